"""Model analysis: configs, parameter counts, the one graph builder, memory, MFU."""

import json

import numpy as np
import pytest

from roofline import RooflineError, load_chip
from roofline.models import (
    Parallel,
    Precision,
    analyze,
    decode,
    kv_bytes_per_token,
    list_models,
    load_model,
    param_counts,
    prefill,
    train,
)
from roofline.models.mfu import mfu
from roofline.models.schedule import Schedule
from roofline.render.model import model_text

H100 = load_chip("h100")

# Published parameter counts (model cards / papers): total and, for MoE, active per token.
PUBLISHED = {
    "llama-2-7b": (6.74e9, None), "llama-2-70b": (68.98e9, None),  # Llama 2 paper / HF
    "llama-3-8b": (8.03e9, None), "llama-3-70b": (70.55e9, None),  # HF model cards
    "llama-3.1-405b": (405.85e9, None), "mistral-7b": (7.24e9, None),
    "mixtral-8x7b": (46.7e9, 12.9e9),  # Mixtral paper: 47B total, 13B active
    "qwen2.5-7b": (7.61e9, None), "qwen2.5-72b": (72.7e9, None),  # Qwen2.5 cards
    "qwen3-30b-a3b": (30.5e9, 3.3e9), "qwen3-8b": (8.2e9, None),  # Qwen3 cards
    "deepseek-v3": (671e9, 37e9),  # DeepSeek-V3 report (main model, MTP excluded)
    "gemma-2-9b": (9.24e9, None), "gpt2": (124.4e6, None), "opt-6.7b": (6.66e9, None),
    "phi-3-mini": (3.82e9, None),
    # MosaicML's cards for the released MPT-7B / 30B (ALiBi, no biases, vocab 50432); the
    # catalog's are llm-foundry's pretraining configs (biases, a position table, vocab 50368)
    "mpt-7b": (6.65e9, None), "mpt-30b": (29.95e9, None),
    "gpt3-175b": (175.0e9, None),  # GPT-3 paper, Table 2.1 (n_params)
}


def test_catalog_complete():  # the newer models' cards: tests/test_catalog_models.py
    assert set(PUBLISHED) <= set(list_models())


@pytest.mark.parametrize(("name", "counts"), PUBLISHED.items())
def test_parameter_counts_match_published(name, counts):
    total, active = counts
    p = param_counts(load_model(name))
    assert p.total == pytest.approx(total, rel=0.01)
    assert p.active == pytest.approx(active or total, rel=0.02 if active else 0.01)


# --- seed 003 §3.3: 70B in bf16 on one H100 ---------------------------------------------------


def test_70b_decode_reads_140gb_and_tpot_42ms():
    a = analyze("llama-3-70b", "h100", decode(batch=1, context=1))
    assert a.bytes["hbm"] == pytest.approx(140e9, rel=0.01)
    assert a.tpot_s == pytest.approx(0.042, rel=0.02)
    assert a.bound == "hbm"
    assert not a.memory.fits  # 141 GB of weights do not fit in 80 GB


def test_batch_16_weight_gemms_have_intensity_16():
    a = analyze("llama-3-70b", "h100", decode(batch=16, context=1))
    gemms = [op for op in a.ops if op.name in ("qkv projection", "mlp up/gate", "mlp down")]
    for op in gemms:
        assert op.intensity == pytest.approx(16, rel=0.02)


def test_kv_bytes_per_token():
    assert kv_bytes_per_token(load_model("llama-3-70b"), Parallel(), Precision()) == 327_680
    # DeepSeek-V3: the MLA latent, 576 elements per layer per token, not 2·heads·head_dim
    ds = load_model("deepseek-v3")
    assert kv_bytes_per_token(ds, Parallel(), Precision()) == 576 * 61 * 2
    assert kv_bytes_per_token(ds, Parallel(tp=8), Precision(kv_cache="fp8")) == 576 * 61


def test_sliding_window_caps_the_cache():
    gemma = load_model("gemma-2-9b")  # 21 local (4096) + 21 global layers
    full = kv_bytes_per_token(gemma, Parallel(), Precision())
    at_32k = kv_bytes_per_token(gemma, Parallel(), Precision(), context=32768)
    assert at_32k == pytest.approx(full * (0.5 + 0.5 * 4096 / 32768))
    assert kv_bytes_per_token(gemma, Parallel(), Precision(), context=1024) == full


# --- the one builder, phases as parameters ----------------------------------------------------


def test_decode_grows_with_context_and_is_flat_in_batch_while_weight_bound():
    ctx = [analyze("llama-3-8b", "h100", decode(8, c)).t_lower_s for c in (1024, 8192, 65536)]
    assert ctx[0] < ctx[1] < ctx[2]
    b1 = analyze("llama-3-8b", "h100", decode(1, 512)).t_lower_s
    b8 = analyze("llama-3-8b", "h100", decode(8, 512)).t_lower_s
    assert b8 == pytest.approx(b1, rel=0.06)  # weights dominate: 8 sequences cost ~the same


def test_tp_halves_weight_bytes_and_adds_all_reduces():
    one = analyze("llama-3-70b", "h100", decode(8, 2048), Parallel(tp=4))
    two = analyze("llama-3-70b", "h100", decode(8, 2048), Parallel(tp=8))
    assert two.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2, rel=0.01)
    assert two.link_bytes["scale-up"] > 0
    reduces = [op for op in two.ops if op.name.endswith("tp all-reduce")]
    assert len(reduces) == 2 and all(op.count == 80 for op in reduces)
    assert "scale-up" not in analyze("llama-3-70b", "h200", decode(8, 2048)).link_bytes
    # by hand: two all-reduces of 8 tokens·8192·2 B = 128 KiB per layer; at that size the
    # default (auto: the fastest kernel, NVLS on H100's switch) pushes the message into the
    # switch and reads the reduced one back: the message once each way
    (layer,) = two.layers
    assert layer.link_bytes == pytest.approx(2 * 8 * 8192 * 2)
    assert "link each" in model_text(two) and "link bytes" in model_text(two, explain=True)


