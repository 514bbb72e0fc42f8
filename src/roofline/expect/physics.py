"""What the roofline leaves out, from first principles: how whole tiles fill the machine.

A GEMM runs as CTA tiles (e.g. 128x128 or 128x256 outputs) over the SMs: ceil(M/tm)·ceil(N/tn)
tiles run in waves of `units` at once, and the last, partial wave keeps the whole machine for
a full tile's time. cuBLAS / CUTLASS heuristics pick the tile that wastes least; so does this.
A FlashAttention forward runs one tile per (batch, head, 128-query block), alike.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

import numpy as np

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..hardware import Chip
from ..opid import Attention, Gemm, LinearAttention
from .kernels import architecture

GEMM_TILES = ((128, 128), (128, 256), (256, 128), (64, 128))  # CUTLASS / cuBLAS Hopper tiles
ATTENTION_BLOCK_Q = 128  # FA2 / FA3 query rows per tile (FA3 d <= 128; d = 256 uses 128 too)


def waves(tiles: Any, units: int) -> Any:
    """Waves of `units` tiles at once: ceil(tiles / units)."""
    return np.ceil(np.asarray(tiles, dtype=float) / units)


def wave_utilization(tiles: Any, units: int) -> Any:
    """Share of the machine's tile slots doing work: tiles / (waves · units), in (0, 1]."""
    t = np.maximum(np.asarray(tiles, dtype=float), 1.0)
    return t / (waves(t, units) * units)


def gemm_tiles(m: Any, n: Any, tile: tuple[int, int], batch: Any = 1) -> Any:
    """Output tiles of a (batched) M x N product: batch · ceil(M/tm) · ceil(N/tn)."""
    tm, tn = tile
    return np.asarray(batch) * np.ceil(np.asarray(m) / tm) * np.ceil(np.asarray(n) / tn)


def gemm_utilization(m: Any, n: Any, units: int, batch: Any = 1,
                     min_rows: Any = 16.0) -> Any:
    """The best share over the tile shapes (the heuristic's pick) of the machine's tile
    slots doing useful work: the output elements over the waves' tile slots, so the padding
    of a partial tile (M = 129 on 128-row tiles) is waste, as on the chip. `min_rows`: the
    fewest rows a tile holds (`mma_rows`)."""
    m = np.asarray(m, dtype=float)
    useful = np.asarray(batch) * m * np.asarray(n, dtype=float)
    # fewer rows than a 128-row tile: the smallest power-of-two tile holding them
    # (`min_rows` up)
    small = np.clip(2.0 ** np.ceil(np.log2(np.maximum(m, 1.0))), min_rows, 128.0)
    shapes = [*GEMM_TILES, (small, 128)]
    return np.maximum.reduce([useful / (waves(np.maximum(gemm_tiles(m, n, t, batch), 1.0),
                                              units) * units * t[0] * t[1])
                              for t in shapes])


@functools.lru_cache(maxsize=4096)
def _gemm_utilization_of(m: float, n: float, units: int, batch: float,
                         min_rows: float = 16.0) -> float:
    """gemm_utilization of one shape, kept: a step's GEMM shapes repeat in every step of a
    serving plan or sweep."""
    return float(gemm_utilization(m, n, units, batch, min_rows))


# The fewest rows one tile of a batched or grouped GEMM holds, per architecture: Hopper's
# warpgroup MMA has M = 64 (PTX ISA, wgmma.mma_async shapes m64nNk16:
# https://docs.nvidia.com/cuda/parallel-thread-execution/#asynchronous-warpgroup-level-
# matrix-shape), so DeepGEMM's SM90 kernels take BLOCK_M of 64 or more and pad each group's
# few rows to it (deepseek-ai/DeepGEMM deep_gemm/jit_kernels/heuristics). A single GEMM's
# kernels swap the operands for few rows (M in the MMA's N slot, 8 up), so 16 stays there.
MMA_ROWS = {"hopper": 64.0}


def mma_rows(chip: Chip) -> float:
    """The fewest rows a batched / grouped GEMM's tile holds on `chip` (16 where its
    architecture names none)."""
    return MMA_ROWS.get(architecture(chip) or "", 16.0)


