"""Matrix products: matmul [M,K]x[K,N], GEMV (M = 1) and the dot product (M = N = 1).

Counting convention: a multiply-add is 2 FLOPs, so FLOPs = 2·M·N·K (seed 000 §2.1).
HBM traffic is the untiled lower bound: each operand read once, the output written once:
bytes = M·K·s_x + K·N·s_w + M·N·s_o with a separate element size per operand, so
weight-only quantization (int8 / int4 weights, bf16 activations) is the same formula.
The compute dtype defaults to the activation dtype: weight-only int4 computes at bf16 peak.
"""

from __future__ import annotations

from ..cost import Cost
from ..derivation import derived, steps, sym, value
from ..dtypes import DType, operand_dtypes
from ._common import size
from .params import OpDecl, Param, dtype_params


@derived
def matmul(
    m: object,
    k: object,
    n: object,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    name: str = "matmul",
) -> Cost:
    """X[M,K] (activations) x W[K,N] (weights) -> Y[M,N]; sizes may be numpy arrays.

    >>> from roofline import evaluate
    >>> est = evaluate(matmul(128, 8192, 8192), "h100")
    >>> round(est.intensity["hbm"], 1), est.bound
    (124.1, 'hbm')
    """
    x, w, o, c = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    M, K, N = size("M", m), size("K", k), size("N", n)
    sx, sw, so = sym("s_x", x.bytes), sym("s_w", w.bytes), sym("s_o", o.bytes)
    flops = 2 * M * N * K
    hbm = M * K * sx + K * N * sw + M * N * so
    return Cost(
        flops={c.peak: value(flops)},
        bytes={"hbm": value(hbm)},
        steps=steps(("FLOPs", flops), ("HBM bytes", hbm)),
        name=name,
    )


def gemv(k: object, n: object, dtype: str | DType = "bf16",
         weight_dtype: str | DType | None = None, out_dtype: str | DType | None = None,
         compute_dtype: str | DType | None = None) -> Cost:
    """One token through a [K,N] weight: matmul with M = 1; intensity ≈ 2/s_w."""
    return matmul(1, k, n, dtype, weight_dtype, out_dtype, compute_dtype, name="gemv")


def dot(n: object, dtype: str | DType = "bf16") -> Cost:
    """x · y for two length-N vectors: matmul with M = N = 1; intensity ≈ 1/s (0.5 for bf16)."""
    return matmul(1, n, 1, dtype, name="dot")


_DTYPES = dtype_params("dtype", "weight", "out", "compute")
MATMUL = OpDecl("matmul", "X[M,K] x W[K,N] -> Y[M,N]", matmul, (
    Param("m", "rows of X (tokens)", required=True),
    Param("k", "contraction dimension", required=True),
    Param("n", "columns of W", required=True), *_DTYPES))
GEMV = OpDecl("gemv", "one token through W[K,N] (matmul with M = 1)", gemv, (
    Param("k", "input features", required=True),
    Param("n", "output features", required=True), *_DTYPES))
DOT = OpDecl("dot", "dot product of two length-N vectors", dot, (
    Param("n", "vector length", required=True), *dtype_params("dtype")))
