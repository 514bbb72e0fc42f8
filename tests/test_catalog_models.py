"""The catalog's newer models (issue 14): parameter counts against their model cards, the
per-layer patterns the spec parser reads from their configs, and the checks the issue asks."""

import json
import re

import pytest

from roofline import RooflineError
from roofline.expect import expected_step
from roofline.models import (
    Parallel,
    Precision,
    analyze,
    decode,
    list_models,
    load_model,
    param_counts,
    prefill,
)
from roofline.models.catalog import CATALOG_DIR
from roofline.models.hf_config import parse_config
from test_models import PUBLISHED  # the older models' table (tests/ is on sys.path)

# name -> (what the card counts, its figure as printed, source). A figure is checked within 1%,
# or, where the card prints fewer digits than that (1T, 17B), equal at the card's precision.
# active-noembed: the card's active count leaves out the input embedding lookup (gpt-oss's card
# says so: its 5.13B active is MLP + attention + unembedding); active-notables leaves out the
# LM head too; nonembed: all parameters but the embedding (Gemma 3 report, Table 1).
CARDS = {
    "llama-3.1-8b": [("total", "8.03B", "HF model card")],
    "llama-3.1-70b": [("total", "70.6B", "HF model card")],
    "llama-3.3-70b": [("total", "70.6B", "HF model card")],
    "llama-3.2-1b": [("total", "1.23B", "Llama 3.2 model card")],
    "llama-3.2-3b": [("total", "3.21B", "Llama 3.2 model card")],
    "llama-4-maverick": [("total", "400B", "Llama 4 model card"),
                         ("active", "17B", "Llama 4 model card")],
    "llama-4-scout": [("active", "17B", "Llama 4 model card")],  # total: test below
    "gpt-oss-20b": [("total", "20.91B", "gpt-oss model card, Table 1"),
                    ("active-noembed", "3.61B", "gpt-oss model card, Table 1")],
    "gpt-oss-120b": [("total", "116.83B", "gpt-oss model card, Table 1"),
                     ("active-noembed", "5.13B", "gpt-oss model card, Table 1")],
    "qwen3-32b": [("total", "32.8B", "Qwen3-32B model card")],
    "qwen3-235b-a22b": [("total", "235B", "Qwen3-235B-A22B model card"),
                        ("active", "22B", "Qwen3-235B-A22B model card")],
    "qwen3-next-80b-a3b": [("total", "80B", "Qwen3-Next-80B-A3B model card"),
                           ("active-notables", "3B", "Qwen3-Next-80B-A3B model card")],
    "gemma-3-1b": [("nonembed", "698M", "Gemma 3 technical report, Table 1")],
    "gemma-3-4b": [("nonembed", "3209M", "Gemma 3 technical report, Table 1")],
    "gemma-3-12b": [("nonembed", "10759M", "Gemma 3 technical report, Table 1")],
    "gemma-3-27b": [("nonembed", "25600M", "Gemma 3 technical report, Table 1")],
    "deepseek-r1": [("total", "671B", "DeepSeek-R1 model card"),
                    ("active-noembed", "37B", "DeepSeek-R1 model card")],
    "kimi-k2": [("total", "1T", "Kimi K2 model card"),
                ("active-noembed", "32B", "Kimi K2 model card")],
    "mistral-large-2": [("total", "123B", "Mistral Large 2 announcement / model card")],
    "phi-4": [("total", "14.7B", "Phi-4 technical report")],
}
_UNITS = {"M": 1e6, "B": 1e9, "T": 1e12}


def _card(figure: str) -> tuple[float, float]:
    """('5.13B') -> (5.13e9, 0.01e9): the value and the unit of its last printed digit."""
    number, unit = re.fullmatch(r"([\d.]+)([MBT])", figure).groups()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return float(number) * _UNITS[unit], 10.0 ** -decimals * _UNITS[unit]


def _ours(name: str, what: str) -> float:
    p = param_counts(load_model(name))
    return {"total": p.total, "active": p.active, "active-noembed": p.active - p.embedding,
            "active-notables": p.active - p.embedding - p.lm_head,
            "nonembed": p.total - p.embedding}[what]


