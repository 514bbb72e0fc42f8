"""Tile utilization of a step's ops, kept on the chip per op shape and found for all the ops
of one kind of typed record at once (`physics.tile_utilization` over arrays of their shapes)."""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from ..cost import Cost
from ..hardware import Chip
from .physics import tile_utilization

UTILIZATIONS = 4096  # op shapes kept per chip (a serving plan's steps repeat a few hundred)


def utilizations(costs: Sequence[Cost], chip: Chip) -> list[Any]:
    """`physics.tile_utilization` of each op with tensor FLOPs (None for the others), kept on
    the chip per op shape (what it reads of a Cost: its typed record and its FLOPs), which
    repeat in every step of a serving plan or a sweep. Those not kept yet are found for all
    the ops of one kind of record at once, `tile_utilization` over arrays of their shapes
    (elementwise formulas: each op's figure is the one it gets alone). An array-valued shape
    (a sweep's) is not kept."""
    kept = cast(dict[tuple[Any, ...], Any], chip.memo.setdefault("expect.utilization", {}))
    out: list[Any] = [None] * len(costs)
    groups: dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]] = {}
    for i, cost in enumerate(costs):
        if not cost.flops:
            continue
        key = (cost.op, *cost.flops.items())
        try:
            out[i] = kept.get(key)
        except TypeError:  # an array in it (unhashable): found alone, not kept
            out[i] = tile_utilization(cost, chip)
            continue
        if out[i] is None:  # one kind: a record type, its names and flags, its dtypes
            kind = (type(cost.op), *cost.flops, *(
                float if _number(v) else v for v in _fields(cost.op)))
            groups.setdefault(kind, {}).setdefault(key, []).append(i)
    if len(kept) + sum(map(len, groups.values())) > UTILIZATIONS:
        kept.clear()
    for members in groups.values():
        shapes = [costs[rows[0]] for rows in members.values()]
        if len(shapes) == 1 or not dataclasses.is_dataclass(shapes[0].op):  # no record
            found: Any = [_one(tile_utilization(c, chip)) for c in shapes]
        else:
            records = [cast(Any, c.op) for c in shapes]
            stacked = type(records[0])(*(
                np.array(column, dtype=float) if _number(column[0]) else column[0]
                for column in zip(*map(_fields, records), strict=True)))
            flops = {dt: np.array([c.flops[dt] for c in shapes], dtype=float)
                     for dt in shapes[0].flops}
            found = np.broadcast_to(tile_utilization(Cost(flops=flops, op=stacked), chip),
                                    len(shapes)).tolist()
        for (key, rows), value in zip(members.items(), found, strict=True):
            kept[key] = value
            for i in rows:
                out[i] = value
    return out


def _fields(record: Any) -> tuple[Any, ...]:
    """A typed record's fields in order (what its class is called with); none for no record."""
    kind: type = type(record)
    return _getter(kind)(record) if dataclasses.is_dataclass(kind) else ()


@functools.cache
def _getter(record_type: type) -> Callable[[Any], tuple[Any, ...]]:
    names = [f.name for f in dataclasses.fields(record_type)]
    get = operator.attrgetter(*names)
    return get if len(names) > 1 else lambda record: (get(record),)


def _one(value: Any) -> Any:
    """A 0-d figure as a Python float (what the arithmetic on it stays in), else itself."""
    return float(value) if type(value) is not float and np.ndim(value) == 0 else value


def _number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)
