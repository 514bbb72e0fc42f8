"""Work split over chips: sharded matmuls (the Megatron tensor-parallel decoder layer is
`roofline.models.tp_layer`, built from the same layer ops as whole models).

All costs are per chip: the chip's share of the FLOPs and HBM traffic plus the collective it
takes part in, so `evaluate` weighs T_math against T_comm directly (seed 001 §2.5).

sharded_matmul, X[M,K] x W[K,N] over p chips:
  contraction  each chip holds K/p of X's columns and W's rows and computes a partial
               Y[M,N]; the partial sums are all-reduced (or reduce-scattered, leaving Y
               sharded). FLOPs per chip 2·M·(K/p)·N; link bytes 2(p-1)/p·M·N·s_o. M cancels
               in the ratio: the per-chip shard K/p decides (critical ≈ 2200 on H100 NVLink).
  output       each chip holds N/p columns of W and computes Y[:, N/p]; an all-gather
               assembles Y (skip it with gather=False, as Megatron's column-parallel layer
               does when the next layer consumes the shard).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import Cost
from ..dtypes import DType, operand_dtypes
from ..errors import RooflineError
from ._common import shown, size, whole
from .collectives import collective
from .matmul import matmul

SHARDINGS = ("contraction", "output")


def sharded_matmul(
    m: Any,
    k: Any,
    n: Any,
    shards: Any,
    shard: str = "contraction",
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    reduce: str = "all-reduce",
    gather: bool = True,
    algo: str = "ring",
    link: str = "scale-up",
    domain_size: Any = None,
    link_share: Any = 1.0,
) -> Cost:
    """Per-chip cost of a matmul sharded over `shards` chips (see the module docstring).

    >>> from roofline import evaluate
    >>> evaluate(sharded_matmul(1024, 8192, 8192, 2), "h100").bound
    'compute'
    >>> evaluate(sharded_matmul(1024, 8192, 8192, 2, link="scale-out"), "h100").bound
    'scale-out'
    """
    p = whole("p", shards, "shards")
    ops = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    M, K, N = size("M", m), size("K", k), size("N", n)
    split = K if shard == "contraction" else N
    if np.any(np.asarray(p.value) > np.asarray(split.value)):  # a shard below one row
        raise RooflineError(f"shards ({shown(shards)}) exceed the {shard} dimension "
                            f"({shown(split.value)}) they split")
    output_bytes = (M * N * ops.o.bytes).value
    if shard == "contraction":
        if reduce not in ("all-reduce", "reduce-scatter"):
            raise RooflineError(f"reduce: partial sums are combined by 'all-reduce' or "
                                f"'reduce-scatter', got {reduce!r}")
        local = matmul(m, (K / p).value, n, *ops, name="local matmul")
        comm = collective(reduce, output_bytes, shards, algo, link, domain_size, link_share)
    elif shard == "output":
        local = matmul(m, k, (N / p).value, *ops, name="local matmul")
        if not gather:
            return local
        comm = collective("all-gather", output_bytes, shards, algo, link, domain_size,
                          link_share)
    else:
        raise RooflineError(f"shard: one of {', '.join(SHARDINGS)}, got {shard!r}")
    total = local + comm
    return Cost(total.flops, total.bytes, total.link_bytes, total.link_steps, total.terms,
                name=f"{shard}-sharded matmul over {shards}")
