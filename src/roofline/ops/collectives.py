"""Collectives in the alpha-beta model: message steps (alpha), bytes per direction (beta) and
one collective call (its base latency).

`nbytes` is the buffer size as nccl-tests reports it: the full per-rank vector for
all-reduce, broadcast and send/recv, the full gathered output for all-gather, the full
input for reduce-scatter, and each rank's whole send buffer for all-to-all.

Per rank, over n ranks (each step sends one message; bytes are per direction):

    collective       ring                          tree (double binary)   nvls (in-switch)
    all-reduce       2(n-1) steps, 2(n-1)/n·m      2·ceil(log2 n), 2·m*   2 steps, m
    all-gather       n-1,  (n-1)/n·m               -                      -
    reduce-scatter   n-1,  (n-1)/n·m               -                      -
    broadcast        n-1,  m (pipelined chain)     ceil(log2 n), m        -
    send-recv        1,    m                       (any name: one message)

    all-to-all       direct: 1 step, (n-1)/n·m     pairwise: n-1 steps, (n-1)/n·m
                     ring: floor(n/2) steps, floor(n²/4)/n·m

    all-reduce       one-shot: 1 step, (n-1)·m     two-shot: 2 steps, 2(n-1)/n·m
    all-gather,      one-shot: 1 step, (n-1)/n·m
    reduce-scatter

The ring rows are the bandwidth-optimal schedules (Thakur et al.); "tree" is NCCL's
pipelined double binary tree: log-depth latency, but the busiest rank moves 2·m (* m over
2 ranks, 1.5·m over 3: `_tree_share`). "one-shot" and "two-shot" are the serving engines'
custom all-reduce kernels over a switch or full mesh (every peer's buffer read directly:
all of them at once, or a reduce-scatter then an all-gather); they are no NCCL call, so
they pay no NCCL base latency. "auto" weighs both (a two-shot kernel, vLLM / aiter custom
all-reduce of 0.25-8 MiB, ran 1.5 MiB on 8x MI355X in 12.9 us, below ring's and tree's
bounds); where it picks two-shot the Cost keeps the libraries' own pick as `runs`, which
the expected time assumes outside CUDA graphs (NCCL / RCCL run ring or tree there). A
one-shot all-gather (reduce-scatter) stores its shard in (loads its shard from) every
peer's buffer at once, as NCCL 2.27+'s symmetric-memory kernels and PyTorch's symmetric
memory do (Megatron-LM#5596: 2 MiB on 8x H100 in 10.9 / 10.8 us of device time, under a
ring's 7 steps and NCCL base latency); "auto" weighs it for the bound, and the expected
time keeps the libraries' ring as `runs` (plain buffers are not symmetric). "nvls" is
NVLink SHARP: every GPU pushes its m bytes into the switch, which reduces and multicasts the
result back: m each way in two steps (ideal; needs a link with in-switch reduction).
All-to-all: "direct" posts every peer's chunk at once (what NCCL and DeepEP do: one round of
latency, the default); "pairwise" exchanges with one peer per step (n-1 rounds); "ring"
relays chunks between neighbours only, each the short way round a bidirectional ring (a
torus axis without direct paths): a chunk k hops away crosses k links.

"auto" (`choose_algorithm`) is the fastest implementation: per message size, the
algorithm the collective implements (nvls only where the link reduces in the switch; one-
and two-shot only where every peer is in reach) with the smallest alpha-beta time on the
chip. Each algorithm's time is a lower bound of its own, so their minimum bounds whatever
the library or engine chose.

A group larger than one scale-up domain (`domain_size` ranks) runs hierarchically, with
a = domain_size ranks inside each domain and b = n / a domains (a group that does not fill
whole domains is spread evenly over the fewest that hold it: b = ceil(n / domain_size),
a = n / b): all-reduce = reduce-scatter
inside (a, m) + all-reduce across (b, m/a, each GPU on its own NIC) + all-gather inside
(a, m); all-gather / reduce-scatter / broadcast split the same way; all-to-all sends
(a-1)/n·m over the scale-up link and (n-a)/n·m over scale-out.

Every collective is one call: it pays the base latency (launch, synchronisation) once per
call, as NCCL's tuning model charges it (the network's longer per-step latency is its
alpha); that model charges NVLS none, and the kernels that reach their peers directly (one-
and two-shot) are no NCCL call. The phases of a hierarchical collective pipeline across
their links (evaluate bounds each link's chain on its own), and the call's launch precedes
every one of them: each link the call uses carries its base latency.

busbw (nccl-tests): algbw = m / t; busbw = algbw · factor with factor 2(n-1)/n for
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and
send-recv — so a ring all-reduce's busbw approaches the per-direction link bandwidth.
Reduction arithmetic (a few adds per element) and the HBM traffic of the buffers are ignored.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import (
    Num,
    Quantity,
    Sym,
    Term,
    any_true,
    call,
    define,
    derived,
    maximum,
    minimum,
    numeric,
    steps,
    sym,
    symbolic,
    unwrap,
    value,
)
from ..errors import RooflineError, unknown
from ..hardware import Chip
from ._common import size, whole
from .moe import remote_domain_copies

if TYPE_CHECKING:
    from ..evaluate import Estimate

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast",
               "send-recv")
ALGORITHMS = ("ring", "tree", "nvls", "direct", "pairwise", "one-shot", "two-shot")
AUTO = "auto"  # per message size, the algorithm with the smallest alpha-beta time
# which algorithms implement each collective (a send-recv is one message under any name)
IMPLEMENTS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "nvls", "one-shot", "two-shot"),
    "all-gather": ("ring", "one-shot"), "reduce-scatter": ("ring", "one-shot"),
    "broadcast": ("ring", "tree"),
    "all-to-all": ("direct", "pairwise", "ring"), "send-recv": ("ring",),
}
SHOTS = ("one-shot", "two-shot")  # kernels that read or write every peer's buffer directly
# over a switch or full mesh (the engines' custom all-reduce, symmetric-memory all-gather and
# reduce-scatter): no NCCL base latency
# Weighed by "auto" for the bound, but not what the expected time assumes runs outside CUDA
# graphs: there the pick without it (NCCL / RCCL's ring or tree, NVLS, or the all-reduce
# one-shot the model was fitted with, at the sizes where two-shot wins), kept as the Cost's
# `runs`. A one-shot all-gather or reduce-scatter needs symmetric (registered) buffers, which
# a plain NCCL call does not have: the libraries run a ring.
ENGINE_ONLY: dict[str, tuple[str, ...]] = {"all-reduce": ("two-shot",),
                                           "all-gather": ("one-shot",),
                                           "reduce-scatter": ("one-shot",)}
# in a CUDA graph an engine runs its own all-reduce kernel (its custom all-reduce), not the
# libraries' pick; its all-gathers and reduce-scatters stay NCCL's
GRAPH_KERNELS = ENGINE_ONLY["all-reduce"]
DEFAULT_ALGO = {"all-to-all": "direct"}  # NCCL's all-to-all; the others: auto (ring without a chip)

_BUSBW_FACTOR: dict[str, Callable[[Num], Num]] = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: np.ones_like(np.asarray(n, dtype=float)),
    "send-recv": lambda n: np.ones_like(np.asarray(n, dtype=float)),
}


def busbw_factor(kind: str, ranks: Any) -> Num:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth."""
    if kind not in _BUSBW_FACTOR:
        raise unknown("collective", kind, COLLECTIVES)
    value = _BUSBW_FACTOR[kind](np.asarray(ranks, dtype=float))
    return float(value) if np.ndim(value) == 0 else value