# Models known only by a training config (llm-foundry's MPT pretraining yamls: no released
# checkpoint, no card): d_model, layers, vocab, the position table by hand. Per layer
# 12·d² + 13·d (QKV and output projections, a 4x GELU MLP, their biases, two LayerNorms
# with biases), the tied embedding V·d, the position table 2048·d, the final LayerNorm 2·d.
FROM_CONFIG = {name: (d, layers) for name, d, layers in (
    ("mpt-3b", 2560, 32), ("mpt-13b", 5120, 40), ("mpt-70b", 8192, 80))}


def test_every_catalog_model_is_checked_against_a_published_count():
    assert set(list_models()) == set(PUBLISHED) | set(CARDS) | set(FROM_CONFIG)
    assert not set(PUBLISHED) & set(CARDS)


@pytest.mark.parametrize("name", list(FROM_CONFIG))
def test_config_only_models_count_by_hand(name):
    d, layers = FROM_CONFIG[name]
    by_hand = layers * (12 * d * d + 13 * d) + 50368 * d + 2048 * d + 2 * d
    assert param_counts(load_model(name)).total == by_hand


@pytest.mark.parametrize(("name", "what", "figure"), [
    (name, what, figure) for name, rows in CARDS.items() for what, figure, _ in rows])
def test_parameter_count_matches_the_card(name, what, figure):
    card, digit = _card(figure)
    ours = _ours(name, what)
    assert ours == pytest.approx(card, rel=0.01) or abs(ours - card) <= digit / 2, \
        f"{name} {what}: {ours / 1e9:.3f}B, card {figure}"


def test_llama_4_scout_total_is_the_card_less_its_vision_encoder():
    # The card's 109B includes the image encoder and projector (a ViT of about 1B); the text
    # model here has 16 routed + 1 shared expert in each of 48 layers: one expert more or
    # less would move it by 6B.
    total = param_counts(load_model("llama-4-scout")).total
    assert 109.0e9 - 1.5e9 <= total <= 109.0e9 - 0.5e9


# --- what the parser reads per layer ---------------------------------------------------------


