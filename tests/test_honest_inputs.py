"""Honest inputs for models and MFU (issue 20): weight quantization leaves the embedding and LM
head alone, a quantized config brings its own weight dtype, the context limit knows RoPE
scaling and only warns, options that do not apply are refused, `mfu` reads what people
write, and counts are integers."""

import json
import re

import numpy as np
import pytest

from roofline import RooflineError, load_chip
from roofline.levers import model_what_if
from roofline.models import (
    Parallel,
    Precision,
    analyze,
    decode,
    load_model,
    model_precision,
    param_counts,
    prefill,
    train,
)
from roofline.models.catalog import CATALOG_DIR
from roofline.models.mfu import mfu

H100 = load_chip("h100")
INT4_G128 = 0.5 + 2 / 128  # bytes per weight: 4 bits + one fp16 scale per 128
NVFP4 = 0.5 + 1 / 16  # 4 bits + one fp8 scale per 16


def _config(tmp_path, **fields):
    base = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000,
            "max_position_embeddings": 4096}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **fields}))
    return path


# --- 1. weight quantization leaves the embedding and LM head in the activation dtype -------


@pytest.mark.parametrize(("weights", "per_weight"), [("int4-g128", INT4_G128),
                                                     ("nvfp4", NVFP4), ("fp8", 1.0)])
def test_quantized_weights_keep_the_tables_in_the_activation_dtype(weights, per_weight):
    spec = load_model("llama-3-8b")
    p = param_counts(spec)
    tables = p.embedding + p.lm_head
    a = analyze(spec, "h100", decode(1, 1024), precision=Precision(weights=weights))
    # by hand: the layers at the quantized size, the two 128256 x 4096 tables at 2 bytes
    assert a.memory.weights_bytes == pytest.approx((p.total - tables) * per_weight
                                                   + tables * 2, rel=1e-9)
    assert a.precision.tables == "bf16"
    # the graph reads them so too: the LM head streams its bf16 table, the lookup one bf16 row
    ops = {op.name: op for op in a.ops}
    v, h = spec.vocab, spec.hidden
    assert ops["lm head"].hbm_bytes == pytest.approx(v * h * 2 + h * 2 + v * 2)
    assert ops["embedding"].hbm_bytes == pytest.approx(h * (2 + 2))
    everything = analyze(spec, "h100", decode(1, 1024),
                         precision=Precision(weights=weights, quantize_embeddings=True))
    assert everything.memory.weights_bytes == pytest.approx(p.total * per_weight, rel=1e-9)
    assert {op.name: op for op in everything.ops}["lm head"].hbm_bytes == pytest.approx(
        v * h * per_weight + h * 2 + v * 2)


def test_llama_3_8b_int4_weights_by_hand():
    # 8.03e9 parameters, of which 2 x 128256 x 4096 = 1.05e9 in the embedding and LM head
    a = analyze("llama-3-8b", "h100", decode(1, 1024), precision=Precision(weights="int4-g128"))
    body, tables = 8_030_261_248 - 2 * 128256 * 4096, 2 * 128256 * 4096
    assert a.memory.weights_bytes == pytest.approx(body * 0.515625 + tables * 2, rel=1e-6)


def test_unquantized_weights_hold_the_tables_in_their_own_dtype():
    assert Precision().tables == "bf16"
    assert Precision(weights="fp32", activations="fp32").tables == "fp32"
    assert Precision(weights="fp8", activations="fp8").tables == "fp8"  # fp8 everywhere


def test_quantize_embeddings_on_the_command_line(run_cli):
    _, plain, _ = run_cli("model", "llama-3-8b", "--weight-dtype", "int4-g128", "--json")
    _, both, _ = run_cli("model", "llama-3-8b", "--weight-dtype", "int4-g128",
                         "--quantize-embeddings", "--json")
    p = param_counts(load_model("llama-3-8b"))
    tables = p.embedding + p.lm_head
    assert json.loads(plain)["memory"]["weights_bytes"] - json.loads(both)["memory"][
        "weights_bytes"] == pytest.approx(tables * (2 - INT4_G128), rel=1e-6)
    _, text, _ = run_cli("model", "llama-3-8b", "--weight-dtype", "int4-g128")
    assert "weights int4-g128 (embedding and lm head bf16), activations bf16" in text


