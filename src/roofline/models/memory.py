"""Memory footprint per chip: weights, KV cache, activations, optimizer state, against HBM.

- weights: the parameters this chip holds (TP-sharded matrices, EP-sharded experts, its PP
  stage's share of the layers; norms, routers and MLA's down-projections are replicated).
- KV cache: per sequence, every cached token of every layer on this chip (sliding-window
  layers keep only the window, chunked-attention layers only the chunk); MLA keeps its
  576-element latent, not per-head K and V.
- recurrent state: linear-attention layers (Qwen3-Next's Gated DeltaNet) keep a fixed-size
  state per sequence instead of a KV cache, the same bytes at any context.
- activations, inference: one layer's working set (input, residual, MLP up/gate output:
  silu(gate)·up alone for a gated MLP, whose SwiGLU runs in the GEMM's epilogue as
  layers.py times it) plus fp32 logits — an estimate of the transient peak, not a bound.
- activations, training (Korthikanti et al. 2022's count redone for the model's own shapes,
  with FlashAttention so no [s, s] scores are kept, sequence parallelism, no dropout):
  `kept_per_token_layer` bytes per token per layer over tp (Llama-3-405B: 31.75·h/tp at
  16-bit; GPT-3 with dropout: Korthikanti's 34·h/tp), 2·T·h/tp with full recomputation (only
  layer inputs kept, plus the one layer being recomputed); times the micro-batches in flight
  on the first pipeline stage, min(pp, m); plus the micro-batch's fp32 logits.
- optimizer state (training): fp32 master weights and two Adam moments (12 B/param) plus the
  gradients; FSDP shards weights, gradients and state over dp.
"""

from __future__ import annotations

import math
from dataclasses import field
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from ..derivation import Num, add_all, floats, in_shape, unwrap
from ..dtypes import dtype as lookup_dtype
from ..lazy import cached_property
from ..ops.linear_attention import recurrent_state_bytes
from ..records import record
from .params import param_counts
from .spec import ModelSpec
from .step import Parallel, Phase, Precision, kv_bytes_per_token_per_layer


def _replicated_attention(spec: ModelSpec) -> float:
    """MLA's down-projections (and their norms) are not split by TP."""
    m = spec.mla
    if m is None:
        return 0.0
    q_down = spec.hidden * m.q_lora_rank + m.q_lora_rank if m.q_lora_rank else 0.0
    return q_down + spec.hidden * (m.kv_lora_rank + m.qk_rope_dim) + m.kv_lora_rank


@cache  # frozen inputs; a sum over every layer, asked for by the graph and the memory
def local_param_split(spec: ModelSpec, par: Parallel) -> tuple[float, float]:
    """(replicated-over-DP parameters, routed-expert parameters) held by one chip of the
    largest pipeline stage: its share of the layers plus the embedding or the LM head."""
    counts = param_counts(spec)
    replicated = _replicated_attention(spec)
    dense = experts = 0.0
    for p in counts.layers:
        attn = (p.attention - replicated) / par.tp + replicated
        dense += attn + p.mlp_dense / par.tp + p.router + p.norms
        # routed experts: E/ep of them, 1/expert_tp of each (tp without EP, whole with it,
        # or moe_tp), as in the graph
        experts += p.experts / (par.expert_tp * par.ep)
    # the final norm sits beside the LM head, whole on every TP rank
    return dense / par.pp + local_table_params(spec, par) + counts.final_norm, \
        experts / par.pp


def local_table_params(spec: ModelSpec, par: Parallel) -> float:
    """Embedding and LM head parameters on one chip of the largest pipeline stage: one stage
    holds the embedding and another the LM head (both, when pp = 1), split over TP."""
    counts = param_counts(spec)
    table = counts.embedding + counts.lm_head if par.pp == 1 else \
        max(counts.embedding, counts.lm_head or counts.embedding)
    return table / par.tp


def local_params(spec: ModelSpec, par: Parallel) -> float:
    """Parameters held by one chip (of the pipeline stage holding the most)."""
    dense, experts = local_param_split(spec, par)
    return dense + experts