def test_train_is_three_forwards_but_attention_has_its_own_backward():
    fwd = analyze("llama-3-8b", "h100", prefill(4, 4096))
    tr = analyze("llama-3-8b", "h100", train(4, 4096))
    rc = analyze("llama-3-8b", "h100", train(4, 4096, recompute=True))

    def layer_flops(a, attention,
                    kernel=lambda name: "norm" not in name and "activation" not in name):
        # the GEMMs' own FLOPs: a forward's up/gate runs SwiGLU in its epilogue
        return sum(op.count * sum(op.cost.flops.values()) if "up/gate" in op.name else op.flops
                   for op in a.ops if op.group != "model" and kernel(op.name)
                   and (op.name in ("attention", "attention backward")) == attention)

    # every op but attention: forward + 2x backward (3 forwards), 4 with recomputation
    assert layer_flops(tr, False) == pytest.approx(3 * layer_flops(fwd, False))
    assert layer_flops(rc, False) == pytest.approx(4 * layer_flops(fwd, False))
    # but the fused residual add + norm, whose backward kernel moves what its forward does
    # (ops.elementwise KINDS backward 1.0: 2 forwards, 3 recomputing)
    def norms(a):
        return layer_flops(a, False, lambda name: "norm" in name)
    assert norms(tr) == pytest.approx(2 * norms(fwd))
    assert norms(rc) == pytest.approx(3 * norms(fwd))
    # and SwiGLU's (Liger-Kernel: loads dc, a, b, stores da, db: 5/3 of the forward)
    swiglu = layer_flops(tr, False, lambda name: "activation" in name)
    epilogue = sum(op.flops - op.count * sum(op.cost.flops.values()) for op in fwd.ops
                   if op.name == "mlp up/gate")  # the forward's SwiGLU, in the epilogue
    assert epilogue > 0 and swiglu == pytest.approx((1 + 5 / 3) * epilogue)
    # attention: its forward once (twice recomputing) and FlashAttention-2's backward, which
    # recomputes S: 2.5x the forward's GEMMs (5 products against 2)
    att = next(op for op in fwd.ops if op.name == "attention")
    back = next(op for op in tr.ops if op.name == "attention backward")
    assert back.cost.flops["bf16"] == pytest.approx(2.5 * att.cost.flops["bf16"])
    assert layer_flops(rc, True) - layer_flops(tr, True) == pytest.approx(att.flops)
    assert rc.model_flops == pytest.approx(tr.model_flops)  # MFU ignores recomputation
    assert rc.hfu > rc.mfu
    # by hand, the model FLOPs: 6·N_body·T + 3x the causal attention + 6·h·V·T (training
    # scores every token); executed: attention is 1 + 2.5 forwards' GEMMs, not 3
    spec = load_model("llama-3-8b")
    p = param_counts(spec)
    tokens, n = 4 * 4096, 4096
    attention = 4 * spec.layers * spec.heads * spec.head_dim * n * (n + 1) / 2 * 4
    expected = (6 * (p.total - p.embedding - p.lm_head) * tokens + 3 * attention
                + 6 * spec.hidden * spec.vocab * tokens)
    assert tr.model_flops == pytest.approx(expected, rel=0.002)  # + elementwise (0.1%)
    assert tr.flops == pytest.approx(expected + 0.5 * attention, rel=0.002)


def test_prefill_flops_match_an_independent_count():
    # 2·(active non-embedding params)·tokens + causal attention 4·L·H·d·pairs + lm head
    spec = load_model("llama-3-8b")
    batch, n = 2, 8192
    a = analyze(spec, "h100", prefill(batch, n))
    p = param_counts(spec)
    body = p.active - p.embedding - p.lm_head
    pairs = n * (n + 1) / 2
    attention = 4 * spec.layers * spec.heads * spec.head_dim * pairs * batch
    lm_head = 2 * spec.hidden * spec.vocab * batch  # last token's logits only
    expected = 2 * body * batch * n + attention + lm_head
    assert a.flops == pytest.approx(expected, rel=0.01)


def test_moe_counts_active_experts_for_flops():
    spec = load_model("mixtral-8x7b")
    a = analyze(spec, "h100", prefill(1, 4096))
    p = param_counts(spec)
    assert p.active < 0.3 * p.total  # top-2 of 8 experts
    # by hand: 2·N_active_body·T + causal attention + the last token's logits
    n = 4096
    expected = (2 * (p.active - p.embedding - p.lm_head) * n
                + 4 * spec.layers * spec.heads * spec.head_dim * n * (n + 1) / 2
                + 2 * spec.hidden * spec.vocab)
    assert a.flops == pytest.approx(expected, rel=0.002)  # + elementwise and routers


def test_pipeline_bubble():
    one_f_one_b = Schedule("1f1b")  # named: none named, training takes zero-bubble
    base = analyze("llama-3-70b", "h100", train(64, 4096), Parallel(tp=8, pp=4, dp=2,
                                                                     microbatches=32),
                   schedule=one_f_one_b)
    fewer = analyze("llama-3-70b", "h100", train(64, 4096), Parallel(tp=8, pp=4, dp=2,
                                                                      microbatches=4),
                    schedule=one_f_one_b)
    ratio = fewer.t_lower_s / base.t_lower_s
    bubble = ((4 + 3) / 4) / ((32 + 3) / 32)
    assert ratio == pytest.approx(bubble, rel=0.05)


def test_placement_uses_scale_out_beyond_the_domain():
    a = analyze("llama-3-70b", "h100", train(64, 4096), Parallel(tp=8, dp=8))
    sync = [op for op in a.ops if op.name == "dp gradient all-reduce"]
    assert sync and a.link_bytes.get("scale-out", 0) > 0  # dp ranks sit in different nodes


