"""Attention: one function for prefill, decode, training shapes; naive, Flash and decode kernels.

Shapes: Q [B, Lq, H, d], K [B, Lkv, Hkv, d], V [B, Lkv, Hkv, d_v]; the queries are the last
Lq of the Lkv positions (prefill: Lq = Lkv; decode: Lq = 1, or k for speculative decoding).
G = H / Hkv query heads share one KV head (MHA: G = 1, GQA: G > 1, MQA: Hkv = 1).

Counting conventions (IO of naive and flash attention: Dao et al., FlashAttention,
arXiv:2205.14135 §3.2; decode reads every cached K and V once per step):
- score pairs per head P: non-causal Lq·Lkv; causal Lq·Lkv − Lq·(Lq − 1)/2 (only keys at or
  before the query, so N(N+1)/2 ≈ N²/2 for prefill: causal halves the score work); a causal
  sliding window W caps each query at the W most recent keys (itself included); chunked local
  attention (Llama 4) with chunk C lets position p see the (p mod C) + 1 keys of its own
  aligned chunk: with S(n) = floor(n/C)·C(C+1)/2 + r(r+1)/2, r = n mod C, the pairs are
  S(Lkv) − S(Lkv − Lq).
- FLOPs = 2·B·H·P·(d + d_v) for QKᵀ and PV (a multiply-add is 2 FLOPs) plus c = 5 FLOPs per
  score for softmax (max, subtract, exp, sum, divide), counted at the same peak.
- HBM bytes: Q read once and O written once, plus the K/V traffic of the implementation:
  naive  K and V read once; S and P materialised as dense [Lq, Lkv] matrices per head in the
         activation dtype (S written, read by softmax, P written, read by PV: 4 passes; a
         causal mask does not shrink a dense matrix). Intensity ≈ d/s, independent of N.
  flash  S and P stay on chip; the query rows of one KV head (G·Lq rows, GQA packed) are cut
         into blocks of Br rows and K/V are re-read once per block, up to the keys the block
         can see: Br = M / (s·(d + d_v)) for SRAM size M (the Q tile and the O accumulator stay
         resident), so traffic is Θ(N²d²/M) (FlashAttention IO analysis).
         With the L2 capacity given (`l2_bytes`), the bound's HBM sees the compulsory
         traffic (Q, O and one K/V pass) and L2 every load: the n_blk − 1 re-reads come from
         L2. When the K/V working set of one (batch, KV head) pair fits in L2 (S_kv <= L2;
         S_kv = the most keys one query sees, Lkv, or W / C with a window or chunk, times the
         bytes per key) a kernel runs together the pairs that fit: FlashAttention-3's
         persistent kernel schedules a "section" of heads whose K/V fit in L2
         (Dao-AILab/flash-attention hopper/tile_scheduler.hpp, DynamicPersistentTileScheduler:
         "32 MB for K & V"). Past that a kernel can still share each K/V load among the
         query blocks of a pair that run at once, or stream K/V in L2-sized chunks, so the
         bound charges no re-read to HBM; the expected time (`Cost.runs`) charges the spill
         of a kernel that runs one pair's re-reads through L2 at a time: all of them once
         S_kv > L2 (FlashAttention-4 at head dim 256 and 128K keys on B200 ran at 0.86 of
         the bound that charged them).
  decode K/V read exactly once per KV head (split-KV flash decoding: all query rows of a KV
         head in one tile). Batching does not raise decode intensity: every sequence reads its
         own cache (DESIGN §4 item 3); GQA (G) and multi-token queries (k) do.
The softmax statistics (logsumexp, fp32 per row) are ignored: O(B·H·Lq) bytes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import (
    Num,
    Quantity,
    Term,
    any_true,
    call,
    define,
    derived,
    note,
    numeric,
    one_point,
    steps,
    sym,
    symbolic,
    value,
)
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..hardware import Chip
from ..opid import Attention
from ._common import size

IMPLEMENTATIONS = ("naive", "flash", "decode")
SOFTMAX_FLOPS_PER_SCORE = 5.0


def score_pairs(q_len: Any, kv_len: Any, causal: bool = True, window: Any = None,
                terms: list[Term] | None = None, chunk: Any = None) -> Quantity:
    """(query, key) pairs per head and sequence that attention actually scores."""
    Lq, Lkv = size("Lq", q_len, "q_len"), size("Lkv", kv_len, "kv_len")
    if causal and any_true(value(Lq) > value(Lkv)):  # cross-attention may have more queries
        raise RooflineError("causal attention: q_len must not exceed kv_len (queries are the "
                            "last q_len positions; causal=False for cross-attention)")
    if chunk is not None:
        if window is not None or not causal:
            raise RooflineError("chunked attention is causal and has no sliding window (give "
                                "chunk or window, not both)")
        return _chunked_pairs(Lq, Lkv, size("C", chunk, "chunk"))
    if window is None:
        return Lq * Lkv - Lq * (Lq - 1) / 2 if causal else Lq * Lkv
    W = size("W", window, "window")
    if not causal:
        raise RooflineError("a sliding window applies to causal attention (set causal=True)")
    # queries see min(W, past + i) keys, i = 1..Lq: n1 of them see fewer than W
    steps = [] if terms is None else terms
    past = define(steps, "cached keys before the first query", "L_past", Lkv - Lq)
    n1 = define(steps, "queries that see fewer than W keys", "n_short",
                call("clip0_Lq", lambda v: np.clip(v, 0, value(Lq)), W - past))
    return n1 * past + n1 * (n1 + 1) / 2 + (Lq - n1) * W


def _chunked_pairs(Lq: Quantity, Lkv: Quantity, C: Quantity) -> Quantity:
    """Pairs of chunked local attention: S(Lkv) - S(Lkv - Lq), S(n) = the keys positions
    0..n-1 see within their own chunk (module docstring)."""
    def seen(n: Quantity, label: str) -> Quantity:
        full = call(f"floor({label}/C)", lambda v: np.floor(v / value(C)), n)
        rest = call(f"{label} mod C", lambda v: np.mod(v, value(C)), n)
        return full * C * (C + 1) / 2 + rest * (rest + 1) / 2
    return seen(Lkv, "Lkv") - seen(Lkv - Lq, "L_past")


@derived
def attention(
    batch: Any,
    q_len: Any,
    kv_len: Any,
    heads: Any,
    kv_heads: Any = None,
    head_dim: Any = 128,
    v_head_dim: Any = None,
    causal: bool = True,
    window: Any = None,
    impl: str = "flash",
    dtype: str | DType = "bf16",
    kv_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    sram_bytes: Any = None,
    block_q: Any = None,
    kv_shared: bool = False,
    name: str = "attention",
    chunk: Any = None,
    l2_bytes: Any = None,
    mla: bool = False,
) -> Cost:
    """Attention cost; every size may be a numpy array (a sweep is one call).

    `sram_bytes` (M, the on-chip SRAM one kernel block can use, e.g.
    ``load_chip("h100").level("sram").unit_capacity_bytes``) or `block_q` (Br directly) is
    required for impl="flash". `l2_bytes` (the L2 capacity) lets flash's K/V re-reads come
    from L2 when one (batch, KV head)'s K/V fits. `kv_shared` means V is part of the K
    cache (MLA's latent cache), so only d elements per token are stored and read. `chunk` is
    chunked local attention (Llama 4): each query sees only the keys of its own aligned chunk.

    >>> c = attention(1, 1, 4096, heads=64, kv_heads=8, head_dim=128, impl="decode")
    >>> round(c.bytes["hbm"] / 2**20, 2)   # 4096 · 8 KV heads · 128 · (K, V) · 2 B: 16 MiB, + Q, O
    16.03
    """
    if impl not in IMPLEMENTATIONS:
        allowed = ", ".join(IMPLEMENTATIONS)
        raise RooflineError(f"unknown attention impl {impl!r} (allowed: {allowed}; "
                            "MLA has its own function, mla_attention)")
    x = lookup_dtype(dtype)
    kv = lookup_dtype(kv_dtype) if kv_dtype is not None else x
    o = lookup_dtype(out_dtype) if out_dtype is not None else x
    B, H = size("B", batch, "batch"), size("H", heads, "heads")
    Hkv = size("Hkv", heads if kv_heads is None else kv_heads, "kv_heads")
    if any_true(value(H) % value(Hkv) != 0):
        h_arr, kv_arr = np.broadcast_arrays(np.asarray(value(H)), np.asarray(value(Hkv)))
        bad = np.mod(h_arr, kv_arr) != 0
        raise RooflineError(f"heads ({h_arr[bad].flat[0]:g}) must be a multiple of kv_heads "
                            f"({kv_arr[bad].flat[0]:g})")
    d = size("d", head_dim, "head_dim")
    dv = size("d_v", head_dim if v_head_dim is None else v_head_dim, "v_head_dim")
    Lq, Lkv = size("Lq", q_len, "q_len"), size("Lkv", kv_len, "kv_len")
    terms: list[Term] = []
    pairs = define(terms, "score pairs per head", "P",
                   score_pairs(q_len, kv_len, causal, window, terms, chunk))
    s, s_kv, s_o = sym("s", x.bytes), sym("s_kv", kv.bytes), sym("s_o", o.bytes)

    # (per-head sizes before the score pairs: over a batch x length grid, each product
    # with a grid-shaped factor is a pass over the grid)
    matmul_flops = 2 * B * H * (d + dv) * pairs
    softmax_flops = sym("c_softmax", SOFTMAX_FLOPS_PER_SCORE) * B * H * pairs
    exps = B * H * pairs  # one exp per score: the special-function units
    q_and_o = B * Lq * H * (d * s + dv * s_o)
    kv_row = d * s_kv if kv_shared else (d + dv) * s_kv  # bytes per cached token per KV head
    l2: Quantity = None  # flash with the L2 capacity given: the L2 traffic
    spill: Quantity = None  # and the re-reads a pair-at-a-time kernel sends to HBM

    if impl == "naive":
        kv_bytes = B * Lkv * Hkv * kv_row
        scores = sym("passes", 4.0) * B * H * Lq * Lkv * s
        hbm = q_and_o + kv_bytes + scores
        terms += steps(("K/V bytes", kv_bytes), ("S/P bytes (materialised)", scores))
    else:
        visible = define(terms, "keys visible per query", "L_vis", pairs / Lq)
        keys = define(terms, "keys some query sees (each read at least once)", "L_read",
                      _keys_read(Lq, Lkv, window, chunk))
        if impl == "decode":
            kv_bytes = B * Hkv * kv_row * keys
            note(terms, "K/V bytes (each cache read once)", kv_bytes)
        else:
            br = define(terms, "Q rows per block", "Br", _block_rows(sram_bytes, block_q, d, dv, x))
            group = define(terms, "query heads per KV head", "G", H / Hkv)
            blocks = define(terms, "Q blocks per KV head", "n_blk",
                            call("ceil", np.ceil, group * Lq / br))
            # each block reads the keys its rows see, and every key is read at least once
            loads = define(terms, "keys loaded per KV head", "L_load",
                           call("at_least_L_read", lambda v: np.maximum(v, value(keys)),
                                blocks * visible))
            kv_bytes = B * Hkv * loads * kv_row
            note(terms, "K/V bytes (re-read per Q block)", kv_bytes)
            if l2_bytes is not None:  # every load passes L2; HBM sees one pass (the bound)
                once = define(terms, "K/V first pass (compulsory: every key once)", "KV_1",
                              B * Hkv * keys * kv_row)
                l2 = q_and_o + kv_bytes
                spill = _l2_spill(terms, _keys_seen(Lkv, window, chunk) * kv_row,
                                  kv_bytes - once, l2_bytes)
                kv_bytes = once
        hbm = q_and_o + kv_bytes

    if symbolic():  # the total FLOPs: a step of the derivation only (a grid in a sweep)
        terms.append(Term("FLOPs", matmul_flops + softmax_flops))
    note(terms, "HBM bytes", hbm)
    levels = {"hbm": hbm}
    if l2 is not None:
        levels["l2"] = l2
        note(terms, "L2 bytes (every load and store)", l2)
    if impl == "flash" and symbolic():  # a step of the derivation only
        naive = attention(batch, q_len, kv_len, heads, kv_heads, head_dim, v_head_dim,
                          causal, window, "naive", x, kv, o, kv_shared=kv_shared, chunk=chunk)
        note(terms, "HBM bytes saved vs naive",
             sym("naive", naive.bytes["hbm"]) - sym("flash", value(hbm)))
    # The GEMMs run on the tensor cores; the softmax in fp32 on the vector units, its exp on
    # the special-function units (FlashAttention-3 §3.1: the exp rate is a real wall).
    cost = Cost(flops={x.peak: value(matmul_flops)},
                bytes={level: value(e) for level, e in levels.items()}, steps=tuple(terms),
                name=name, vector_flops={"fp32": value(softmax_flops - exps)},
                special_ops={"exp": value(exps)},
                op=Attention(value(B), value(H), value(Lq), value(Lkv), value(d), impl, mla=mla,
                             kv_heads=value(Hkv), kv_dtype=kv.name))
    return _spilled(cost, spill)


def _spilled(cost: Cost, spill: Quantity) -> Cost:
    """`cost` with what a kernel that streams one (batch, head) pair's re-reads through L2 at
    a time moves (the expected time's `Cost.runs`): HBM carries the spill too."""
    if spill is not None and any_true(value(spill) > 0):
        hbm = cost.bytes["hbm"] + value(spill)
        return replace(cost, runs=replace(cost, bytes={**cost.bytes, "hbm": hbm}, steps=()))
    return cost


def _keys_read(Lq: Quantity, Lkv: Quantity, window: Any, chunk: Any) -> Quantity:
    """Keys at least one query sees: all Lkv, but a window's first query starts W - 1 keys
    back (min(Lkv, Lq + W - 1)) and a chunk's at its chunk's start."""
    if window is not None:
        W = size("W", window, "window")
        return call("min_Lkv", lambda v: np.minimum(v, value(Lkv)), Lq + W - 1)
    if chunk is not None:
        C = size("C", chunk, "chunk")
        first = call("floor(L_past/C)", lambda v: np.floor(v / value(C)), Lkv - Lq)
        return Lkv - first * C
    return Lkv


def _keys_seen(Lkv: Quantity, window: Any, chunk: Any) -> Quantity:
    """The most keys one query sees: all Lkv, or at most the window W or the chunk C."""
    limit = window if window is not None else chunk
    if limit is None:
        return Lkv
    cap = size("W" if window is not None else "C", limit)
    name = "W" if window is not None else "C"
    return call(f"min_{name}", lambda v: np.minimum(v, value(cap)), Lkv)


def _l2_spill(terms: list[Term], working_set: Quantity, rereads: Quantity, l2_bytes: Any,
              what: str = "K/V", heads: str = "KV head") -> Quantity:
    """The re-reads (of K/V in the forward; of Q, dO, dQ in the backward) that reach HBM in
    a kernel running one (batch, head) pair's re-reads through L2 at a time: none when its
    working set fits in L2, all of them otherwise. The expected time charges them
    (`Cost.runs`); the bound does not: a kernel can run a pair's blocks together, each load
    from HBM shared through L2, or stream the pair in L2-sized chunks (module docstring)."""
    L2 = size("L2", l2_bytes, "l2_bytes")
    S = define(terms, f"{what} working set per (batch, {heads})", "S_ws", working_set)
    fits = define(terms, "re-reads served by L2 (1 when S_ws <= L2)", "f",
                  call("fits", _at_most_one, S / L2))
    spill = (1 - fits) * rereads
    note(terms, f"{what} re-reads a pair-at-a-time kernel spills to HBM (expected time only)",
         spill)
    return spill


def _block_rows(sram_bytes: Any, block_q: Any, d: Quantity, dv: Quantity, x: DType
                ) -> Quantity:
    if block_q is not None:
        return size("Br", block_q, "block_q")
    if sram_bytes is None:
        raise RooflineError("flash attention needs the on-chip SRAM size: pass sram_bytes "
                            "(e.g. the chip's sram unit_capacity_bytes) or block_q")
    M = size("M", sram_bytes, "sram_bytes")
    rows = call("floor", np.floor, M / (sym("s", x.bytes) * (d + dv)))
    if np.any(np.asarray(value(rows)) < 1):
        raise RooflineError("head_dim (with v_head_dim) too large: one query row and its "
                            "output do not fit in the on-chip SRAM (sram_bytes)")
    return rows


def _at_most_one(v: Any) -> Any:
    if one_point(v):
        return 1.0 if v <= 1.0 else 0.0
    return np.where(v <= 1.0, 1.0, 0.0)


DEFAULT_BLOCK_Q = 128  # FA2 / FA3's query tile, for chips whose file gives no SRAM level
_SCALAR_OR_NONE = frozenset({type(None), int, float})  # a tiling memoised on the chip


def flash_tiling(chip: Chip | None, sram_bytes: Any = None, block_q: Any = None,
                 l2_bytes: Any = None) -> dict[str, Any]:
    """How flash attention tiles and what catches its K/V re-reads. The SRAM budget M or
    query block Br given, else the chip's per-SM (per-core) SRAM as M, else (no chip, or a
    chip file without an sram level: Gaudi, a measured GPU) Br = 128 query rows. The L2
    capacity given, else the chip's l2 level (none: every re-read goes to HBM). The one place these
    defaults are decided: ops, models, levers and measurements all ask here."""
    key = ("flash tiling", sram_bytes, block_q, l2_bytes)
    scalar = _SCALAR_OR_NONE.issuperset(map(type, key[1:]))
    if chip is not None and scalar and key in chip.memo:  # asked twice per analysis
        return dict(chip.memo[key])
    tiling = _tiling(chip, sram_bytes, block_q, l2_bytes)
    if chip is not None and scalar:
        chip.memo[key] = tiling
    return dict(tiling)


def _tiling(chip: Chip | None, sram_bytes: Any, block_q: Any, l2_bytes: Any
            ) -> dict[str, Any]:
    if sram_bytes is not None or block_q is not None:
        tiling = {"sram_bytes": sram_bytes, "block_q": block_q}
    elif chip is None or not _has_level(chip, "sram"):
        tiling = {"sram_bytes": None, "block_q": DEFAULT_BLOCK_Q}
    else:
        sram = chip.level("sram")
        tiling = {"sram_bytes": float(sram.unit_capacity_bytes or sram.capacity_bytes or 0.0),
                  "block_q": None}
    if l2_bytes is None and chip is not None and _has_level(chip, "l2"):
        l2_bytes = chip.level("l2").capacity_bytes
    return {**tiling, "l2_bytes": l2_bytes}


def _has_level(chip: Chip, name: str) -> bool:
    return any(m.name == name for m in chip.memory)


@numeric
def kv_cache_bytes(tokens: Any, kv_heads: Any, head_dim: Any, v_head_dim: Any = None,
                   kv_dtype: str | DType = "bf16", kv_shared: bool = False) -> Num:
    """Bytes of K/V cache for `tokens` cached tokens in one layer (all sequences together)."""
    T, Hkv, d = size("T", tokens, "tokens"), size("Hkv", kv_heads, "kv_heads"), size(
        "d", head_dim, "head_dim")
    dv = size("d_v", head_dim if v_head_dim is None else v_head_dim, "v_head_dim")
    s = sym("s_kv", lookup_dtype(kv_dtype).bytes)
    return value(T * Hkv * (d if kv_shared else d + dv) * s)
