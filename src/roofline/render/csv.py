"""Tables as CSV: raw values in SI units under their column keys; empty = none."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..files import csv_text
from .table import Table


def _cell(value: Any) -> Any:
    """A value as the CSV writer takes it: numbers as numbers, text (guarded there)."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray)
                                                    and value.ndim == 0):
        v = float(value)
        return v if math.isfinite(v) else ""
    return str(value)


def render(t: Table) -> str:
    columns = {c.key: [_cell(row[i]) for row in t.rows] for i, c in enumerate(t.columns)}
    return csv_text(columns, newline="\n")