def test_llama_4_interleaves_moe_and_chunked_attention():
    scout, maverick = load_model("llama-4-scout"), load_model("llama-4-maverick")
    assert [scout.is_moe_layer(i) for i in range(4)] == [True] * 4
    assert [maverick.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert maverick.moe.shared_experts == 1 and maverick.moe.experts == 128
    assert maverick.ffn == 16384 and maverick.moe.expert_ffn == 8192  # dense vs expert MLP
    kinds = [scout.layer_attention(i) for i in range(8)]
    assert kinds == [("chunk", 8192)] * 3 + [("full", None)] + [("chunk", 8192)] * 3 + \
        [("full", None)]


def test_chunked_attention_decode_reads_only_the_current_chunk():
    # Llama 4 decode at context 20000: chunked layers see (20000 mod 8192) + 1 keys, the
    # global (NoPE) layers all 20001
    spec = load_model("llama-4-scout")
    a = analyze(spec, "h100", decode(1, 20000), precision=Precision())
    kv = {op.group: op.hbm_bytes for op in a.ops if op.name == "attention"}
    row = 2 * 8 * 128 * 2  # K and V of 8 KV heads, bf16
    q_o = 2 * 40 * 128 * 2
    assert kv["moe layer (chunk 8192)"] == pytest.approx(36 * (3617 * row + q_o))
    assert kv["moe layer"] == pytest.approx(12 * (20001 * row + q_o))


def test_chunked_attention_prefill_counts_each_chunk_causally():
    from roofline.ops.attention import score_pairs
    # 20000 = 2 whole chunks of 8192 + 3616: three independent causal blocks
    assert score_pairs(20000, 20000, chunk=8192).value == \
        2 * 8192 * 8193 / 2 + 3616 * 3617 / 2
    with pytest.raises(RooflineError, match="give chunk or window, not both"):
        score_pairs(8, 8, window=4, chunk=4)


def test_chunked_layers_cache_at_most_one_chunk():
    spec = load_model("llama-4-scout")
    a = analyze(spec, "h200", decode(1, 100_000), precision=Precision())
    per_token_layer = 2 * 8 * 128 * 2
    assert a.memory.kv_cache_bytes == pytest.approx(
        per_token_layer * (12 * 100_001 + 36 * 8192))


def test_gpt_oss_alternates_sliding_128_and_full_with_sinks():
    spec = load_model("gpt-oss-120b")
    kinds = [spec.layer_attention(i) for i in range(4)]
    assert kinds == [("window", 128), ("full", None), ("window", 128), ("full", None)]
    assert spec.attention_sinks and spec.moe.experts == 128 and spec.moe.top_k == 4
    assert load_model("gpt-oss-20b").moe.experts == 32


def test_gpt_oss_defaults_to_mxfp4_experts_only():
    a = analyze("gpt-oss-120b", "h100", decode(1, 1024))
    assert a.precision.experts == "mxfp4" and a.precision.weights == "bf16"
    assert "modules_to_not_convert" in a.precision.weights_from
    # 4.25 bits per expert weight (e2m1 + one e8m0 scale per 32), 16 for the rest
    p = param_counts(load_model("gpt-oss-120b"))
    experts = sum(layer.experts for layer in p.layers)
    assert a.memory.weights_bytes == pytest.approx(experts * 4.25 / 8 + (p.total - experts) * 2)
    # a weight dtype given applies to every weight, the experts too
    given = analyze("gpt-oss-120b", "h100", decode(1, 1024), precision=Precision("fp8", "bf16"))
    assert given.precision.experts == "fp8"


def test_gpt_oss_decode_step_reads_touched_mxfp4_experts_once_and_a_windowed_cache():
    # 99 sequences at 1536 tokens on 2 H100s (tp 2: 4 of the 8 KV heads each), fp8 KV cache:
    # the step the c512 silicon rows are bounded at (benchmarks/validation/silicon.py BEATEN)
    a = analyze("gpt-oss-120b", "h100", decode(99, 1536), Parallel(tp=2),
                Precision("bf16", "bf16", "fp8", expert_weights="mxfp4"))
    # the bound reads the top_k = 4 experts any routing touches a layer, each 3·2880²
    # weights at 4.25 bits, 36 layers, half on each chip: 36·4·13,219,200 / 2 = 9.518e8 B
    # (plus the tokens' activations); the expected time the uniform routing's
    # 128·(1 − (1 − 4/128)^99) = 122.48: 2.914e10 B
    rows = [op for op in a.ops if op.name.startswith("experts")]
    floor = 36 * 4 * 3 * 2880 ** 2 * 4.25 / 8 / 2
    assert floor == 951_782_400
    experts = sum(float(op.hbm_bytes) for op in rows)
    assert floor <= experts <= 1.3 * floor
    touched = 128 * (1 - (1 - 4 / 128) ** 99)
    assert touched == pytest.approx(122.48, abs=0.01)
    weights = 36 * touched * 3 * 2880 ** 2 * 4.25 / 8 / 2
    assert weights == pytest.approx(2.914e10, rel=1e-3)
    uniform = sum(float(op.hbm_bytes) * float(op.cost.runs.bytes["hbm"] / op.cost.bytes["hbm"])
                  for op in rows)
    assert weights <= uniform <= 1.01 * weights
    assert uniform - experts == pytest.approx(weights * (1 - 4 / touched), rel=1e-9)
    # the sliding layers read 128 keys a sequence, the full ones the whole context:
    # 18 layers · 99 · keys · 4 heads · 64 · (K and V) · 1 byte, plus q and the output
    attention = {op.group: float(op.hbm_bytes) for op in a.ops if op.name == "attention"}
    window = attention["moe layer (window 128)"]
    full = attention["moe layer"]
    assert 18 * 99 * 128 * 512 <= window <= 1.15 * 18 * 99 * 128 * 512
    assert 18 * 99 * 1536 * 512 <= full <= 1.02 * 18 * 99 * 1536 * 512


def test_gpt_oss_120b_decode_batch_16_at_8k_fits_one_h100():
    a = analyze("gpt-oss-120b", "h100", decode(16, 8192))
    assert a.memory.fits
    assert not analyze("gpt-oss-120b", "h100", decode(16, 8192), precision=Precision()).memory.fits


def test_gemma_3_keeps_5_local_to_1_global():
    spec = load_model("gemma-3-27b")
    kinds = [spec.layer_attention(i)[0] for i in range(spec.layers)]
    assert kinds[:6] == ["window"] * 5 + ["full"] and kinds.count("full") == 62 // 6
    assert spec.sliding_window == 1024 and load_model("gemma-3-1b").sliding_window == 512


def test_deepseek_r1_is_v3s_architecture_and_kimi_k2_has_384_experts():
    r1, v3, kimi = load_model("deepseek-r1"), load_model("deepseek-v3"), load_model("kimi-k2")
    shape = ("hidden", "layers", "heads", "ffn", "vocab", "moe", "mla")
    assert all(getattr(r1, f) == getattr(v3, f) for f in shape)
    assert kimi.moe.experts == 384 and kimi.mla == v3.mla and kimi.heads == 64
    assert r1.weight_dtype == "fp8" == kimi.weight_dtype  # both ship fp8 checkpoints


def test_every_new_config_cites_its_published_config_json():
    for name in CARDS:
        source = load_model(name).source
        assert source.startswith("https://huggingface.co/") and "config.json" in source, name


def test_llama_4_moe_layers_other_than_interleaved_are_refused(tmp_path):
    data = json.loads((CATALOG_DIR / "llama-4-maverick.json").read_text())
    data["text_config"]["moe_layers"] = [0, 5]
    with pytest.raises(RooflineError, match=r"moe_layers.*interleaved"):
        parse_config(data, "odd", "odd.json")


def test_prefill_runs_for_every_new_model():
    for name in CARDS:
        a = analyze(name, "b200", prefill(1, 4096), Parallel())
        assert a.t_lower_s > 0


# --- config keys read as transformers reads them ---------------------------------------------


def _catalog(name: str) -> dict:
    return json.loads((CATALOG_DIR / f"{name}.json").read_text())


def _params(data: dict):
    return param_counts(parse_config(data, "x", "x.json"))


@pytest.mark.parametrize("shared", [None, 0])
def test_deepseek_null_or_zero_shared_experts_mean_none(shared):
    # DeepSeek's modelling code builds shared experts only for a non-null count
    base = _params(_catalog("deepseek-v3"))
    none = _params({**_catalog("deepseek-v3"), "n_shared_experts": shared})
    one_each = 58 * 3 * 7168 * 2048  # one shared expert in each of the 58 MoE layers
    assert base.total - none.total == base.active - none.active == one_each
    assert none.total == pytest.approx(668.5e9, abs=0.05e9)
    assert none.active == pytest.approx(35.0e9, abs=0.05e9)
    absent = {k: v for k, v in _catalog("deepseek-v3").items() if k != "n_shared_experts"}
    assert _params(absent).total == base.total  # absent: one, as before
    with pytest.raises(RooflineError, match=r"x\.json: field 'n_shared_experts': must be a "
                       r"whole"):
        parse_config({**_catalog("deepseek-v3"), "n_shared_experts": -1}, "x", "x.json")


# text_config as google/gemma-3-{4b,12b,27b}-it publish it: transformers' defaults fill the rest
_GEMMA_3_IT = {
    "gemma-3-4b": {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34},
    "gemma-3-12b": {"hidden_size": 3840, "intermediate_size": 15360, "num_hidden_layers": 48,
                    "num_attention_heads": 16, "num_key_value_heads": 8},
    "gemma-3-27b": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
                    "num_attention_heads": 32, "num_hidden_layers": 62,
                    "num_key_value_heads": 16, "query_pre_attn_scalar": 168},
}


