"""A transformer's architecture in one normalised record (`ModelSpec`): only the shapes
that set FLOPs and bytes. `models.hf_config` reads it from a Hugging Face config.json."""

from __future__ import annotations

from dataclasses import field, fields

from ..lazy import cached_property
from ..records import record


@record(frozen=True)
class MoE:
    """Routed experts (plus always-on shared experts) replacing the dense MLP in some layers."""

    experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    shared_ffn: int = 0
    first_dense_layers: int = 0  # DeepSeek: the first k layers keep a dense MLP
    every: int = 1  # an MoE layer every `every` layers (after the dense ones)
    dense_layers: frozenset[int] = frozenset()  # any others that keep a dense MLP
    # group-limited routing (DeepSeek-V3/R1: n_group 8, topk_group 4): a token's experts lie
    # in at most `topk_groups` of `groups` consecutive blocks of experts; 1, 1: unrestricted
    groups: int = 1
    topk_groups: int = 1


@record(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention: low-rank K/V (and optionally Q) projections."""

    kv_lora_rank: int
    qk_rope_dim: int
    qk_nope_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None


@record(frozen=True)
class LinearAttention:
    """Linear-attention / state-space mixers (ops.linear_attention) in place of attention in
    some layers: a fixed-size recurrent state per sequence instead of a KV cache."""

    kind: str  # gated_deltanet (Qwen3-Next) | mamba2
    heads: int  # value (state) heads
    key_heads: int
    key_dim: int  # d_k (Mamba-2: d_state)
    value_dim: int  # d_v (Mamba-2: head_dim)
    conv_kernel: int = 4

    @property
    def conv_dim(self) -> int:  # the short convolution runs over q, k and v
        return 2 * self.key_heads * self.key_dim + self.heads * self.value_dim


@record(frozen=True)
class ModelSpec:
    """A transformer's shape, read from its config.json (parse_config)."""

    name: str
    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    gated_mlp: bool = True  # SwiGLU / GeGLU: gate, up, down
    tied_embeddings: bool = False
    learned_positions: int = 0  # GPT-2 / OPT absolute position table size
    norm: str = "rmsnorm"  # or layernorm (with a bias unless bias is "none": MPT's no_bias)
    bias: str = "none"  # none | qkv (Qwen2) | all (GPT-2, OPT)
    qk_norm: bool = False  # Qwen3: RMSNorm on q and k per head
    sliding_window: int | None = None
    sliding_layers: tuple[bool, ...] = ()  # per layer: True where the window applies
    moe: MoE | None = None
    mla: MLA | None = None
    attention_chunk: int | None = None  # Llama 4: chunked local attention on chunked_layers
    chunked_layers: tuple[bool, ...] = ()
    linear: LinearAttention | None = None  # Qwen3-Next: linear mixers on linear_layers
    linear_layers: tuple[bool, ...] = ()
    attn_output_gate: bool = False  # Qwen3-Next: q_proj also emits a sigmoid gate per head
    attention_sinks: bool = False  # gpt-oss: one learned logit per head joins each softmax
    quantized_experts_only: bool = False  # weight_dtype covers the routed experts alone
    max_context: int | None = None  # the longest context it supports (RoPE scaling included)
    trained_context: int | None = None  # the context before RoPE scaling (pre-training)
    weight_dtype: str | None = None  # a quantized checkpoint's weight dtype (quantization_config)
    quantization: str = ""  # quantization_config's quant_method, as the config names it
    source: str = ""
    extra_norms: int = 0  # Gemma 2/3: pre- and post- norms around each block (2 more)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __hash__(self) -> int:
        # hashed once: the analyses' caches key on the spec (every field, the per-layer
        # tuples too: ~0.6 us a time)
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)
                                                    if f.compare))
        return h

    def __getstate__(self) -> dict[str, object]:  # a string's hash differs per process
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def is_moe_layer(self, i: int) -> bool:
        m = self.moe
        return m is not None and i >= m.first_dense_layers and \
            (i - m.first_dense_layers) % m.every == 0 and i not in m.dense_layers

    def uses_window(self, i: int) -> bool:
        return self.sliding_window is not None and (not self.sliding_layers
                                                     or self.sliding_layers[i])

    @cached_property
    def layer_mixers(self) -> tuple[tuple[bool, str, int | None], ...]:
        """Per layer: (is an MoE layer, its token mixer, the mixer's span), worked out once
        per spec (a whole-model estimate reads it several times)."""
        return tuple((self.is_moe_layer(i), *self.layer_attention(i))
                     for i in range(self.layers))

    @cached_property
    def layer_kinds(self) -> dict[tuple[bool, str, int | None], int]:
        """How many layers of each (is MoE, token mixer, span), in first-seen order."""
        counts: dict[tuple[bool, str, int | None], int] = {}
        for kind in self.layer_mixers:
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def layer_attention(self, i: int) -> tuple[str, int | None]:
        """Layer i's token mixer: ("linear", None), ("chunk", C), ("window", W) or
        ("full", None)."""
        if self.linear is not None and self.linear_layers[i]:
            return "linear", None
        if self.attention_chunk is not None and self.chunked_layers[i]:
            return "chunk", self.attention_chunk
        if self.uses_window(i):
            return "window", self.sliding_window
        return "full", None