def test_memory_fit_and_largest_batch():
    a = analyze("llama-3-8b", "h100", decode(8, 8192))
    m = a.memory
    assert m.fits and m.weights_bytes == pytest.approx(16.06e9, rel=0.01)
    assert m.max_batch >= 8
    bigger = analyze("llama-3-8b", "h100", decode(int(m.max_batch) + 8, 8192))
    assert not bigger.memory.fits
    assert analyze("llama-3-8b", "h100", decode(int(m.max_batch), 8192)).memory.fits


def test_largest_batch_by_hand():
    # Llama-3-70B, TP4 on H100 (81,559 MiB = 85.52e9 B exposed), 4096-token context:
    # weights 70.55e9·2/4 = 35.28 GB per chip; KV 80 layers·2·8 heads·128·2 B / 4 = 81,920 B
    # per token per chip, 335.5 MB per sequence -> (85.52 - 35.28) GB / 335.5 MB = 149.7
    spec = load_model("llama-3-70b")
    a = analyze(spec, "h100", decode(1, 4096), Parallel(tp=4))
    kv_per_sequence = spec.layers * 2 * spec.kv_heads * spec.head_dim * 2 * 4096 / 4
    weights = param_counts(spec).total * 2 / 4
    assert a.memory.kv_bytes_per_token == 81920
    assert a.memory.max_batch == int((85.52e9 - weights) / kv_per_sequence) == 149


@pytest.mark.parametrize(("model", "hw", "phase", "par", "needle"), [
    ("deepseek-v3", "h200", decode(64, 4096), Parallel(tp=4, ep=4),  # its own fp8 weights
     "the weights alone need 169 GB of"),
    ("llama-3-8b", "h100", train(8, 4096), Parallel(),
     "the weights, gradients and optimizer state alone need 128 GB"),
    ("llama-3-8b", "h100", decode(1, 2_000_000), Parallel(),
     "not even one sequence's KV cache"),
    ("llama-3-70b", "h100", train(64, 4096), Parallel(tp=8, pp=8, dp=8, microbatches=8),
     "largest batch that fits:"),
])
def test_report_says_why_nothing_fits(model, hw, phase, par, needle):
    a = analyze(model, hw, phase, par)
    assert needle in model_text(a)
    assert (a.memory.max_batch < 1) == ("nothing fits" in model_text(a))


def test_to_dict_has_the_cli_keys():
    d = analyze("qwen2.5-7b", "h100", decode(4, 1024)).to_dict()
    for key in ["t_lower_s", "t_upper_s", "flops", "bytes", "bound", "tpot_s", "tokens_per_s",
                "ops", "layers"]:
        assert key in d
    for key in ["weights_bytes", "kv_cache_bytes", "total_bytes", "capacity_bytes", "fits"]:
        assert key in d["memory"]
    json.dumps(d)
    p = analyze("qwen2.5-7b", "h100", prefill(1, 1024)).to_dict()
    assert p["ttft_s"] == p["t_lower_s"] and p["tpot_s"] is None


def test_every_catalog_model_analyses_in_every_phase():
    for name in list_models():
        for phase in (prefill(2, 512), decode(2, 512), train(2, 512)):
            a = analyze(name, "h200", phase)
            assert 0 < a.t_lower_s <= a.t_upper_s
            assert a.t_floor_s <= a.t_lower_s * (1 + 1e-9)
            assert abs(sum(op.share for op in a.ops) - 1) < 1e-9


# --- configs ---------------------------------------------------------------------------------


def test_config_file_and_directory(tmp_path):
    data = {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 4096,
            "num_hidden_layers": 4, "num_attention_heads": 8, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(data))
    spec = load_model(str(tmp_path))
    assert spec.kv_heads == 8 and spec.head_dim == 128
    assert load_model(str(tmp_path / "config.json")).layers == 4


@pytest.mark.parametrize(("data", "needle"), [
    ({"model_type": "mamba"}, "unsupported model_type 'mamba'"),
    ({"model_type": "llama", "hidden_size": -3}, "'hidden_size': must be a positive integer"),
    ({"model_type": "llama", "hidden_size": 64}, "'num_attention_heads': required"),
    ({"model_type": "llama", "hidden_size": 10**400}, "at most 9007199254740992, got a 401-digit"),
    ({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
      "num_hidden_layers": 10**9}, "'num_hidden_layers': must be at most 10000"),
    ([1, 2], "must hold a JSON object"),
])
def test_bad_configs(tmp_path, data, needle):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RooflineError, match=needle) as info:
        load_model(str(path))
    assert str(path) in str(info.value)


def test_unknown_model_and_hub_id_without_hub():
    with pytest.raises(RooflineError, match=r"unknown model 'llama-3-7b'.*did you mean"):
        load_model("llama-3-7b")
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        with pytest.raises(RooflineError, match=r"huggingface_hub is not installed"):
            load_model("meta-llama/Llama-3.2-1B")


@pytest.mark.parametrize(("par", "needle"), [
    (Parallel(tp=3), "must divide the 64 attention heads"),
    (Parallel(dp=3), "divisible by dp"),
    (Parallel(ep=2), "needs an MoE model"),
    (Parallel(pp=200), "exceeds the 80 layers"),
])
def test_bad_parallel(par, needle):
    with pytest.raises(RooflineError, match=needle):
        analyze("llama-3-70b", "h100", decode(4, 128), par)


# --- MFU (seed 001 §2.8) -----------------------------------------------------------------------


def test_seed_001_mfu_example_is_99_percent_with_a_warning():
    r = mfu(70e9, 2048 * 4096, 7, 512, "h100")
    assert r.model_flops == pytest.approx(3.52e18, rel=0.01)
    assert r.mfu == pytest.approx(0.99, abs=0.01)  # not 49% (DESIGN §4 item 1)
    assert r.warning and "implausibly high" in r.warning
    assert mfu(70e9, 2048 * 4096, 14, 512, "h100").warning is None  # ~50% is normal