@pytest.mark.parametrize("name", list(_GEMMA_3_IT))
def test_published_gemma_3_multimodal_configs_load_with_transformers_defaults(name):
    text = {**_GEMMA_3_IT[name], "model_type": "gemma3_text", "sliding_window": 1024,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}
    spec = parse_config({"architectures": ["Gemma3ForConditionalGeneration"],
                         "model_type": "gemma3", "text_config": text}, name, "it.json")
    ours = load_model(name)  # the catalog spells every key out
    shape = ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab",
             "sliding_window", "sliding_layers", "max_context", "tied_embeddings")
    assert {f: getattr(spec, f) for f in shape} == {f: getattr(ours, f) for f in shape}
    assert spec.vocab == 262208 and param_counts(spec).total == param_counts(ours).total


def test_qwen_moe_mlp_only_layers_keep_a_dense_mlp():
    data = _catalog("qwen3-30b-a3b")
    spec = parse_config({**data, "mlp_only_layers": [0, 1, 2, 3]}, "x", "x.json")
    assert [spec.is_moe_layer(i) for i in range(6)] == [False] * 4 + [True] * 2
    dense = param_counts(spec).layers[0]
    assert dense.experts == 0 and dense.mlp_dense == 3 * 2048 * 6144  # intermediate_size
    moe = load_model("qwen3-30b-a3b")
    assert param_counts(moe).total - param_counts(spec).total == pytest.approx(
        4 * (128 * 3 * 2048 * 768 + 2048 * 128 - 3 * 2048 * 6144))
    # transformers: layer i is MoE where (i + 1) % decoder_sparse_step == 0
    every_2nd = parse_config({**data, "decoder_sparse_step": 2, "mlp_only_layers": [3]},
                             "x", "x.json")
    assert [every_2nd.is_moe_layer(i) for i in range(6)] == [False, True, False, False,
                                                             False, True]
    for bad in ([48], [-1], "0,1", [True]):
        with pytest.raises(RooflineError, match=r"x\.json: field 'mlp_only_layers': must list "
                           r"layer indices from 0 to 47"):
            parse_config({**data, "mlp_only_layers": bad}, "x", "x.json")


