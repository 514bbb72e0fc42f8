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
  writes its fp32 dQ accumulator (FA2 adds partial dQ atomically): the Θ(N²d²/M) term, with
  Bc = M / (s·(d + d_v)) keys per block for SRAM size M (the K and V tiles in shared memory;
  their fp32 dK, dV accumulators in registers on Hopper (FlashAttention-3) and in tensor
  memory on Blackwell), so each pair of a query row with a block costs those loads once per
  Bc scores.
- With the L2 capacity given (`l2_bytes`), as in the forward: every load and store passes L2,
  and HBM sees the compulsory traffic, one pass of Q, dO and dQ, and the re-reads only when
  the query side of one (batch, query head) pair does not fit in L2 (the K/V blocks of one
  head run on neighbouring SMs at once and stream the same query rows, and a kernel can run
  together as many heads as fit; dQ's atomic adds resolve in L2; with GQA the G heads'
  dK, dV are summed afterwards).
"""

from __future__ import annotations

from typing import Any

from ..cost import Cost
from ..derivation import Term, define, derived, note, steps, sym, value
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..opid import Attention
from ._common import size
from .attention import _block_rows, _l2_spill, _spilled, score_pairs

SOFTMAX_BACKWARD_VECTOR_OPS = 4.0  # per score: minus logsumexp, dP - D, times P, scale
ACCUMULATOR_BYTES = 4.0  # dQ, logsumexp and D are fp32


@derived
def attention_backward(
    batch: Any, q_len: Any, kv_len: Any, heads: Any, kv_heads: Any = None,
    head_dim: Any = 128, v_head_dim: Any = None, causal: bool = True, window: Any = None,
    dtype: str | DType = "bf16", sram_bytes: Any = None, block_kv: Any = None,
    chunk: Any = None, l2_bytes: Any = None,
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
    s, acc = sym("s", x.bytes), sym("s_acc", ACCUMULATOR_BYTES)

    gemm = 2 * B * H * pairs * (3 * d + 2 * dv)
    exps = B * H * pairs
    vector = sym("c_bwd", SOFTMAX_BACKWARD_VECTOR_OPS) * B * H * pairs
    bc = define(terms, "K/V rows per block", "Bc", _block_rows(sram_bytes, block_kv, d, dv, x))
    compulsory = (2 * B * Lkv * Hkv * (d + dv) * s  # K, V in; dK, dV out
                  + 2 * B * Lq * H * dv * s  # O and dO for D = rowsum(dO∘O)
                  + 2 * B * Lq * H * acc)  # logsumexp and D
    row = d * s + dv * s + 2 * d * acc  # Q and dO in, dQ read and written (fp32)
    reread = B * H * pairs / bc * row
    levels: dict[str, Any] = {}
    spill: Any = None  # the re-reads a pair-at-a-time kernel sends to HBM (expected only)
    if l2_bytes is None:
        hbm = compulsory + reread
        note(terms, "HBM bytes re-read per K/V block (Q, dO, dQ accumulator)", reread)
    else:  # every load passes L2; HBM sees one query-side pass (the spill: expected only)
        once = define(terms, "query side once (Q, dO in; dQ out)", "Q_1",
                      B * H * Lq * (d * s + dv * s + d * acc))
        spill = _l2_spill(terms, Lq * (d * s + dv * s + d * acc), reread - once, l2_bytes,
                          what="query-side", heads="query head")
        hbm = compulsory + once
        levels["l2"] = compulsory + reread
        note(terms, "L2 bytes (every load and store)", levels["l2"])
    terms += steps(("FLOPs (5 GEMM-sized products)", gemm),
                   ("softmax backward and exp FLOPs (vector and special-function units)",
                    vector + exps),
                   ("FLOPs", gemm + vector + exps),
                   ("HBM bytes compulsory (K, V, dK, dV, O, dO, statistics)", compulsory),
                   ("HBM bytes", hbm))
    levels = {"hbm": hbm, **levels}
    return _spilled(Cost(flops={x.peak: value(gemm)},
                         bytes={k: value(v) for k, v in levels.items()},
                         steps=tuple(terms), name="attention backward",
                         vector_flops={"fp32": value(vector)}, special_ops={"exp": value(exps)},
                         op=Attention(value(B), value(H), value(Lq), value(Lkv), value(d),
                                      "flash", "backward")), spill)
