"""A dense graph-replayed step (decode, continuous batching): each kernel's fixed cost on its
own (step_kernel_s), the ops streaming off HBM at their HBM figure outside the engine's
factor, the factor over the rest (an engine's own figure over its tensor-core-bound share,
framework.compute.<engine>); an MoE step keeps the factor over the whole step."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.expect import expected_step
from roofline.expect.step import library_all_reduce, on_hbm_roof, on_link_roof
from roofline.expect.table import DEFAULTS, figures
from roofline.hardware import load_chip
from roofline.models import Parallel, analyze, decode, prefill


def test_on_hbm_roof_by_hand() -> None:
    assert on_hbm_roof({"hbm": 2e-6, "compute": 1e-6}) == 1.0
    assert on_hbm_roof({"hbm": 1e-6, "compute": 2e-6, "scale-up": 0.5e-6}) == 0.0
    assert on_hbm_roof({"hbm": 1e-6}) == 1.0  # nothing else: on the HBM roof
    assert on_hbm_roof({"compute": 1e-6}) == 0.0  # no HBM traffic
    swept = on_hbm_roof({"hbm": np.array([1.0, 3.0]), "compute": np.array([2.0, 2.0])})
    assert np.array_equal(swept, [0.0, 1.0])


def test_on_link_roof_by_hand() -> None:
    assert on_link_roof({"scale-up": 2e-6, "hbm": 1e-6}) == 1.0
    assert on_link_roof({"latency": 3e-6, "scale-up": 1e-6, "hbm": 2e-6}) == 1.0
    assert on_link_roof({"scale-out": 1e-6, "compute": 2e-6}) == 0.0
    assert on_link_roof({"compute": 1e-6, "hbm": 2e-6}) == 0.0  # no link
    swept = on_link_roof({"scale-up": np.array([1.0, 3.0]), "hbm": np.array([2.0, 2.0])})
    assert np.array_equal(swept, [0.0, 1.0])


def test_tensorrt_llm_compute_bound_share_takes_its_own_figure() -> None:
    # one H100, batch 1024 at context 128: the bf16 GEMMs (M = 1024 over a ridge of ~300 FLOP/B) are
    # tensor-core-bound, no collectives. Each engine's step is the same streamed part S plus
    # the same compute-bound work C over its figure: vLLM's and SGLang's decode factors,
    # TensorRT-LLM's framework.compute figure (not its decode factor)
    a = analyze("llama-3-8b", "h100", decode(1024, 128), Parallel())
    figs = figures(load_chip("h100"))
    f = {"vllm": figs["framework.decode.vllm"].value,
         "sglang": figs["framework.decode.sglang"].value,
         "tensorrt-llm": figs["framework.compute.tensorrt-llm"].value}
    assert f["tensorrt-llm"] != figs["framework.decode.tensorrt-llm"].value
    t = {fw: float(expected_step(a, "h100", framework=fw).t_s) for fw in f}
    work = (t["vllm"] - t["tensorrt-llm"]) / (1 / f["vllm"] - 1 / f["tensorrt-llm"])
    streamed = t["vllm"] - work / f["vllm"]
    assert work > 0.5 * float(a.t_lower_s) and streamed > 0  # mostly tensor-core-bound
    assert t["sglang"] == pytest.approx(streamed + work / f["sglang"], rel=1e-9)
    assert "framework.compute.tensorrt-llm" in expected_step(a, "h100",
                                                             framework="tensorrt-llm").sources
    # an MoE step (no split) never takes it
    moe = analyze("mixtral-8x7b", "h100", decode(1024, 1024), Parallel())
    assert "framework.compute.tensorrt-llm" not in expected_step(
        moe, "h100", framework="tensorrt-llm").sources


def test_dense_batch_1_decode_is_outside_the_engine_factor() -> None:
    # one GPU, batch 1: every op streams weights or KV off HBM, so the engines' factors
    # (vLLM 0.60, TensorRT-LLM 0.57, none: 0.70) give the same step
    a = analyze("llama-3-8b", "h100", decode(1, 1024), Parallel())
    steps = [expected_step(a, "h100", framework=fw) for fw in ("vllm", "tensorrt-llm", None)]
    assert steps[0].t_s == pytest.approx(steps[1].t_s, rel=1e-12)
    assert steps[0].t_s == pytest.approx(steps[2].t_s, rel=1e-12)
    # each kernel costs step_kernel_s: a whole number of them, at least 7 per layer (2 norms,
    # QKV, attention, O, gate-up, down) over Llama-3-8B's 32 layers
    kernel = DEFAULTS["step_kernel_s"].value
    n = float(steps[0].launch_s) / kernel
    assert n == pytest.approx(round(n), abs=1e-6) and n >= 7 * 32
    # the rest is the ops' work at their HBM figure: above the bound, below it / 0.5
    work = float(steps[0].t_s) - float(steps[0].launch_s)
    assert a.t_lower_s < work < a.t_lower_s / 0.5


def test_dense_tp8_decode_factor_times_only_the_collectives() -> None:
    a = analyze("llama-3-70b", "h100", decode(1, 1024), Parallel(tp=8))
    vllm, trt = (float(expected_step(a, "h100", framework=fw).t_s)
                 for fw in ("vllm", "tensorrt-llm"))
    figs = figures(load_chip("h100"))
    f_vllm = figs["framework.decode.vllm"].value
    f_trt = figs["framework.decode.tensorrt-llm"].value
    assert f_vllm > f_trt and vllm < trt  # the all-reduces still take the factor
    # but not the whole step: far less than the ratio of the factors
    assert trt / vllm < f_vllm / f_trt


def test_moe_decode_keeps_the_factor_over_the_whole_step() -> None:
    a = analyze("mixtral-8x7b", "h100", decode(1, 1024), Parallel())
    figs = figures(load_chip("h100"))
    vllm, trt = (expected_step(a, "h100", framework=fw) for fw in ("vllm", "tensorrt-llm"))
    f_vllm = figs["framework.decode.vllm"].value
    f_trt = figs["framework.decode.tensorrt-llm"].value
    assert float(vllm.t_s) * f_vllm == pytest.approx(float(trt.t_s) * f_trt, rel=1e-12)
    n = float(vllm.launch_s) / figs["graph_launch_s"].value  # its kernels at the graph launch
    assert n == pytest.approx(round(n), abs=1e-6)


def test_an_eager_prefill_pays_the_launch_not_the_step_kernel() -> None:
    a = analyze("llama-3-8b", "h100", prefill(1, 2048), Parallel())
    figs = figures(load_chip("h100"))
    step = expected_step(a, "h100")  # eager (no CUDA graphs): launch_s per kernel
    n = float(step.launch_s) / figs["launch_s"].value
    assert n == pytest.approx(round(n), abs=1e-6) and n >= 7 * 32
    # and the framework factor over the whole step: its time over the kernels' is 1 / factor
    assert float(step.t_s) > float(step.launch_s) / figs["framework"].value


def test_gpt_fast_runs_nccls_all_reduce_in_its_graph() -> None:
    # gpt-fast's tensor parallelism all-reduces through NCCL (tp.py: funcol.all_reduce), no
    # custom one-shot kernel: its collectives take the library's pick at a graph-captured
    # call's cost, never faster than the engines' own kernel
    a = analyze("mixtral-8x7b", "a100-sxm-80gb", decode(1, 1024), Parallel(tp=8, ep=1))
    fast = expected_step(a, "a100-sxm-80gb", framework="gpt-fast")
    assert "collective_call_s.graph" in fast.sources
    engine = expected_step(a, "a100-sxm-80gb", framework="vllm")
    assert "collective_call_s.graph" not in engine.sources
    # at the same factor (MoE: over the whole step) gpt-fast's step is the longer
    factor = DEFAULTS["framework.decode.gpt-fast"].value / DEFAULTS["framework.decode.vllm"].value
    assert float(fast.t_s) * factor > float(engine.t_s)
    assert float(fast.t_s) >= float(a.t_lower_s)


def test_pcie_only_chips_run_the_librarys_all_reduce() -> None:
    # TensorRT-LLM falls back to NCCL without NVLink at any TP; vLLM / SGLang's custom
    # all-reduce is off beyond two PCIe-only GPUs; NVLink chips keep the engines' kernels
    l40s, h100 = load_chip("l40s"), load_chip("h100")
    assert library_all_reduce(l40s, "tensorrt-llm", 2)
    assert library_all_reduce(l40s, "vllm", 4) and library_all_reduce(l40s, "sglang", 8)
    assert not library_all_reduce(l40s, "vllm", 2)
    assert not library_all_reduce(h100, "tensorrt-llm", 8)
    assert library_all_reduce(h100, "gpt-fast", 8)
    a = analyze("llama-3.1-70b", "l40s", decode(256, 1100), Parallel(tp=8))
    step = expected_step(a, "l40s", framework="tensorrt-llm")
    assert "collective_call_s.graph" in step.sources
    assert float(step.t_s) >= float(a.t_lower_s)


def test_l40s_nccl_keeps_under_half_the_pcie_link() -> None:
    # NCCL's defaults stage the ring's hops through host memory across the CPUs' root ports:
    # the chip file's figure, below the generic share (fitted where NVLink dominates), is the
    # one a TP8 step's all-reduces run at; the step stays above the bound
    figs = figures(load_chip("l40s"), step=True)
    assert figs["scale-up"].value == pytest.approx(0.48)
    assert figs["scale-up"].value < DEFAULTS["scale-up"].value
    a = analyze("llama-3.1-70b", "l40s", decode(256, 1100), Parallel(tp=8))
    slow = expected_step(a, "l40s", framework="tensorrt-llm")
    assert slow.efficiency["scale-up"] == pytest.approx(0.48)
    assert float(slow.t_s) >= float(a.t_lower_s)
