"""Attention's backward pass, FlashAttention-2 style (Dao 2023, Algorithm 2).

The backward recomputes S = QKᵀ and P = softmax(S) from the saved logsumexp instead of
reading them, then forms dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D), dQ = dS·K, dK = dSᵀ·Q:
five GEMM-sized products against the forward's two, so per score pair
FLOPs = 2·(d + d + d_v + d_v + d) = 2·(3·d + 2·d_v) = 2.5x the forward's 2·(d + d_v) when
d = d_v. Softmax backward: one exp per score (recomputing P) on the special-function units,
about 4 more operations per score (subtract the logsumexp, dP − D, the product, the scaling)
on the vector units in fp32.

HBM traffic (the outer loop runs over K/V blocks of Bc keys, the inner loop over query rows):
- compulsory: K and V read once, dK and dV written once; the preprocessing pass reads O and
  dO once (D = rowsum(dO∘O)); the logsumexp and D are fp32 per query row;
- re-read per K/V block: every query row that sees the block loads Q and dO, and reads and
  writes its fp32 dQ accumulator (FA2 adds partial dQ to HBM): the Θ(N²d²/M) term, with
  Bc = M / ((d + d_v)·(s + 4)) keys per block for SRAM size M (the K and V tiles and their
  fp32 dK, dV accumulators stay resident), so each pair of a query row with a block costs
  those loads once per Bc scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Call, Expr, Sym, Term, define
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ._common import size
from .attention import score_pairs

SOFTMAX_BACKWARD_VECTOR_OPS = 4.0  # per score: minus logsumexp, dP - D, times P, scale
ACCUMULATOR_BYTES = 4.0  # dQ, logsumexp and D are fp32


def _kv_block(sram_bytes: Any, block_kv: Any, d: Sym, dv: Sym, s: Sym, acc: Sym) -> Expr:
    if block_kv is not None:
        return size("Bc", block_kv, "block_kv")
    if sram_bytes is None:
        raise RooflineError("flash attention backward needs the on-chip SRAM size: pass "
                            "sram_bytes (the chip's sram unit_capacity_bytes) or block_kv")
    M = size("M", sram_bytes, "sram_bytes")
    rows = Call("floor", np.floor, M / ((d + dv) * (s + acc)))
    if np.any(np.asarray(rows.value) < 1):
        raise RooflineError("sram_bytes is too small to hold one K/V row and its gradients")
    return rows


def attention_backward(
    batch: Any, q_len: Any, kv_len: Any, heads: Any, kv_heads: Any = None,
    head_dim: Any = 128, v_head_dim: Any = None, causal: bool = True, window: Any = None,
    dtype: str | DType = "bf16", sram_bytes: Any = None, block_kv: Any = None,
    chunk: Any = None,
) -> Cost:
    """The backward pass of flash attention for one call (all layers' shapes alike)."""
    x = lookup_dtype(dtype)
    B, H = size("B", batch, "batch"), size("H", heads, "heads")
    Hkv = size("Hkv", heads if kv_heads is None else kv_heads, "kv_heads")
    d = size("d", head_dim, "head_dim")
    dv = size("d_v", head_dim if v_head_dim is None else v_head_dim, "v_head_dim")
    Lq, Lkv = size("Lq", q_len, "q_len"), size("Lkv", kv_len, "kv_len")
    terms: list[Term] = []
    pairs = define(terms, "score pairs per head", "P",
                   score_pairs(q_len, kv_len, causal, window, terms, chunk=chunk))
    s, acc = Sym("s", x.bytes), Sym("s_acc", ACCUMULATOR_BYTES)

    gemm = 2 * B * H * pairs * (3 * d + 2 * dv)
    exps = B * H * pairs
    vector = Sym("c_bwd", SOFTMAX_BACKWARD_VECTOR_OPS) * B * H * pairs
    bc = define(terms, "K/V rows per block", "Bc", _kv_block(sram_bytes, block_kv, d, dv, s, acc))
    compulsory = (2 * B * Lkv * Hkv * (d + dv) * s  # K, V in; dK, dV out
                  + 2 * B * Lq * H * dv * s  # O and dO for D = rowsum(dO∘O)
                  + 2 * B * Lq * H * acc)  # logsumexp and D
    row = d * s + dv * s + 2 * d * acc  # Q and dO in, dQ read and written (fp32)
    reread = B * H * pairs / bc * row
    hbm = compulsory + reread
    terms += [Term("FLOPs (5 GEMM-sized products)", gemm),
              Term("HBM bytes compulsory (K, V, dK, dV, O, dO, statistics)", compulsory),
              Term("HBM bytes re-read per K/V block (Q, dO, dQ accumulator)", reread),
              Term("HBM bytes", hbm)]
    return Cost(flops={x.peak: gemm.value}, vector_flops={"fp32": vector.value},
                special_ops={"exp": exps.value}, bytes={"hbm": hbm.value},
                terms=tuple(terms), name="attention backward")