def units(chip: Chip) -> int | None:
    """SMs / CUs: the units of the innermost level that names them."""
    for level in reversed(chip.memory):
        if level.units:
            return level.units
    return None


def attention_kernel(cost: Cost) -> bool:
    """An attention kernel (flash / naive / decode, MHA or MLA, forward or backward), not the
    output projection beside it (a weight GEMM)."""
    return isinstance(cost.op, Attention)


def attention_operands(cost: Cost) -> Cost:
    """An attention kernel's GEMMs at the dtype its kernel runs them in: the K/V cache's
    where that is wider than the queries' compute dtype. A fused attention kernel takes Q, K
    and V in one dtype: FlashAttention-3's fp8 forward takes e4m3 Q, K and V
    (Dao-AILab/flash-attention hopper/flash_attn_interface.py, q / k / v descales),
    TensorRT-LLM's context kernels are named by it (fmhaSm100fKernel_QkvE4m3OBfloat16...,
    lmsys.org/blog/2026-02-19-gb300-longctx), and none runs below 8 bits. So fp8 or fp4 weight
    GEMMs beside a bf16 cache leave attention in bf16, and nvfp4 GEMMs beside an fp8 cache
    leave it in fp8. The bound keeps the narrower dtype (a kernel quantizing K / V itself
    could run there); the expected time never runs faster than it."""
    op = cost.op
    if not isinstance(op, Attention) or op.kv_dtype is None or len(cost.flops) != 1:
        return cost
    (dt, flops), = cost.flops.items()
    kv = lookup_dtype(op.kv_dtype)
    if kv.bits <= lookup_dtype(dt).bits:
        return cost
    return replace(cost, flops={kv.name: flops})


def decode_attention(cost: Cost) -> bool:
    """An attention forward with one query block per head at most (decode, a speculative
    step's few tokens): it streams the KV cache, the kernels' split-KV path."""
    op = cost.op
    return isinstance(op, Attention) and not op.backward and bool(
        np.all(np.asarray(op.q_len, dtype=float) <= ATTENTION_BLOCK_Q))


GPU_VENDORS = ("NVIDIA", "AMD")  # chips whose `units` are SMs / CUs running CTAs


def attention_waves(cost: Cost, chip: Chip) -> Any:
    """Waves of tiles a prefill attention runs on the chip's SMs, ceil(tiles / SMs): the
    forward one per (sequence, head, 128-query block), the backward one per (sequence, head,
    128-key block), as FlashAttention-2 / 3 parallelise it (0 for decode, where the split-KV
    path runs, or a chip whose units are not a GPU's SMs / CUs: a TPU's few TensorCores run
    no such tiles)."""
    op, n_units = cost.op, units(chip)
    if not isinstance(op, Attention) or not n_units or chip.vendor not in GPU_VENDORS:
        return 0.0
    q = np.asarray(op.q_len, dtype=float)
    rows = np.asarray(op.kv_len, dtype=float) if op.backward else q
    tiles = np.asarray(op.batch) * np.asarray(op.heads) * np.ceil(rows / ATTENTION_BLOCK_Q)
    return np.where(q > ATTENTION_BLOCK_Q, waves(tiles, n_units), 0.0)


