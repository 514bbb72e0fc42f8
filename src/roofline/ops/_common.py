"""Input checks shared by the ops: sizes are positive, finite numbers or arrays of them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..derivation import Num, Sym
from ..errors import RooflineError


def size(symbol: str, value: Any, what: str | None = None) -> Sym:
    """A positive size as a derivation symbol; arrays are checked element by element."""
    label = what or symbol
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise RooflineError(f"{label}: expected a positive number, got {value!r}") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise RooflineError(f"{label}: must be a positive finite number, got {value!r}")
    v: Num = float(arr) if arr.ndim == 0 else arr
    return Sym(symbol, v)


def whole(symbol: str, value: Any, what: str | None = None) -> Sym:
    """A positive whole number (a count of tokens, experts, ...) as a derivation symbol."""
    count = size(symbol, value, what)
    arr = np.asarray(count.value)
    if not np.all(arr == np.round(arr)):
        raise RooflineError(f"{what or symbol}: must be a whole number, got {value!r}")
    return count