def _log2(n: Quantity) -> Quantity:
    return call("ceil_log2", _ceil_log2, n)


def _ceil_log2(v: Any) -> Any:
    if type(v) is float:  # one group: no 0-d numpy round trip
        return float(math.ceil(math.log2(v)))
    return np.ceil(np.log2(v))


def _flat(kind: str, algo: str, n: Quantity, m: Quantity) -> tuple[Quantity, Quantity]:
    """(steps, bytes per direction) for one phase over n ranks on one link."""
    if kind == "send-recv":
        return sym("1", 1.0), m
    if kind == "all-to-all":
        if algo == "direct":
            return sym("1", 1.0), (n - 1) / n * m
        if algo == "pairwise":
            return n - 1, (n - 1) / n * m
        # ring relay, each chunk the short way: sum over k of min(k, n-k) hops = floor(n²/4)
        return (call("floor", np.floor, n / 2),
                call("floor", np.floor, n * n / 4) / n * m)
    if algo == "ring":
        if kind == "all-reduce":
            return 2 * (n - 1), 2 * (n - 1) / n * m
        if kind == "broadcast":
            return n - 1, m
        return n - 1, (n - 1) / n * m
    if algo == "one-shot":  # one step: an all-reduce reads the n - 1 other buffers at once
        # and reduces them; an all-gather stores its shard in every peer's buffer, a
        # reduce-scatter loads its shard of every peer's and reduces it
        return sym("1", 1.0), (n - 1) * m if kind == "all-reduce" else (n - 1) / n * m
    if algo == "two-shot":  # each rank reduces its 1/n, read from every peer, then every
        return sym("2", 2.0), 2 * (n - 1) / n * m  # peer reads the reduced shards: 2 steps
    if algo == "tree":
        depth = _log2(n)
        if kind != "all-reduce":
            return depth, m
        return 2 * depth, call("tree_share", _tree_share, n) * m
    return sym("2", 2.0), m  # nvls all-reduce


