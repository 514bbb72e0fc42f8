"""Sweeps: axis parsing, vectorized results equal scalar analyses, the frontier is right."""

import json

import numpy as np
import pytest

from roofline import RooflineError
from roofline.cli import main
from roofline.models import Parallel, Precision, analyze, decode
from roofline.sweep import parse_axis, sweep_model


@pytest.mark.parametrize(("text", "values"), [
    ("1:1024:x2", [2.0**i for i in range(11)]),
    ("1k,8k,128k", [1024, 8192, 131072]),
    ("8:32:+8", [8, 16, 24, 32]),
    ("3", [3]),
    ("1:10:x3", [1, 3, 9]),
])
def test_parse_axis(text, values):
    np.testing.assert_array_equal(parse_axis(text, "x"), values)


@pytest.mark.parametrize("text", ["", "0", "1:0:x2", "1:8:x1", "1:8", "a,b", "1.5", "1:8:-1"])
def test_parse_axis_rejects(text):
    with pytest.raises(RooflineError, match="--batch"):
        parse_axis(text, "--batch")


def small_sweep():
    return sweep_model("llama-3-8b", ["h100", "a100"], "decode", [1, 16, 256, 1024],
                       [1024, 32768], tp=[1, 2], kv_dtypes=["bf16", "fp8"])


def test_every_point_equals_a_scalar_analysis():
    r = small_sweep()
    assert len(r) == 2 * 2 * 2 * 4 * 2
    for i in range(0, len(r), 5):
        row = r.row(i)
        a = analyze("llama-3-8b", row["hardware"], decode(int(row["batch"]), int(row["length"])),
                    Parallel(tp=row["tp"]), Precision(kv_cache=row["kv_dtype"]))
        assert row["t_lower_s"] == pytest.approx(a.t_lower_s, rel=1e-12)
        assert row["bound"] == a.bound and row["fits"] == a.memory.fits
        assert row["tokens_per_s"] == pytest.approx(a.tokens_per_s, rel=1e-12)


def test_sweep_batch_is_the_total_as_in_model_and_per_replica_is_explicit():
    # `--batch` means what `roofline model --batch` means: all replicas together; a dp that
    # does not divide a value skips it. `batch_per_replica` is the explicit per-replica form.
    r = sweep_model("llama-3-8b", ["h100"], "decode", [3, 32], [2048], dp=[1, 2])
    rows = [r.row(i) for i in range(len(r))]
    assert sorted((x["dp"], x["batch"]) for x in rows) == [(1, 3), (1, 32), (2, 32)]
    two = next(x for x in rows if x["dp"] == 2)
    a = analyze("llama-3-8b", "h100", decode(32, 2048), Parallel(dp=2))
    assert two["tokens_per_s"] == pytest.approx(a.tokens_per_s, rel=1e-12)
    per = sweep_model("llama-3-8b", ["h100"], "decode", [16], [2048], dp=[1, 2],
                      batch_per_replica=True)
    rows = {per.row(i)["dp"]: per.row(i) for i in range(len(per))}
    assert rows[1]["batch"] == 16 and rows[2]["batch"] == 32
    # inference replicas never talk: each does the dp=1 step, so twice the tokens, same time
    assert rows[2]["t_lower_s"] == pytest.approx(rows[1]["t_lower_s"], rel=1e-12)
    assert rows[2]["tokens_per_s"] == pytest.approx(2 * rows[1]["tokens_per_s"], rel=1e-12)
    with pytest.raises(RooflineError, match="divisible by dp 4"):
        sweep_model("llama-3-8b", ["h100"], "decode", [3], [2048], dp=[4])


def test_fewest_chips_honours_the_latency_target_and_lines_say_what_they_meet(run_cli):
    # asked for 20 ms per step, the fewest-chips answer must be a point within 20 ms
    r = sweep_model("llama-3-70b", ["h100"], "decode", [64], [8192], tp=[2, 4, 8])
    loose = r.frontier()["fewest_chips_that_fit"]
    tight = r.frontier(0.02)["fewest_chips_that_fit"]
    assert loose["t_lower_s"] > 0.02  # the fewest chips alone would miss the target
    assert tight["t_lower_s"] <= 0.02 and tight["chips"] > loose["chips"]
    code, out, _ = run_cli("sweep", "model", "llama-3-70b", "--batch", "64", "--context",
                           "8k", "--tp", "2,4,8", "--max-tpot", "20ms")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("fewest chips"))
    assert "[fits in memory, step <= 20 ms]" in line and f"x{tight['chips']} " in line


def test_a_duration_without_a_unit_is_refused(run_cli):
    code, _, err = run_cli("sweep", "model", "llama-3-8b", "--max-tpot", "50")
    assert code == 2 and "no unit" in err and "50ms" in err and "Traceback" not in err


