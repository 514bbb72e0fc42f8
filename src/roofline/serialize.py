"""Results as plain JSON-ready data: numpy values become lists and scalars, and non-finite
floats become None (JSON has no NaN or Infinity)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """Recursively convert numpy values to lists / scalars and non-finite floats to None.
    Whole numbers stay integers (a batch of 133 is 133, not 133.0). A record with a
    `to_dict` method (serve.point.ServePoint) is written as that dict."""
    if hasattr(obj, "to_dict") and not isinstance(obj, type):
        return jsonable(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        if obj.is_integer() and abs(obj) <= 2**53:  # 133.0 -> 133; exactly representable
            return int(obj)
    return obj
