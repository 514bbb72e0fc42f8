"""What would move an op: every lever is a re-evaluation, so its numbers must agree."""

import pytest

from roofline import evaluate, load_chip, matmul
from roofline.levers import ATTENTION_LEVERS, ELEMENTWISE_LEVERS, MATMUL_LEVERS, what_if
from roofline.ops import elementwise
from roofline.ops.attention import attention

H100 = load_chip("h100")


def rows_by_label(op, kwargs, levers, chip=H100):
    base = evaluate(op(**kwargs), chip)
    return {r.label: r for r in what_if(op, kwargs, chip, levers, base)}, base


def test_decode_attention_levers():
    kw = dict(batch=1, q_len=1, kv_len=4096, heads=64, kv_heads=8, impl="decode")
    rows, _ = rows_by_label(attention, kw, ATTENTION_LEVERS)
    assert "FlashAttention (S, P stay on chip)" not in rows  # already not naive
    assert rows["4x batch (sequences)"].speedup == pytest.approx(1.0)  # DESIGN §4 item 3
    assert rows["fp8 KV cache"].speedup == pytest.approx(2.0, rel=0.01)
    assert rows["4 query tokens per step (speculative decoding)"].speedup > 3.9


def test_naive_attention_flash_lever():
    kw = dict(batch=1, q_len=8192, kv_len=8192, heads=32, kv_heads=8, impl="naive")
    rows, base = rows_by_label(attention, kw, ATTENTION_LEVERS)
    flash = rows["FlashAttention (S, P stay on chip)"]
    assert base.bound == "hbm" and flash.speedup > 4 and flash.bound == "compute"


def test_matmul_levers_and_chip_without_fp8():
    kw = dict(m=128, k=8192, n=8192)
    rows, _ = rows_by_label(matmul, kw, MATMUL_LEVERS)
    assert rows["4x more tokens per weight read (batching)"].bound == "compute"
    # by hand: both HBM-bound on H100 (3.35 TB/s); bf16 moves 2·(128·8192·2 + 8192²) B =
    # 138.4 MB = 41.3 µs, int8 weights 2·128·8192·2 + 8192² B = 71.3 MB = 21.3 µs -> 1.94x
    act, weights = 2 * 128 * 8192 * 2, 8192 * 8192
    int8 = rows["int8 weights (weight-only)"]
    assert int8.bound == "hbm"
    assert int8.speedup == pytest.approx((act + 2 * weights) / (act + weights), rel=1e-9)
    assert int8.speedup == pytest.approx(1.94, abs=0.005)
    a100_rows, _ = rows_by_label(matmul, kw, MATMUL_LEVERS, load_chip("a100"))
    assert "fp8 activations and weights (fp8 peak)" not in a100_rows  # no fp8 peak on A100


def test_fusion_removes_memory_bound():
    rows, _ = rows_by_label(elementwise, dict(n=10**7, kind="silu", dtype="bf16"),
                               ELEMENTWISE_LEVERS)
    fused = rows["fused into its neighbour (no HBM round trip)"]
    assert fused.bound == "sfu" and fused.speedup > 4  # then silu's exp is the wall


