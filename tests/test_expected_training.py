"""A training step's forecast: the framework's own attention kernel (llm-foundry's
FlashAttention-2 on Hopper), the casts of fp8 GEMM operands, MoE experts at the fp8 peak of
fp8 training, and a dense step's busy link outside the framework factor."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from roofline.cost import Cost
from roofline.dtypes import dtype
from roofline.expect import expected_step
from roofline.expect.kernels import framework_attention
from roofline.expect.step import cast_s, routed_rows
from roofline.expect.table import figures
from roofline.hardware import load_chip
from roofline.models import Parallel, analyze, load_model, model_precision, train
from roofline.opid import Gemm


def test_llm_foundry_runs_flash_attention_2_on_hopper_only() -> None:
    assert framework_attention("llm-foundry(composer)", load_chip("h100")) == "fa2"
    assert framework_attention("LLM-Foundry", load_chip("h200")) == "fa2"
    assert framework_attention("llm-foundry", load_chip("a100")) is None  # FA2: the default
    assert framework_attention("llm-foundry", load_chip("b200")) is None  # no figure named
    assert framework_attention("megatron-bridge", load_chip("h100")) is None
    assert framework_attention(None, load_chip("h100")) is None


def test_fa2_backward_figure_is_the_fa3_papers_share_of_the_peak() -> None:
    figs = figures(load_chip("h100"))
    # arXiv:2407.08608 Figure 6b: 322 TFLOP/s of 989 dense (FA3: 561), below FA3's figure
    assert figs["attention_bwd.fa2"].value == pytest.approx(322 / 989, abs=0.005)
    assert figs["attention_bwd.fa2"].value < figs["attention_bwd"].value


def test_llm_foundry_long_sequence_step_is_slower_on_hopper() -> None:
    # both take the default factor: only the attention kernel differs
    a = analyze("llama-3-8b", "h100", train(8, 32768), Parallel(dp=8, fsdp=True))
    foundry = float(expected_step(a, "h100", framework="llm-foundry(composer)").t_s)
    other = float(expected_step(a, "h100", framework="nemo").t_s)
    assert foundry > 1.2 * other  # attention holds most of a 32K step
    # on Ampere FA2 is the default kernel already: the same step
    b = analyze("llama-3-8b", "a100", train(8, 32768), Parallel(dp=8, fsdp=True))
    assert float(expected_step(b, "a100", framework="llm-foundry").t_s) == pytest.approx(
        float(expected_step(b, "a100", framework="nemo").t_s), rel=1e-12)


def _gemm(m: float, k: float, n: float, dt: str, grouped: bool = False,
          groups: float = 1.0) -> Cost:
    return Cost(flops={dt: 2.0 * m * k * n * groups},
                op=Gemm(m, n, k, "bf16", groups=groups, grouped=grouped))


def test_cast_s_by_hand() -> None:
    chip = load_chip("h100")
    bw = chip.bandwidth_Bps("hbm")
    # X [1024, 4096] and dY [1024, 8192]: each read in bf16 (2 B) and written twice in fp8
    # (row-wise and transposed): 1024 * (4096 + 8192) * (2 + 2 * 1) = 50,331,648 B
    t = cast_s(_gemm(1024, 4096, 8192, "fp8"), "bf16", chip, 0.8)
    assert t == pytest.approx(50_331_648 / (bw * 0.8), rel=1e-12)
    # nvfp4: 4.5 bits a copy (4-bit values and an 8-bit scale per 16)
    assert dtype("nvfp4").bits == 4.5
    t4 = cast_s(_gemm(1024, 4096, 8192, "nvfp4"), "bf16", chip, 0.8)
    assert t4 == pytest.approx(1024 * 12288 * (2 + 2 * 4.5 / 8) / (bw * 0.8), rel=1e-12)
    # a bf16 GEMM casts nothing; a batched one casts each product's rows
    assert cast_s(_gemm(1024, 4096, 8192, "bf16"), "bf16", chip, 0.8) == 0.0
    assert cast_s(_gemm(64, 128, 128, "fp8", groups=32), "bf16", chip, 1.0) == pytest.approx(
        32 * 64 * 256 * 4 / bw, rel=1e-12)
    # a grouped (MoE) GEMM's record holds the mean expert's M over its touched experts: the
    # rows are every routed row, its FLOPs over 2·N·K (32 experts x 128 rows here)
    grouped = _gemm(128, 2048, 1536, "fp8", grouped=True, groups=32)
    assert routed_rows(grouped) == pytest.approx(4096, rel=1e-12)
    assert cast_s(grouped, "bf16", chip, 1.0) == pytest.approx(4096 * 3584 * 4 / bw, rel=1e-12)
    # an EP rank's share (its Cost a quarter of the group's FLOPs) and a training step's 3
    # passes of FLOPs: the same rows per pass
    rank = Cost(flops={"fp8": 3 * 2.0 * 1024 * 2048 * 1536}, op=grouped.op)
    assert routed_rows(rank, 3.0) == pytest.approx(1024, rel=1e-12)
    assert cast_s(rank, "bf16", chip, 1.0, routed_rows(rank, 3.0)) == pytest.approx(
        1024 * 3584 * 4 / bw, rel=1e-12)


def test_grouped_gemm_casts_every_routed_row_of_the_rank() -> None:
    # Qwen3-30B-A3B fp8, EP8 on 8 H100s: each rank's expert GEMMs multiply T·top_k/8 routed
    # rows, 16x the mean expert's M that the typed record holds (128 experts, 16 a rank)
    spec = load_model("qwen3-30b-a3b")
    prec = replace(model_precision(spec, "bf16"), matmul="fp8")
    a = analyze(spec, "h100", train(8, 4096), Parallel(dp=8, ep=8), prec)
    up = next(r for r in a.parts.rows if r.name == "experts up/gate")
    assert isinstance(up.cost.op, Gemm) and up.cost.op.grouped
    tokens = 4096  # one sequence a rank per micro-batch
    assert routed_rows(up.cost, a.phase.work_factor) == pytest.approx(tokens * 8, rel=1e-9)
    assert float(up.cost.op.m) == pytest.approx(tokens * 8 * 8 / 128, rel=0.01)


def test_fp8_training_gains_less_than_its_peak() -> None:
    # MPT-3B on 8 H100s, 2K tokens: llm-foundry's tables (scripts/train/benchmarking/
    # README.md) measure 1.15-1.31x from amp_fp8; the GEMM roofs alone gave the forecast
    # 1.51x, the bound 1.66x
    spec = load_model("mpt-3b")
    bf16 = model_precision(spec, "bf16")
    par = Parallel(dp=8, fsdp=True)
    a16 = analyze(spec, "h100", train(80, 2048), par, bf16)
    a8 = analyze(spec, "h100", train(80, 2048), par, replace(bf16, matmul="fp8"))
    t16, t8 = (float(expected_step(a, "h100").t_s) for a in (a16, a8))
    assert float(a16.t_lower_s) / float(a8.t_lower_s) > t16 / t8
    assert 1.2 < t16 / t8 < 1.45
    assert t8 >= float(a8.t_lower_s)


def test_moe_experts_run_at_the_fp8_peak_of_fp8_training() -> None:
    spec = load_model("qwen3-30b-a3b")
    bf16 = model_precision(spec, "bf16")
    par = Parallel(dp=8, ep=8)
    a16 = analyze(spec, "b200", train(64, 4096), par, bf16)
    a8 = analyze(spec, "b200", train(64, 4096), par, replace(bf16, matmul="fp8"))

    def expert_dtypes(a: object) -> set[str]:
        return {dt for row in a.parts.rows  # type: ignore[attr-defined]
                if isinstance(row.cost.op, Gemm) and row.cost.op.grouped
                for dt in row.cost.flops}

    assert expert_dtypes(a16) == {"bf16"} and expert_dtypes(a8) == {"fp8"}
    assert float(a8.t_lower_s) < float(a16.t_lower_s)


def test_a_dense_steps_busy_link_is_outside_the_framework_factor() -> None:
    # Llama-3.1-405B, FSDP 16 x TP 8 on 128 H100s, 2 sequences a replica: the weight gathers
    # over the scale-out network outlast the compute path (torchtitan's docs/performance.md)
    spec = load_model("llama-3.1-405b")
    prec = replace(model_precision(spec, "bf16"), matmul="fp8")
    a = analyze(spec, "h100", train(32, 8192, True), Parallel(tp=8, dp=16, fsdp=True,
                                                                microbatches=1), prec)
    core = a.parts.core
    assert float(core.times.not_hidden_s) > 0
    figs = figures(load_chip("h100"))
    link = figs[str(core.times.not_hidden_link)].value
    floor = (float(np.sum(core.times.critical_s)) + float(core.times.not_hidden_s)) / link
    titan = float(expected_step(a, "h100", framework="torchtitan").t_s)
    factor = figs["framework.train.torchtitan"].value
    # at least the link at its own pace, and not that pace slowed by the framework factor
    assert floor <= titan < floor / factor
