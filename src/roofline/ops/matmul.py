"""Matrix products: matmul [M,K]x[K,N], GEMV (M = 1) and the dot product (M = N = 1).

Counting convention: a multiply-add is 2 FLOPs, so FLOPs = 2·M·N·K (the JAX Scaling Book,
https://jax-ml.github.io/scaling-book/roofline/).
HBM traffic is the untiled lower bound: each operand read once, the output written once:
bytes = M·K·s_x + K·N·s_w + M·N·s_o with a separate element size per operand, so
weight-only quantization (int8 / int4 weights, bf16 activations) is the same formula.
The compute dtype defaults to the activation dtype: weight-only int4 computes at bf16 peak.

Warm (`warm_l2_bytes`, `roofline op matmul --warm l2` for the chip's L2 capacity): a loop over
the same operands keeps up to that many of their bytes in L2 between calls, so only the rest
must come from HBM (max(0, bytes − L2)), and every byte passes L2. A cold call (the default,
and every GEMM of a model step, whose weights other layers evicted) reads them all from HBM.
Published GEMV timings taken that way run past the HBM roof (aiconfigurator's FP8 GEMVs on
L40S and RTX PRO 6000: 2.4-3.5x); the warm bound holds them.
"""

from __future__ import annotations

from ..cost import Cost
from ..derivation import call, derived, maximum, steps, sym, value
from ..dtypes import DType, operand_dtypes
from ..errors import ParameterError
from ..hardware import Chip
from ..opid import Gemm
from ._common import size


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
    warm_l2_bytes: object = None,
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
    op = Gemm(value(M), value(N), value(K), w.name)
    if warm_l2_bytes is None:
        return Cost(flops={c.peak: value(flops)}, bytes={"hbm": value(hbm)},
                    steps=steps(("FLOPs", flops), ("HBM bytes", hbm)), name=name, op=op)
    operands = hbm  # every operand byte once, through L2; what L2 cannot hold from HBM
    beyond = call("at_least_0", lambda v: maximum(v, 0.0),
                  operands - size("L2", warm_l2_bytes, "warm_l2"))
    return Cost(flops={c.peak: value(flops)},
                bytes={"hbm": value(beyond), "l2": value(operands)},
                steps=steps(("FLOPs", flops), ("operand bytes (L2)", operands),
                            ("HBM bytes beyond what L2 keeps warm", beyond)),
                name=name, op=op)


def gemv(k: object, n: object, dtype: str | DType = "bf16",
         weight_dtype: str | DType | None = None, out_dtype: str | DType | None = None,
         compute_dtype: str | DType | None = None, warm_l2_bytes: object = None) -> Cost:
    """One token through a [K,N] weight: matmul with M = 1; intensity ≈ 2/s_w."""
    return matmul(1, k, n, dtype, weight_dtype, out_dtype, compute_dtype, name="gemv",
                  warm_l2_bytes=warm_l2_bytes)


def dot(n: object, dtype: str | DType = "bf16") -> Cost:
    """x · y for two length-N vectors: matmul with M = N = 1; intensity ≈ 1/s (0.5 for bf16)."""
    return matmul(1, n, 1, dtype, name="dot")


def warm_capacity(chip: Chip) -> float:
    """The bytes a loop over the same operands keeps on chip between calls: the l2 level's
    capacity, with any cache behind it the chip file names (`warm_capacity_bytes`: AMD's
    256 MiB Infinity Cache; its traffic charged at the L2's bandwidth, a looser bound)."""
    level = next((m for m in chip.memory if m.name == "l2"), None)
    if level is None or not level.capacity_bytes:
        raise ParameterError("warm_l2_bytes", f"l2: chip {chip.id!r} gives no l2 level with a "
                             "capacity (give a size)")
    return float(level.warm_capacity_bytes or level.capacity_bytes)