def test_frontier_matches_brute_force():
    r = small_sweep()
    limit = 0.03
    front = r.frontier(limit)
    rows = [r.row(i) for i in range(len(r))]
    ok = [x for x in rows if x["fits"] and x["t_lower_s"] <= limit]
    for hw in ("h100-sxm", "a100-sxm-80gb"):
        best = max((x for x in ok if x["hardware"] == hw), key=lambda x: x["tokens_per_s"])
        assert front["best_tokens_per_s"][hw]["tokens_per_s"] == best["tokens_per_s"]
    assert front["fewest_chips_that_fit"]["chips"] == min(x["chips"] for x in ok)
    assert front["feasible_points"] == len(ok)
    assert front["points"] == len(rows)  # infeasible points are kept, only marked
    assert any(not x["fits"] for x in rows)
    pareto = front["pareto"]
    assert pareto and all(p["fits"] and p["t_lower_s"] <= limit for p in pareto)
    for p in pareto:  # nothing feasible is both faster and higher in throughput
        assert not any(x["t_lower_s"] < p["t_lower_s"] and x["tokens_per_s"] > p["tokens_per_s"]
                       for x in ok)
    # and every feasible point is matched or beaten by some Pareto point
    for x in ok:
        assert any(p["t_lower_s"] <= x["t_lower_s"] and p["tokens_per_s"] >= x["tokens_per_s"]
                   for p in pareto)


def test_bound_changes_are_the_first_batch_with_another_bound():
    batches = [1, 64, 128, 256, 512, 1024, 2048]
    r = sweep_model("llama-3-8b", ["h100"], "decode", batches, [128])
    (change,) = r.bound_changes
    assert (change["from"], change["to"]) == ("hbm", "compute")
    bounds = [analyze("llama-3-8b", "h100", decode(b, 128)).bound for b in batches]
    assert change["batch"] == batches[bounds.index("compute")]


def test_sweep_cli(capsys, tmp_path):
    csv_path = tmp_path / "points.csv"
    code = main(["sweep", "model", "llama-3-70b", "--hw", "h100,h200,mi300x", "--phase",
                 "decode", "--batch", "1:1024:x2", "--context", "1k,8k,32k,128k", "--tp",
                 "1,2,4,8", "--kv-dtype", "bf16,fp8", "--max-tpot", "50ms", "--csv",
                 str(csv_path)])
    out = capsys.readouterr().out
    assert code == 0 and "1056 points" in out and "Pareto frontier" in out
    assert len(csv_path.read_text().splitlines()) == 1057
    code = main(["sweep", "model", "qwen3-30b-a3b", "--phase", "prefill", "--batch", "1,4",
                 "--prompt-len", "2k", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["frontier"]["points"] == 2


def test_sweep_cli_bad_axis(capsys):
    with pytest.raises(SystemExit) as info:
        main(["sweep", "model", "llama-3-8b", "--max-tpot", "fast"])
    assert info.value.code == 2
    capsys.readouterr()
    code = main(["sweep", "model", "llama-3-8b", "--batch", "0:4:x2"])
    err = capsys.readouterr().err
    assert code == 2 and "--batch" in err and err.count("\n") == 1


def test_sweep_op_cli_vectorizes_ops_and_collectives(capsys):
    code = main(["sweep", "op", "matmul", "--hw", "h100,h200", "--m", "1:4096:x4", "--k",
                 "8192", "--n", "8192", "--weight-dtype", "bf16,int4", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and len(data["points"]["m"]) == 2 * 2 * 7
    changes = {(c["hardware"], c["weight_dtype"]): c["at"] for c in data["bound_changes"]}
    assert changes[("h100-sxm", "bf16")] == 1024 and changes[("h100-sxm", "int4")] == 256
    code = main(["sweep", "op", "allreduce", "--bytes", "1KiB,1MiB,1GiB", "--ranks", "8,16",
                 "--json"])
    data = json.loads(capsys.readouterr().out)
    bounds = dict(zip(zip(data["points"]["nbytes"], data["points"]["ranks"], strict=True),
                      data["points"]["bound"], strict=True))
    assert bounds[(1024.0, 8.0)] == "latency" and bounds[(2.0**30, 8.0)] == "scale-up"
    from roofline import evaluate, load_chip
    from roofline.ops.collectives import collective
    h100 = load_chip("h100")  # the sweep's algorithm is auto: what NCCL picks on this chip
    one = evaluate(collective("all-reduce", 2.0**20, 16, domain_size=8, chip=h100), h100)
    i = list(zip(data["points"]["nbytes"], data["points"]["ranks"], strict=True)).index(
        (2.0**20, 16.0))
    assert data["points"]["t_lower_s"][i] == pytest.approx(one.t_lower_s)


def test_sweep_refuses_more_points_than_memory_allows():
    from roofline.sweep import MAX_POINTS

    with pytest.raises(RooflineError, match="more than 2e\\+07 points to keep in memory"):
        sweep_model("llama-3-8b", ["h100"], "decode", np.arange(1, MAX_POINTS // 2), [1024, 2048,
                                                                                    4096])


def test_a_grid_skips_the_layouts_the_model_cannot_run(run_cli):
    """--tp 1,4 --ep 1,4 stopped at tp 1 ep 4 (ep past dp·tp); it is skipped, and said."""
    import json

    code, out, err = run_cli("sweep", "model", "mixtral-8x7b", "--tp", "1,4", "--ep", "1,4",
                             "--batch", "8", "--json")
    assert code == 0, err
    skipped = json.loads(out)["frontier"]["skipped"]
    assert len(skipped) == 1 and "ep 4" in skipped[0] and "cannot exceed" in skipped[0]
    assert "roofline: note: skipped" in err
    code, _, err = run_cli("sweep", "model", "mixtral-8x7b", "--tp", "1", "--ep", "4",
                           "--batch", "8")
    assert code == 2 and "no configuration is valid" in err
