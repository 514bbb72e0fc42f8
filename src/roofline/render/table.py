"""The one table model: columns with a machine key and a human header, rows of raw values.

Every format renders the same Table: text and Markdown and HTML show each cell through its
column's formatter; CSV writes the raw values (SI units, named by the column key).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

import numpy as np

from ..records import record
from ..units import format_bytes, format_si, format_time


def _plain(value: Any) -> str:
    return "-" if value is None else str(value)


@record(frozen=True)
class Column:
    """One column: `key` names the raw value (CSV header, with its unit: `t_lower_s`),
    `header` is what people read, `fmt` turns a raw value into a cell."""

    key: str
    header: str = ""
    fmt: Callable[[Any], str] = _plain
    numeric: bool = False  # right-aligned in text

    @property
    def title(self) -> str:
        return self.header or self.key


@record(frozen=True)
class Table:
    """Columns and rows, rendered as text, Markdown, CSV or HTML."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...] = ()
    caption: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table row has {len(row)} cells for {len(self.columns)} "
                                 "columns")

    @property
    def headers(self) -> list[str]:
        return [c.title for c in self.columns]

    def cells(self) -> list[list[str]]:
        """Every row as display strings."""
        return [[c.fmt(v) for c, v in zip(self.columns, row, strict=True)] for row in self.rows]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> Table:
    """A table of already-formatted strings (keys = headers)."""
    return Table(tuple(Column(h) for h in headers), tuple(tuple(r) for r in rows), caption)


# --- cell formatters -------------------------------------------------------------------------


def _finite(value: Any) -> float | None:
    arr = np.asarray(value, dtype=float) if value is not None else None
    if arr is None or arr.ndim:
        return None
    v = float(arr)
    return v if math.isfinite(v) else None


def si(unit: str = "") -> Callable[[Any], str]:
    def fmt(value: Any) -> str:
        v = _finite(value)
        if v is None:
            return f"[{np.size(value)} values]" if np.ndim(value) else "-"
        return format_si(v, unit)
    return fmt


def nbytes(value: Any) -> str:
    v = _finite(value)
    return "-" if v is None else format_bytes(v)


def seconds(value: Any) -> str:
    v = _finite(value)
    return "-" if v is None else format_time(v)


def percent(value: Any) -> str:
    v = _finite(value)
    return "-" if v is None else f"{100 * v:.1f}%"


def general(digits: int = 4) -> Callable[[Any], str]:
    def fmt(value: Any) -> str:
        v = _finite(value)
        return "-" if v is None else f"{v:.{digits}g}"
    return fmt


GAIN = 1.001  # a change that moves work per second by less than 0.1% does not move it


def gains(rows: Sequence[Any]) -> tuple[list[Any], str]:
    """What-if rows that speed the work up (by `speedup`), and one line naming the rest with
    their factor (a lever that does not help, or slows it, is not advice)."""
    helps = [r for r in rows if r.speedup > GAIN]
    rest = [f"{r.label} ({r.speedup:.3g}x)" for r in rows if not r.speedup > GAIN]
    return helps, ("no gain from: " + "; ".join(rest)) if rest else ""
