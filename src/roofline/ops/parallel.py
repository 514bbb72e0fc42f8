"""Work split over chips: sharded matmuls and the Megatron tensor-parallel transformer layer.

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

tp_layer: one decoder layer with Megatron tensor parallelism (forward): QKV and the MLP's
up/gate projections are column-parallel, the attention output and MLP down projections are
row-parallel, so each half ends in one all-reduce of the [tokens, hidden] activations: two
all-reduces per layer forward. Norms, the activation and residual adds are elementwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import Cost
from ..dtypes import DType, operand_dtypes
from ..errors import RooflineError
from ._common import size, whole
from .attention import attention
from .collectives import collective
from .elementwise import elementwise
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
    output_bytes = (M * N * ops.o.bytes).value
    if shard == "contraction":
        if reduce not in ("all-reduce", "reduce-scatter"):
            raise RooflineError(f"reduce: partial sums are combined by 'all-reduce' or "
                                f"'reduce-scatter', got {reduce!r}")
        local = matmul(m, (K / p).value, n, *ops, name="local matmul")
        comm = collective(reduce, output_bytes, shards, algo, link, domain_size)
    elif shard == "output":
        local = matmul(m, k, (N / p).value, *ops, name="local matmul")
        if not gather:
            return local
        comm = collective("all-gather", output_bytes, shards, algo, link, domain_size)
    else:
        raise RooflineError(f"shard: one of {', '.join(SHARDINGS)}, got {shard!r}")
    total = local + comm
    return Cost(total.flops, total.bytes, total.link_bytes, total.link_steps, total.terms,
                name=f"{shard}-sharded matmul over {shards}")


def tp_layer(
    batch: Any,
    seq_len: Any,
    hidden: Any,
    ffn: Any,
    heads: Any,
    kv_heads: Any = None,
    head_dim: Any = None,
    tp: Any = 1,
    gated: bool = True,
    dtype: str | DType = "bf16",
    impl: str = "flash",
    sram_bytes: Any = None,
    block_q: Any = None,
    algo: str = "ring",
    link: str = "scale-up",
    domain_size: Any = None,
) -> Cost:
    """Forward cost per chip of one decoder layer (prefill / training shapes) at TP degree tp.

    >>> from roofline import evaluate
    >>> layer = tp_layer(8, 4096, 8192, 28672, 64, 8, tp=8, block_q=128)
    >>> evaluate(layer, "h100").bound, evaluate(tp_layer(8, 4096, 8192, 28672, 64, 8, tp=8,
    ...     block_q=128, link="scale-out"), "h100").bound
    ('compute', 'scale-out')
    """
    t = whole("tp", tp, "tp")
    H = whole("H", heads, "heads")
    Hkv = whole("Hkv", heads if kv_heads is None else kv_heads, "kv_heads")
    d = size("d", (size("hidden", hidden) / H).value if head_dim is None else head_dim,
             "head_dim")
    tpv, hv, hkv = np.asarray(t.value), np.asarray(H.value), np.asarray(Hkv.value)
    if np.any(np.mod(hv, tpv) != 0):
        raise RooflineError(f"heads ({heads}) must be divisible by tp ({tp})")
    if np.any((np.mod(hkv, tpv) != 0) & (np.mod(tpv, hkv) != 0)):
        raise RooflineError(f"kv_heads ({kv_heads}) and tp ({tp}) must divide one another")
    kv_local = np.maximum(hkv / tpv, 1.0)  # fewer KV heads than ranks: each rank keeps one
    tokens = (size("B", batch, "batch") * size("S", seq_len, "seq_len")).value
    h, f = size("hidden", hidden).value, size("ffn", ffn).value
    q_cols = hv / tpv * d.value
    kv_cols = 2 * kv_local * d.value
    parts = [
        elementwise(tokens * h, "rmsnorm", dtype),
        matmul(tokens, h, q_cols + kv_cols, dtype, name="qkv projection"),
        attention(batch, seq_len, seq_len, hv / tpv, kv_local, d.value, impl=impl,
                  dtype=dtype, sram_bytes=sram_bytes, block_q=block_q),
        matmul(tokens, q_cols, h, dtype, name="attention output projection"),
        elementwise(tokens * h, "add", dtype),
        elementwise(tokens * h, "rmsnorm", dtype),
        matmul(tokens, h, (2 if gated else 1) * f / tpv, dtype, name="mlp up/gate"),
        elementwise(tokens * f / tpv, "swiglu" if gated else "gelu", dtype),
        matmul(tokens, f / tpv, h, dtype, name="mlp down"),
        elementwise(tokens * h, "add", dtype),
    ]
    if np.any(tpv > 1):
        all_reduce = collective("all-reduce", tokens * h * operand_dtypes(dtype).x.bytes, tp,
                                algo, link, domain_size)
        parts += [all_reduce, all_reduce]
    total = sum(parts[1:], parts[0])
    return Cost(total.flops, total.bytes, total.link_bytes, total.link_steps, total.terms,
                name=f"tensor-parallel layer (tp={tp})")
