""""auto": per message size, the algorithm with the smallest alpha-beta time on the chip,
weighed from each candidate's one-byte Cost (a collective is linear in its message size)."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, NamedTuple, cast

import numpy as np

from ...cost import Cost
from ...derivation import Num, all_one_point, maximum, minimum, numeric, one_point, symbolic, value
from ...errors import unknown
from ...hardware import Chip
from .._common import size
from .algorithms import COLLECTIVES, ENGINE_ONLY, IMPLEMENTS, SHOTS, in_reach
from .flat import full_steps
from .named import named_collective
from .pointwise import group_index, per_pick, varies


@numeric
def choose_algorithm(kind: str, nbytes: Any, ranks: Any, chip: Chip, link: str = "scale-up",
                     domain_size: Any = None, link_share: Any = 1.0) -> Any:
    """The fastest implementation ("auto"): per message size (a name, or an array of names
    for arrays of sizes or ranks), the algorithm implementing `kind` whose alpha-beta time on
    `chip` is smallest; nvls only where the link reduces in the switch, one- and two-shot
    only where every peer is in reach. Ties go to the earlier of ring, tree, nvls, one-shot,
    two-shot (direct, pairwise, ring for all-to-all)."""
    if varies(ranks) or varies(domain_size):  # each (ranks, domain) its own pick
        index, groups = group_index(nbytes, ranks, domain_size, link_share, None)
        picked = np.full(index.shape, "", dtype=object)
        for i, (r, d, share, _) in enumerate(groups):
            names = choose(kind, nbytes, r, chip, link, d, share)[0]
            picked = np.where(index == i, np.broadcast_to(np.asarray(names, dtype=object),
                                                          index.shape), picked)
        return picked.astype(str)
    return choose(kind, nbytes, ranks, chip, link, domain_size, link_share)[0]


def candidates(kind: str, ranks: Any, chip: Chip, link: str, domain_size: Any) -> list[str]:
    """The algorithms "auto" weighs: those implementing `kind`; nvls only where the link
    reduces in the switch; one- and two-shot only with every peer directly reachable (a
    switch or a full mesh) in one domain; no neighbour relay for an all-to-all spanning
    domains."""
    if kind not in COLLECTIVES:
        raise unknown("collective", kind, COLLECTIVES)
    up = chip.links.get(link)
    switch = up is not None and up.in_switch_reduction
    spans = domain_size is not None and link == "scale-up" and bool(
        np.any(np.asarray(ranks) > np.asarray(domain_size)))
    direct = in_reach(chip, link) and not spans
    return [a for a in IMPLEMENTS[kind] if (a != "nvls" or switch)
            and (a not in SHOTS or direct) and not (a == "ring" and kind == "all-to-all"
                                                    and spans)]


class PerByte(NamedTuple):
    """"auto"'s candidates for one group shape on one chip, at a one-byte message: each
    algorithm's Cost and, per link, its alpha-beta chain as (latency, seconds per message
    byte); and the least any of them demands (None for a single candidate)."""

    units: dict[str, Cost]
    chains: dict[str, list[tuple[Any, Any]]]
    least: Cost | None


def _per_byte(kind: str, ranks: Any, chip: Chip, link: str, domain_size: Any,
              link_share: Any) -> PerByte:
    """"auto"'s candidates at one byte. A collective is linear in its message size (bytes
    scale with it; steps and calls do not), so any size's time on a link is latency +
    size · seconds-per-byte and its Cost the one-byte Cost scaled (`sized`): built once
    per group shape and chip (memoised on the chip for scalar groups), not per message."""
    key = ("collective per byte", kind, ranks, link, domain_size, link_share)
    scalar = _scalar(ranks) and _scalar(domain_size) and _scalar(link_share)
    if scalar and key in chip.memo:
        return cast(PerByte, chip.memo[key])
    from ...evaluate import link_times  # the one evaluator's alpha-beta terms

    units, chains = {}, {}
    for a in candidates(kind, ranks, chip, link, domain_size):
        units[a] = named_collective(kind, a, 1.0, ranks, link, domain_size, link_share)
        transfer, latency = link_times(units[a], chip)
        chains[a] = [(latency[k], transfer[k]) for k in transfer]
    auto = PerByte(units, chains, _least(list(units.values())) if len(units) > 1 else None)
    if scalar:
        chip.memo[key] = auto
    return auto


def _scalar(x: Any) -> bool:
    return x is None or isinstance(x, (int, float, np.generic))


def choose(kind: str, nbytes: Any, ranks: Any, chip: Chip, link: str, domain_size: Any,
            link_share: Any) -> tuple[Any, PerByte, Any]:
    """`choose_algorithm`'s pick, the candidates it weighed, and where the pick is an
    engine-only kernel the libraries' own pick among the rest (else None)."""
    auto = _per_byte(kind, ranks, chip, link, domain_size, link_share)
    m = value(size("m", nbytes, "bytes"))
    # each link's chain competes on its own (evaluate): the busiest is the time
    if one_point(m):  # the same maximum in plain Python (loops, not comprehensions: each
        times: dict[str, Any] = {}  # is a call on Python 3.11)
        for a, chains in auto.chains.items():
            longest = 0.0
            for lat, per in chains:
                t = lat + per * m
                if t > longest:
                    longest = t
            times[a] = longest
    else:
        times = {a: functools.reduce(maximum, [lat + per * m for lat, per in chains], 0.0)
                 for a, chains in auto.chains.items()}
    picked = _fastest(times)
    library = None
    engine_only = ENGINE_ONLY.get(kind, ())
    engine = picked in engine_only if isinstance(picked, str) else \
        bool(np.isin(picked, engine_only).any())
    if engine and not symbolic():
        library = _fastest({a: t for a, t in times.items() if a not in engine_only})
    return picked, auto, library