# --- 2. a config that ships quantized brings its weight dtype ----------------------------


def test_deepseek_v3_ships_fp8_and_fits_on_8_h200():
    spec = load_model("deepseek-v3")
    assert (spec.weight_dtype, spec.quantization) == ("fp8", "fp8")
    a = analyze(spec, "h200", decode(32, 4096), Parallel(tp=8))
    assert a.precision.weights == "fp8" and "quantization_config" in a.precision.weights_from
    assert a.memory.fits and a.memory.max_batch >= 32
    # an explicit dtype wins: bf16 weights (170 GB per chip) do not fit
    bf16 = analyze(spec, "h200", decode(32, 4096), Parallel(tp=8), Precision())
    assert not bf16.memory.fits and bf16.precision.weights_from == ""
    assert a.memory.weights_bytes == pytest.approx(bf16.memory.weights_bytes / 2, rel=0.01)


def test_the_output_says_which_weight_dtype_and_why(run_cli):
    argv = ("model", "deepseek-v3", "--hw", "h200", "--tp", "8", "--batch", "32", "--context",
            "4k")
    code, out, _ = run_cli(*argv)
    assert code == 0 and ": fits" in out
    assert "weights fp8 (from the config's quantization_config, quant_method fp8; embedding " \
        "and lm head bf16)" in out
    code, out, _ = run_cli(*argv, "--weight-dtype", "bf16")
    assert code == 0 and "DOES NOT FIT" in out and "weights bf16, activations" in out
    _, out, _ = run_cli(*argv, "--json")
    assert json.loads(out)["precision"]["weights_from"].startswith(
        "from the config's quantization_config")


@pytest.mark.parametrize(("quantization", "weights"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4-g128"),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "int8"),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
])
def test_quantization_configs_give_their_weight_dtype(tmp_path, quantization, weights):
    spec = load_model(str(_config(tmp_path, quantization_config=quantization)))
    assert spec.weight_dtype == weights
    assert model_precision(spec).weights == weights
    assert model_precision(spec, weights="bf16").weights == "bf16"  # given wins


def test_an_unread_quantization_says_so(tmp_path):
    spec = load_model(str(_config(tmp_path, quantization_config={"quant_method": "bitsandbytes",
                                                                 "load_in_4bit": True})))
    prec = model_precision(spec)
    assert spec.weight_dtype is None and prec.weights == "bf16"
    assert "quant_method bitsandbytes" in prec.weights_from and "give the weight dtype" in \
        prec.weights_from


@pytest.mark.parametrize(("quantization", "needle"), [
    ([1, 2], "field 'quantization_config': must be an object, got list"),
    ({"bits": 4}, "field 'quantization_config': needs a quant_method"),
])
def test_bad_quantization_configs(tmp_path, quantization, needle):
    with pytest.raises(RooflineError, match=needle):
        load_model(str(_config(tmp_path, quantization_config=quantization)))


# --- 3. the fp8 lever says whether the KV cache moved with it ----------------------------


def test_fp8_lever_says_whether_it_moved_the_kv_cache():
    phase = decode(8, 4096)
    labels = [r.label for r in model_what_if("llama-3-8b", H100, phase, Parallel(),
                                             Precision())]
    assert "fp8 weights and activations, KV cache too" in labels
    kept = [r.label for r in model_what_if("llama-3-8b", H100, phase, Parallel(),
                                           Precision(kv_cache="bf16"))]
    assert "fp8 weights and activations; KV cache stays bf16" in kept
    # the two differ by exactly the KV cache: the first is the second plus an fp8 KV cache
    moved = analyze("llama-3-8b", H100, phase, precision=Precision("fp8", "fp8"))
    stays = analyze("llama-3-8b", H100, phase, precision=Precision("fp8", "fp8", "bf16"))
    assert moved.memory.kv_cache_bytes == pytest.approx(stays.memory.kv_cache_bytes / 2)
    trained = [r.label for r in model_what_if("llama-3-8b", H100, train(8, 4096), Parallel(),
                                              Precision())]
    assert "fp8 GEMMs (--matmul-dtype fp8)" in trained  # no KV cache; bf16 master weights