def test_model_levers_re_analyse_the_step():
    from roofline.levers import model_what_if
    from roofline.models import Parallel, Precision, analyze, decode

    phase, par, prec = decode(16, 4096), Parallel(tp=4), Precision()
    rows = {r.label: r for r in model_what_if("llama-3-70b", H100, phase, par, prec)}
    base = analyze("llama-3-70b", "h100", phase, par, prec)
    int4 = analyze("llama-3-70b", "h100", phase, par, Precision(weights="int4-g128"))
    assert rows["int4 weights, group-128 scales"].speedup == pytest.approx(
        int4.tokens_per_s / base.tokens_per_s)
    # by hand: TPOT >= (weights + KV)/HBM + 160 all-reduces (2 per layer) in the alpha-beta
    # model: the two-shot kernel (what auto picks for 256 KiB on 4 ranks): two alphas, no
    # NCCL call, 2·3/4 x the 16·8192·2 B message over NVLink; residuals and norms the rest
    from roofline.models import load_model, param_counts
    from roofline.ops.collectives import choose_algorithm

    spec, hbm = load_model("llama-3-70b"), H100.level("hbm").bandwidth_Bps
    p = param_counts(spec)
    kv = 16 * spec.layers * 2 * spec.kv_heads * spec.head_dim * 2 * 4096 / 4
    nvlink = H100.link("scale-up")
    # NVLS (no NCCL base latency, as in NCCL's own cost model): 2 steps, the message once
    assert choose_algorithm("all-reduce", 16 * spec.hidden * 2, 4, H100) == "nvls"
    latency = 2 * spec.layers * (2 * nvlink.latency_s + 16 * spec.hidden * 2
                                 / nvlink.bandwidth_Bps)
    body = p.total - p.embedding - p.lm_head  # int4 leaves the LM head in bf16
    for analysis, bytes_per_weight in [(base, 2), (int4, 0.5 + 2 / 128)]:
        hand = ((body * bytes_per_weight + p.lm_head * 2) / 4 + kv) / hbm + latency
        assert hand <= analysis.tpot_s <= 1.03 * hand
    # 4.39 ms of HBM, 0.19 ms of alphas (160 NVLS all-reduces of 2 x 0.6 us), 0.09 ms of
    # their bytes on NVLink (160 x 256 KiB / 450 GB/s); norms (sequence-parallel, 4 tokens
    # a rank), residuals and SwiGLU's epilogue output the rest
    assert int4.tpot_s == pytest.approx(4.735e-3, rel=0.01)
    assert rows["4 tokens per step (speculative decoding, all drafts accepted)"].speedup > 3
    a100 = {r.label for r in model_what_if("llama-3-8b", load_chip("a100"), phase,
                                           Parallel(), prec)}
    assert not any(label.startswith("fp8 weights") for label in a100)  # no fp8 peak


def test_model_levers_fit_the_phase():
    from roofline.levers import model_what_if
    from roofline.models import Parallel, Precision, train
    from roofline.models.schedule import COMMON

    def labels(schedule=None):
        return {r.label for r in model_what_if("llama-3-8b", H100, train(8, 4096),
                                               Parallel(tp=8), Precision(), schedule=schedule)}

    # no KV cache, no int4; fp8 training runs fp8 GEMMs on bf16 master weights; the TP
    # overlap is a lever of the common schedule (named), the headline already has it
    levers = {"2x batch", "fp8 GEMMs (--matmul-dtype fp8)",
              "2x tensor parallelism (twice the chips)",
              "tp 4 x pp 2 (the same chips; 2 micro-batches)"}
    assert labels(COMMON) == {*levers, "TP collectives overlapped with their GEMMs (--tp-overlap)"}
    assert labels() == levers


def test_model_levers_for_a_step_its_links_hold_back():
    # TP 16 over two H100 nodes: the levers that touch the links (were missing): the TP
    # collectives overlapped, and the same 16 chips as tp 8 x pp 2; none when already so
    from roofline.levers import model_what_if
    from roofline.models import Parallel, Precision, analyze, decode
    from roofline.models.schedule import Schedule

    phase, par, prec = decode(64, 4096), Parallel(tp=16), Precision()
    rows = {r.label: r for r in model_what_if("llama-3-70b", H100, phase, par, prec)}
    base = analyze("llama-3-70b", H100, phase, par, prec)
    overlap = analyze("llama-3-70b", H100, phase, par, prec, schedule=Schedule(tp_overlap=True))
    split = analyze("llama-3-70b", H100, phase, Parallel(tp=8, pp=2, microbatches=2), prec)
    tp_overlap = rows["TP collectives overlapped with their GEMMs (--tp-overlap)"]
    assert tp_overlap.speedup == pytest.approx(overlap.tokens_per_s / base.tokens_per_s)
    assert tp_overlap.speedup > 1.2
    swap = rows["tp 8 x pp 2 (the same chips; 2 micro-batches)"]
    assert swap.speedup == pytest.approx(split.tokens_per_s / base.tokens_per_s)
    assert swap.speedup > 1
    already = {r.label for r in model_what_if("llama-3-70b", H100, phase, par, prec,
                                              schedule=Schedule(tp_overlap=True))}
    assert not any("overlapped" in label for label in already)
    serial = {r.label: r for r in model_what_if("llama-3-70b", H100, phase, par, prec,
                                                schedule=Schedule(overlap=False))}
    assert "collectives overlapped as the default schedule has them" in serial
    # after --no-overlap the TP overlap goes on top of the default overlaps (it was 1x)
    both = serial["TP collectives overlapped with their GEMMs (--tp-overlap, without "
                  "--no-overlap)"]
    assert both.speedup == pytest.approx(overlap.tokens_per_s / analyze(
        "llama-3-70b", H100, phase, par, prec, schedule=Schedule(overlap=False)).tokens_per_s)
    assert both.speedup > 1.2
    single = {r.label for r in model_what_if("llama-3-8b", H100, phase, Parallel(), prec)}
    assert not any("overlapped" in label or " x pp " in label for label in single)