def test_attention_term_counts_every_sequence():
    kw = dict(params=70e9, step_time_s=10, chips=512, hw="h100", layers=80, hidden=8192)
    one = mfu(tokens_per_step=4096 * 1024, seq_len=4096, **kw)
    two = mfu(tokens_per_step=4096 * 2048, seq_len=4096, **kw)
    assert two.attention_flops == pytest.approx(2 * one.attention_flops)
    assert one.attention_flops == pytest.approx(12 * 80 * 8192 * 4096**2 * 1024)
    longer = mfu(tokens_per_step=4096 * 1024, seq_len=8192, **kw)  # half as many sequences
    assert longer.attention_flops == pytest.approx(2 * one.attention_flops)


def test_mfu_refuses_infinite_input():
    with pytest.raises(RooflineError, match="params must be positive and finite"):
        mfu(float("inf"), 1e6, 1, 8, "h100")
    with pytest.raises(RooflineError, match="step_time_s must be positive and finite"):
        mfu(70e9, 1e6, float("inf"), 8, "h100")


def test_mfu_over_100_percent_and_bad_input():
    assert "exceeds 100%" in mfu(70e9, 2048 * 4096, 3, 512, "h100").warning
    with pytest.raises(RooflineError, match="step_time_s must be positive"):
        mfu(70e9, 1e6, 0, 8, "h100")
    with pytest.raises(RooflineError, match="needs all of"):
        mfu(70e9, 1e6, 1, 8, "h100", layers=80)
    assert np.isfinite(mfu(70e9, 1e6, 1, 8, "h100", recompute=True).hfu)


def test_gemma3_multimodal_config_reads_its_text_part(tmp_path):
    data = {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
        "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 256, "vocab_size": 262208, "sliding_window": 1024,
        "sliding_window_pattern": 6}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    spec = load_model(str(path))
    assert spec.sliding_window == 1024 and spec.tied_embeddings and spec.qk_norm
    assert [spec.uses_window(i) for i in range(6)] == [True] * 5 + [False]


def test_to_frame_needs_pandas():
    a = analyze("gpt2", "h100", decode(1, 128))
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(RooflineError, match="pip install pandas"):
            a.to_frame()
    else:
        frame = a.to_frame()
        assert len(frame) == len(a.ops) and "t_lower_s" in frame.columns


def test_vectorized_analysis_equals_scalar_point_by_point():
    batch = np.array([1, 8, 64, 256])[:, None]
    context = np.array([1024, 8192, 131072])[None, :]
    grid = analyze("gemma-2-9b", "h100", decode(batch, context), Parallel(tp=2))
    assert grid.t_lower_s.shape == (4, 3)
    for i, b in enumerate(batch[:, 0]):
        for j, c in enumerate(context[0]):
            one = analyze("gemma-2-9b", "h100", decode(int(b), int(c)), Parallel(tp=2))
            assert grid.t_lower_s[i, j] == pytest.approx(one.t_lower_s, rel=1e-12)
            assert grid.t_upper_s[i, j] == pytest.approx(one.t_upper_s, rel=1e-12)
            assert grid.bound[i, j] == one.bound
            assert grid.memory.fits[i, j] == one.memory.fits
            assert grid.memory.max_batch[i, j] == one.memory.max_batch
            assert grid.memory.max_context[i, j] == one.memory.max_context
            assert grid.mfu[i, j] == pytest.approx(one.mfu, rel=1e-12)


def test_max_context_is_the_last_that_fits():
    # gemma at batch 32: past its 4096 window (only global layers grow), below its 8192 limit
    for name, batch, par in [("qwen2.5-7b", 64, Parallel()), ("gemma-2-9b", 32, Parallel()),
                             ("llama-3-70b", 128, Parallel(tp=4))]:
        ctx = analyze(name, "h100", decode(batch, 1024), par).memory.max_context
        assert ctx < load_model(name).max_context
        assert analyze(name, "h100", decode(batch, int(ctx)), par).memory.fits
        assert not analyze(name, "h100", decode(batch, int(ctx) + 1), par).memory.fits
        # speculative decoding: its k new tokens ride on the context too
        ctx4 = analyze(name, "h100", decode(batch, 1024, k=4), par).memory.max_context
        assert analyze(name, "h100", decode(batch, int(ctx4), k=4), par).memory.fits
        assert not analyze(name, "h100", decode(batch, int(ctx4) + 1, k=4), par).memory.fits


def test_max_context_is_capped_by_the_model():
    phi = analyze("phi-3-mini", "h100", decode(1, 1024))  # every layer windowed
    # the step's own new token is the model's last position
    assert phi.memory.max_context == load_model("phi-3-mini").max_context - 1
    assert phi.memory.context_at_model_limit


@pytest.mark.parametrize(("tp", "ep", "dp"), [(8, 8, 1), (8, 1, 1), (1, 8, 8), (4, 8, 2)])
def test_every_parameter_lives_on_some_chip(tp, ep, dp):
    from roofline.models import local_params

    spec = load_model("deepseek-v3")
    chips = tp * dp
    held = local_params(spec, Parallel(tp=tp, ep=ep, dp=dp)) * chips
    p = param_counts(spec)
    # replicated pieces (norms, routers, MLA down-projections, and experts under pure DP) make
    # the sum exceed the model; nothing may be missing
    assert held >= p.total * 0.999
    if dp == 1:  # no data-parallel replicas: little but norms and routers is repeated
        assert held < p.total * 1.1


def test_ep_dispatch_stays_inside_the_node_when_it_fits():
    a = analyze("deepseek-v3", "h100", decode(64, 2048), Parallel(tp=8, ep=8))
    a2a = [op for op in a.ops if "all-to-all" in op.name]
    assert a2a and "scale-out" not in a.link_bytes  # 8-way EP on one 8-GPU node