# --- 4. context limits, phase options, first_k_dense_replace ------------------------------


def test_context_limit_knows_rope_scaling(tmp_path):
    llama31 = load_model("llama-3.1-405b")  # llama3 type: max_position_embeddings is scaled
    assert (llama31.max_context, llama31.trained_context) == (131072, 8192)
    deepseek = load_model("deepseek-v3")  # yarn: 40 x 4096
    assert (deepseek.max_context, deepseek.trained_context) == (163840, 4096)
    # Qwen2.5's long-context recipe: max_position_embeddings is the original
    qwen = load_model(str(_config(tmp_path, max_position_embeddings=32768, rope_scaling={
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})))
    assert (qwen.max_context, qwen.trained_context) == (131072, 32768)
    # linear: the factor is already in max_position_embeddings (Gemma 3: 131072, factor 8)
    linear = load_model(str(_config(tmp_path, rope_scaling={"type": "linear", "factor": 4})))
    assert (linear.max_context, linear.trained_context) == (4096, 4096)
    assert load_model("gemma-3-27b").max_context == 131072
    plain = load_model(str(_config(tmp_path)))
    assert (plain.max_context, plain.trained_context) == (4096, 4096)
    with pytest.raises(RooflineError, match="field 'factor': must be a positive number"):
        load_model(str(_config(tmp_path, rope_scaling={"type": "yarn", "factor": "x"})))
    with pytest.raises(RooflineError, match="field 'rope_scaling': must be an object"):
        load_model(str(_config(tmp_path, rope_scaling=[4])))


def test_a_context_beyond_the_maximum_is_a_warning(run_cli):
    a = analyze("llama-3-8b", "h100", decode(1, 10000))
    assert a.warnings == ["10,001 positions exceed the 8,192 this model supports; the bound "
                          "extrapolates"]
    assert a.to_dict()["warnings"] == a.warnings
    assert analyze("llama-3-8b", "h100", decode(1, 8000)).warnings == []
    code, out, err = run_cli("model", "llama-3-8b", "--context", "10000")
    assert code == 0 and err.count("roofline: warning:") == 1 and err.count("\n") == 1
    assert "note: 10,001 positions exceed the 8,192" in out
    code, out, err = run_cli("model", "llama-3-8b", "--context", "10000", "--json")
    assert code == 0 and err.count("roofline: warning:") == 1
    assert json.loads(out)["warnings"] == a.warnings
    # within the scaled maximum of a RoPE-scaled model: no warning
    assert analyze("llama-3.1-405b", "h100", decode(1, 100_000), Parallel(tp=8)).warnings == []