@cache  # frozen inputs: the graph, memory and levers ask per analysis
def weight_bytes(spec: ModelSpec, par: Parallel, prec: Precision) -> float:
    """Bytes of the weights one chip holds: the layers in the weight dtype, the embedding and
    LM head in theirs (`Precision.tables`), as the graph reads them."""
    tables = local_table_params(spec, par)
    dense, experts = local_param_split(spec, par)
    return (dense - tables) * lookup_dtype(prec.weights).bytes + \
        experts * lookup_dtype(prec.experts).bytes + tables * lookup_dtype(prec.tables).bytes


@cache  # frozen inputs; a walk over every layer
def _kv_layers(spec: ModelSpec, par: Parallel) -> tuple[tuple[float, float], ...]:
    """(attention layers on one chip, the most tokens their cache keeps: inf for the whole
    context, W for a sliding window, C for chunked attention), fewest kept first.
    Linear-attention layers keep no KV cache (their state: `state_bytes_per_sequence`)."""
    caps: dict[float, int] = {}
    for i in range(spec.layers):
        kind, span = spec.layer_attention(i)
        if kind != "linear":
            cap = math.inf if span is None else float(span)
            caps[cap] = caps.get(cap, 0) + 1
    return tuple((n / par.pp, cap) for cap, n in sorted(caps.items()))


def kv_bytes_per_token(spec: ModelSpec, par: Parallel, prec: Precision,
                       context: Any = None) -> Any:
    """KV cache bytes one sequence adds per token on one chip (all its layers); with
    `context`, the average over a sequence of that length (window and chunk layers stop
    growing at their span)."""
    whole, every_layer_grows = _kv_whole_context(spec, par, prec)
    if context is None or every_layer_grows:
        return whole
    ctx = np.asarray(context, dtype=float)
    return kv_bytes_per_token_per_layer(spec, par, prec) * sum(
        n * np.minimum(ctx, cap) / ctx for n, cap in _kv_layers(spec, par))


@cache  # frozen inputs: the footprint asks twice per analysis
def _kv_whole_context(spec: ModelSpec, par: Parallel, prec: Precision) -> tuple[float, bool]:
    """(KV bytes per token over all the chip's attention layers, whether every one of them
    keeps the whole context: no window or chunk)."""
    layers = _kv_layers(spec, par)
    return (kv_bytes_per_token_per_layer(spec, par, prec) * sum(n for n, _ in layers),
            all(cap == math.inf for _, cap in layers))


def _max_context(spec: ModelSpec, par: Parallel, prec: Precision, seqs: Any,
                 room: Any) -> Any:
    """Longest context whose KV cache fits in `room` bytes: the cache grows linearly, more
    slowly past each window or chunk span (those layers stop growing there); piece by piece."""
    layers = _kv_layers(spec, par)
    g = np.asarray(seqs, dtype=float) * kv_bytes_per_token_per_layer(spec, par, prec)
    out = np.full(np.broadcast(g, room).shape, np.inf)
    done = np.zeros(out.shape, dtype=bool)
    lo = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for hi in sorted({cap for _, cap in layers}):  # the piece (lo, hi]
            capped = sum(n * cap for n, cap in layers if cap <= lo)
            growing = sum(n for n, cap in layers if cap > lo)
            ctx = (room - g * capped) / (g * growing)
            hit = ~done & (ctx <= hi)
            out, done, lo = np.where(hit, ctx, out), done | hit, hi
    return np.where(room <= 0, 0.0, np.floor(out))


@cache  # frozen inputs; a walk over every layer, asked for per analysis
def state_bytes_per_sequence(spec: ModelSpec, par: Parallel, prec: Precision) -> float:
    """The recurrent state one sequence keeps on one chip: every linear-attention layer's
    fixed-size state and convolution window (ops.linear_attention.recurrent_state_bytes),
    however long the context."""
    m = spec.linear
    layers = sum(mixer == "linear" for _, mixer, _ in spec.layer_mixers)
    if m is None or not layers:
        return 0.0
    per_layer = recurrent_state_bytes(m.heads / par.tp, m.key_dim, m.value_dim,
                                      conv_dim=m.conv_dim / par.tp, conv_kernel=m.conv_kernel,
                                      conv_dtype=prec.activations)
    return float(layers / par.pp * per_layer)