def _tree_share(n: Any) -> Any:
    """The busiest rank's bytes per direction of NCCL's double binary tree all-reduce, in
    units of the message: each of the two trees carries half of it (a rank sends its half up
    to its parent and down to each child). From 4 ranks some rank has a parent and two
    children in one tree (1.5) and is a leaf of the other (0.5): 2. Two ranks: root with one
    child in one tree, leaf in the other: 1. Three (ncclGetBtree, the second tree shifted by
    one): a rank is root with one child in one tree (0.5) and interior with one child in the
    other (1.0): 1.5 (nccl#1801: 3 GB200 trays over IB move ~1.56x the message per rank).
    Inside a node NCCL's tree is a chain, whose middle ranks move 2x: this bound is looser
    there, still a bound."""
    if type(n) is float:
        return 0.0 if n <= 1 else 1.0 if n == 2 else 1.5 if n == 3 else 2.0
    v = np.asarray(n, dtype=float)
    return np.select([v <= 1, v == 2, v == 3], [0.0, 1.0, 1.5], 2.0)


def _check_algo(kind: str, algo: str) -> None:
    if algo not in ALGORITHMS:
        raise unknown("algorithm", algo, (*ALGORITHMS, AUTO))
    # a send-recv is one message under any name but the engines' all-reduce kernels'
    if (kind != "send-recv" or algo in SHOTS) and algo not in IMPLEMENTS[kind]:
        raise RooflineError(f"algorithm {algo!r} does not implement {kind} (it has: "
                            f"{', '.join(IMPLEMENTS[kind])}, or {AUTO})")


def _in_reach(chip: Chip, link: str) -> bool:
    """Every peer of the link directly reachable: a scale-up switch or full mesh (what one-
    and two-shot kernels read their peers' buffers over)."""
    up = chip.links.get(link)
    return up is not None and link == "scale-up" and up.topology in ("switch", "mesh")


def _check_direct(kind: str, algo: str, link: str, chip: Chip | None) -> None:
    """One- and two-shot reach every peer's buffer directly: a scale-up switch or full mesh
    (on a chip without one, name ring or tree; "auto" weighs them only where they run)."""
    if link != "scale-up" or (chip is not None and not _in_reach(chip, link)):
        up = chip.links.get(link) if chip is not None else None
        where = f"{chip.id}'s {link} link is a {up.topology}" if up is not None and \
            chip is not None and link == "scale-up" else f"not the {link} link"
        others = [a for a in IMPLEMENTS[kind] if a not in SHOTS]
        raise RooflineError(f"a {algo} {kind} reaches every peer's buffer directly over a "
                            f"scale-up switch or full mesh ({where}): use "
                            f"{', '.join(others)} or auto")


@derived
def collective(
    kind: str,
    nbytes: Any,
    ranks: Any,
    algo: Any = None,
    link: str = "scale-up",
    domain_size: Any = None,
    link_share: Any = 1.0,
    chip: Chip | None = None,
) -> Cost:
    """One collective over `ranks` ranks as a per-rank Cost on the link(s) it uses.

    `algo` is a name, "auto" (needs `chip`: see `choose_algorithm`) or an array of names
    (one per message size, as "auto" picks them). Default: "direct" for all-to-all; for the
    others "auto" with a chip, else "ring".
    `domain_size` (ranks per scale-up domain) makes a larger group hierarchical: the part
    inside a domain runs on `link` (scale-up) and the part across domains on scale-out.
    `link_share` is the fraction of that link's bandwidth the group can use (a ring along one
    axis of a TPU torus uses 2 of its 4 or 6 ports, a pair on a full mesh one of its ports:
    `System.link_share`); its bytes count as 1/link_share as many, so the evaluator's
    bandwidth stays the chip's figure.

    >>> c = collective("all-reduce", 8 * 2**30, 8)
    >>> round(c.link_bytes["scale-up"] / 2**30, 3), c.link_steps["scale-up"]
    (14.0, 14.0)
    """
    if kind not in COLLECTIVES:
        raise unknown("collective", kind, COLLECTIVES)
    if link not in LINKS:
        raise unknown("link", link, LINKS)
    if algo is None:
        algo = DEFAULT_ALGO.get(kind, AUTO if chip is not None else "ring")
    if isinstance(algo, str) and algo == AUTO and chip is None:
        raise RooflineError("algorithm 'auto' is chosen on a chip's link: pass chip= (or "
                            "name the algorithm: " + ", ".join(IMPLEMENTS[kind]) + ")")
    if isinstance(algo, str) and algo in SHOTS:
        _check_direct(kind, algo, link, chip)
    if _ndim(ranks) or _ndim(domain_size):  # checked before they split a sweep
        whole("n", ranks, "ranks")
        if domain_size is not None:
            whole("a", domain_size, "domain_size")
        if _varies(ranks) or _varies(domain_size):
            return _by_group(kind, nbytes, ranks, algo, link, domain_size, link_share, chip)
    auto: _PerByte | None = None
    library: Any = None  # the libraries' pick where auto's is an engine-only kernel
    if isinstance(algo, str) and algo == AUTO:
        assert chip is not None
        algo, auto, library = _choose(kind, nbytes, ranks, chip, link, domain_size,
                                      link_share)
    if auto is not None and not symbolic():  # "auto" on numbers: the one-byte Costs scaled
        m = value(nbytes)
        cost = _from_units(auto, algo, m, kind)  # made here: its floor and library pick set
        if auto.least is not None:  # set in place (no larger than the pick: finite too)
            object.__setattr__(cost, "least", _sized(auto.least, m))
        if library is not None:
            object.__setattr__(cost, "runs", _from_units(auto, library, m, kind))
        return cost
    # a named algorithm, or the derivation of the picked one
    return _per_pick(algo, kind, lambda a: _collective(kind, a, nbytes, ranks, link,
                                                       domain_size, link_share))