def tile_utilization(cost: Cost, chip: Chip) -> Any:
    """Wave utilization of the op's tiles on the chip's SMs (1 where it has no tile shape:
    not a GEMM or attention, a grouped MoE GEMM, or a chip that does not count its units)."""
    n_units = units(chip)
    op = cost.op
    if not n_units or not cost.flops:
        return 1.0
    if isinstance(op, Gemm) and not op.grouped:  # a (batched / repeated) GEMM
        m, n, k = (np.asarray(x, dtype=float) for x in (op.m, op.n, op.k))
        total = sum(np.asarray(f, dtype=float) for f in cost.flops.values())
        with np.errstate(divide="ignore", invalid="ignore"):  # repeats run as one batch
            batch = np.maximum(np.round(np.where(m * n * k > 0, total / (2 * m * n * k), 1.0)),
                               1.0)
        # a batched GEMM's tiles (one call over `groups` products: ops.moe.batched_matmul)
        # hold the MMA's rows at least, no operand swap there; repeats of one product (a
        # step's layers) are calls of their own, whose kernels swap the operands for few rows
        batched = np.where(np.asarray(op.groups, dtype=float) > 1, mma_rows(chip), 16.0)
        if m.ndim == n.ndim == batch.ndim == 0:  # one shape: asked again and again
            return _gemm_utilization_of(float(m), float(n), n_units, float(batch),
                                        float(batched))
        return gemm_utilization(m, n, n_units, batch, batched)
    if isinstance(op, Gemm):  # an MoE grouped GEMM: each expert's rows in whole tiles
        # (DeepGEMM's contiguous layout pads every expert's tokens to its 128-row block;
        # CUTLASS grouped GEMMs tile each group alone): the mean tokens per touched expert
        m, n = (np.asarray(x, dtype=float) for x in (op.m, op.n))
        groups = np.maximum(np.asarray(op.groups, dtype=float), 1.0)
        rows = mma_rows(chip)
        if m.ndim == n.ndim == groups.ndim == 0:
            return _gemm_utilization_of(float(m), float(n), n_units, float(groups), rows)
        return gemm_utilization(m, n, n_units, groups, rows)
    if isinstance(op, Attention):
        # a query block's rows beyond the last query are waste (Lq = 129 runs two blocks);
        # fewer queries than a block (decode) run one block each, their rows packed
        heads = np.asarray(op.batch) * np.asarray(op.heads)
        blocks = np.asarray(op.q_len, dtype=float) / ATTENTION_BLOCK_Q
        slots = waves(heads * np.ceil(blocks), n_units) * n_units
        whole = heads * np.maximum(blocks, 1.0) / slots
        # one query block per head (decode): the kernels split the keys over more tiles to
        # fill the machine (FlashDecoding, FlashInfer, FlashMLA, vLLM's paged attention v2)
        return np.where(blocks <= 1.0, split_kv_utilization(heads, op.kv_len, n_units),
                        whole)
    # (a linear-attention kernel's sequential recurrence: `recurrence_chain`, not tiles)
    return 1.0


# Kernels that cut a long sequence into segments run side by side when its (sequence, head)
# chains are too few to fill the machine: FlashQLA's gate-driven intra-card context
# parallelism (QwenLM/FlashQLA flash_qla/ops/gated_delta_rule/chunk/cp_context.py), TileOPs'
# CP-split Gated DeltaNet prefill (tile-ai/TileOPs PR #1596); FlashInfer's own planner below
# (`flashinfer_segments`).
CONTEXT_PARALLEL = ("flashqla", "flashinfer", "tileops")
# Kernels whose recurrence is a kernel of its own, run between the parallel ones (its walk adds
# to their time instead of overlapping it), its CTAs splitting the state's d_v columns in
# blocks: FLA's chunk_gated_delta_rule_fwd_h, grid (cdiv(V, BV), N·H), BV autotuned over
# {32, 64} (fla-org/flash-linear-attention fla/ops/common/chunk_delta_h.py); 64 fits the fit
# half of benchmarks/validation best (5.4% median error against 7.6% at 32, 8.0% unsplit).
# Each chunk step runs one dot per 64 rows of d_k (its b_h1 ... b_h4 blocks): a step's time
# is the fitted one (d_k = 128, two blocks) times ceil(d_k / 64) / 2.
SEPARATE_RECURRENCE = {"fla": 64}
STATE_ROW_BLOCK = 64

