"""A Hugging Face config.json read into a ModelSpec. Every supported `model_type` maps its
config keys onto the same fields, so the graph builder never looks at a raw config. The
config is data: it is parsed as JSON, validated field by field, never executed.
"""

from __future__ import annotations

from typing import Any

from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError, brief
from ..files import check_text
from .hf_fields import ConfigReader
from .hf_legacy import gpt2, mpt, opt
from .spec import MLA, LinearAttention, ModelSpec, MoE

SUPPORTED = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
             "gemma2", "gemma3_text", "gemma3", "deepseek_v2", "deepseek_v3", "gpt2", "opt",
             "phi3", "llama4", "llama4_text", "gpt_oss", "kimi_k2", "qwen3_next", "mpt")
_DEEPSEEK = ("deepseek_v2", "deepseek_v3", "kimi_k2")  # Kimi K2 is DeepSeek-V3's architecture


# transformers' defaults for keys real configs leave out: Gemma 3's multimodal config.json
# files give only some text_config keys (4B: no heads, head_dim or vocab_size)
_GEMMA3 = {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4,
           "head_dim": 256, "max_position_embeddings": 131072, "sliding_window": 4096}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": _GEMMA3, "gemma3": _GEMMA3, "gpt_oss": {"sliding_window": 128}}