def _from_units(auto: _PerByte, picked: Any, m: Any, kind: str) -> Cost:
    """The Cost of the algorithm(s) `picked` (a name, or one per point) at message size `m`,
    from "auto"'s one-byte Costs (a new Cost: the caller may set its floor)."""
    if type(picked) is str:  # one algorithm (every point of a sweep, or one point)
        return _sized(auto.units[picked], m)
    return _per_pick(picked, kind, lambda a: _sized(auto.units[a], m))


def _per_pick(picked: Any, kind: str, cost_of: Callable[[str], Cost]) -> Cost:
    """One algorithm's Cost, or (an array of names, one per point) each point's."""
    names = None if isinstance(picked, str) else np.asarray(picked)
    chosen = [str(picked)] if names is None or names.ndim == 0 else \
        list(dict.fromkeys(names.ravel().tolist()))
    costs = {a: cost_of(a) for a in chosen}
    if names is None or len(chosen) == 1:
        return costs[chosen[0]]
    return _pointwise(names, costs, f"{kind} (auto per size: {'/'.join(costs)})", "algo")


def _sized(unit: Cost, m: Any) -> Cost:
    """A collective's one-byte Cost at message size `m`: its bytes scale, its message steps
    and calls do not (its derivation re-runs the formula at `m`: `derived`)."""
    one = type(m) is float  # one size: the steps and calls as they are
    # by position (a collective's fields after flops, bytes, steps, name, vector_flops and
    # special_ops): a step sizes two or three of these
    return Cost(None, None, (), unit.name, None, None,
                {k: v * m for k, v in unit.link_bytes.items()},
                dict(unit.link_steps) if one else
                {k: _full(v, m) for k, v in unit.link_steps.items()},
                dict(unit.link_calls) if one else
                {k: _full(v, m) for k, v in unit.link_calls.items()},
                unit.algorithm)


def _least(units: list[Cost]) -> Cost:
    """Per link, the fewest bytes, message steps and calls of any candidate algorithm: no
    algorithm demands less of any one resource (a floor takes each resource's least)."""
    def fewest(field: str) -> dict[str, Num]:
        keys = dict.fromkeys(k for unit in units for k in getattr(unit, field))
        return {key: functools.reduce(minimum, [getattr(unit, field).get(key, 0.0)
                                               for unit in units]) for key in keys}
    return Cost(link_bytes=fewest("link_bytes"), link_steps=fewest("link_steps"),
                link_calls=fewest("link_calls"), name="least of any algorithm")


def _ndim(x: Any) -> int:
    """np.ndim without its cost for the common None, int and float."""
    return 0 if x is None or type(x) is int or type(x) is float else np.ndim(x)


def _by_group(kind: str, nbytes: Any, ranks: Any, algo: Any, link: str, domain_size: Any,
              link_share: Any, chip: Chip | None) -> Cost:
    """Group or domain sizes that vary over a sweep: each distinct pair is its own collective
    (flat inside one domain, hierarchical past it, with its own candidate algorithms),
    taken point by point."""
    index, groups = _groups(nbytes, ranks, domain_size, link_share, algo)
    costs = {i: collective(kind, nbytes, r, names, link, d, share, chip)
             for i, (r, d, share, names) in enumerate(groups)}
    label = "/".join(f"{r:g}" + ("" if d is None else f" of {d:g}") for r, d, _, _ in groups)
    return _pointwise(index, costs, f"{kind} (per group: {label} ranks)", "group")


def _varies(x: Any) -> bool:
    return bool(np.ndim(x)) and np.unique(np.asarray(x, dtype=float)).size > 1