@record(frozen=True)
class MemoryFootprint:
    """Bytes per chip; fields are arrays when the phase's sizes are (broadcastable to the
    phase's shape; `total_bytes`, `fits` and `to_dict` in it)."""

    weights_bytes: float
    kv_cache_bytes: Num
    kv_bytes_per_token: float  # per sequence token, on this chip, all its layers
    activations_bytes: Num
    optimizer_bytes: float
    capacity_bytes: float
    # what the step holds per sequence: `max_batch` and `max_context` are worked out from it
    # on first read (a sweep reads only the bytes)
    sizing: Sizing = field(repr=False, compare=False)
    context_limit: int | None = None  # the model's own maximum context, which caps it
    state_bytes: Num = 0.0  # linear-attention layers' recurrent state (not a KV cache)

    @cached_property
    def _limits(self) -> tuple[Num, Num | None, Any]:
        return _fit_limits(self)

    @property
    def max_batch(self) -> Num:
        """Largest batch (all DP replicas) that fits; 0 if not even one."""
        return self._limits[0]

    @property
    def max_context(self) -> Num | None:
        """Longest context that fits at this batch (None in training): a decode step at this
        context, its own new tokens included, still fits."""
        return self._limits[1]

    @property
    def context_at_model_limit(self) -> Any:
        """Whether the model's own maximum context, not memory, caps `max_context`."""
        return self._limits[2]

    def to_dict(self) -> dict[str, Any]:
        """Every figure, the per-point ones in the phase's shape."""
        def shaped(value: Any) -> Any:
            return in_shape(value, np.shape(self.total_bytes))
        return {"weights_bytes": self.weights_bytes,
                "kv_cache_bytes": shaped(self.kv_cache_bytes),
                "kv_bytes_per_token": self.kv_bytes_per_token,
                "activations_bytes": shaped(self.activations_bytes),
                "optimizer_bytes": self.optimizer_bytes, "capacity_bytes": self.capacity_bytes,
                "max_batch": self.max_batch, "max_context": self.max_context,
                "context_at_model_limit": self.context_at_model_limit,
                "context_limit": self.context_limit, "state_bytes": shaped(self.state_bytes),
                "total_bytes": self.total_bytes, "fits": self.fits}

    @cached_property
    def total_bytes(self) -> Num:
        return add_all([self.weights_bytes, self.optimizer_bytes, self.state_bytes,
                        self.activations_bytes, self.kv_cache_bytes])

    @property
    def fits(self) -> Any:
        fits = np.asarray(self.total_bytes) <= self.capacity_bytes
        return bool(fits) if fits.ndim == 0 else fits


def _activations(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision,
                 seqs: Any, tokens_per_seq: Any, in_flight: float | None = None) -> Any:
    s_a = lookup_dtype(prec.activations).bytes
    seqs = floats(seqs)
    tokens = seqs * tokens_per_seq
    if phase.kind == "train":
        micro = tokens / par.microbatches
        full = kept_per_token_layer(spec, par, s_a) * micro  # one layer, all it keeps
        # sequence parallelism shards what is kept (layer inputs alone with recomputation,
        # plus the one layer being recomputed)
        kept = (2.0 / par.tp * micro * spec.hidden * s_a / 2) if phase.recompute else full
        held = min(par.pp, par.microbatches) if in_flight is None else in_flight
        stored = kept * spec.layers / par.pp * held  # micro-batches in flight (schedule)
        logits = micro * spec.vocab / par.tp * 4.0  # fp32 logits of the micro-batch
        return stored + (full if phase.recompute else 0.0) + logits
    ffn = spec.moe.expert_ffn * spec.moe.top_k if spec.moe else spec.ffn
    # a gated MLP's up/gate GEMM writes only silu(gate)·up (its epilogue, layers._up_gate);
    # a plain MLP writes the up output and its activation's
    mlp = 1 if spec.gated_mlp else 2
    layer = tokens * (2 * spec.hidden + mlp * ffn / par.tp) * s_a
    logits_tokens = tokens if phase.kind == "decode" else seqs
    return layer + logits_tokens * spec.vocab / par.tp * 4.0