# the layer_types names (transformers' ALLOWED_LAYER_TYPES) read here
_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def parse_config(data: Any, name: str, origin: str) -> ModelSpec:
    """Validate a Hugging Face config dict and normalise it into a ModelSpec."""
    if not isinstance(data, dict):
        raise RooflineError(f"{origin}: a config.json must hold a JSON object")
    check_text(name, f"{origin}: model name", name=True)  # it heads every table
    if isinstance(data.get("_source"), str):
        check_text(data["_source"], f"{origin}: field '_source'", name=True)
    if isinstance(data.get("text_config"), dict):  # multimodal wrappers (Gemma 3): the LM part
        data = {**data["text_config"], "model_type": data["text_config"].get(
            "model_type", data.get("model_type")), **{  # the wrapper's source and quantization
                k: data[k] for k in ("_source", "quantization_config") if k in data}}
    model_type = data.get("model_type")
    if model_type not in SUPPORTED:
        raise RooflineError(f"{origin}: unsupported model_type {model_type!r} (supported: "
                            f"{', '.join(SUPPORTED)})")
    if model_type == "llama4":  # a flat llama4 config: its keys are text_config's
        model_type = "llama4_text"
    data = {**_DEFAULTS.get(model_type, {}), **data}
    c = ConfigReader(data, origin)
    if model_type in ("gpt2",):
        return gpt2(c, name)
    if model_type == "opt":
        return opt(c, name)
    if model_type == "mpt":
        return mpt(c, name)

    hidden = c.integer("hidden_size")
    heads = c.integer("num_attention_heads")
    layers = c.integer("num_hidden_layers")
    if "head_dim" not in data and heads > hidden:
        raise c.error("num_attention_heads", f"{heads} heads exceed hidden_size {hidden} "
                      "(give head_dim)")
    kv_heads = c.integer("num_key_value_heads", default=heads)
    if heads % kv_heads and model_type not in _DEEPSEEK:  # MLA: every head has its own K, V
        raise c.error("num_key_value_heads", f"num_attention_heads ({heads}) must be a multiple "
                      f"of num_key_value_heads ({kv_heads})")
    common: dict[str, Any] = dict(
        name=name, model_type=model_type, hidden=hidden, layers=layers, heads=heads,
        kv_heads=kv_heads,
        head_dim=c.integer("head_dim", default=hidden // heads),
        ffn=c.integer("intermediate_size"), vocab=c.integer("vocab_size"),
        tied_embeddings=c.flag("tie_word_embeddings", model_type.startswith("gemma")),
        source=str(data.get("_source") or origin),
    )
    common["max_context"], common["trained_context"] = _context(c)
    common["weight_dtype"], common["quantization"] = _quantization(c)
    if model_type in ("qwen2", "qwen2_moe"):
        common["bias"] = "qkv"
    if model_type in ("qwen3", "qwen3_moe", "gemma3_text", "gemma3", "qwen3_next"):
        common["qk_norm"] = True
    common.update(_layer_patterns(c, model_type, layers))
    common.update(_mixers(c, model_type, layers))
    if model_type.startswith("gemma") and model_type != "gemma":
        common["extra_norms"] = 2
    moe = _moe(c, model_type)
    if moe:
        common["moe"] = moe
    if model_type in _DEEPSEEK:
        common["mla"] = MLA(kv_lora_rank=c.integer("kv_lora_rank"),
                            qk_rope_dim=c.integer("qk_rope_head_dim"),
                            qk_nope_dim=c.integer("qk_nope_head_dim"),
                            v_head_dim=c.integer("v_head_dim"),
                            q_lora_rank=c.opt_int("q_lora_rank"))
        common["head_dim"] = c.integer("qk_nope_head_dim") + c.integer("qk_rope_head_dim")
        common["kv_heads"] = heads  # expanded form: every head has its own K and V
    return ModelSpec(**common)


# RoPE scalings whose factor stretches the trained context (Hugging Face: the original is
# rope_scaling's original_max_position_embeddings, else max_position_embeddings): the longest
# context is factor x original. llama3 and longrope configs give the stretched maximum as
# max_position_embeddings already (Llama 3.1: 131072 = the original 8192 stretched).
# yarn and dynamic NTK stretch the original positions by their factor (Qwen's and DeepSeek's
# configs give the original and the factor); a linear factor is already folded into
# max_position_embeddings (Gemma 3: 131072 with factor 8), so it stretches nothing further
_STRETCHING_ROPE = ("dynamic", "yarn")


def _context(c: ConfigReader) -> tuple[int | None, int | None]:
    """(the longest context the model supports, the context it was trained at before RoPE
    scaling)."""
    positions = c.opt_int("max_position_embeddings")
    key = "rope_scaling" if c.data.get("rope_scaling") is not None else "rope_parameters"
    rope = c.data.get(key)
    if rope is None:
        return positions, c.opt_int("original_max_position_embeddings") or positions
    if not isinstance(rope, dict):
        raise c.error(key, f"must be an object, got {type(rope).__name__}")
    r = ConfigReader(rope, f"{c.origin}: {key}")
    original = r.opt_int("original_max_position_embeddings") or \
        c.opt_int("original_max_position_embeddings")
    kind = rope.get("rope_type", rope.get("type"))
    limit = positions
    if kind in _STRETCHING_ROPE and rope.get("factor") is not None and (original or positions):
        stretched = int(r.number("factor") * (original or positions or 0))
        limit = max(positions or 0, stretched)
    return limit, original or positions


def _quantization(c: ConfigReader) -> tuple[str | None, str]:
    """(the weight dtype a quantized checkpoint stores its linear layers in, the config's
    quant_method) from quantization_config; (None, method) for a method not read here, whose
    weights then default to the activation dtype and the output says so."""
    q = c.data.get("quantization_config")
    if q is None:
        return None, ""
    if not isinstance(q, dict):
        raise c.error("quantization_config", f"must be an object, got {type(q).__name__}")
    method = q.get("quant_method")
    if not isinstance(method, str) or not 0 < len(method.strip()) <= 40:
        raise c.error("quantization_config", "needs a quant_method (a name of at most 40 "
                      "characters, e.g. fp8, awq, gptq)")
    method = check_text(method, f"{c.origin}: field 'quantization_config.quant_method'",
                        name=True).strip().lower()
    name: str | None = None
    if method in ("fp8", "mxfp4"):  # DeepSeek-V3 / Qwen3-FP8 (128x128 blocks), gpt-oss
        name = method
    elif method in ("awq", "gptq"):  # int weights with one scale per group of inputs
        bits = q.get("bits", q.get("w_bit"))
        group = q.get("group_size", q.get("q_group_size"))
        if isinstance(bits, int) and isinstance(group, int):
            name = f"int{bits}" + (f"-g{group}" if group > 0 else "")  # -1: per channel
    elif method == "modelopt":  # NVIDIA ModelOpt
        algo = q.get("quant_algo")
        name = {"FP8": "fp8", "NVFP4": "nvfp4"}.get(algo) if isinstance(algo, str) else None
    if name is not None:
        try:
            lookup_dtype(name)
        except RooflineError:  # e.g. 3-bit GPTQ: no such dtype here
            name = None
    return name, method


def _layer_types(c: ConfigReader, model_type: str, layers: int) -> list[str] | None:
    """The config's layer_types (newer configs list every layer), validated; None if absent."""
    kinds = c.data.get("layer_types")
    if kinds is None:
        return None
    if not isinstance(kinds, list) or len(kinds) != layers or \
            not all(isinstance(k, str) for k in kinds):
        raise c.error("layer_types", f"must list one name per layer ({layers} layers, "
                      "num_hidden_layers)")
    allowed = _LAYER_TYPES + (("linear_attention",) if model_type == "qwen3_next" else ())
    for kind in kinds:
        if kind not in allowed:
            raise c.error("layer_types", f"unknown layer type {brief(kind)!r} (allowed: "
                          f"{', '.join(allowed)})")
    return kinds


def _window_size(c: ConfigReader, model_type: str) -> int | None:
    if c.data.get("sliding_window") is None or (
            model_type.startswith("qwen") and not c.flag("use_sliding_window", False)):
        return None
    return c.integer("sliding_window")


def _default_layer_types(c: ConfigReader, model_type: str, layers: int,
                         window: int | None) -> list[str]:
    """Each layer's attention as transformers derives it when layer_types is absent."""
    if model_type == "llama4_text":  # chunked with RoPE; every interval-th layer global, NoPE
        rope = c.data.get("no_rope_layers")
        if rope is not None and (not isinstance(rope, list) or len(rope) != layers):
            raise c.error("no_rope_layers", f"must list 0 or 1 per layer ({layers} layers)")
        every = c.integer("no_rope_layer_interval", default=4)
        chunked = [bool(r) for r in rope] if rope is not None else \
            [(i + 1) % every != 0 for i in range(layers)]
        return ["chunked_attention" if k else "full_attention" for k in chunked]
    if window is None:
        sliding = [False] * layers
    elif model_type in ("gemma2", "gpt_oss"):  # local and global alternate, local first
        sliding = [i % 2 == 0 for i in range(layers)]
    elif model_type in ("gemma3_text", "gemma3"):  # 5 local : 1 global
        pattern = c.integer("sliding_window_pattern", default=6)
        sliding = [(i + 1) % pattern != 0 for i in range(layers)]
    elif model_type.startswith("qwen"):  # the window only from max_window_layers on
        first = c.count("max_window_layers", 28 if model_type in ("qwen2", "qwen2_moe",
                                                                  "qwen3") else 0)
        sliding = [i >= first for i in range(layers)]
    else:  # Mistral, Phi-3: every layer
        sliding = [True] * layers
    kinds = ["sliding_attention" if k else "full_attention" for k in sliding]
    if model_type == "qwen3_next":  # linear mixers; every interval-th layer attention
        every = c.integer("full_attention_interval", default=4)
        kinds = ["linear_attention" if (i + 1) % every else k for i, k in enumerate(kinds)]
    return kinds


def _mixers(c: ConfigReader, model_type: str, layers: int) -> dict[str, Any]:
    """Each layer's token mixer: full, sliding-window, chunked or linear attention."""
    window = _window_size(c, model_type)
    kinds = _layer_types(c, model_type, layers)
    if kinds is None:
        kinds = _default_layer_types(c, model_type, layers, window)
    out: dict[str, Any] = {}
    sliding = tuple(k == "sliding_attention" for k in kinds)
    if any(sliding):
        if window is None:
            raise c.error("layer_types", "sliding_attention layers need a sliding_window" + (
                " and use_sliding_window true" if model_type.startswith("qwen") else ""))
        out["sliding_window"], out["sliding_layers"] = window, sliding
    chunked = tuple(k == "chunked_attention" for k in kinds)
    if any(chunked):
        if c.data.get("attention_chunk_size") is None and "layer_types" in c.data:
            raise c.error("layer_types", "chunked_attention layers need attention_chunk_size")
        out["attention_chunk"], out["chunked_layers"] = \
            c.integer("attention_chunk_size"), chunked
    if model_type == "qwen3_next":
        out["linear_layers"] = tuple(k == "linear_attention" for k in kinds)
    return out


def _layer_patterns(c: ConfigReader, model_type: str, layers: int) -> dict[str, Any]:
    """What Llama 4, gpt-oss and Qwen3-Next change per layer, and what gpt-oss quantizes."""
    out: dict[str, Any] = {}
    if model_type == "llama4_text":
        out["ffn"] = c.integer("intermediate_size_mlp")  # dense layers; experts: intermediate
    if model_type == "gpt_oss":
        out["bias"] = "all"  # attention, expert and router biases
        out["attention_sinks"] = True
    if model_type == "qwen3_next":
        out["attn_output_gate"] = True
        out["linear"] = LinearAttention(
            "gated_deltanet", c.integer("linear_num_value_heads"),
            c.integer("linear_num_key_heads"), c.integer("linear_key_head_dim"),
            c.integer("linear_value_head_dim"), c.integer("linear_conv_kernel_dim", default=4))
    q = c.data.get("quantization_config")
    if isinstance(q, dict) and isinstance(q.get("modules_to_not_convert"), list):
        # gpt-oss keeps attention, router, embedding and LM head in bf16: experts only
        out["quantized_experts_only"] = any(
            isinstance(m, str) and "self_attn" in m for m in q["modules_to_not_convert"])
    return out


def _routed(c: ConfigReader, experts_key: str, *top_k_keys: str) -> tuple[int, int]:
    """(routed experts, experts per token), at most as many per token as there are."""
    experts, top_k = c.integer(experts_key), c.integer(*top_k_keys)
    if top_k > experts:
        key = next(k for k in top_k_keys if c.data.get(k) is not None)
        raise c.error(key, f"{top_k} experts per token exceed the {experts} experts "
                      f"({experts_key})")
    return experts, top_k


def _moe(c: ConfigReader, model_type: str) -> MoE | None:
    if model_type == "mixtral":
        return MoE(*_routed(c, "num_local_experts", "num_experts_per_tok"),
                   c.integer("intermediate_size"))
    if model_type == "llama4_text":  # a shared expert beside every routed set
        step = c.integer("interleave_moe_layer_step", default=1)
        moe_layers = c.data.get("moe_layers")
        if moe_layers is not None and moe_layers != list(range(step - 1, c.integer(
                "num_hidden_layers"), step)):
            raise c.error("moe_layers", "only the interleaved pattern (every "
                          "interleave_moe_layer_step-th layer) is supported")
        ffn = c.integer("intermediate_size")
        return MoE(*_routed(c, "num_local_experts", "num_experts_per_tok"), ffn, 1, ffn,
                   first_dense_layers=step - 1, every=step)
    if model_type == "gpt_oss":
        return MoE(*_routed(c, "num_local_experts", "num_experts_per_tok", "experts_per_token"),
                   c.integer("intermediate_size"))
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_next"):
        shared = c.opt_int("shared_expert_intermediate_size")
        # transformers: layer i is MoE unless in mlp_only_layers, if (i + 1) % step == 0
        step = c.integer("decoder_sparse_step", default=1)
        return MoE(*_routed(c, "num_experts", "num_experts_per_tok"),
                   c.integer("moe_intermediate_size"), 1 if shared else 0, shared or 0,
                   first_dense_layers=step - 1, every=step,
                   dense_layers=_layer_list(c, "mlp_only_layers"))
    if model_type in _DEEPSEEK:
        # DeepSeek's modelling code: null (V2's default) or 0 means no shared experts
        shared = c.count("n_shared_experts", 0 if "n_shared_experts" in c.data else 1)
        first, freq = _first_dense(c), c.integer("moe_layer_freq", default=1)
        # MoE where i >= first_k_dense_replace and i % moe_layer_freq == 0
        layers = c.integer("num_hidden_layers")
        experts, top_k = _routed(c, "n_routed_experts", "num_experts_per_tok")
        return MoE(experts, top_k,
                   c.integer("moe_intermediate_size"), shared, c.integer("moe_intermediate_size"),
                   first_dense_layers=first,
                   dense_layers=frozenset(i for i in range(first, layers) if i % freq),
                   **_groups(c, experts, top_k))
    return None


def _groups(c: ConfigReader, experts: int, top_k: int) -> dict[str, int]:
    """DeepSeek's group-limited routing (modeling_deepseek.py MoEGate: topk_method
    "group_limited_greedy" / "noaux_tc" pick topk_group of n_group groups, then top_k experts
    among them); absent or one group: unrestricted."""
    groups = c.integer("n_group", default=1)
    chosen = c.integer("topk_group", default=groups)
    if groups == 1 or c.data.get("topk_method") == "greedy":  # greedy: every group
        return {}
    if experts % groups:
        raise c.error("n_group", f"{groups} groups do not split the {experts} experts "
                      "(n_routed_experts) evenly")
    if not 1 <= chosen <= groups:
        raise c.error("topk_group", f"{chosen}: between 1 and n_group ({groups})")
    if top_k > chosen * experts // groups:
        raise c.error("topk_group", f"{chosen} of {groups} groups hold "
                      f"{chosen * experts // groups} experts, fewer than the {top_k} per token")
    return {"groups": groups, "topk_groups": chosen}


def _layer_list(c: ConfigReader, key: str) -> frozenset[int]:
    """A list of layer indices (e.g. mlp_only_layers), each within num_hidden_layers."""
    value = c.data.get(key)
    if value is None:
        return frozenset()
    layers = c.integer("num_hidden_layers")
    if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value):
        raise c.error(key, f"must list layer indices from 0 to {layers - 1} "
                      "(num_hidden_layers - 1)")
    return frozenset(value)


def _first_dense(c: ConfigReader) -> int:
    if c.data.get("first_k_dense_replace") == 0:  # every layer MoE
        return 0
    first = c.integer("first_k_dense_replace", default=1)
    layers = c.integer("num_hidden_layers")
    if first > layers:  # every layer dense: an MoE config without an MoE layer
        raise c.error("first_k_dense_replace", f"{first} dense layers exceed the {layers} "
                      "layers (num_hidden_layers); at most that many")
    return first
