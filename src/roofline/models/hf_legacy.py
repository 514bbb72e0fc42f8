"""The configs of the learned-position, LayerNorm families (GPT-2, OPT, MosaicML MPT), each
with its own key names, read into a ModelSpec."""

from __future__ import annotations

from ..errors import brief
from .hf_fields import ConfigReader
from .spec import ModelSpec


def gpt2(c: ConfigReader, name: str) -> ModelSpec:
    hidden = c.integer("n_embd")
    heads = c.integer("n_head")
    return ModelSpec(
        name=name, model_type="gpt2", hidden=hidden, layers=c.integer("n_layer"), heads=heads,
        kv_heads=heads, head_dim=hidden // heads, ffn=c.integer("n_inner", default=4 * hidden),
        vocab=c.integer("vocab_size"), gated_mlp=False, tied_embeddings=True,
        learned_positions=c.integer("n_positions"), norm="layernorm", bias="all",
        max_context=c.integer("n_positions"), trained_context=c.integer("n_positions"),
        source=str(c.data.get("_source") or c.origin))


def opt(c: ConfigReader, name: str) -> ModelSpec:
    hidden = c.integer("hidden_size")
    heads = c.integer("num_attention_heads")
    if c.integer("word_embed_proj_dim", default=hidden) != hidden:
        raise c.error("word_embed_proj_dim", "OPT with a projected embedding (opt-350m) is "
                      "not supported")
    positions = c.integer("max_position_embeddings")
    return ModelSpec(
        name=name, model_type="opt", hidden=hidden, layers=c.integer("num_hidden_layers"),
        heads=heads, kv_heads=heads, head_dim=hidden // heads, ffn=c.integer("ffn_dim"),
        vocab=c.integer("vocab_size"), gated_mlp=False,
        tied_embeddings=c.flag("tie_word_embeddings", True),
        learned_positions=positions + 2,  # OPT's position table carries an offset of 2
        norm="layernorm", bias="all", max_context=positions, trained_context=positions,
        source=str(c.data.get("_source") or c.origin))


# MPTConfig's defaults (mosaicml/llm-foundry llmfoundry/models/mpt/configuration_mpt.py) for
# the keys a config leaves out: its pretraining yamls give only the shapes
_MPT_FFN = {"mptmlp": False, "te_ln_mlp": False, "mptglu": True}  # gated?


def mpt(c: ConfigReader, name: str) -> ModelSpec:
    """MosaicML MPT (llm-foundry's `mpt_causal_lm`): LayerNorm, a GELU MLP (`mptglu`: gated)
    of expansion_ratio x d_model, tied embeddings; biases unless `no_bias`; a learned
    position table of max_seq_len unless ALiBi or RoPE replaces it."""
    hidden, heads = c.integer("d_model"), c.integer("n_heads")
    attn = c.data.get("attn_config") or {}
    ffn_config = c.data.get("ffn_config") or {}
    for key, table in (("attn_config", attn), ("ffn_config", ffn_config)):
        if not isinstance(table, dict):
            raise c.error(key, f"must be an object, got {type(table).__name__}")
    a, f = ConfigReader(attn, f"{c.origin}: attn_config"), ConfigReader(ffn_config,
                                                             f"{c.origin}: ffn_config")
    kind = attn.get("attn_type", "multihead_attention")
    kv_heads = {"multihead_attention": heads, "multiquery_attention": 1}.get(kind) or \
        a.integer("kv_n_heads")
    if heads % kv_heads:
        raise a.error("kv_n_heads", f"n_heads ({heads}) must be a multiple of it ({kv_heads})")
    ffn_type = ffn_config.get("ffn_type", "mptmlp")
    if ffn_type not in _MPT_FFN:
        raise f.error("ffn_type", f"unsupported {ffn_type!r} (supported: {', '.join(_MPT_FFN)})")
    ratio = ffn_config.get("expansion_ratio", c.data.get("expansion_ratio", 4))
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < 1e3:
        raise c.error("expansion_ratio", f"must be a positive number, got {brief(ratio)}")
    positions = c.integer("max_seq_len", default=2048)
    learned = c.flag("learned_pos_emb", True) and not a.flag("alibi", False) and \
        not a.flag("rope", False)
    return ModelSpec(
        name=name, model_type="mpt", hidden=hidden, layers=c.integer("n_layers"), heads=heads,
        kv_heads=kv_heads, head_dim=hidden // heads, ffn=int(ratio * hidden),
        vocab=c.integer("vocab_size", default=50368), gated_mlp=_MPT_FFN[ffn_type],
        tied_embeddings=c.flag("tie_word_embeddings", True),
        learned_positions=positions if learned else 0, norm="layernorm",
        bias="none" if c.flag("no_bias", False) else "all", max_context=positions,
        trained_context=positions, source=str(c.data.get("_source") or c.origin))
