"""Results as tables for notebooks: pandas DataFrames (`to_frame`) and HTML (`_repr_html_`)
for the column-shaped results (ServePlan, SweepResult, Trace). Full precision in the
DataFrame; engineering units in the HTML, as in every table for people."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import RooflineError
from ..units import format_si, format_time
from . import html
from .table import Column, Table

ROWS_SHOWN = 20


def human(value: Any, column: str = "") -> str:
    """One value for people, in engineering units chosen by its column's name (`*_s` a
    time, `*_flops_per_s` FLOP/s, `*_Bps` B/s, `*_per_s` a rate, `*bytes*` bytes; a whole
    number every digit)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        return "-" if value is None else str(value)
    v = float(value)
    if not np.isfinite(v):
        return "-"
    if column.endswith("flops_per_s"):
        return format_si(v, "FLOP/s")
    if column.endswith("_Bps"):
        return format_si(v, "B/s")
    if column.endswith("_per_s"):
        return format_si(v, "/s")
    if column.endswith("_s"):
        return format_time(v)
    if "bytes" in column:
        return format_si(v, "B")
    if v.is_integer() and abs(v) < 1e9:
        return str(int(v))
    return format_si(v)


def frame(columns: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Any:
    """A pandas DataFrame of columns (name -> array) or of records (pandas is optional)."""
    try:
        import pandas as pd
    except ImportError:
        raise RooflineError("to_frame needs pandas: pip install pandas") from None
    if isinstance(columns, Mapping):
        return pd.DataFrame({k: np.asarray(v) for k, v in columns.items()})
    return pd.DataFrame(list(columns))


def columns_html(title: str, columns: Mapping[str, Any], rows: Sequence[int] | None = None,
                 keys: Sequence[str] | None = None) -> str:
    """A titled HTML table of some rows (default the first ROWS_SHOWN) of column arrays."""
    keys = list(keys or columns)
    n = len(np.asarray(columns[keys[0]])) if keys else 0
    shown = list(rows) if rows is not None else list(range(min(n, ROWS_SHOWN)))
    arrays = {k: np.asarray(columns[k]) for k in keys}
    cells = [[human(arrays[k][i].item() if hasattr(arrays[k][i], "item") else arrays[k][i], k)
              for k in keys] for i in shown]
    return records_html(title, keys, cells, f"{len(shown)} of {n} rows shown; "
                        "to_frame() has every row at full precision")


def records_html(title: str, headers: Sequence[str], cells: Sequence[Sequence[str]],
                 note: str = "") -> str:
    table = Table(tuple(Column(h, h) for h in headers), tuple(tuple(r) for r in cells),
                  caption=title, notes=(note,) if note else ())
    return f"<div>{html.render(table)}</div>"
