"""Sweeps whose algorithm or group size varies point by point: one Cost whose every point
takes the Cost of its own algorithm (or group)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...cost import Cost
from ...derivation import Num, Term, one_point, steps, sym


def per_pick(picked: Any, kind: str, cost_of: Callable[[str], Cost]) -> Cost:
    """One algorithm's Cost, or (an array of names, one per point) each point's."""
    names = None if isinstance(picked, str) else np.asarray(picked)
    chosen = [str(picked)] if names is None or names.ndim == 0 else \
        list(dict.fromkeys(names.ravel().tolist()))
    costs = {a: cost_of(a) for a in chosen}
    if names is None or len(chosen) == 1:
        return costs[chosen[0]]
    return pointwise(names, costs, f"{kind} (auto per size: {'/'.join(costs)})", "algo")


def ndim(x: Any) -> int:
    """np.ndim without its cost for None and one point."""
    return 0 if x is None or one_point(x) else np.ndim(x)


def varies(x: Any) -> bool:
    return bool(np.ndim(x)) and np.unique(np.asarray(x, dtype=float)).size > 1


def group_index(nbytes: Any, ranks: Any, domain_size: Any, link_share: Any, algo: Any
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


def pointwise(keys: np.ndarray[Any, Any], costs: dict[Any, Cost], name: str,
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
        least = pointwise(keys, {k: c.least for k, c in costs.items()  # type: ignore[misc]
                                  }, "least of any algorithm", by)
    if any(c.runs is not None for c in costs.values()):  # the library's pick, point by point
        runs = pointwise(keys, {k: c.runs or c for k, c in costs.items()}, name, by)
    return Cost(link_bytes=fields["link_bytes"], link_steps=fields["link_steps"],
                link_calls=fields["link_calls"], steps=tuple(terms), name=name,
                algorithm=algorithm.astype(str), least=least, runs=runs)
