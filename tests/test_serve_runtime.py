"""Plans a platform engineer could launch: the engine's own defaults (cited per version), the
checkpoint's dtypes, counts as integers, a `meets_targets` column, a cause and exit 3 when
nothing fits, and the plan as the engine's launch command."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from roofline import load_chip
from roofline.serve import Space, Workload, plan
from roofline.serve.runtime import hub_id, runtime

W = Workload.from_lengths(2048, 256)


def test_engine_defaults_by_chip_and_tp() -> None:
    h100, a100, l4 = (load_chip(c) for c in ("h100", "a100-sxm-80gb", "l4"))
    # vLLM: >= 70 GiB devices other than A100 take 1024 sequences and 8192-token chunks
    assert (runtime("vllm", h100).max_running, runtime("vllm", h100).chunk_tokens) == (1024, 8192)
    assert (runtime("vllm", a100).max_running, runtime("vllm", a100).chunk_tokens) == (256, 2048)
    assert runtime("vllm", h100).memory_fraction == 0.9
    # SGLang: the static fraction shrinks with TP; small GPUs take 2048-token chunks
    assert [runtime("sglang", h100, tp).memory_fraction for tp in (1, 2, 4, 8, 16)] == \
        [0.88, 0.87, 0.85, 0.81, 0.79]
    assert runtime("sglang", l4).chunk_tokens == 2048
    assert runtime("tensorrt-llm", h100).max_running == 2048
    generic = runtime(None, h100)
    assert generic.engine == "generic" and "no engine named" in generic.describe()
    assert hub_id("https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
                  "x") == "meta-llama/Llama-3.1-8B"


def test_default_dtypes_are_the_checkpoints() -> None:
    p = plan("llama-3.1-70b", ["h100"], W)
    assert set(p.columns["weight_dtype"].tolist()) == {"bf16"}
    assert set(p.columns["kv_dtype"].tolist()) == {"bf16"}
    assert set(p.columns["memory_fraction"].tolist()) == {0.9}
    # Llama-70B bf16 (141 GB) needs more than one H100: no TP 1 point fits
    assert not np.any(p.columns["fits"][p.columns["tp"] == 1])


def test_the_engines_cap_bounds_the_running_batch() -> None:
    """gpt-oss-120b on one B200 once ran 2,674 sequences; vLLM runs at most 1024."""
    free = plan("gpt-oss-120b", ["b200"], W, space=Space(tp=(1,), dp=(1,)), engine_limits=False)
    vllm = plan("gpt-oss-120b", ["b200"], W, space=Space(tp=(1,), dp=(1,)), framework="vllm")
    assert free.columns["max_running"].max() > 1024
    assert vllm.columns["max_running"].max() == 1024
    assert vllm.columns["running"].max() <= 1024


def test_meets_targets_and_integer_columns(run_cli, tmp_path) -> None:
    path = tmp_path / "plan.csv"
    code, _, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tpot", "10ms",
                         "--csv", str(path))
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    for row in rows:
        meets = row["fits"] == "True" and row["feasible"] == "True" and \
            float(row["tpot_s"]) <= 0.010
        assert (row["meets_targets"] == "True") == meets
        for key in ("running", "chips", "tp", "chunk", "max_running"):
            assert row[key].isdigit(), (key, row[key])
    assert any(r["meets_targets"] == "False" and r["feasible"] == "True" for r in rows)


def test_nothing_fits_exits_3_with_the_cause(run_cli) -> None:
    code, out, err = run_cli("serve", "llama-3.1-405b", "--hw", "h100", "--tp", "1", "--pp",
                             "1", "--max-chips", "1")
    assert code == 3 and err == ""
    assert "weights 812 GB per chip > 77 GB usable x 1 chip(s)" in out
    assert "allow >= 11 chips" in out and "quantize" in out
    # a --gpus budget's replicas each hold the weights whole: the need is per instance
    code, out, _ = run_cli("serve", "llama-3.1-405b", "--hw", "h100", "--tp", "1", "--pp",
                           "1", "--max-chips", "1", "--gpus", "8")
    assert code == 3 and "usable x 1 chip(s)" in out and "allow >= 11 chips per instance" in out
    code, out, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tpot", "0.1ms",
                           "--json")
    assert code == 3 and "TPOT" in json.loads(out)["infeasible"]


@pytest.mark.parametrize(("engine", "expected"), [
    ("vllm", "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4"),
    ("sglang", "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --tp 4"),
    ("tensorrt-llm", "trtllm-serve meta-llama/Llama-3.1-70B --tp_size 4"),
])
def test_emit_prints_the_plan_as_a_launch_command(run_cli, engine, expected) -> None:
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--tp", "4",
                           "--engine", engine, "--emit", engine, "--json")
    assert code == 0
    data = json.loads(out)
    cmd, row = data["launch"]["h100-sxm"], data["best"]["h100-sxm"]
    assert cmd.startswith(expected)
    assert str(row["chunk"]) in cmd and f"{row['memory_fraction']:g}" in cmd
    assert str(row["running"]) in cmd  # the plan's running batch is the engine's cap


def test_an_engine_that_does_not_run_on_the_chip_is_refused(run_cli) -> None:
    for args in (("--engine", "tensorrt-llm"), ("--emit", "tensorrt-llm")):
        code, _, err = run_cli("serve", "llama-3.1-8b", "--hw", "mi300x", *args)
        assert code == 2 and "runs on NVIDIA GPUs, not on mi300x (AMD)" in err


def test_clients_in_step_queue_behind_each_others_prompts() -> None:
    """A closed loop of equal-length requests keeps its clients in step: each round a
    replica's k prompts arrive together and pass the chunk budget first come first served
    (grid.burst_ttft_s), a client waiting the share IN_STEP of that queue (the expected time
    only; a bound cannot assume it)."""
    space = Space(tp=(1,), chunks=(8192,))

    def ttft(clients: int, expect: bool, in_step: bool = True) -> float:
        w = Workload.from_lengths(1024, 256, in_step=in_step)
        from roofline.serve import Load

        c = plan("llama-3.1-8b", ["h100"], w, space=space, load=Load(concurrency=clients),
                 expect=expect, engine_limits=False).columns
        return float(c["ttft_s"][0]), float(c["prefill_s"][0]), float(c["queue_s"][0])

    lone, _, lone_queue = ttft(1, True)
    many, prefill64, queue = ttft(64, True)
    # 64 prompts of 1024 tokens, 8 per 8192-token iteration: the mean client's first token
    # after 4.5 full iterations, each at least its own (1024-token) one and at most 8 of them
    from roofline.serve.burst import IN_STEP

    assert 3.5 * prefill64 <= queue / IN_STEP <= (4.5 * 8 - 1) * prefill64
    assert many > lone and lone_queue == 0.0
    assert ttft(64, True, in_step=False)[2] == 0.0  # lengths that vary: no shared round
    assert ttft(64, False)[2] == 0.0  # the bound charges no burst
    # a workload from a distribution of lengths is not in step
    assert not Workload.from_lengths([100, 200], [50, 60]).in_step
    assert Workload.from_lengths([100, 100], [50, 50]).in_step


def test_a_bursts_prompts_leave_the_decode_iterations_by_its_share(monkeypatch) -> None:
    """Clients in step prefill the burst share of the other clients' prompts before they
    decode: TPOT = the decode-alone step + (1 - share) x the prompt tokens' extra, so it is
    linear in the share (at 1 the decode-alone step, the slowest at 0), the rate unchanged."""
    import roofline.serve.grid as grid
    from roofline.serve import Load

    space = Space(tp=(1,), chunks=(8192,))
    w = Workload.from_lengths(1024, 128, in_step=True)

    def point(share: float) -> tuple[float, float]:
        monkeypatch.setattr(grid, "burst_share", lambda framework: share)
        c = plan("llama-3.1-8b", ["h100"], w, space=space, load=Load(concurrency=64),
                 expect=True, engine_limits=False).columns
        return float(c["tpot_s"][0]), float(c["requests_per_s"][0])

    (none, rate0), (half, rate_half), (whole, rate1) = point(0.0), point(0.5), point(1.0)
    assert whole < half < none
    assert half == pytest.approx((none + whole) / 2, rel=1e-9)
    assert rate0 == pytest.approx(rate_half, rel=1e-12) == pytest.approx(rate1, rel=1e-12)


def test_moe_models_search_attention_data_parallelism_by_default() -> None:
    """DeepSeek-V3 on H200: attention DP over the EP group (tp 1, dp 8, ep 8) is searched
    without --dp, and beats TP 8 in tokens/s per chip at large batch, as the MoE serving
    recipes run it; a dense model keeps dp 1."""
    moe = plan("deepseek-v3", ["h200"], W)
    assert set(moe.columns["dp"].tolist()) == {1, 2, 4, 8}
    best = moe.best()["h200-sxm"]
    assert (best.tp, best.dp, best.ep) == (1, 8, 8)
    assert set(plan("llama-3.1-8b", ["h100"], W).columns["dp"].tolist()) == {1}
