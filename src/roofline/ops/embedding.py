"""Embedding lookup: gather one row of the table per token (no arithmetic).

bytes = T·h·(s_w + s_x): each token's row read from the table and written as an activation.
A lookup does no FLOPs; it is pure data movement (the evaluator then has no compute resource).
"""

from __future__ import annotations

from typing import Any

from ..cost import Cost
from ..derivation import derived, steps, sym, value
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..opid import EMBEDDING
from ._common import size


@derived
def embedding_lookup(tokens: Any, hidden: Any, weight_dtype: str | DType = "bf16",
                     dtype: str | DType = "bf16") -> Cost:
    T, h = size("T", tokens, "tokens"), size("h", hidden, "hidden")
    hbm = T * h * (sym("s_w", lookup_dtype(weight_dtype).bytes) + sym("s_x", lookup_dtype(
        dtype).bytes))
    return Cost(bytes={"hbm": value(hbm)}, steps=steps(("HBM bytes", hbm)), name="embedding",
                op=EMBEDDING)