def _groups(nbytes: Any, ranks: Any, domain_size: Any, link_share: Any, algo: Any
            ) -> tuple[np.ndarray[Any, Any], list[tuple[float, float | None, Any, Any]]]:
    """Per point, the index of its (ranks, domain size) pair; per pair: (ranks, domain size,
    the link share and algorithm names, the other pairs' points given values valid here)."""
    shape = np.broadcast_shapes(np.shape(nbytes), np.shape(ranks), np.shape(domain_size),
                                np.shape(link_share), np.shape(algo))
    sizes = np.broadcast_to(np.asarray(ranks, dtype=float), shape)
    domains = np.broadcast_to(np.asarray(np.nan if domain_size is None else domain_size,
                                         dtype=float), shape)
    index = np.zeros(shape, dtype=np.int64)
    groups: list[tuple[float, float | None, Any, Any]] = []
    pairs = np.unique(np.stack([sizes.ravel(), domains.ravel()], axis=1), axis=0)
    for i, (r, d) in enumerate(pairs.tolist()):
        at = (sizes == r) & ((domains == d) | (np.isnan(domains) & np.isnan(d)))
        index[at] = i
        groups.append((r, None if np.isnan(d) else d, _here(link_share, shape, at),
                       _here(algo, shape, at)))
    return index, groups


def _here(given: Any, shape: tuple[int, ...], at: np.ndarray[Any, Any]) -> Any:
    """A per-point value for one group: its own points as given, the others the value at
    its first point (so every point stays valid for this group's collective)."""
    if not np.ndim(given):
        return given
    full = np.broadcast_to(np.asarray(given), shape)
    return np.where(at, full, full[at][0])


def _collective(kind: str, algo: str, nbytes: Any, ranks: Any, link: str, domain_size: Any,
                link_share: Any) -> Cost:
    _check_algo(kind, algo)
    m = size("m", nbytes, "bytes")
    n = whole("n", ranks, "ranks")
    # ranks = 1 is allowed (a sweep may include it): 0 steps, 0 bytes and no call
    # (scalar-friendly comparisons: a whole-model estimate builds these on single numbers)
    hierarchical = domain_size is not None and link == "scale-up" and kind != "send-recv" \
        and any_true(value(n) > np.asarray(domain_size) if np.ndim(domain_size) else
                     value(n) > domain_size)
    share = size("share", link_share, "link_share")
    if any_true(value(share) > 1):
        raise RooflineError(f"link_share: a fraction in (0, 1], got {link_share!r}")
    if not hierarchical:
        hops, traffic = _flat(kind, algo, n, m)
        others = (value(n) > 1) * 1.0
        if any_true(others == 0):  # a group of one moves nothing, on any algorithm
            hops, traffic = hops * sym("[n > 1]", others), traffic * sym("[n > 1]", others)
        if any_true(value(share) < 1):
            traffic = traffic / share
        # one- and two-shot all-reduces are the engines' own kernels (vLLM, SGLang,
        # TensorRT-LLM, aiter custom all-reduce), not NCCL calls: no NCCL base latency; nor
        # has NVLS one in NCCL's own cost model (tuning.cc: baseLat 0 for NVLS and NVLS tree,
        # 6.6 us for Ring LL): its NVLS tree ran 128 B on 2 H100s in a CUDA graph in about
        # 6 us (nccl#1259), under 6.6 us + two steps
        calls = others * (0.0 if algo in SHOTS or algo == "nvls" else 1.0)
        return Cost(link_bytes={link: value(traffic)}, link_steps={link: _full(value(hops), m)},
                    link_calls={link: _full(calls, m)},
                    steps=steps((f"{link} steps", hops), (f"{link} bytes", traffic)),
                    name=f"{kind} ({algo})", algorithm=algo)
    if algo == "ring" and kind == "all-to-all":
        raise RooflineError("all-to-all 'ring' relays between neighbours of one ring; a group "
                            "that spans scale-up domains uses direct or pairwise")
    if algo in SHOTS:
        others = [a for a in IMPLEMENTS[kind] if a not in SHOTS]
        raise RooflineError(f"a {algo} {kind} reaches its peers' buffers over the scale-up "
                            f"link: its group must fit one domain (use {', '.join(others)})")
    domain = whole("a", domain_size, "domain_size")
    # a group smaller than a domain stays inside it: a = min(n, domain), b = n / a domains
    a = np.minimum(np.asarray(value(n)), np.asarray(value(domain))) * 1.0
    return _hierarchical(kind, algo, n, m, unwrap(a), share)


def _full(count: Num, like: Quantity) -> Num:
    """Steps broadcast to the message shape, so a sweep over sizes gives arrays throughout."""
    message = value(like)
    if type(count) is float and type(message) is float:
        return count
    shape = np.broadcast_shapes(np.shape(count), np.shape(message))
    return count if shape == () else np.broadcast_to(count, shape)