def test_model_levers_keep_the_steps_own_options():
    """The table re-analysed on the catalog chip, the whole device and the default
    schedule: a 2x batch said it fits under --mem-util 0.5 (it does not), a clocked chip's
    levers were the full clock's, and --k 4's lever was 16 tokens per step."""
    from roofline.levers import model_what_if
    from roofline.models import Parallel, Precision, analyze, decode
    from roofline.models.step import MemoryBudget

    phase, par, prec = decode(16, 4096), Parallel(tp=4), Precision()
    half = MemoryBudget(0.5)
    rows = {r.label: r for r in model_what_if("llama-3-70b", H100, phase, par, prec,
                                              budget=half)}
    alone = analyze("llama-3-70b", H100, decode(32, 4096), par, prec, budget=half)
    assert rows["2x batch"].fits == bool(alone.memory.fits) is False
    slow = H100.at_clock(800)
    fp8 = {r.label: r for r in model_what_if("llama-3-8b", slow, decode(8, 4096), Parallel(),
                                             prec)}
    again = analyze("llama-3-8b", slow, decode(16, 4096), Parallel(), prec)
    assert fp8["2x batch"].t_lower_s == pytest.approx(float(again.t_lower_s), rel=1e-12)
    k4 = {r.label for r in model_what_if("llama-3-8b", H100, decode(8, 4096, k=4), Parallel(),
                                         prec)}
    assert not any("tokens per step" in label for label in k4)  # already 4 per step


def test_a_send_recv_gets_no_reduction_levers(run_cli):
    """tree and NVLS reduce: a send-recv has neither (it offered both, at 1x)."""
    import json

    code, out, _ = run_cli("op", "sendrecv", "--bytes", "64MiB", "--ranks", "2", "--explain",
                           "--json")
    labels = [r["label"] for r in json.loads(out)["what_if"]]
    assert code == 0 and labels == ["fp8 payload (half the bytes)"]


def test_levers_that_do_not_speed_the_work_up_are_named_apart(run_cli):
    # a compute-bound GEMM: batching and weight-only quantization move nothing (1x); they
    # were listed as advice beside fp8's 2x
    code, out, _ = run_cli("op", "matmul", "--m", "4096", "--k", "4096", "--n", "4096",
                           "--hw", "h100", "--explain")
    assert code == 0
    table = out.split("what would move it")[1]
    advice, rest = table.split("no gain from:")
    assert "fp8 activations and weights" in advice and "int8 weights" not in advice
    assert "int8 weights (weight-only) (1x)" in rest and "batching" in rest
    # a compute-bound prefill step: the 2x batch and narrower KV cache, in the note
    code, out, _ = run_cli("model", "llama-3-8b", "--hw", "h100", "--phase", "prefill",
                           "--batch", "8", "--prompt-len", "4096", "--explain")
    advice, rest = out.split("what would move it")[1].split("no gain from:")
    assert "2x tensor parallelism" in advice and "2x batch" not in advice
    assert "fp8 KV cache (1x)" in rest