def test_first_k_dense_replace_beyond_the_layers_is_refused(tmp_path):
    base = json.loads((CATALOG_DIR / "deepseek-v3.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, "num_hidden_layers": 4, "first_k_dense_replace": 5}))
    with pytest.raises(RooflineError, match=r"field 'first_k_dense_replace': 5 dense layers "
                       r"exceed the 4 layers \(num_hidden_layers\)"):
        load_model(str(path))
    path.write_text(json.dumps({**base, "num_hidden_layers": 4, "first_k_dense_replace": 4}))
    assert not any(load_model(str(path)).is_moe_layer(i) for i in range(4))
    path.write_text(json.dumps({**base, "num_hidden_layers": 4, "first_k_dense_replace": 0}))
    assert all(load_model(str(path)).is_moe_layer(i) for i in range(4))


@pytest.mark.parametrize(("argv", "needle"), [
    (["--phase", "decode", "--fsdp"], "--fsdp applies to --phase train, not --phase decode"),
    (["--phase", "prefill", "--fsdp"], "--fsdp applies to --phase train, not --phase prefill"),
    (["--phase", "decode", "--microbatches", "4"],
     "microbatches (4) fill a pipeline: decode needs pp > 1 for them"),
    (["--phase", "prefill", "--microbatches", "2"], "prefill needs pp > 1"),
    (["--phase", "decode", "--recompute"], "--recompute applies to --phase train"),
    (["--phase", "train", "--k", "2"], "--k applies to --phase decode, not --phase train"),
])
def test_options_that_do_not_apply_to_the_phase_are_refused(run_cli, argv, needle):
    code, _, err = run_cli("model", "llama-3-8b", *argv)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_micro_batches_fill_an_inference_pipeline():
    # with a pipeline they apply in every phase; without one only training accumulates them
    a = analyze("llama-3-8b", "h100", decode(8, 1024), Parallel(pp=2, microbatches=2))
    assert a.t_lower_s > 0
    analyze("llama-3-8b", "h100", train(8, 1024), Parallel(microbatches=2))
    with pytest.raises(RooflineError, match="FSDP shards training state over dp"):
        analyze("llama-3-8b", "h100", prefill(8, 1024), Parallel(dp=2, fsdp=True))


# --- 5. roofline mfu ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "params"), [("8B", 8e9), ("70B", 70e9), ("405e9", 405e9),
                                              ("125M", 125e6), ("1.5T", 1.5e12),
                                              ("7b", 7e9), ("70000000000", 70e9)])
def test_mfu_reads_parameter_counts(run_cli, text, params):
    code, out, _ = run_cli("mfu", "--params", text, "--tokens-per-step", "1M",
                           "--step-time-s", "10", "--gpus", "64", "--json")
    assert code == 0 and json.loads(out)["params"] == pytest.approx(params)


@pytest.mark.parametrize("text", ["8X", "B", "-8B", "inf", "8 BB", "1e400"])
def test_mfu_refuses_unreadable_parameter_counts(run_cli, text):
    code, _, err = run_cli("mfu", f"--params={text}", "--tokens-per-step", "1M",
                           "--step-time-s", "10", "--gpus", "64")
    assert code == 2 and "argument --params: expected a positive number of parameters " \
        "such as 8B, 70B or 405e9 (B = 1e9, M = 1e6)" in err and err.count("\n") == 1


def test_mfu_help_says_what_the_suffixes_mean(run_cli):
    _, out, _ = run_cli("mfu", "--help")
    out = " ".join(out.split())  # as wrapped for any terminal width
    assert "8B, 70B, 405e9 (decimal: B = 1e9, M = 1e6)" in out


@pytest.mark.parametrize("name", ["llama-3-8b", "deepseek-v3", "gpt2", "mixtral-8x7b",
                                  "qwen3-8b", "qwen3-30b-a3b"])
def test_mfu_from_a_model_matches_the_model_analysis(name):
    # --model fills N (active, input embedding left out; a tied table counts as the head),
    # the layers and the attention width (MLA's is heads·(192 + 128)/2): on the model's own
    # bound step time it gives the model's own MFU, MLA and MoE included
    spec = load_model(name)
    a = analyze(spec, "h100", train(8, 1024))
    r = mfu(None, 8 * 1024, a.t_lower_s, 1, "h100", a.mfu_dtype, seq_len=1024, causal=True,
            model=spec)  # the same peak: DeepSeek-V3's fp8 weights run fp8 GEMMs
    assert r.mfu == pytest.approx(a.mfu, rel=0.005)