def _hierarchical(kind: str, algo: str, n: Quantity, m: Quantity, in_domain: Num,
                  share: Quantity) -> Cost:
    terms: list[Term] = []
    uneven = np.mod(np.asarray(value(n)), np.asarray(in_domain)) != 0
    if np.any(uneven):
        # n ranks that do not fill whole domains (16 of 9-per-domain): spread them evenly over
        # the fewest domains that hold them, b = ceil(n / a) with n / b ranks in each
        fewest = np.ceil(np.asarray(value(n)) / np.asarray(in_domain))
        in_domain = unwrap(np.where(uneven, np.asarray(value(n)) / fewest,
                                    np.asarray(in_domain) * 1.0))
    a = sym("a", in_domain)
    b = define(terms, "scale-up domains spanned", "b", n / a)
    if kind == "all-reduce":
        up_steps, up_bytes = _flat("all-reduce", algo if algo == "nvls" else "ring", a, m)
        out_steps, out_bytes = _flat("all-reduce", "tree" if algo == "tree" else "ring", b,
                                     m / a)
    elif kind in ("all-gather", "reduce-scatter"):
        up_steps, up_bytes = _flat(kind, "ring", a, m)
        out_steps, out_bytes = _flat(kind, "ring", b, m / a)
    elif kind == "broadcast":
        up_steps, up_bytes = _flat(kind, algo, a, m)
        out_steps, out_bytes = _flat(kind, algo, b, m)
    else:  # all-to-all: (a-1) peers inside the domain, n-a outside; direct: one round each
        up_bytes, out_bytes = (a - 1) / n * m, (n - a) / n * m
        up_steps, out_steps = (a - 1, n - a) if algo == "pairwise" else \
            (sym("[a > 1]", (np.asarray(value(a)) > 1) * 1.0),
             sym("[b > 1]", (np.asarray(value(b)) > 1) * 1.0))
    if any_true(value(share) < 1):  # the group's share of the scale-up link (link_share)
        up_bytes = up_bytes / share
    inside = (np.asarray(value(a)) > 1) * 1.0  # a phase over one rank moves nothing
    across = (np.asarray(value(b)) > 1) * 1.0
    if not np.all(inside):
        up_steps, up_bytes = up_steps * sym("[a > 1]", inside), up_bytes * sym("[a > 1]", inside)
    terms += steps(("scale-up steps", up_steps), ("scale-up bytes", up_bytes),
                   ("scale-out steps", out_steps), ("scale-out bytes", out_bytes))
    # one call: its launch precedes the phase on each link it uses (a group of one: none)
    return Cost(link_bytes={"scale-up": value(up_bytes), "scale-out": value(out_bytes)},
                link_steps={"scale-up": _full(value(up_steps), m),
                            "scale-out": _full(value(out_steps), m)},
                link_calls={"scale-up": _full(inside, m), "scale-out": _full(across, m)},
                steps=tuple(terms), name=f"{kind} ({algo}, hierarchical)", algorithm=algo)


def _pointwise(keys: np.ndarray[Any, Any], costs: dict[Any, Cost], name: str,
               by: str) -> Cost:
    """One Cost from several Costs: each point takes the Cost of its key (its algorithm,
    or its group size); the algorithm is kept per point."""
    fields: dict[str, dict[str, Num]] = {}
    terms: list[Term] = []
    for field, what in (("link_bytes", "bytes"), ("link_steps", "steps"),
                        ("link_calls", "calls")):
        merged: dict[str, Num] = {}
        for key in dict.fromkeys(k for c in costs.values() for k in getattr(c, field)):
            picked = np.zeros(keys.shape)
            for which, cost in costs.items():
                if key in getattr(cost, field):
                    part = np.broadcast_to(getattr(cost, field)[key], keys.shape)
                    picked = np.where(keys == which, part, picked)
            merged[key] = picked
            if what != "calls":
                terms += steps((f"{key} {what}", sym(f"{what}({by})", picked)))
        fields[field] = merged
    algorithm = np.full(keys.shape, "", dtype=object)
    for which, cost in costs.items():
        algorithm = np.where(keys == which, np.broadcast_to(
            np.asarray(cost.algorithm, dtype=object), keys.shape), algorithm)
    least = runs = None
    if all(c.least is not None for c in costs.values()):  # per group size: each its own
        least = _pointwise(keys, {k: c.least for k, c in costs.items()  # type: ignore[misc]
                                  }, "least of any algorithm", by)
    if any(c.runs is not None for c in costs.values()):  # the library's pick, point by point
        runs = _pointwise(keys, {k: c.runs or c for k, c in costs.items()}, name, by)
    return Cost(link_bytes=fields["link_bytes"], link_steps=fields["link_steps"],
                link_calls=fields["link_calls"], steps=tuple(terms), name=name,
                algorithm=algorithm.astype(str), least=least, runs=runs)