def test_training_moves_each_collective_twice_not_thrice():
    par = Parallel(tp=8)
    fwd = analyze("llama-3-70b", "h100", prefill(8, 4096), par).link_bytes["scale-up"]
    tr = analyze("llama-3-70b", "h100", train(8, 4096), par).link_bytes["scale-up"]
    rc = analyze("llama-3-70b", "h100", train(8, 4096, recompute=True), par)
    assert tr == pytest.approx(2 * fwd) and rc.link_bytes["scale-up"] == pytest.approx(3 * fwd)
    # by hand: 2 all-reduces per layer forward + 2 backward, each (NVLS on H100, what auto
    # picks) T·h·2 bytes each way
    spec = load_model("llama-3-70b")
    assert tr == pytest.approx(4 * 8 * 4096 * spec.hidden * 2 * spec.layers)


def test_context_parallel_splits_the_work_evenly():
    one = analyze("llama-3-8b", "h100", prefill(1, 32768))
    four = analyze("llama-3-8b", "h100", prefill(1, 32768), Parallel(cp=4))
    assert four.model_flops * 4 == pytest.approx(one.model_flops, rel=1e-9)
    # by hand: each rank gathers the other ranks' K and V, (cp-1)/cp·S·2·Hkv·d·2 B per layer
    spec = load_model("llama-3-8b")
    gather = 3 / 4 * 32768 * 2 * spec.kv_heads * spec.head_dim * 2 * spec.layers
    assert four.link_bytes == {"scale-up": pytest.approx(gather)}


def test_training_on_chips_without_an_fp32_peak():
    for hw in ("v5e", "gaudi2", "tpu-7x"):
        a = analyze("llama-3-8b", hw, train(8, 4096))
        assert a.t_lower_s > 0


def test_mfu_causal_convention_matches_the_model():
    kw = dict(params=70e9, tokens_per_step=4096 * 64, step_time_s=1, chips=8, hw="h100",
              layers=80, hidden=8192, seq_len=4096)
    full, causal = mfu(**kw), mfu(**kw, causal=True)
    assert causal.attention_flops == pytest.approx(full.attention_flops / 2)
    # `roofline mfu` on the model's own bound step time gives the model's MFU: the two
    # count the same useful work (6·N_non-embedding·T + causal attention)
    spec = load_model("llama-3-8b")
    p = param_counts(spec)
    a = analyze(spec, "h100", train(4, 4096))
    r = mfu(p.total - p.embedding, 4 * 4096, a.t_lower_s, 1, "h100", layers=spec.layers,
            hidden=spec.hidden, seq_len=4096, causal=True)
    assert r.mfu == pytest.approx(a.mfu, rel=0.005)


def test_pipeline_micro_batches_re_read_the_stage_weights():
    # each micro-batch streams the stage's weights from HBM again: never faster than that
    from roofline.models import local_params

    hbm = load_chip("h100").level("hbm").bandwidth_Bps
    for m in (1, 2, 4, 8):
        par = Parallel(pp=4, microbatches=m)
        a = analyze("llama-3-70b", "h100", decode(64, 4096), par)
        stage_weights = local_params(load_model("llama-3-70b"), par) * 2
        # a steady stream of decode steps keeps the pipeline full: max(m, pp) slots
        assert a.t_lower_s >= max(m, 4) * stage_weights / hbm * 0.99
        assert a.bytes["hbm"] >= m * stage_weights * 0.99


def test_pipelined_decode_keeps_the_pipeline_full():
    """Serving engines run pp micro-batches of the running batch in flight: a decode step of
    64 sequences as 2 micro-batches over 2 stages takes 2 slots of 32 sequences each, as
    serve's iteration (decode of 32 with one micro-batch: 2 slots) has it. A fill and drain
    charged per token made it 18.9 ms where serve planned 12.6 ms."""
    par2 = Parallel(tp=2, pp=2, microbatches=2)
    prec = Precision(weights="fp8", activations="fp8", kv_cache="fp8")
    two = analyze("llama-3.1-70b", "h100", decode(64, 2048), par2, prec)
    serve_way = analyze("llama-3.1-70b", "h100", decode(32, 2048), Parallel(tp=2, pp=2), prec)
    assert two.t_lower_s == pytest.approx(serve_way.t_lower_s, rel=1e-12)
    assert two.bubble_fraction == 0
    one = analyze("llama-3.1-70b", "h100", decode(64, 2048), Parallel(tp=2, pp=2), prec)
    assert two.t_lower_s < one.t_lower_s  # smaller micro-batches, the same two slots
    # a training step still fills and drains the pipeline
    step = analyze("llama-3.1-70b", "h100", train(2, 2048), par2, schedule=Schedule("1f1b"))
    assert step.bubble_fraction == 0.5
    # a prefill does not: its prompts' chunks follow one another through the stages
    # (SGLang's chunked pipeline parallelism), so one prompt over 2 stages is bounded by one
    # stage's work: half of the whole pass, where a serialised pass charged both stages
    pre = analyze("llama-3.1-70b", "h100", prefill(2, 2048), par2, prec)
    assert pre.bubble_fraction == 0
    one_stage = analyze("llama-3.1-70b", "h100", prefill(1, 2048), Parallel(tp=2, pp=2), prec)
    whole = analyze("llama-3.1-70b", "h100", prefill(1, 2048), Parallel(tp=2), prec)
    assert one_stage.t_lower_s < 0.56 * whole.t_lower_s  # the LM head's stage: a bit over half


def test_expert_parallel_gradients_are_not_all_reduced_over_unique_experts():
    a = analyze("mixtral-8x7b", "h100", train(8, 4096), Parallel(ep=8, dp=8))
    names = {op.name: op for op in a.ops}
    assert "expert gradient all-reduce" not in names  # ep = dp: one copy of each expert
    dense_params = 1.606e9  # attention, norms, routers, embeddings of Mixtral
    assert names["dp gradient all-reduce"].link_bytes == pytest.approx(
        dense_params * 2, rel=0.01)  # NVLS (auto on H100): the bf16 gradients once each way
    tp = analyze("mixtral-8x7b", "h100", train(8, 4096), Parallel(tp=2, dp=4))
    assert "expert gradient all-reduce" in {op.name for op in tp.ops}  # replicated over dp