def test_deepseek_moe_layer_freq_counts_from_layer_zero():
    # DeepSeek: MoE where i >= first_k_dense_replace and i % moe_layer_freq == 0
    data = {**_catalog("deepseek-v3"), "num_hidden_layers": 8, "first_k_dense_replace": 3,
            "moe_layer_freq": 2}
    spec = parse_config(data, "x", "x.json")
    assert [spec.is_moe_layer(i) for i in range(8)] == [False] * 4 + [True, False] * 2


def _windowed(spec) -> list[int]:
    return [i for i in range(spec.layers) if spec.layer_attention(i)[0] == "window"]


def test_qwen_sliding_window_starts_at_max_window_layers():
    # transformers' Qwen2: the window applies to layers i >= max_window_layers
    data = {**_catalog("qwen2.5-7b"), "use_sliding_window": True, "sliding_window": 4096}
    assert _windowed(parse_config(data, "x", "x.json")) == []  # 28 of 28 layers: none
    spec = parse_config({**data, "max_window_layers": 20}, "x", "x.json")
    assert _windowed(spec) == list(range(20, 28)) and spec.sliding_window == 4096
    assert len(_windowed(parse_config({**data, "max_window_layers": 0}, "x", "x.json"))) == 28
    absent = {k: v for k, v in data.items() if k != "max_window_layers"}
    assert _windowed(parse_config(absent, "x", "x.json")) == []  # Qwen2's default: 28
    assert _windowed(parse_config({**data, "use_sliding_window": False}, "x", "x.json")) == []
    with pytest.raises(RooflineError, match="field 'max_window_layers': must be a whole"):
        parse_config({**data, "max_window_layers": -2}, "x", "x.json")