@numeric
def choose_algorithm(kind: str, nbytes: Any, ranks: Any, chip: Chip, link: str = "scale-up",
                     domain_size: Any = None, link_share: Any = 1.0) -> Any:
    """The fastest implementation ("auto"): per message size (a name, or an array of names
    for arrays of sizes or ranks), the algorithm implementing `kind` whose alpha-beta time on
    `chip` is smallest; nvls only where the link reduces in the switch, one- and two-shot
    only where every peer is in reach. Ties go to the earlier of ring, tree, nvls, one-shot,
    two-shot (direct, pairwise, ring for all-to-all)."""
    if _varies(ranks) or _varies(domain_size):  # each (ranks, domain) its own pick
        index, groups = _groups(nbytes, ranks, domain_size, link_share, None)
        picked = np.full(index.shape, "", dtype=object)
        for i, (r, d, share, _) in enumerate(groups):
            names = _choose(kind, nbytes, r, chip, link, d, share)[0]
            picked = np.where(index == i, np.broadcast_to(np.asarray(names, dtype=object),
                                                          index.shape), picked)
        return picked.astype(str)
    return _choose(kind, nbytes, ranks, chip, link, domain_size, link_share)[0]


def _candidates(kind: str, ranks: Any, chip: Chip, link: str, domain_size: Any) -> list[str]:
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
    direct = _in_reach(chip, link) and not spans
    return [a for a in IMPLEMENTS[kind] if (a != "nvls" or switch)
            and (a not in SHOTS or direct) and not (a == "ring" and kind == "all-to-all"
                                                    and spans)]


class _PerByte(NamedTuple):
    """"auto"'s candidates for one group shape on one chip, at a one-byte message: each
    algorithm's Cost and, per link, its alpha-beta chain as (latency, seconds per message
    byte); and the least any of them demands (None for a single candidate)."""

    units: dict[str, Cost]
    chains: dict[str, list[tuple[Any, Any]]]
    least: Cost | None


def _per_byte(kind: str, ranks: Any, chip: Chip, link: str, domain_size: Any,
              link_share: Any) -> _PerByte:
    """"auto"'s candidates at one byte. A collective is linear in its message size (bytes
    scale with it; steps and calls do not), so any size's time on a link is latency +
    size · seconds-per-byte and its Cost the one-byte Cost scaled (`_sized`): built once
    per group shape and chip (memoised on the chip for scalar groups), not per message."""
    key = ("collective per byte", kind, ranks, link, domain_size, link_share)
    scalar = _scalar(ranks) and _scalar(domain_size) and _scalar(link_share)
    if scalar and key in chip.memo:
        return cast(_PerByte, chip.memo[key])
    from ..evaluate import link_times  # the one evaluator's alpha-beta terms

    units, chains = {}, {}
    for a in _candidates(kind, ranks, chip, link, domain_size):
        units[a] = _collective(kind, a, 1.0, ranks, link, domain_size, link_share)
        transfer, latency = link_times(units[a], chip)
        chains[a] = [(latency[k], transfer[k]) for k in transfer]
    auto = _PerByte(units, chains, _least(list(units.values())) if len(units) > 1 else None)
    if scalar:
        chip.memo[key] = auto
    return auto


def _scalar(x: Any) -> bool:
    return x is None or isinstance(x, (int, float, np.generic))


def _choose(kind: str, nbytes: Any, ranks: Any, chip: Chip, link: str, domain_size: Any,
            link_share: Any) -> tuple[Any, _PerByte, Any]:
    """`choose_algorithm`'s pick, the candidates it weighed, and where the pick is an
    engine-only kernel the libraries' own pick among the rest (else None)."""
    auto = _per_byte(kind, ranks, chip, link, domain_size, link_share)
    m = value(size("m", nbytes, "bytes"))
    # each link's chain competes on its own (evaluate): the busiest is the time
    if type(m) is float:  # one size: the same maximum in plain Python (loops, not
        times: dict[str, Any] = {}  # comprehensions: each is a call on Python 3.11)
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


_ONE_SIZE = frozenset({float, np.float64})


def _fastest(times: dict[str, Any]) -> Any:
    """Per point, the first of the fastest (a name, or an array of names)."""
    candidates, values = list(times), list(times.values())
    if _ONE_SIZE.issuperset(map(type, values)):  # one size
        return candidates[values.index(min(values))]
    best = np.argmin(np.stack(np.broadcast_arrays(*map(np.asarray, values))), axis=0)
    picked = np.asarray(candidates)[best]
    return str(picked) if picked.ndim == 0 else picked


