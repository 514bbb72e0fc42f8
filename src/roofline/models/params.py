"""Parameter counts of a ModelSpec: total, active per token (MoE), and by part.

Counting follows the Hugging Face checkpoints: embeddings included, a tied LM head counted
once, norms and biases included, DeepSeek's multi-token-prediction module excluded (the
published 671B is the main model).
"""

from __future__ import annotations

from functools import cache

from ..records import record
from .spec import ModelSpec


@record(frozen=True)
class LayerParams:
    """One layer's parameters by part (attention, dense MLP, routed experts)."""

    attention: float
    mlp_dense: float  # the dense MLP, or the always-on shared experts of an MoE layer
    experts: float  # all routed experts of the layer
    expert_active: float  # the top_k experts one token uses
    router: float
    norms: float

    @property
    def total(self) -> float:
        return self.attention + self.mlp_dense + self.experts + self.router + self.norms

    @property
    def active(self) -> float:
        return self.attention + self.mlp_dense + self.expert_active + self.router + self.norms


@record(frozen=True)
class ParamCount:
    """A model's parameters: total, active per token, and by part."""

    total: float
    active: float
    embedding: float  # token (+ position) embedding
    lm_head: float  # 0 when tied
    layers: tuple[LayerParams, ...]
    final_norm: float = 0.0  # beside the LM head


def _mlp(spec: ModelSpec, width: int) -> float:
    matrices = 3 if spec.gated_mlp else 2
    bias = width + spec.hidden if spec.bias == "all" else 0
    return matrices * spec.hidden * width + bias


def attention_params(spec: ModelSpec) -> float:
    h, H, d = spec.hidden, spec.heads, spec.head_dim
    if spec.mla:
        m = spec.mla
        qk = m.qk_nope_dim + m.qk_rope_dim
        q = (h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * H * qk if m.q_lora_rank
             else h * H * qk)
        kv = h * (m.kv_lora_rank + m.qk_rope_dim) + m.kv_lora_rank \
            + m.kv_lora_rank * H * (m.qk_nope_dim + m.v_head_dim)
        return q + kv + H * m.v_head_dim * h
    qkv = h * (H + 2 * spec.kv_heads) * d
    out = H * d * h
    bias = {"none": 0, "qkv": (H + 2 * spec.kv_heads) * d,
            "all": (H + 2 * spec.kv_heads) * d + h}[spec.bias]
    gate = h * H * d if spec.attn_output_gate else 0  # Qwen3-Next: q_proj's second half
    sinks = H if spec.attention_sinks else 0  # gpt-oss: one logit per head
    return qkv + out + bias + (2 * d if spec.qk_norm else 0) + gate + sinks


def linear_attention_params(spec: ModelSpec) -> float:
    """A Gated DeltaNet mixer (Qwen3-Next): in_proj_qkvz, in_proj_ba (beta and the decay
    per value head), the short convolution, A_log and dt_bias, the gated output norm and
    out_proj."""
    m = spec.linear
    assert m is not None
    key, value = m.key_heads * m.key_dim, m.heads * m.value_dim
    return spec.hidden * (2 * key + 2 * value) + spec.hidden * 2 * m.heads \
        + m.conv_dim * m.conv_kernel + 2 * m.heads + m.value_dim + value * spec.hidden


def _norm_size(spec: ModelSpec) -> int:
    """One norm's parameters: its scale, and a LayerNorm's shift where the model keeps its
    biases (MPT's `no_bias` drops them)."""
    return spec.hidden * (2 if spec.norm == "layernorm" and spec.bias != "none" else 1)


def layer_params(spec: ModelSpec, i: int) -> LayerParams:
    norms = (2 + spec.extra_norms) * _norm_size(spec)
    attn = linear_attention_params(spec) if spec.layer_attention(i)[0] == "linear" else \
        attention_params(spec)
    m = spec.moe
    if m is None or not spec.is_moe_layer(i):
        return LayerParams(attn, _mlp(spec, spec.ffn), 0.0, 0.0, 0.0, norms)
    one_expert = _mlp(spec, m.expert_ffn)
    return LayerParams(attn, m.shared_experts * _mlp(spec, m.shared_ffn), m.experts * one_expert,
                       m.top_k * one_expert, spec.hidden * m.experts, norms)


@cache  # a ModelSpec is frozen (hashable); the graph, memory and summary all ask for it
def param_counts(spec: ModelSpec) -> ParamCount:
    layers = tuple(layer_params(spec, i) for i in range(spec.layers))
    embedding = spec.vocab * spec.hidden + spec.learned_positions * spec.hidden
    lm_head = 0.0 if spec.tied_embeddings else spec.vocab * spec.hidden
    final_norm = _norm_size(spec)
    fixed = embedding + lm_head + final_norm
    return ParamCount(total=fixed + sum(p.total for p in layers),
                      active=fixed + sum(p.active for p in layers),
                      embedding=embedding, lm_head=lm_head, layers=layers,
                      final_norm=final_norm)