def test_moe_decode_names_the_expert_critical_batch():
    # experts see batch·top_k/E tokens each: E/top_k times the batch their own shard needs
    from roofline.solve import critical_batch
    a = analyze("qwen3-30b-a3b", "h200", decode(64, 1024), Parallel(tp=4, ep=4))
    # EP: whole experts, up/gate 2048 x 1536 and down 768 x 2048; the down needs more
    up, down = critical_batch("h200", k=2048, n=1536), critical_batch("h200", k=768, n=2048)
    assert up < down
    assert a.decode_expert_compute_bound_batch == pytest.approx(down * 128 / 8)
    # fp8 DeepSeek-V3 at TP 8: the kv down-projection (7168 x 576) and the experts' shards
    # are never compute-bound (2/576 of activation bytes per FLOP outweigh 2·BW/P)
    v3 = analyze("deepseek-v3", "h200", decode(64, 1024), Parallel(tp=8))
    assert v3.decode_compute_bound_batch == v3.decode_expert_compute_bound_batch == np.inf


def test_the_weight_gemms_critical_batch_uses_each_chips_shard_not_the_large_matrix_limit():
    # by hand, H100 bf16: M* = s_w / (2·BW/P - s_x/N - s_o/K), BW 3.35e12, P 989.4e12;
    # Llama-3-70B at TP 4 holds QKV 8192 x (16 + 2·2)·128 = 8192 x 2560 and the attention
    # output 2048 x 8192 per chip: 2 / (6.7/989.4 - 2/2560 - 2/8192) = 348.0 and
    # 2 / (6.7/989.4 - 2/8192 - 2/2048) = 360.3; the large-matrix limit is 2·989.4/6.7 = 295.3
    a = analyze("llama-3-70b", "h100", decode(8, 1024), Parallel(tp=4))
    ridge = 2 * 3.35e12 / 989.4e12
    assert 2 / (ridge - 2 / 2560 - 2 / 8192) == pytest.approx(348.0, abs=0.05)
    assert a.decode_compute_bound_batch == pytest.approx(2 / (ridge - 2 / 8192 - 2 / 2048))
    assert a.decode_compute_bound_batch == pytest.approx(360.3, abs=0.05)
    assert a.decode_compute_bound_batch_limit == pytest.approx(2 * 989.4 / 6.7)
    # a whole matrix (TP 1) is nearer the limit; every shard needs more than the limit
    one = analyze("llama-3-70b", "h100", decode(8, 1024))
    assert a.decode_compute_bound_batch_limit < one.decode_compute_bound_batch \
        < a.decode_compute_bound_batch
    # and the batch is the DP replicas' together
    dp = analyze("llama-3-70b", "h100", decode(16, 1024), Parallel(tp=4, dp=2))
    assert dp.decode_compute_bound_batch == pytest.approx(2 * a.decode_compute_bound_batch)
    assert analyze("llama-3-8b", "h100", decode(8, 1024)).decode_expert_compute_bound_batch \
        is None


def test_pipeline_stage_holds_a_whole_embedding_table():
    from roofline.models import local_params

    spec = load_model("llama-3-8b")
    counts = param_counts(spec)
    body = counts.total - counts.embedding - counts.lm_head
    assert local_params(spec, Parallel(pp=4)) == pytest.approx(body / 4 + counts.embedding,
                                                               rel=1e-3)


def test_context_parallel_ranks_keep_their_own_chunk_of_the_cache():
    one = analyze("llama-3-8b", "h100", prefill(1, 131072)).memory
    four = analyze("llama-3-8b", "h100", prefill(1, 131072), Parallel(cp=4)).memory
    assert four.kv_cache_bytes == pytest.approx(one.kv_cache_bytes / 4)


def test_training_activations_include_logits_and_the_recomputed_layer():
    spec = load_model("llama-3-8b")
    plain = analyze(spec, "h100", train(8, 4096)).memory.activations_bytes
    recompute = analyze(spec, "h100", train(8, 4096, recompute=True)).memory.activations_bytes
    tokens, h, layers = 8 * 4096, spec.hidden, spec.layers
    logits = tokens * spec.vocab * 4
    assert plain == pytest.approx(34 * tokens * h * layers + logits)
    assert recompute == pytest.approx(2 * tokens * h * layers + 34 * tokens * h + logits)


def test_training_activations_are_counted_for_the_models_own_shapes():
    from roofline.models.memory import kept_per_token_layer
    # Korthikanti et al. 2022 (GPT-3: MHA, 4h GeLU, dropout masks): 34·h bytes per token per
    # layer at 16-bit: norms 2h + attention (h + q + k + v + o = 5h) + MLP (h + 4h + 4h) =
    # 16h elements = 32h bytes, plus two 1-byte masks of h
    gpt3 = load_model("gpt3-175b")
    assert kept_per_token_layer(gpt3, Parallel(), 2.0, dropout=True) == 34 * gpt3.hidden
    assert kept_per_token_layer(gpt3, Parallel(), 2.0) == 32 * gpt3.hidden  # no dropout
    # Llama-3.1-405B (GQA 128/8, SwiGLU f = 3.25h, no dropout): 2·(2 + 1 + 1 + 2/16 + 1 +
    # 1 + 3·3.25) = 31.75·h; sequence parallelism splits all of it over tp
    big = load_model("llama-3.1-405b")
    assert kept_per_token_layer(big, Parallel(), 2.0) == 31.75 * big.hidden
    assert kept_per_token_layer(big, Parallel(tp=8), 2.0) == 31.75 * big.hidden / 8
    # past tp = kv_heads each rank keeps a whole K and V head: more than 1/tp of them
    assert kept_per_token_layer(big, Parallel(tp=16), 2.0) > 31.75 * big.hidden / 16


