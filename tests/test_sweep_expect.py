"""`--expect` on sweeps: every point's expected figures are those of that configuration alone
(`expected_step(analyze(...))`, `expected(cost, chip)`), never faster than the bound, and the
frontier ranks by them only when asked."""

import csv
import json

import numpy as np
import pytest

import roofline.model_sweep as model_sweep
from roofline.expect import expected, expected_step
from roofline.hardware import load_chip
from roofline.models import Parallel, Precision, analyze, decode, prefill, train
from roofline.ops.collectives import busbw_factor
from roofline.ops.registry import op_decl, resolve_op
from roofline.sweep import ModelSweep, sweep_model, sweep_op
from roofline.sweep_frame import Frontier, pareto_front

PHASES = {"decode": decode, "prefill": prefill, "train": train}


def grid(phase="decode", **kw):
    args = {"hardware": ["h100", "mi300x"], "phase": phase, "batch": [1, 8, 64, 512],
            "length": [512, 8192], "tp": [1, 2], "dp": [1, 2], "kv_dtypes": ["bf16", "fp8"]}
    return sweep_model("llama-3-8b", **{**args, **kw}, expect=True)


@pytest.mark.parametrize("phase", ["decode", "prefill", "train"])
def test_each_point_equals_expected_step_of_its_own_analysis(phase):
    r = grid(phase, kv_dtypes=["fp8"])
    for i in range(0, len(r), 7):
        row = r.row(i)
        a = analyze("llama-3-8b", row["hardware"],
                    PHASES[phase](int(row["batch"]), int(row["length"])),
                    Parallel(tp=row["tp"], dp=row["dp"]),
                    Precision(weights="bf16", activations="bf16", kv_cache=row["kv_dtype"]))
        e = expected_step(a, row["hardware"])
        assert row["expected_t_s"] == pytest.approx(float(e.t_s), rel=1e-9, abs=0)
        assert row["expected_tokens_per_s"] == pytest.approx(float(e.tokens_per_s), rel=1e-9)
        assert row["expected_mfu"] == pytest.approx(float(e.mfu), rel=1e-9)
        assert row["t_lower_s"] == pytest.approx(float(a.t_lower_s), rel=1e-12)


@pytest.mark.parametrize("phase", ["decode", "prefill", "train"])
def test_expected_is_never_faster_than_the_bound_on_a_grid(phase):
    r = grid(phase, batch=[1, 2, 4, 16, 64, 256, 1024], length=[128, 2048, 32768],
             tp=[1, 2, 8], pp=[1, 2])
    c = r.columns
    assert np.all(c["expected_t_s"] >= c["t_lower_s"])
    assert np.all(c["expected_tokens_per_s"] <= c["tokens_per_s"])
    assert np.all(c["expected_mfu"] <= c["mfu"])
    assert np.any(c["expected_t_s"] > c["t_lower_s"])  # a forecast, not the bound again


def test_the_bound_columns_stay_and_the_default_sweep_has_no_expected_columns():
    plain = sweep_model("llama-3-8b", ["h100"], "decode", [1, 64], [1024, 8192], tp=[1, 2])
    with_expect = sweep_model("llama-3-8b", ["h100"], "decode", [1, 64], [1024, 8192],
                              tp=[1, 2], expect=True)
    assert not any(k.startswith("expected") for k in plain.columns)
    for key in plain.columns:
        assert key in with_expect.columns
        np.testing.assert_array_equal(plain.columns[key], with_expect.columns[key])