def test_mfu_model_fills_only_what_is_not_given():
    spec = load_model("llama-3-8b")
    p = param_counts(spec)
    r = mfu(None, 4096 * 64, 1.0, 8, "h100", model="llama-3-8b")
    assert r.params == p.total - p.embedding
    # 12·L·h·s² per sequence, s = the model's trained context (8192)
    assert r.attention_flops == pytest.approx(12 * 32 * 4096 * 8192**2 * (4096 * 64 / 8192))
    assert r.notes[0].startswith("from llama-3-8b: N = 7.5B") and "seq-len 8192" in r.notes[0]
    given = mfu(7e9, 4096 * 64, 1.0, 8, "h100", seq_len=4096, model="llama-3-8b")
    assert given.params == 7e9
    assert given.attention_flops == pytest.approx(12 * 32 * 4096 * 4096**2 * 64)
    assert "seq-len" not in given.notes[0] and "N =" not in given.notes[0]
    deepseek = mfu(None, 4096 * 64, 1.0, 8, "h100", model="deepseek-v3")
    assert "seq-len 4096" in deepseek.notes[0]  # the pre-training context, not 163840
    with pytest.raises(RooflineError, match="params is needed"):
        mfu(None, 4096, 1.0, 8, "h100")


def test_mfu_says_when_attention_is_not_counted(run_cli):
    argv = ("mfu", "--params", "70B", "--tokens-per-step", "8M", "--step-time-s", "14",
            "--gpus", "512")
    code, out, err = run_cli(*argv)
    assert code == 0 and err == ""
    assert out.count("attention not counted") == 2  # the FLOP line, and the line saying how
    assert "give --layers, --hidden and --seq-len, or --model ID" in out
    data = json.loads(run_cli(*argv, "--json")[1])
    assert data["attention_counted"] is False and data["attention_flops"] == 0
    data = json.loads(run_cli(*argv, "--layers", "80", "--hidden", "8192", "--seq-len", "4096",
                              "--json")[1])
    assert data["attention_counted"] is True and data["notes"] == []
    code, out, _ = run_cli("mfu", "--model", "llama-3-70b", "--tokens-per-step", "8M",
                           "--step-time-s", "14", "--gpus", "512")
    assert code == 0 and "not counted" not in out and "from llama-3-70b:" in out


def test_mfu_warns_once_and_prints_exa_flops(run_cli):
    # the Scaling Book ch.1 example: 6 · 70e9 · 8·2**20 = 3.52e18 FLOP in 7 s on 512 H100s
    argv = ("mfu", "--params", "70B", "--tokens-per-step", "8M", "--step-time-s", "7",
            "--gpus", "512")
    code, out, err = run_cli(*argv)
    assert code == 0 and "model FLOPs per step 3.52 EFLOP" in out and "MFU 99.4%" in out
    assert (out + err).count("implausibly high") == 1 and "implausibly high" in err
    code, out, err = run_cli(*argv, "--json")
    assert err.count("implausibly high") == 1 and "implausibly high" in json.loads(out)[
        "warning"]


def test_mfu_needs_params_or_a_model(run_cli):
    code, _, err = run_cli("mfu", "--tokens-per-step", "8M", "--step-time-s", "7", "--gpus",
                           "512")
    assert code == 2 and "--params is needed (the parameter count), or a model" in err
    assert err.count("\n") == 1


# --- 6. counts are integers --------------------------------------------------------------


def test_counts_are_integers():
    a = analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4))
    m = a.memory
    assert type(m.max_batch) is int and type(m.max_context) is int
    assert type(m.context_limit) is int
    assert all(type(op.count) is int for op in a.ops)
    assert all(type(layer.count) is int for layer in a.layers)
    grid = analyze("llama-3-8b", "h100", decode(np.array([1, 8]), np.array([[1024], [4096]])))
    assert grid.memory.max_batch.dtype.kind == "i"
    # an uneven pipeline split is an average, not a whole number
    uneven = analyze("llama-3-8b", "h100", train(8, 1024), Parallel(pp=3, microbatches=4))
    # (the stage's first attention norm is the first layer's, a row of its own)
    counts = {op.name: op.count for op in uneven.ops if op.group == "dense layer"}
    assert counts.pop("residual + attention norm") == (32 / 3 - 1) * 4
    assert set(counts.values()) == {32 / 3 * 4}


