"""Input checks shared by the ops: sizes are positive, finite numbers or arrays of them."""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from ..derivation import NUMBERS, Num, Quantity, Sym, formula_mode, one_point, sym, value
from ..errors import RooflineError

_LARGEST = sys.float_info.max  # an int beyond it has no float


def shown(value: Any) -> str:
    """A value for an error message: arrays as their offending range, on one line."""
    if isinstance(value, np.ndarray) and value.size == 0:
        return "an empty array"
    if isinstance(value, np.ndarray) and value.size > 1:
        bad = value[~(np.isfinite(value) & (value > 0))] if value.dtype.kind == "f" else value
        pick = bad if bad.size else value
        return f"array of {value.size} values including {float(pick.flat[0]):g}"
    return repr(value.item() if isinstance(value, np.ndarray) else value)


def size(symbol: str, given: Any, what: str | None = None) -> Quantity:
    """A positive size as a derivation symbol (its number when running on numbers); arrays
    are checked element by element."""
    if one_point(given) and 0 < given <= _LARGEST:  # (nan fails)
        number = float(given)  # as sym(symbol, number), without the call
        return number if formula_mode() == NUMBERS else Sym(symbol, number)
    label = what or symbol
    try:
        arr = np.asarray(given, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise RooflineError(f"{label}: expected a positive number, got {shown(given)}") from None
    # two reductions, no temporaries (nan fails both comparisons)
    if arr.size == 0 or not (arr.min() > 0 and arr.max() < math.inf):
        raise RooflineError(f"{label}: must be a positive finite number, got {shown(arr)}")
    v: Num = float(arr) if arr.ndim == 0 else arr
    return sym(symbol, v)


def whole(symbol: str, given: Any, what: str | None = None) -> Quantity:
    """A positive whole number (a count of tokens, experts, ...) as a derivation symbol."""
    count = size(symbol, given, what)
    number = value(count)
    if one_point(number) and float(number).is_integer():
        return count
    arr = np.asarray(number)
    if not np.all(arr == np.round(arr)):
        raise RooflineError(f"{what or symbol}: must be a whole number, got {shown(arr)}")
    return count