# FlashInfer's context-parallel Gated DeltaNet prefill (SM90 / SM100 / SM120; flashinfer-ai/
# flashinfer flashinfer/gdn_kernels/delta_rule_dsl/varlen_helper.py at 7dce283, PR #4078):
# `should_use_cp_host` splits when B·H·d < SMs, d = 4 on SM100, 3 on GDDR cards (names with
# "geforce", "rtx", "workstation"), else 2; `choose_cp_chunk_len_host` cuts segments of C
# tokens: C = sqrt(S·64·F/P) rounded up to 64 where ceil(B·S/512)·H·d' < SMs (d' = 3 GDDR,
# else 2; F/P = 1, on SM120 1/2 and only for H <= 16), else the least multiple of 512 whose
# segments of all sequences fill one wave of SMs // H. Each segment's chunks are walked twice
# (MN precompute: its local state and transfer; then the prefill from its fixed initial
# state) and the fixup walks the segments once, F/P of a chunk step each.
FLASHINFER_CP_GRANULE = 512
GDDR_NAMES = ("geforce", "rtx", "workstation")


def flashinfer_segments(b: Any, h: Any, length: Any, chunk: Any, n_units: int,
                        sm100: bool = False, gddr: bool = False) -> tuple[Any, Any]:
    """FlashInfer's context-parallel plan of `b` sequences of `length` tokens over `h` value
    heads: (chains, steps) of its walk, in chunks of `chunk` tokens (the unsplit walk where
    its planner does not split)."""
    n = np.maximum(np.ceil(length / chunk), 1.0)
    split = b * h * (4.0 if sm100 else 3.0 if gddr else 2.0) < n_units
    ratio = 0.5 if gddr else 1.0
    short = (np.ceil(b * length / FLASHINFER_CP_GRANULE) * h * (3.0 if gddr else 2.0)
             < n_units) & ((h <= 16) | (not gddr))
    c_short = np.maximum(np.ceil(np.ceil(np.sqrt(length * chunk * ratio)) / chunk) * chunk,
                         chunk)
    per_sequence = np.maximum(np.floor(np.maximum(np.floor(n_units / h), 1.0) / b), 1.0)
    c_long = np.ceil(np.ceil(length / per_sequence) / FLASHINFER_CP_GRANULE) \
        * FLASHINFER_CP_GRANULE
    c = np.where(short, c_short, c_long)
    segments = np.ceil(length / c)
    steps = 2.0 * np.ceil(c / chunk) + ratio * segments
    return (np.where(split, b * h * segments, b * h), np.where(split, steps, n))


def recurrence_chain(op: LinearAttention, n_units: int, kernel: str | None = None,
                     blackwell: bool = False, gddr: bool = False) -> tuple[Any, Any]:
    """The sequential part of a chunked linear-attention kernel: (chains, steps). Each
    (sequence, value head)'s state passes from chunk to chunk in order, one CTA walking its
    ceil(q_len / chunk) chunks (FlashInfer's and FlashQLA's fused chunk kernels; FLA's
    state kernel splits d_v too, its steps scaled by d_k: SEPARATE_RECURRENCE); the chains run
    in waves over the SMs, so the walk takes waves(chains) · steps chunk times at the least.
    FlashInfer's
    context-parallel plan: `flashinfer_segments` (`blackwell`: SM100; `gddr`: a GDDR card);
    `flashinfer-fused` is its kernel before that (releases up to 0.6.13 on SM90, 0.6.16 on
    SM100: PRs #3481 and #4078 added the split).
    Other context-parallel kernels (CONTEXT_PARALLEL) split the sequences into segments of
    L_cp chunks when B·H is small, by FlashQLA's planner (cp_context.py `_calc_cp_seqs`: L_cp =
    2^round(log2(3·sqrt(H·B·n/P))), at least 4; on SM90 / SM120 when B·H <= 40, or <= 56 with
    n >= 128 chunks; on SM100 when B·H <= 56 with n >= 256, or <= 32 with n >= 192), and walk
    each segment twice: a pre-pass for its final state (fused_gdr_h), then the main pass from
    the corrected initial state."""
    b, h = np.asarray(op.batch, dtype=float), np.asarray(op.heads, dtype=float)
    chunk = np.asarray(op.chunk, dtype=float)
    n = np.maximum(np.ceil(np.asarray(op.q_len, dtype=float) / chunk), 1.0)
    if kernel == "flashinfer":
        return flashinfer_segments(b, h, np.asarray(op.q_len, dtype=float), chunk, n_units,
                                   blackwell, gddr)
    chains = b * h
    if kernel in SEPARATE_RECURRENCE:
        chains = chains * np.ceil(np.asarray(op.value_dim, dtype=float)
                                  / SEPARATE_RECURRENCE[kernel])
        n = n * np.ceil(np.asarray(op.key_dim, dtype=float) / STATE_ROW_BLOCK) / 2.0
    if kernel not in CONTEXT_PARALLEL:
        return chains, n
    with np.errstate(divide="ignore"):
        seg = np.maximum(2.0 ** np.round(np.log2(3.0 * np.sqrt(chains * n / n_units))), 4.0)
    if blackwell:
        split = ((chains <= 56) & (n >= 256)) | ((chains <= 32) & (n >= 192))
    else:
        split = (chains <= 40) | ((chains <= 56) & (n >= 128))
    split &= n > seg
    return (np.where(split, chains * np.ceil(n / seg), chains),
            np.where(split, 2.0 * seg, n))