def test_json_counts_are_integers(run_cli):
    _, out, _ = run_cli("model", "llama-3-70b", "--tp", "4", "--batch", "16", "--json")
    data = json.loads(out)
    assert type(data["memory"]["max_batch"]) is int and type(data["chips"]) is int
    assert '"max_context": 8191,' in out  # 8192 positions, the step's own token the last
    assert data["memory"]["context_at_model_limit"] is True
    assert all(type(op["count"]) is int for op in data["ops"])
    assert all(type(layer["count"]) is int for layer in data["layers"])


def test_a_long_value_in_an_error_is_brief():
    from roofline.errors import brief

    assert brief(-10**400) == "a 401-digit negative integer"  # the sign is no digit
    assert brief(10**30) == "a 31-digit integer"
    assert brief("x" * 40) == "x" * 21 + "..."  # not called an integer
    assert brief(1.5) == "1.5"


# --- config values that cannot work are refused when the config is read, naming the keys ---


@pytest.mark.parametrize(("model", "fields", "needle"), [
    ("llama-3-8b", {"num_key_value_heads": 5}, "field 'num_key_value_heads': "
     "num_attention_heads (32) must be a multiple of num_key_value_heads (5)"),
    ("mixtral-8x7b", {"num_experts_per_tok": 9}, "field 'num_experts_per_tok': 9 experts per "
     "token exceed the 8 experts (num_local_experts)"),
    ("qwen3-30b-a3b", {"num_experts": 4}, "field 'num_experts_per_tok': 8 experts per token "
     "exceed the 4 experts (num_experts)"),
    ("deepseek-v3", {"num_experts_per_tok": 257}, "field 'num_experts_per_tok': 257 experts "
     "per token exceed the 256 experts (n_routed_experts)"),
])
def test_impossible_heads_and_experts_are_refused_naming_the_file_and_keys(
        run_cli, tmp_path, model, fields, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((CATALOG_DIR / f"{model}.json").read_text()),
                                **fields}))
    with pytest.raises(RooflineError, match=re.escape(f"{path}: {needle}")):
        load_model(str(path))
    code, _, err = run_cli("model", str(path))
    assert code == 2 and needle in err and err.count("\n") == 1


def test_gpt_oss_experts_per_token_names_its_key(tmp_path):
    data = json.loads((CATALOG_DIR / "gpt-oss-20b.json").read_text())
    data.pop("num_experts_per_tok", None)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**data, "experts_per_token": 33}))
    with pytest.raises(RooflineError, match="field 'experts_per_token': 33 experts per token "
                       r"exceed the 32 experts \(num_local_experts\)"):
        load_model(str(path))


def test_the_published_gemma_3_27b_it_config_runs(run_cli, tmp_path):
    # google/gemma-3-27b-it's text_config has no vocab_size: transformers' 262208
    text = {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504,
            "model_type": "gemma3_text", "num_attention_heads": 32, "num_hidden_layers": 62,
            "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024}
    path = tmp_path / "gemma3_27b_it.json"
    path.write_text(json.dumps({"model_type": "gemma3", "text_config": text}))
    code, out, err = run_cli("model", str(path), "--json")
    assert code == 0 and err == "" and json.loads(out)
    assert param_counts(load_model(str(path))).total == \
        param_counts(load_model("gemma-3-27b")).total


@pytest.mark.parametrize("name", ["gemma-3-27b", "gpt-oss-120b"])
def test_mfu_from_a_windowed_model_matches_its_analysis(name):
    """--model counted 12·L·h·s² over every layer, windowed ones too (Gemma 3: 52 of 62
    layers see 1024 keys): its attention was ~6x what the model analysis counts."""
    spec = load_model(name)
    a = analyze(spec, "h100", train(8, 4096), Parallel(tp=8))
    r = mfu(None, 8 * 4096, a.t_lower_s, 8, "h100", a.mfu_dtype, seq_len=4096, causal=True,
            model=spec)
    assert r.mfu == pytest.approx(a.mfu, rel=0.02)
