"""The optimizer step: mixed-precision Adam(W) over the parameters a chip owns.

Per parameter it reads the fp32 master weight, the two fp32 moments and the gradient, and
writes the master weight, both moments and the low-precision weight copy:
bytes = P·(3·s_state + s_g + 3·s_state + s_w) = 28 B per parameter with fp32 states and bf16
gradients and weights. FLOPs ≈ 12 per parameter (moment updates, bias correction, the
sqrt-divide, weight decay), on the vector units at the fp32 rate (the square root on the
special-function units).
"""

from __future__ import annotations

from typing import Any

from ..cost import Cost
from ..derivation import derived, steps, sym, value
from ..dtypes import dtype as lookup_dtype
from ..opid import OpKind, Plain
from ._common import size

ADAM_FLOPS_PER_PARAM = 12.0


@derived
def adam_update(params: Any, state_dtype: str = "fp32", grad_dtype: str = "bf16",
                weight_dtype: str = "bf16", compute_dtype: str | None = None) -> Cost:
    """The update of `params` parameters. FLOPs count at `compute_dtype`'s peak (default the
    state dtype; chips that publish no fp32 peak, like TPUs, pass their widest one: a valid
    but loose bound)."""
    P = size("P", params, "params")
    s = sym("s_state", lookup_dtype(state_dtype).bytes)
    hbm = P * (6 * s + sym("s_g", lookup_dtype(grad_dtype).bytes)
               + sym("s_w", lookup_dtype(weight_dtype).bytes))
    flops = sym("c", ADAM_FLOPS_PER_PARAM) * P
    peak = lookup_dtype(compute_dtype or state_dtype).peak
    # the vector units, and one square root per parameter on the special-function units
    return Cost(vector_flops={peak: value(flops - P)}, special_ops={"sqrt": value(P)},
                bytes={"hbm": value(hbm)},
                steps=steps(("FLOPs", flops), ("HBM bytes", hbm)), name="adam update",
                op=Plain(OpKind.OPTIMIZER, "adam"))
