"""Memory footprint per chip: weights, KV cache, activations, optimizer state, against HBM.

- weights: the parameters this chip holds (TP-sharded matrices, EP-sharded experts, its PP
  stage's share of the layers; norms, routers and MLA's down-projections are replicated).
- KV cache: per sequence, every cached token of every layer on this chip (sliding-window
  layers keep only the window); MLA keeps its 576-element latent, not per-head K and V.
- activations, inference: one layer's working set (input, residual, MLP up/gate output)
  plus fp32 logits — an estimate of the transient peak, not a bound.
- activations, training (Korthikanti et al. 2022, with FlashAttention so no [s, s] scores are
  kept, and sequence parallelism): 34·T·h/tp bytes per layer at 16-bit (scaled by the
  activation dtype), 2·T·h with full recomputation (only layer inputs kept); times the
  micro-batches in flight on the first pipeline stage, min(pp, m).
- optimizer state (training): fp32 master weights and two Adam moments (12 B/param) plus the
  gradients; FSDP shards weights, gradients and state over dp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import dtype as lookup_dtype
from .graph import Parallel, Phase, Precision
from .params import param_counts
from .spec import ModelSpec


def _replicated_attention(spec: ModelSpec) -> float:
    """MLA's down-projections (and their norms) are not split by TP."""
    m = spec.mla
    if m is None:
        return 0.0
    q_down = spec.hidden * m.q_lora_rank + m.q_lora_rank if m.q_lora_rank else 0.0
    return q_down + spec.hidden * (m.kv_lora_rank + m.qk_rope_dim) + m.kv_lora_rank


def local_params(spec: ModelSpec, par: Parallel) -> float:
    """Parameters held by one chip (an average pipeline stage)."""
    counts = param_counts(spec)
    replicated = _replicated_attention(spec)
    total = 0.0
    for p in counts.layers:
        attn = (p.attention - replicated) / par.tp + replicated
        total += attn + p.mlp_dense / par.tp + p.experts / (par.ep * par.tp) + p.router + p.norms
    total += (counts.embedding + counts.lm_head) / par.tp
    return total / par.pp


def kv_bytes_per_token(spec: ModelSpec, par: Parallel, prec: Precision,
                       context: Any = None) -> Any:
    """KV cache bytes one sequence adds per token on one chip (all its layers); with
    `context`, the average over a sequence of that length (window layers stop growing)."""
    s_kv = lookup_dtype(prec.kv).bytes
    if spec.mla:
        per_layer = float(spec.mla.kv_lora_rank + spec.mla.qk_rope_dim)
    else:
        per_layer = 2.0 * max(1.0, spec.kv_heads / par.tp) * spec.head_dim
    total: Any = 0.0
    for i in range(spec.layers):
        share = 1.0
        if context is not None and spec.uses_window(i):
            assert spec.sliding_window is not None
            ctx = np.asarray(context, dtype=float)
            share = np.minimum(ctx, spec.sliding_window) / ctx
        total = total + per_layer * s_kv * share
    return total / par.pp


@dataclass(frozen=True)
class MemoryFootprint:
    weights_bytes: float
    kv_cache_bytes: float
    kv_bytes_per_token: float  # per sequence token, on this chip, all its layers
    activations_bytes: float
    optimizer_bytes: float
    capacity_bytes: float
    max_batch: float  # largest batch (all DP replicas) that fits; 0 if not even one
    max_context: float | None  # longest context that fits at this batch (inference)

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.activations_bytes + \
            self.optimizer_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def _activations(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision,
                 seqs: Any, tokens_per_seq: float) -> Any:
    s_a = lookup_dtype(prec.activations).bytes
    tokens = np.asarray(seqs, dtype=float) * tokens_per_seq
    if phase.kind == "train":
        micro = tokens / par.microbatches
        per_layer = (2.0 if phase.recompute else 34.0 / par.tp) * micro * spec.hidden * s_a / 2
        return per_layer * spec.layers / par.pp * min(par.pp, par.microbatches)
    ffn = spec.moe.expert_ffn * spec.moe.top_k if spec.moe else spec.ffn
    gate = 3 if spec.gated_mlp else 2
    layer = tokens * (2 * spec.hidden + gate * ffn / par.tp) * s_a
    logits_tokens = tokens if phase.kind == "decode" else np.asarray(seqs, dtype=float)
    return layer + logits_tokens * spec.vocab / par.tp * 4.0


def footprint(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision,
              capacity_bytes: float) -> MemoryFootprint:
    """What one chip must hold for this step, and the largest batch / context that fit."""
    params = local_params(spec, par)
    shard = par.dp if (phase.kind == "train" and par.fsdp) else 1
    weights = params * lookup_dtype(prec.weights).bytes / shard
    optimizer = 0.0
    if phase.kind == "train":
        optimizer = params * (12.0 + lookup_dtype(prec.grads).bytes) / shard
    tokens_per_seq = phase.q_len / par.cp

    def per_chip(seqs: Any, context: Any) -> Any:
        kv = 0.0 if phase.kind == "train" else \
            np.asarray(seqs, dtype=float) * np.asarray(context, dtype=float) * \
            kv_bytes_per_token(spec, par, prec, context)
        return weights + optimizer + kv + _activations(spec, phase, par, prec, seqs,
                                                       tokens_per_seq)

    seqs = phase.batch / par.dp
    context = phase.kv_len
    kv_total = 0.0 if phase.kind == "train" else \
        float(seqs * context * kv_bytes_per_token(spec, par, prec, context))
    per_seq = float(per_chip(1.0, context) - per_chip(0.0, context))
    room = capacity_bytes - weights - optimizer
    max_batch = max(0.0, np.floor(room / per_seq)) * par.dp if per_seq > 0 else np.inf
    max_context = None
    if phase.kind != "train":  # the footprint grows with context: bisect for the last fit
        lo, hi = 0.0, 1e9
        if per_chip(seqs, hi) <= capacity_bytes:
            max_context = float("inf")
        else:
            for _ in range(100):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if per_chip(seqs, max(mid, 1.0)) <= capacity_bytes else (lo, mid)
            max_context = float(np.floor(lo))
    return MemoryFootprint(weights, kv_total, float(kv_bytes_per_token(spec, par, prec)),
                           float(per_chip(seqs, context) - weights - optimizer - kv_total),
                           optimizer, capacity_bytes, float(max_batch), max_context)