def kept_per_token_layer(spec: ModelSpec, par: Parallel, s_a: float,
                         dropout: bool = False) -> float:
    """Bytes one token keeps for the backward pass in one decoder layer on one TP rank, at
    s_a bytes per activation (Korthikanti et al. 2022, "Reducing Activation Recomputation in
    Large Transformer Models", §4.1, recounted for the model's shapes). Per token, elements:

        two norms' inputs (the residual stream)          2·h
        attention: norm output (QKV input), Q, K, V,     h + q + 2·kv + q
                   and its output O (FlashAttention's backward re-reads Q, K, V, O; no
                   [s, s] scores are kept)
        MLP: norm output (up/gate input), the gate       h + (2 if gated else 1)·f + f
             and up outputs (the activation's inputs), the activation's output (down input)
        dropout masks (1 byte each), if any: after attention and after the MLP: 2·h bytes

    with q = heads·head_dim, kv = kv_heads·head_dim and f the MLP width (MoE: top_k routed
    experts' f plus the shared experts'). With sequence parallelism every term is split over
    the TP ranks (the norms and residuals run on 1/tp of the tokens; K and V are kept per
    KV head, so past tp = kv_heads each rank keeps one). GPT-3 (MHA, q = kv = h, GeLU with
    f = 4h, dropout) gives 2 + 4 + 2 + 2·(1 + 4 + 4) = 32 sbh at 2 bytes plus 2 of masks: 34,
    Korthikanti's count. Llama-3-405B (h 16384, 128 heads over 8 KV heads of 128, SwiGLU f
    53248 = 3.25·h, no dropout): 2·(2 + 1 + 1 + 1/8 + 1 + 1 + 3·3.25) = 31.75·h bytes."""
    h, tp = spec.hidden, par.tp
    if spec.mla is not None:  # expanded K and V per head, as the prefill / training form
        m = spec.mla
        q = k = spec.heads * (m.qk_nope_dim + m.qk_rope_dim) / tp
        v = spec.heads * m.v_head_dim / tp
        o = v
    else:
        q = o = spec.heads * spec.head_dim / tp
        k = v = max(1.0, spec.kv_heads / tp) * spec.head_dim
    moe = spec.moe
    f = (moe.top_k * moe.expert_ffn + moe.shared_experts * moe.shared_ffn) if moe else spec.ffn
    mlp = (3 if spec.gated_mlp else 2) * f / tp
    elements = 2 * h / tp + (h / tp + q + k + v + o) + (h / tp + mlp)
    return elements * s_a + (2 * h / tp if dropout else 0.0)


class ChipShare(NamedTuple):
    """What one chip holds of the model whatever the step's sizes."""

    params: float
    weight_bytes: float
    kv_bytes_per_token: float  # per sequence token, all the chip's attention layers
    state_bytes: float  # per sequence: linear-attention layers' recurrent state


@cache  # frozen inputs: one lookup per step for what would be four
def chip_share(spec: ModelSpec, par: Parallel, prec: Precision) -> ChipShare:
    return ChipShare(local_params(spec, par), weight_bytes(spec, par, prec),
                     kv_bytes_per_token(spec, par, prec),
                     state_bytes_per_sequence(spec, par, prec))