def test_meta_llama3_405b_layout_fits_an_h100():
    # Llama 3 paper §3.3.2: TP 8, PP 16, DP 128, 8K sequences, micro-batch 1, 16
    # micro-batches on 16,384 H100 80 GB, optimizer state sharded over DP. At 34·h the first
    # stage's 16 micro-batches in flight needed 72.4 GB of activations; at 31.75·h, 67.6
    from roofline.models.memory import kept_per_token_layer
    a = analyze("llama-3.1-405b", "h100", train(2048, 8192),
                Parallel(tp=8, pp=16, dp=128, microbatches=16, zero=1))
    spec = load_model("llama-3.1-405b")
    layer = kept_per_token_layer(spec, Parallel(tp=8), 2.0) * 8192  # one micro-batch
    logits = 8192 * spec.vocab / 8 * 4
    assert a.memory.activations_bytes == pytest.approx(layer * 126 / 16 * 16 + logits)
    assert a.memory.activations_bytes == pytest.approx(67.64e9, rel=1e-3)
    assert a.memory.fits and a.memory.total_bytes < a.memory.capacity_bytes


def test_mfu_command_agrees_with_the_model_analysis():
    # the same step through both paths: N without the input embedding, causal attention
    spec = load_model("llama-3-8b")
    a = analyze(spec, "h100", train(8, 4096), Parallel(dp=8))
    counts = param_counts(spec)
    r = mfu(counts.total - counts.embedding, 8 * 4096, a.t_lower_s, 8, "h100",
            layers=spec.layers, hidden=spec.hidden, seq_len=4096, causal=True)
    assert r.mfu == pytest.approx(a.mfu, rel=0.01)


def test_ep_with_tp_gathers_the_expert_outputs_instead_of_reducing():
    a = analyze("deepseek-v3", "h100", decode(64, 2048), Parallel(tp=8, ep=8))
    moe = {op.name: op for op in a.ops if op.group == "moe layer"}
    assert "mlp tp all-gather" in moe and "mlp tp all-reduce" not in moe
    # ranks hold disjoint tokens after the combine: (tp-1)/tp of the activations, not an
    # all-reduce's (auto's NVLS at this size on H100: the activations once)
    assert moe["mlp tp all-gather"].link_bytes == pytest.approx(
        moe["attention tp all-reduce"].link_bytes * 7 / 8)


def test_speculative_tpot_is_the_step_over_its_tokens():
    a = analyze("llama-3-8b", "h100", decode(1, 4096, 4))
    assert a.tpot_s == pytest.approx(a.t_lower_s / 4)
    assert a.tokens_per_s == pytest.approx(1 / a.tpot_s)  # one sequence: the two agree
    text = model_text(a)
    assert "for 4 tokens per sequence; TPOT (all drafts accepted) >=" in text


def test_the_floor_never_falls_as_the_batch_grows():
    """The floor takes each collective's least demand of any algorithm, resource by resource:
    with the chosen algorithm's (one-shot: 3.5x tree's bytes) batch 105 on MI300X had a
    higher floor than batch 106 (tree), though 105 could run tree too."""
    for model, chip in [("llama-3.1-8b", "mi300x"), ("llama-3.1-8b", "b200"),
                        ("gemma-3-27b", "mi300x")]:
        batch = np.arange(96, 129, dtype=float)
        grid = analyze(model, chip, decode(batch, 512), Parallel(tp=8))
        assert np.all(np.diff(grid.t_floor_s) >= -1e-12 * grid.t_floor_s[1:]), (model, chip)
        assert np.all(grid.t_floor_s <= grid.t_lower_s * (1 + 1e-12))
        for b in (105, 106):  # one point alone is the grid's point
            assert analyze(model, chip, decode(b, 512), Parallel(tp=8)).t_floor_s == \
                pytest.approx(grid.t_floor_s[b - 96], rel=1e-12)


@pytest.mark.parametrize("name", ["deepseek-v3", "llama-3-8b", "mixtral-8x7b", "qwen3-30b-a3b",
                                  "qwen3-next-80b-a3b"])
def test_model_flops_do_not_depend_on_the_layout(name):
    """Work every TP rank repeats (norms, residual adds, the router, MLA's down projections,
    K/V heads shared past tp = kv_heads) is the model's once: the step's model FLOPs over
    all chips are the same under TP 8 as under TP 1 (DeepSeek-V3's were 18% higher under
    TP 8, and so its MFU; Qwen3-30B-A3B's, with 4 KV heads, 2.9%)."""
    total = []
    for par in (Parallel(tp=8, dp=2, microbatches=4), Parallel(tp=1, dp=16, microbatches=4)):
        a = analyze(name, "h100", train(64, 2048), par)
        total.append(float(a.model_flops) * par.chips)
    assert total[0] == pytest.approx(total[1], rel=1e-12)