def crossover_from_times(nbytes: float, est: Estimate) -> float | None:
    """The message size below which an evaluated collective is latency-bound. Each link's
    alpha-beta chain is latency + bytes/bandwidth, linear in the message size; the bound is
    the busiest chain, `latency` where that chain's latency exceeds its transfer time. None
    when nothing moves."""
    links = [k for k in est.chain_s if float(est.time_s[k]) > 0]
    if not links:
        return None
    slope = {k: float(est.time_s[k]) / nbytes for k in links}  # seconds per message byte
    fixed = {k: float(est.chain_s[k]) - float(est.time_s[k]) for k in links}

    def latency_bound(m: float) -> bool:
        busiest = max(links, key=lambda k: fixed[k] + slope[k] * m)
        return fixed[busiest] > slope[busiest] * m

    lo, hi = 0.0, max(fixed[k] / slope[k] for k in links)  # past it no chain is latency-led
    if not latency_bound(1e-30):
        return 0.0
    for _ in range(100):  # the switch, by bisection on the piecewise-linear chains
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if latency_bound(mid) else (lo, mid)
    return hi


def latency_crossover_bytes(cost: Cost, nbytes: Any, latency_s: float,
                            bandwidth_Bps: float, link: str, base_latency_s: float = 0.0) -> Num:
    """Message size at which the latency (alpha·steps + base·calls) equals bytes/bandwidth on
    one link (costs are linear in the message size, so it is latency·W / (bytes per byte of
    message))."""
    per_byte = np.asarray(cost.link_bytes[link]) / np.asarray(nbytes, dtype=float)
    latency = np.asarray(cost.link_steps[link]) * latency_s \
        + np.asarray(cost.link_calls.get(link, 0.0)) * base_latency_s
    value = latency * bandwidth_Bps / per_byte
    return float(value) if value.ndim == 0 else value


def one_copy_per_destination(cost: Cost, top_k: int, ranks: float,
                             in_domain: float | None = None,
                             experts: int | None = None, groups: int = 1,
                             topk_groups: int = 1) -> Cost:
    """An expert-parallel all-to-all of every (token, expert) pair (`cost`: top_k copies of a
    token, the other ranks' share of them on the links) as the expert kernels send it: one
    copy per destination rank holding any of its experts (the rank runs all of them: DeepEP,
    pplx-kernels, MORI) and, across scale-up domains (`in_domain` ranks each), one per
    destination domain, fanned out there (DeepEP internode, HybridEP, MORI). Copies under
    uniform routing: `moe.remote_domain_copies`, group-limited where the model routes so
    (`groups`, `topk_groups`: its config's n_group, topk_group). DeepSeek-V3 over EP 8: 4.6
    copies, not 7 (3.2 with its 4-of-8 groups); over 8 8-GPU nodes 3.2 across, not 7. The
    expected time keeps the per-copy volume (`Cost.runs`): DeepEP's, HybridEP's and MORI's
    measured times follow it (13% median error against 27% with the deduplicated bytes)."""
    route = (experts, groups, topk_groups)
    shares = dict.fromkeys(cost.link_bytes, _copy_share(top_k, ranks, *route))
    across = False  # one copy per destination domain on the scale-out link
    if in_domain is not None and ranks > in_domain and "scale-out" in shares:
        across = True
        # the group spread evenly over the fewest domains that hold it, as `_hierarchical`
        # splits it: (n - n/b)/n of every copy crosses
        shares["scale-out"] = _copy_share(top_k, math.ceil(ranks / in_domain), *route)
    if all(share >= 1.0 for share in shares.values()):
        return cost
    return Cost(link_bytes={link: nbytes * shares[link]
                            for link, nbytes in cost.link_bytes.items()},
                link_steps=cost.link_steps, link_calls=cost.link_calls,
                steps=functools.partial(_per_destination_terms, cost, shares, across),
                name=f"{cost.name}, one copy per destination", algorithm=cost.algorithm,
                runs=cost)


def _copy_share(top_k: int, destinations: float, experts: int | None, groups: int = 1,
                topk_groups: int = 1) -> float:
    """The share of a token's copies to other destinations that one copy per destination
    sends: remote copies over top_k·(1 - 1/d); never more than every copy."""
    if destinations <= 1:
        return 1.0
    return min(1.0, remote_domain_copies(top_k, destinations, experts, groups, topk_groups) / (
        top_k * (1.0 - 1.0 / destinations)))


def _per_destination_terms(cost: Cost, shares: dict[str, float], across: bool
                           ) -> tuple[Term, ...]:
    return (*cost.terms, *(Term(f"{link} bytes, one copy per destination "
                                + ("domain" if link == "scale-out" and across else "rank"),
                                Sym("share", share) * Sym(f"{link} bytes",
                                                          cost.link_bytes[link]))
                           for link, share in shares.items() if share < 1.0))