@record(eq=False)  # a step record: not frozen (roofline.models)
class Sizing:
    """One step's per-sequence memory on one chip: the KV cache, recurrent state and
    activations that grow with the batch (and the context)."""

    spec: ModelSpec
    phase: Phase
    par: Parallel
    prec: Precision
    in_flight: float | None  # micro-batches whose activations the first stage holds
    share: ChipShare

    @property
    def seqs(self) -> Any:  # sequences on this chip (its DP replica's share)
        return floats(self.phase.batch) / self.par.dp

    @property
    def context(self) -> Any:
        return floats(self.phase.kv_len)

    @property
    def tokens_per_seq(self) -> Any:  # context parallelism: each rank computes 1/cp
        return floats(self.phase.q_len) / self.par.cp

    def kv(self, seqs: Any) -> Any:
        if self.phase.kind == "train":  # training keeps activations, not a KV cache
            return 0.0 * floats(seqs)
        ctx = self.context
        # context parallelism: each rank keeps its own 1/cp chunk of the sequence's cache
        # (per-sequence bytes first: over a batch x length grid, one pass for the product)
        per_seq = ctx * kv_bytes_per_token(self.spec, self.par, self.prec, ctx) / self.par.cp
        return floats(seqs) * per_seq

    @property
    def state(self) -> float:  # linear-attention state per sequence (not in training)
        return 0.0 if self.phase.kind == "train" else self.share.state_bytes

    def activations(self, seqs: Any) -> Any:
        return _activations(self.spec, self.phase, self.par, self.prec, seqs,
                            self.tokens_per_seq, self.in_flight)


def footprint(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision,
              capacity_bytes: float, in_flight: float | None = None) -> MemoryFootprint:
    """What one chip must hold for this step, and the largest batch / context that fit."""
    share = chip_share(spec, par, prec)
    params = share.params
    zero = par.zero_stage if phase.kind == "train" else 0
    # ZeRO over dp: 1 shards the optimizer state, 2 the gradients too, 3 the weights too
    weights = share.weight_bytes / (par.dp if zero >= 3 else 1)
    optimizer = 0.0
    if phase.kind == "train":
        optimizer = params * 12.0 / (par.dp if zero >= 1 else 1) \
            + params * lookup_dtype(prec.grads).bytes / (par.dp if zero >= 2 else 1)
    sizing = Sizing(spec, phase, par, prec, in_flight, share)
    seqs = sizing.seqs
    kv_total = sizing.kv(seqs)
    sizes = (seqs, sizing.context, sizing.tokens_per_seq)
    if np.ndarray in map(type, sizes):  # a view in the phase's shape
        kv_total = np.broadcast_to(kv_total, np.broadcast(*sizes).shape)
    return MemoryFootprint(weights, unwrap(kv_total), float(share.kv_bytes_per_token),
                           unwrap(sizing.activations(seqs)), optimizer, capacity_bytes, sizing,
                           spec.max_context, unwrap(seqs * sizing.state))


def _fit_limits(fp: MemoryFootprint) -> tuple[Num, Num | None, Any]:
    """(the largest batch that fits, the longest context that fits at this batch, whether
    the model's own maximum is what caps it)."""
    s = fp.sizing
    shape = np.shape(fp.total_bytes)
    room = fp.capacity_bytes - fp.weights_bytes - fp.optimizer_bytes
    # everything but the weights and optimizer state grows linearly with the batch
    per_seq = s.kv(1.0) + s.state + s.activations(1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        max_batch = _whole(np.broadcast_to(np.where(
            per_seq > 0, np.maximum(0.0, np.floor(room / per_seq)) * s.par.dp, np.inf), shape))
    if s.phase.kind == "train":
        return unwrap(max_batch), None, False
    # the most positions whose cache fits, never beyond the positions the model was built
    # for; a decode step's own k tokens take the last of them (kv_len = context + k)
    fits = _max_context(s.spec, s.par, s.prec, s.seqs / s.par.cp,  # each CP rank: 1/cp
                        room - fp.activations_bytes - fp.state_bytes)
    limit = s.spec.max_context or np.inf
    own = s.phase.q_len if s.phase.kind == "decode" else 0
    longest = np.maximum(np.minimum(fits, limit) - own, 0.0)
    return (unwrap(max_batch), unwrap(_whole(np.broadcast_to(longest, shape))),
            unwrap(np.broadcast_to(limit <= fits, shape)))


def _whole(counts: Any) -> Any:
    """Counts (floored) as integers: a batch of 133, not 133.0; unbounded ones stay inf."""
    arr = np.asarray(counts)
    return arr.astype(np.int64) if np.all(np.isfinite(arr)) else arr