def test_ep_sends_a_token_once_per_destination_rank_and_node():
    # DeepSeek-V3, EP 32 over 4 8-GPU nodes: the network carries one copy per remote node
    # holding one of a token's experts (DeepEP), not one per remote expert (8 x 24/32 = 6).
    # Its router picks 4 of 8 groups of 32 experts (n_group, topk_group), then 8 experts in
    # them: a node holds 2 groups, j of them chosen (hypergeometric: 15, 40, 15 of 70 for
    # j = 0, 1, 2), and is hit with P = sum_j P(j)·(1 - C(128 - 32j, 8)/C(128, 8)).
    # Megatron-Bridge's DeepSeek-V3 on 256 B200 beat the per-expert bound by 1.35x
    import math

    phase, par = train(4096, 4096), Parallel(pp=8, dp=32, ep=32, microbatches=128)
    a = analyze("deepseek-v3", "b200", phase, par)
    dispatch = next(op for op in a.ops if op.name == "ep dispatch all-to-all")

    def miss(left: int) -> float:
        return math.comb(left, 8) / math.comb(128, 8)

    hit = (40 * (1 - miss(96)) + 15 * (1 - miss(64))) / 70
    assert 3 * hit == pytest.approx(2.196, abs=1e-3)  # not 2.7 as unrestricted routing
    per_copy = dispatch.cost.link_bytes["scale-out"] / (3 * hit)
    inside = analyze("deepseek-v3", "b200", phase, Parallel(pp=8, dp=32, ep=8,
                                                            microbatches=128))
    flat = next(op for op in inside.ops if op.name == "ep dispatch all-to-all")
    assert "scale-out" not in flat.cost.link_bytes
    # the per-copy volume is the tokens' hidden vectors (1/top_k of the all-to-all message,
    # every copy of which the expected time keeps)
    message = flat.cost.runs.link_bytes["scale-up"] / (7 / 8)
    assert per_copy == pytest.approx(message / 8, rel=1e-9)
    # inside one node one copy per destination rank: a rank of EP 8 holds one group, chosen
    # with P = 4/8, then hit with 1 - C(96, 8)/C(128, 8): 7·P = 3.2 of the 8·7/8 copies (4.6
    # under unrestricted routing); across nodes a rank holds a quarter of a group, 31·P(rank
    # hit) of 8·31/32
    rank_hit = 0.5 * (1 - miss(96))
    assert flat.cost.link_bytes["scale-up"] == pytest.approx(
        flat.cost.runs.link_bytes["scale-up"] * 7 * rank_hit / 7, rel=1e-12)
    of_32 = 0.5 * (1 - miss(120))
    assert dispatch.cost.link_bytes["scale-up"] == pytest.approx(
        dispatch.cost.runs.link_bytes["scale-up"] * 31 * of_32 / (8 * 31 / 32), rel=1e-12)
    assert "one copy per destination" in dispatch.cost.name
    explained = dispatch.cost.explain()
    assert any("one copy per destination domain" in line for line in explained)
    assert any("one copy per destination rank" in line for line in explained)
    # the expected time keeps every copy, in a CUDA graph too (the measured kernels' pace)
    from roofline.expect import expected

    per_copy = dispatch.cost.runs
    assert per_copy is not None and per_copy.link_bytes["scale-out"] > dispatch.cost.link_bytes[
        "scale-out"]
    for graphs in (False, True):
        assert expected(dispatch.cost, "b200", cuda_graphs=graphs).t_s == pytest.approx(
            expected(per_copy, "b200", cuda_graphs=graphs).t_s)
    # a group that does not fill whole domains (12 ranks on 8-GPU nodes: 2 domains of 6)
    from roofline.models.graph import build
    from roofline.models.step import Precision

    rows = build(load_model("kimi-k2"), train(4104, 4096), Parallel(dp=12, ep=12),
                 Precision(), load_chip("h100"), block_q=128)
    uneven = next(r for r in rows if r.name == "ep dispatch all-to-all").cost
    hit = 1 - math.comb(384 - 192, 8) / math.comb(384, 8)
    assert uneven.link_bytes["scale-out"] / uneven.runs.link_bytes["scale-out"] == \
        pytest.approx(hit / (8 * 0.5))


def test_an_ep_that_does_not_divide_the_experts_spreads_them_evenly():
    # DeepSeek-V3's 256 experts over EP 72 (LMSYS's 9 decode nodes, EPLB with 32 redundant
    # copies) or EP 48: E/ep experts per rank on average, between the dividing layouts
    def weights(ep: int) -> float:
        a = analyze("deepseek-v3", "h100", decode(ep, 2048), Parallel(dp=ep, ep=ep))
        return a.memory.weights_bytes
    assert weights(64) > weights(72) > weights(128)
    assert weights(32) > weights(48) > weights(64)
    with pytest.raises(RooflineError, match="needs an MoE model"):
        analyze("llama-3-8b", "h100", decode(8, 128), Parallel(dp=8, ep=8))


def test_ep_dispatch_goes_out_in_fp8_where_the_experts_take_fp8():
    # DeepSeek-V3 quantizes the tokens to FP8 before the MoE up-projections and dispatches
    # them so, combining in BF16 (arXiv:2412.19437 §3.3.2; DeepEP sends FP8 dispatch, BF16
    # combine): with its fp8 checkpoint the dispatch moves half the combine's bytes
    from dataclasses import replace

    from roofline.models import model_precision

    def ep_bytes(model, prec=None):
        a = analyze(model, "h800", decode(256, 4096), Parallel(dp=16, ep=16), prec)
        return [sum(op.cost.link_bytes.values()) for name in ("dispatch", "combine")
                for op in a.ops if op.name == f"ep {name} all-to-all"]

    spec = load_model("deepseek-v3")
    assert model_precision(spec).ep_dispatch == "fp8"
    dispatch, combine = ep_bytes("deepseek-v3")
    assert dispatch == pytest.approx(combine / 2, rel=1e-12)
    # bf16 experts and GEMMs: the activation dtype both ways; fp8 GEMMs (training) or a
    # dtype named: that one
    bf16 = model_precision(spec, "bf16")
    assert bf16.ep_dispatch == "bf16"
    assert replace(bf16, matmul="fp8").ep_dispatch == "fp8"
    assert replace(bf16, matmul="mxfp8").ep_dispatch == "mxfp8"
    assert replace(bf16, dispatch="bf16", matmul="fp8").ep_dispatch == "bf16"
    assert replace(bf16, weights="int8").ep_dispatch == "bf16"  # W8A16: tokens stay bf16
    dispatch, combine = ep_bytes("deepseek-v3", bf16)
    assert dispatch == pytest.approx(combine, rel=1e-12)


def test_qwen3_normalises_each_head_of_q_and_k():
    # Qwen3-32B: 64 query and 8 KV heads of 128; a decode step of 8 tokens normalises
    # 8 x 72 x 128 = 73,728 elements per layer, read and written in bf16 (4 B each) with
    # rmsnorm's 4 operations, over 64 layers; Llama (no qk_norm) has no such op
    a = analyze("qwen3-32b", "h100", decode(batch=8, context=1024))
    op = next(o for o in a.ops if o.name == "q / k norm")
    assert op.count == 64
    assert op.hbm_bytes == 64 * 73_728 * 4 and op.flops == 64 * 73_728 * 4
    assert not [o for o in analyze("llama-3-8b", "h100", decode(batch=8, context=1024)).ops
                if o.name == "q / k norm"]