def test_a_flat_llama_4_config_reads_like_its_text_config():
    nested = load_model("llama-4-scout")
    flat = parse_config({**_catalog("llama-4-scout")["text_config"], "model_type": "llama4"},
                        "llama-4-scout", "flat.json")
    assert flat.model_type == "llama4_text" and flat.moe == nested.moe
    assert flat.layer_mixers == nested.layer_mixers and flat.attention_chunk == 8192
    assert param_counts(flat).total == param_counts(nested).total


def test_gpt_oss_without_layer_types_alternates_sliding_and_full():
    # transformers' GptOssConfig: sliding where (i + 1) % 2, full otherwise; window 128
    data = {k: v for k, v in _catalog("gpt-oss-20b").items() if k != "layer_types"}
    spec = parse_config(data, "x", "x.json")
    assert spec.layer_mixers == load_model("gpt-oss-20b").layer_mixers
    assert _windowed(spec) == list(range(0, 24, 2))
    no_window = {k: v for k, v in data.items() if k != "sliding_window"}
    assert parse_config(no_window, "x", "x.json").layer_mixers == spec.layer_mixers


def test_layer_types_read_transformers_names_and_refuse_others():
    data = _catalog("gpt-oss-20b")
    chunked = {**data, "layer_types": ["chunked_attention", "full_attention"] * 12,
               "attention_chunk_size": 4096}
    spec = parse_config(chunked, "x", "x.json")
    assert [spec.layer_attention(i) for i in range(2)] == [("chunk", 4096), ("full", None)]
    assert _windowed(spec) == []
    with pytest.raises(RooflineError, match=r"x\.json: field 'layer_types': chunked_attention "
                       r"layers need attention_chunk_size"):
        parse_config({**chunked, "attention_chunk_size": None}, "x", "x.json")
    for odd, allowed in (("mamba", "full_attention, sliding_attention, chunked_attention"),
                         ("linear_attention", "full_attention, sliding_attention, "
                          "chunked_attention")):
        with pytest.raises(RooflineError, match=re.escape(
                f"x.json: field 'layer_types': unknown layer type '{odd}' (allowed: "
                f"{allowed})")):
            parse_config({**data, "layer_types": [odd] * 24}, "x", "x.json")
    with pytest.raises(RooflineError, match="'layer_types': sliding_attention layers need a "
                       "sliding_window"):
        parse_config({**data, "sliding_window": None}, "x", "x.json")
    qwen = {**_catalog("qwen2.5-7b"), "layer_types": ["sliding_attention"] * 28}
    with pytest.raises(RooflineError, match="need a sliding_window and use_sliding_window"):
        parse_config(qwen, "x", "x.json")
    # Qwen3-Next's own layer_types: linear mixers where it says so
    nxt = _catalog("qwen3-next-80b-a3b")
    kinds = ["linear_attention", "full_attention"] * (nxt["num_hidden_layers"] // 2)
    spec = parse_config({**nxt, "layer_types": kinds}, "x", "x.json")
    assert [spec.layer_attention(i)[0] for i in range(4)] == ["linear", "full"] * 2


def test_the_released_mpt_7b_config_counts_its_published_parameters():
    # mosaicml/mpt-7b's config.json: ALiBi (no position table), no biases, vocab 50432:
    # 6,649,286,656 parameters, its card's 6.7B to the parameter
    released = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
                "expansion_ratio": 4, "max_seq_len": 2048, "vocab_size": 50432,
                "no_bias": True, "learned_pos_emb": True,
                "attn_config": {"alibi": True, "attn_impl": "torch"}}
    spec = parse_config(released, "mpt-7b", "config.json")
    assert param_counts(spec).total == 6_649_286_656
    assert spec.learned_positions == 0 and spec.bias == "none" and not spec.gated_mlp
    gqa = parse_config({**released, "attn_config": {"attn_type": "grouped_query_attention",
                                                    "kv_n_heads": 8}}, "m", "c.json")
    assert gqa.kv_heads == 8 and gqa.learned_positions == 2048