def _fastest(times: dict[str, Any]) -> Any:
    """Per point, the first of the fastest (a name, or an array of names)."""
    candidates, values = list(times), list(times.values())
    if all_one_point(values):
        return candidates[values.index(min(values))]
    best = np.argmin(np.stack(np.broadcast_arrays(*map(np.asarray, values))), axis=0)
    picked = np.asarray(candidates)[best]
    return str(picked) if picked.ndim == 0 else picked


def from_units(auto: PerByte, picked: Any, m: Any, kind: str, least: Cost | None = None,
               runs: Cost | None = None) -> Cost:
    """The Cost of the algorithm(s) `picked` (a name, or one per point) at message size `m`,
    from "auto"'s one-byte Costs, with its floor (`least`) and library pick (`runs`)."""
    if type(picked) is str:  # one algorithm (every point of a sweep, or one point)
        return sized(auto.units[picked], m, least, runs)
    cost = per_pick(picked, kind, lambda a: sized(auto.units[a], m))
    return cost if least is None and runs is None else replace(cost, least=least, runs=runs)


def sized(unit: Cost, m: Any, least: Cost | None = None, runs: Cost | None = None) -> Cost:
    """A collective's one-byte Cost at message size `m`: its bytes scale, its message steps
    and calls do not (its derivation re-runs the formula at `m`: `derived`)."""
    one = one_point(m)  # the steps and calls as they are
    return Cost(name=unit.name, link_bytes={k: v * m for k, v in unit.link_bytes.items()},
                link_steps=dict(unit.link_steps) if one else
                {k: full_steps(v, m) for k, v in unit.link_steps.items()},
                link_calls=dict(unit.link_calls) if one else
                {k: full_steps(v, m) for k, v in unit.link_calls.items()},
                algorithm=unit.algorithm, least=least, runs=runs)


def _least(units: list[Cost]) -> Cost:
    """Per link, the fewest bytes, message steps and calls of any candidate algorithm: no
    algorithm demands less of any one resource (a floor takes each resource's least)."""
    def fewest(field: str) -> dict[str, Num]:
        keys = dict.fromkeys(k for unit in units for k in getattr(unit, field))
        return {key: functools.reduce(minimum, [getattr(unit, field).get(key, 0.0)
                                               for unit in units]) for key in keys}
    return Cost(link_bytes=fewest("link_bytes"), link_steps=fewest("link_steps"),
                link_calls=fewest("link_calls"), name="least of any algorithm")
