"""Tables as CSV: raw values in SI units under their column keys; empty = none."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np

from .safe import csv_cell
from .table import Table


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) or (isinstance(value, np.ndarray)
                                                    and value.ndim == 0):
        v = float(value)
        return repr(v) if math.isfinite(v) else ""
    return csv_cell(str(value))


def render(t: Table) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([csv_cell(c.key) for c in t.columns])
    writer.writerows([_cell(v) for v in row] for row in t.rows)
    return buf.getvalue()