@pytest.mark.parametrize(("edit", "needle"), [
    ({"attn_config": [1]}, "attn_config"),
    ({"ffn_config": {"ffn_type": "moe"}}, "ffn_type"),
    ({"expansion_ratio": -1}, "expansion_ratio"),
    ({"attn_config": {"attn_type": "grouped_query_attention"}}, "kv_n_heads"),
])
def test_a_bad_mpt_config_names_its_field(edit, needle):
    base = {"model_type": "mpt", "d_model": 256, "n_heads": 4, "n_layers": 2,
            "vocab_size": 1000}
    with pytest.raises(RooflineError, match=needle):
        parse_config({**base, **edit}, "m", "c.json")


def test_deepseek_group_limited_routing_is_read_from_the_config():
    # DeepSeek-V3 routes each token to at most topk_group = 4 of n_group = 8 groups
    v3 = load_model("deepseek-v3").moe
    assert (v3.groups, v3.topk_groups) == (8, 4)
    kimi = load_model("kimi-k2").moe  # n_group 1: unrestricted
    assert (kimi.groups, kimi.topk_groups) == (1, 1)
    greedy = parse_config({**_catalog("deepseek-v3"), "topk_method": "greedy"}, "x", "x.json")
    assert (greedy.moe.groups, greedy.moe.topk_groups) == (1, 1)  # greedy ignores groups
    with pytest.raises(RooflineError, match=r"'topk_group': 9: between 1 and n_group \(8\)"):
        parse_config({**_catalog("deepseek-v3"), "topk_group": 9}, "x", "x.json")
    with pytest.raises(RooflineError, match=r"'n_group': 7 groups do not split the 256"):
        parse_config({**_catalog("deepseek-v3"), "n_group": 7}, "x", "x.json")
    # 1 of 64 groups holds 4 experts, fewer than the 8 a token takes
    with pytest.raises(RooflineError, match=r"'topk_group': 1 of 64 groups hold 4 experts"):
        parse_config({**_catalog("deepseek-v3"), "n_group": 64, "topk_group": 1}, "x", "x.json")


def test_deepseek_v3_decode_bound_reads_top_k_experts_and_expected_the_uniform_ones():
    # batch 64 on 8 H200s (tp 8: each chip holds 1/8 of every expert, expert_ffn 2048 / 8 =
    # 256), fp8 weights, bf16 activations, SwiGLU in the up/gate epilogue. A layer's routed
    # pairs: 64·8 = 512, up/gate activations 512·(7168 + 512)·2 minus the gate half never
    # written 512·256·2: 7,602,176 B; down 512·(256 + 7168)·2: 7,602,176 B. Weights: the 8
    # experts any routing touches, 8·7168·512 = 29,360,128 B and 8·256·7168 = 14,680,064 B;
    # the expected time the 256·(1 − (1 − 8/256)^64) = 222.44 uniform routing touches
    a = analyze("deepseek-v3", "h200", decode(64, 4096), Parallel(tp=8))
    rows = {op.name: op for op in a.ops if op.name.startswith("experts")}
    up, down = rows["experts up/gate"].cost, rows["experts down"].cost
    assert up.bytes["hbm"] == 7_602_176 + 29_360_128
    assert down.bytes["hbm"] == 7_602_176 + 14_680_064
    touched = 256 * (1 - (1 - 8 / 256) ** 64)
    assert touched == pytest.approx(222.44, abs=0.01)
    assert up.runs.bytes["hbm"] == pytest.approx(7_602_176 + touched * 7168 * 512, rel=1e-12)
    assert down.runs.bytes["hbm"] == pytest.approx(7_602_176 + touched * 256 * 7168,
                                                   rel=1e-12)
    assert rows["experts up/gate"].count == 58  # layers 4-61 are MoE
    # the expected step reads them (38.5 ms when written, the bound 5.7: was 20.0 reading
    # the uniform experts)
    e = expected_step(a)
    uniform_weights = 58 * touched * (7168 * 512 + 256 * 7168)
    assert float(e.t_s) >= float(a.t_lower_s) + uniform_weights / 4.8e12