def test_the_default_sweep_builds_no_per_op_rows(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("analyze called without expect")

    monkeypatch.setattr(model_sweep, "analyze", refuse)
    r = sweep_model("llama-3-8b", ["h100"], "decode", [1, 64], [1024])
    assert len(r) == 2
    with pytest.raises(AssertionError, match="without expect"):
        sweep_model("llama-3-8b", ["h100"], "decode", [1, 64], [1024], expect=True)


def brute_best(c, limit, latency, tokens):
    ok = c["fits"] & (c[latency] <= limit)
    return int(np.flatnonzero(ok)[np.argmax(c[tokens][ok])])


def test_frontier_ranks_by_the_bound_unless_expected_is_asked():
    r = grid(batch=[1, 4, 16, 64, 256, 1024], length=[1024, 32768])
    c = r.columns
    limit = float(np.median(c["expected_t_s"]))
    by_bound, by_expected = r.frontier(limit), r.frontier(limit, expected=True)
    assert by_bound["ranked_by"] == "bound" and by_expected["ranked_by"] == "expected"
    assert "expected time per step" in by_expected["constraint"]
    for hw, row in by_expected["best_tokens_per_s"].items():
        mask = c["hardware"] == hw
        ok = mask & c["fits"] & (c["expected_t_s"] <= limit)
        assert row["expected_tokens_per_s"] == c["expected_tokens_per_s"][ok].max()
        assert row["expected_t_s"] <= limit
    best_bound = r.row(brute_best(c, limit, "t_lower_s", "tokens_per_s"))
    best_expected = r.row(brute_best(c, limit, "expected_t_s", "expected_tokens_per_s"))
    assert best_bound != best_expected  # the target filters a different set: a real check
    ok = c["fits"] & (c["expected_t_s"] <= limit)
    front = pareto_front(c["expected_t_s"], c["expected_tokens_per_s"], ok)
    assert by_expected["pareto"] == [r.row(i) for i in front]
    assert r.pareto(limit, expected=True) == front


def test_streamed_expected_frontier_equals_the_whole():
    args = ("llama-3-8b", ["h100", "a100"], "decode", [1, 3, 8, 32, 100, 256], [512, 4096])
    whole = ModelSweep(*args, tp=[1, 2], expect=True).collect()
    sweep = ModelSweep(*args, tp=[1, 2], expect=True, chunk_points=5)
    reduce = Frontier(0.02, expected=True)
    for chunk in sweep:
        reduce.add(chunk)
    assert reduce.result(sweep.bound_changes) == whole.frontier(0.02, expected=True)
    assert sweep.expected_sources == whole.expected_sources and whole.expected_sources


def single_op(name, chip, **kwargs):
    decl = op_decl(name)
    cost = decl.function(**resolve_op(decl, load_chip(chip), **kwargs))
    return cost, expected(cost, chip)


def test_op_sweep_points_equal_expected_of_the_op_alone():
    m = np.array([1.0, 17.0, 128.0, 1000.0, 4096.0])
    r = sweep_op("matmul", ["h100", "mi300x"], {"m": m, "k": np.array([4096.0]),
                                                "n": np.array([1024.0, 14336.0])},
                 expect=True)
    c = r.columns
    assert np.all(c["expected_t_s"] >= c["t_lower_s"])
    for i in range(len(r)):
        row = r.row(i)
        _, e = single_op("matmul", row["hardware"], m=row["m"], k=row["k"], n=row["n"])
        assert row["expected_t_s"] == pytest.approx(float(e.t_s), rel=1e-9, abs=0)
        assert row["expected_flops_per_s"] == pytest.approx(float(e.flops_per_s), rel=1e-9)


def test_collective_sweep_takes_each_sizes_own_algorithm_and_nccl_bandwidths():
    sizes = 4.0 ** np.arange(5, 16)  # 1 KiB .. 1 GiB: auto picks different algorithms
    r = sweep_op("allreduce", ["h100"], {"nbytes": sizes, "ranks": np.array([8.0])},
                 expect=True)
    c = r.columns
    names = set()
    assert np.all(c["expected_t_s"] >= c["t_lower_s"])
    assert np.all(c["expected_busbw_Bps"] <= c["busbw_Bps"])
    for i in range(len(r)):
        row = r.row(i)
        cost, e = single_op("allreduce", "h100", nbytes=row["nbytes"], ranks=8)
        names.add(cost.name)
        assert row["expected_t_s"] == pytest.approx(float(e.t_s), rel=1e-9, abs=0)
        algbw = row["nbytes"] / float(e.t_s)
        assert row["expected_algbw_Bps"] == pytest.approx(algbw, rel=1e-9)
        assert row["expected_busbw_Bps"] == pytest.approx(algbw * busbw_factor("all-reduce", 8),
                                                          rel=1e-9)
    assert len(names) > 1  # the grid spans a change of algorithm


def test_cli_sweep_op_expect_matches_op_expect(run_cli):
    code, out, _ = run_cli("sweep", "op", "allreduce", "--bytes", "64MiB", "--ranks", "8",
                           "--expect", "--json")
    assert code == 0
    points = json.loads(out)["points"]
    code, out, _ = run_cli("op", "allreduce", "--bytes", "64MiB", "--ranks", "8", "--expect",
                           "--json")
    one = json.loads(out)
    assert code == 0
    for key in ("t_s", "busbw_Bps", "algbw_Bps"):
        assert points[f"expected_{key}" if key != "t_s" else "expected_t_s"][0] == \
            pytest.approx(one["expected"][key], rel=1e-9)
    assert points["busbw_Bps"][0] == pytest.approx(one["busbw_Bps"], rel=1e-9)


def test_cli_sweep_model_expect_text_json_and_csv(run_cli, tmp_path):
    args = ("sweep", "model", "llama-3-8b", "--hw", "h100", "--batch", "1,64", "--context",
            "1k", "--tp", "1,2", "--max-tpot", "20ms")
    code, plain, _ = run_cli(*args)
    assert code == 0 and "expected" not in plain and "(lower bound)" in plain
    code, text, _ = run_cli(*args, "--expect")
    assert code == 0
    assert "ranked by the expected time" in text and "expected (a forecast" in text
    assert "step (lower bound)" in text  # the bound stays beside it
    code, out, _ = run_cli(*args, "--expect", "--json", "--all")
    data = json.loads(out)
    assert data["frontier"]["ranked_by"] == "expected"
    assert data["frontier"]["expected_sources"]
    pts = data["points"]
    assert all(e >= b for e, b in zip(pts["expected_t_s"], pts["t_lower_s"], strict=True))
    path = tmp_path / "s.csv"
    assert run_cli(*args, "--expect", "--csv", str(path))[0] == 0
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 4 and float(rows[0]["expected_t_s"]) >= float(rows[0]["t_lower_s"])
    assert "expected_tokens_per_s" in rows[0] and "tokens_per_s" in rows[0]
