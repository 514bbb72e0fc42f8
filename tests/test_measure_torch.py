"""The torch paths of measurement, run on the CPU (the same code runs on CUDA), the CUDA-only
checks where a GPU exists, and the collective sweep under torchrun with 2 gloo ranks.

Skipped, with the reason shown, when torch is not installed (`pip install torch==2.13.0`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch not installed: pip install torch==2.13.0")

from roofline import RooflineError, load_chip  # noqa: E402
from roofline.measure import get_backend, measure_bandwidth, measure_peaks, run_ops  # noqa: E402
from roofline.measure.backend import ROW, Unsupported  # noqa: E402
from roofline.measure.ops import attention_case, elementwise_case, matmul_case  # noqa: E402
from roofline.measure.timing import Settings  # noqa: E402

TINY = Settings(repeats=3, warmup=1, min_sample_s=1e-3)
SRC = Path(__file__).resolve().parent.parent / "src"


@pytest.fixture(scope="module")
def tcpu():
    return get_backend("cpu", "torch")


def test_torch_matmuls_per_dtype_on_cpu(tcpu):
    peaks, skipped = measure_peaks(tcpu, ["fp32", "bf16", "tf32", "fp8", "int8"], sizes=[64],
                             settings=TINY)
    measured = {p.dtype for p in peaks}
    assert {"fp32", "bf16", "tf32"} <= measured
    assert measured | set(skipped) == {"fp32", "bf16", "tf32", "fp8", "int8"}
    assert all(p.flops_per_s > 0 for p in peaks)
    assert "_scaled_mm" in tcpu.matmul_method("fp8") and "allow_tf32" in tcpu.matmul_method(
        "tf32")


def test_torch_kernels_build_and_run_on_cpu(tcpu):
    for kind in ("add", "mul", "relu", "silu", "gelu", "softmax", "rmsnorm", "layernorm"):
        tcpu.elementwise(kind, 2 * ROW, "fp32")()
    with pytest.raises(Unsupported, match="no 'conv' kernel"):
        tcpu.elementwise("conv", ROW, "fp32")
    with pytest.raises(RooflineError, match="multiple of the row length"):
        tcpu.elementwise("softmax", ROW + 1, "fp32")
    tcpu.attention(2, 16, 16, 4, 2, 32, True, "fp32")()  # prefill, GQA
    tcpu.attention(2, 1, 64, 4, 1, 32, True, "fp32")()  # decode, MQA
    with pytest.raises(Unsupported, match="top-left"):
        tcpu.attention(1, 4, 16, 4, 4, 32, True, "fp32")
    for kernel in ("read", "copy", "triad"):
        case = tcpu.stream(kernel, 1 << 20)
        case.run(2)
        assert case.bytes_moved == pytest.approx(case.working_set_bytes)  # one pass each


def test_torch_ops_sweep_against_a_catalog_chip(tcpu):
    chip = load_chip("h100")
    cases = [matmul_case(64, 128, 128, "fp32"), matmul_case(64, 128, 128, "bf16"),
             elementwise_case("silu", ROW * 4, "fp32"),
             attention_case(1, 64, 64, 4, 2, 32, "fp32", chip),
             attention_case(2, 1, 256, 4, 2, 32, "fp32", chip),
             matmul_case(8, 8, 8, "fp4")]
    result = run_ops(tcpu, chip, cases, "2026-01-31", TINY)
    assert len(result.points) == 5 and "no fp4 peak" in next(iter(result.skipped.values()))
    assert {p.family for p in result.points} == {"matmul", "elementwise", "attention"}
    assert all(p.time_s > 0 and p.efficiency > 0 for p in result.points)
    flash = result.points[3]
    assert "flash" in flash.label and flash.estimate.flops > 0


def test_torch_bandwidth_sweep_on_cpu(tcpu):
    sweep = measure_bandwidth(tcpu, ["copy"], [64 * 1024, 1 << 20], settings=TINY)
    assert len(sweep.points) == 2 and all(p.bandwidth_Bps > 0 for p in sweep.points)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error without a GPU")
def test_cuda_without_a_gpu_is_one_clear_error():
    with pytest.raises(RooflineError, match="sees no CUDA device"):
        get_backend("cuda")


@pytest.mark.gpu
def test_cuda_quick_peaks_and_bandwidth():
    gpu = get_backend("cuda")
    peaks, _ = measure_peaks(gpu, ["bf16", "fp32", "tf32", "fp8"], sizes=[2048],
                             settings=TINY)
    rates = {p.dtype: p.flops_per_s for p in peaks}
    assert rates["bf16"] > rates["fp32"] and rates["tf32"] > rates["fp32"]
    sweep = measure_bandwidth(gpu, ["copy"], [4 << 20, 1 << 30], settings=TINY)
    assert sweep.points[-1].bandwidth_Bps > 1e11


@pytest.mark.slow  # starts torchrun and two Python processes: seconds, more on a busy host
def test_comm_sweep_under_torchrun_with_two_gloo_ranks():
    """torchrun starts 2 CPU ranks; rank 0 prints one JSON object (a tiny sweep)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "-m", "roofline.measure", "comm", "--backend", "gloo", "--quick",
           "--max-bytes", "64KiB", "--factor", "8", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert data["ranks"] == 2 and data["backend"] == "gloo"
    kinds = {p["kind"] for p in data["points"]} | set(data["skipped"])
    assert kinds == {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}
    for p in data["points"]:
        assert p["time_s"] > 0 and p["busbw_Bps"] <= p["algbw_Bps"] + 1e-9
    # tiny messages on a busy machine may not show a bandwidth: a fit or its reason, never
    # a crash (the fit itself is checked on synthetic timings in test_measure.py)
    assert "alpha_s" in data["fit"] or "error" in data["fit"]
