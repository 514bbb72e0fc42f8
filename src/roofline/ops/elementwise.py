"""Elementwise work: norms, softmax, activations, residual adds (memory-bound in every
transformer: Ivanov et al., "Data Movement Is All You Need", MLSys 2021, arXiv:2007.00072).

FLOPs = c·N for c operations per element (a stated small constant per kind, below), run on
the vector units (CUDA cores / VPU), except the transcendentals (exp, tanh), which go to the
special-function units; bytes = N·(n_in·s_in + n_out·s_out): every input read once and every
output written once (n_out = 1 but for a fused residual add + norm, which writes two).
Intensity ≈ c / (2s): a constant, so these ops sit far left of every ridge point.
The reduction in a norm or softmax reads its row once more only if it does not fit on chip;
we count the single-pass (fused-row) lower bound. Norm weights (one vector) are ignored.
"""

from __future__ import annotations

import numpy as np

from ..cost import Cost
from ..derivation import derived, one_point, steps, sym, value
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..errors import unknown
from ..opid import OpKind, Plain
from ..records import record
from ._common import size


@record(frozen=True)
class ElementwiseKind:
    """An elementwise op's operations per element, inputs and transcendentals."""

    ops_per_element: float  # all operations, the transcendental ones included
    inputs: int
    note: str
    special: float = 0.0  # of which transcendentals (exp, tanh) per element
    outputs: int = 1  # tensors written (a fused residual add + norm writes two)
    # training: the backward kernel's HBM bytes over the forward's (Liger-Kernel's fused
    # kernels, linkedin/Liger-Kernel src/liger_kernel/ops: rms_norm backward loads dY and X,
    # stores dX: 3 passes to the forward's 2; swiglu backward loads dc, a, b, stores da, db:
    # 5 to 3; a fused add + norm's backward loads dY, X and the residual's gradient, stores
    # dX: 4 to 4; an add's gradient passes through: none)
    backward: float = 1.5


# Operation counts per output element (the convention, written once):
KINDS: dict[str, ElementwiseKind] = {
    "generic": ElementwiseKind(1, 1, "one operation per element"),
    "add": ElementwiseKind(1, 2, "x + y (residual add)", backward=0.0),
    "mul": ElementwiseKind(1, 2, "x · y"),
    "relu": ElementwiseKind(1, 1, "max(x, 0)"),
    "silu": ElementwiseKind(4, 1, "x / (1 + exp(-x)): neg, exp, add, div", 1),
    "gelu": ElementwiseKind(8, 1, "tanh approximation: ~8 ops, one tanh", 1),
    "swiglu": ElementwiseKind(5, 2, "silu(a) · b: 4 + 1 ops, two inputs", 1, backward=5 / 3),
    "rmsnorm": ElementwiseKind(4, 1, "square, sum, scale by rsqrt, scale by weight"),
    "layernorm": ElementwiseKind(7, 1, "mean, subtract, square, sum, normalise, scale, shift"),
    "softmax": ElementwiseKind(5, 1, "max, subtract, exp, sum, divide", 1),
    # the residual add fused with the next norm, one kernel (vLLM csrc/layernorm_kernels.cu
    # fused_add_rms_norm; Apex / Transformer Engine / Liger-Kernel fused norms): reads the
    # residual and the block's output, writes the new residual and the normed activations:
    # 4 passes over the tokens, not the add's 3 and the norm's 2
    "add_rmsnorm": ElementwiseKind(5, 2, "x + y, then rmsnorm of it; writes both", outputs=2,
                                   backward=1.0),
    "add_layernorm": ElementwiseKind(8, 2, "x + y, then layernorm of it; writes both",
                                     outputs=2, backward=1.0),
}


def preset(kind: str) -> ElementwiseKind:
    """The operation count and inputs of an elementwise kind."""
    if kind not in KINDS:
        raise unknown("elementwise kind", kind, KINDS)
    return KINDS[kind]


@derived
def elementwise(
    n: object,
    kind: str = "generic",
    dtype: str | DType = "bf16",
    out_dtype: str | DType | None = None,
    ops_per_element: float | None = None,
    inputs: int | None = None,
    compute_dtype: str | DType | None = None,
) -> Cost:
    """N elements through an elementwise op; `ops_per_element` / `inputs` override the kind.

    The compute dtype (default: the input dtype) picks the vector units' rate; the kind's
    transcendentals (at most the ops per element) run on the special-function units.
    """
    spec = preset(kind)
    x = lookup_dtype(dtype)
    o = lookup_dtype(out_dtype) if out_dtype is not None else x
    c = lookup_dtype(compute_dtype) if compute_dtype is not None else x
    N = size("N", n)
    # a given count is checked; the kind's own (KINDS) are positive already
    ops = sym("c", float(spec.ops_per_element)) if ops_per_element is None else \
        size("c", ops_per_element, "ops per element")
    n_in = sym("n_in", float(spec.inputs)) if inputs is None else size("n_in", inputs, "inputs")
    flops = ops * N
    per_element = value(ops)  # transcendentals: at most all the element's operations
    c_sfu = min(spec.special, per_element) if one_point(per_element) else \
        np.minimum(spec.special, per_element)
    special = sym("c_sfu", c_sfu) * N
    out = sym("s_out", o.bytes) if spec.outputs == 1 else \
        sym("n_out", float(spec.outputs)) * sym("s_out", o.bytes)
    hbm = N * (n_in * sym("s_in", x.bytes) + out)
    transcendentals = [("of which transcendentals (special-function units)", special)]
    return Cost(
        bytes={"hbm": value(hbm)},
        steps=steps(("FLOPs", flops), *(transcendentals if spec.special else []),
                    ("HBM bytes", hbm)),
        name=kind, vector_flops={c.peak: value(flops - special)},
        special_ops={"exp": value(special)} if spec.special else None,
        op=Plain(OpKind.ELEMENTWISE, kind))