def recurrence_waves(op: LinearAttention, chip: Chip, kernel: str | None = None) -> Any:
    """Chunk steps on the critical path of the op's recurrence (`recurrence_chain`): the
    waves of its chains over the chip's SMs times each chain's steps (0 without SM count)."""
    n_units = units(chip)
    if not n_units:
        return 0.0
    gddr = any(mark in chip.name.lower() for mark in GDDR_NAMES)
    chains, steps = recurrence_chain(op, n_units, kernel, architecture(chip) == "blackwell",
                                     gddr)
    return waves(chains, n_units) * steps


DECODE_KV_CHUNK = 256  # fewest keys a split-KV decode tile takes (FlashDecoding's chunks)


def split_kv_utilization(heads: Any, keys: Any, units: int) -> Any:
    """Decode attention over `heads` (batch x heads) query blocks of `keys` keys, each split
    into as many key chunks (of at least DECODE_KV_CHUNK keys) as best fill the machine's
    waves: the better of the splits that fill one wave just under and just over."""
    heads = np.maximum(np.asarray(heads, dtype=float), 1.0)
    most = np.maximum(np.ceil(np.asarray(keys, dtype=float) / DECODE_KV_CHUNK), 1.0)
    best = 0.0
    for splits in (np.floor(units / heads), np.ceil(units / heads)):
        s = np.clip(splits, 1.0, most)
        best = np.maximum(best, wave_utilization(heads * s, units))
    return best


# Decode kernels that launch a scheduler kernel of their own before the attention: FA3's
# flash_attn_with_kvcache (cache_seqlens make it varlen, and with dynamic splits
# prepare_varlen_num_blocks runs first: Dao-AILab/flash-attention hopper/
# flash_fwd_launch_template.h, `if (Varlen && params.num_splits_dynamic_ptr && ...)`)
SCHEDULED_DECODE = ("fa3",)


def kernel_launches(cost: Cost, chip: Chip, kernel: str | None = None) -> Any:
    """Kernels one op runs: 2 for a split-KV attention forward (the partial attention over
    key chunks, then the merge of their partial softmax states: FlashDecoding's reduction,
    FlashInfer's merge_states, FlashAttention's combine kernel, FlashMLA's combine), else 1.
    A kernel splits the keys where its CTAs, one per sequence and K/V head (the query heads
    of a GQA group share one), do not fill the machine and there are keys to split: a query
    block per head (decode, short chunks) over more than DECODE_KV_CHUNK keys. A named
    decode kernel in SCHEDULED_DECODE runs its scheduler kernel first: one more."""
    op = cost.op
    n_units = units(chip)
    if not isinstance(op, Attention) or op.backward or not n_units:
        return 1.0
    kv_heads = op.heads if op.kv_heads is None else op.kv_heads
    decode = np.asarray(op.q_len, dtype=float) <= ATTENTION_BLOCK_Q
    split = (decode & (np.asarray(op.batch) * np.asarray(kv_heads) < n_units)
             & (np.asarray(op.kv_len, dtype=float) > DECODE_KV_CHUNK))
    launches = 1.0 + split + (decode if kernel in SCHEDULED_DECODE else 0.0)
    return launches if np.ndim(launches) else float(launches)
