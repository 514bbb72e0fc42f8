"""The forecast's 80% interval: bands from the fit half of the published rows, checked on the
held-out half, never below the bound, on every expected figure of every output."""

from __future__ import annotations

import json
import math
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from roofline.expect import expected, expected_step
from roofline.expect.interval import INTERVALS, band, bands, op_kind, spread
from roofline.models import Parallel, analyze, decode, prefill, train
from roofline.ops.attention import attention
from roofline.ops.attention_backward import attention_backward
from roofline.ops.collectives import collective
from roofline.ops.elementwise import elementwise
from roofline.ops.matmul import matmul

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks/validation"))
import cases
import check


@cache
def _scored() -> list[cases.Scored]:
    return cases.scored()[0]


def test_the_committed_bands_are_the_validations_own() -> None:
    """intervals.json is what `check.py --intervals` computes from today's forecast: a change
    to the forecast must rewrite it (the bands describe the forecast that ships)."""
    fresh = check.intervals(_scored())
    stored = json.loads(INTERVALS.read_text())["kinds"]
    assert stored.keys() == fresh.keys()
    for kind, b in fresh.items():
        for key, value in b.items():
            assert stored[kind][key] == pytest.approx(value, abs=2e-6), (kind, key)


def test_held_out_coverage_is_near_80_percent() -> None:
    rows = _scored()
    held = [r for r in rows if check.held_out(r.id)]
    table = check.intervals(rows)
    assert 0.70 <= check.coverage(held, table) <= 0.90
    for kind in {r.kind for r in rows}:
        mine = [r for r in held if r.kind == kind]
        if len(mine) >= 40:  # fewer: a share of a few dozen rows swings by 10 points
            assert 0.70 <= check.coverage(mine, table) <= 0.90, kind


def test_the_conformal_ranks_by_hand() -> None:
    # n = 9: ranks floor(0.1*10) = 1 and ceil(0.9*10) = 9, the extremes
    assert check.band([float(x) for x in range(9)]) == (0.0, 8.0)
    # n = 19: ranks 2 and 18
    assert check.band([float(x) for x in range(19)]) == (1.0, 17.0)
    assert check.band([1.0] * 8) is None  # too few for both ranks: the pooled band instead
    assert band("no such kind") == bands()["all"]


def test_spread_by_hand() -> None:
    b = band("gemm")
    data = spread({"t_s": 1e-3, "tokens_per_s": 1000.0, "ttft_s": None}, 0.2e-3, "gemm")
    assert data["t_s_p10"] == pytest.approx(max(0.2e-3, 1e-3 * b.lo))
    assert data["t_s_p90"] == pytest.approx(1e-3 * b.hi)
    # a rate spans the same interval inverted: its low end is the slow end of the time
    assert data["tokens_per_s_p10"] == pytest.approx(1000.0 / b.hi)
    assert data["tokens_per_s_p90"] == pytest.approx(1000.0 * 1e-3 / data["t_s_p10"])
    assert "ttft_s_p10" not in data and data["interval"]["kind"] == "gemm"
    # never below the bound: a bound close to the expected time lifts the low end to it
    tight = spread({"t_s": 1e-3}, 0.999e-3, "collective")
    assert tight["t_s_p10"] == pytest.approx(0.999e-3)


@pytest.mark.parametrize(("cost", "kind"), [
    (matmul(4096, 4096, 4096), "gemm"),
    (attention(4, 4096, 4096, 32, 8, 128, block_q=128), "attention_fwd"),
    (attention(64, 1, 4096, 32, 8, 128, impl="decode"), "attention_decode"),
    (attention_backward(4, 4096, 4096, 32, 8, 128, block_kv=128), "attention_bwd"),
    (elementwise(2**26, "add"), "hbm"),
    (collective("all-reduce", 2**26, 8), "collective"),
])
def test_each_op_takes_the_band_of_its_kind(cost, kind) -> None:
    assert op_kind(cost) == kind


@pytest.mark.parametrize("phase", [decode(batch=16, context=4096),
                                   prefill(batch=2, prompt_len=2048),
                                   train(batch=8, seq_len=4096)])
@pytest.mark.parametrize("hw", ["h100", "mi300x", "b200"])
def test_every_step_figure_has_an_interval_around_it(phase, hw) -> None:
    e = expected_step(analyze("llama-3-8b", hw, phase, Parallel()))
    f = e.figures()
    for key in ("t_s", "tokens_per_s", "flops_per_s", "mfu", "ttft_s", "tpot_s"):
        if f[key] is None:
            continue
        lo, hi = f[key + "_p10"], f[key + "_p90"]
        assert lo <= hi
        if band(e.kind).lo <= 1 <= band(e.kind).hi:
            assert lo <= f[key] * (1 + 1e-12) and f[key] <= hi * (1 + 1e-12), key
    assert f["t_s_p10"] >= float(e.analysis.t_lower_s)  # no measurement beats the bound
    assert f["interval"]["kind"] == {"decode": "decode", "prefill": "prefill",
                                     "train": "train"}[phase.kind]


def test_op_intervals_over_a_sweep_are_arrays() -> None:
    m = np.array([1.0, 64.0, 4096.0])
    e = expected(matmul(m, 8192, 8192), "h100")
    lo, hi = e.interval()
    assert np.shape(lo) == (3,) and np.all(lo <= hi)
    assert np.all(np.asarray(lo) >= np.asarray(e.bound.t_lower_s))


def test_the_cli_prints_and_writes_the_interval(run_cli) -> None:
    code, out, _ = run_cli("op", "matmul", "--m", "4096", "--n", "4096", "--k", "4096",
                           "--hw", "h100", "--expect")
    assert code == 0 and "80% interval" in out and "held on" in out
    code, out, _ = run_cli("op", "all-reduce", "--bytes", "64MiB", "--ranks", "8", "--hw",
                           "h100", "--expect", "--json")
    data = json.loads(out)["expected"]
    for key in ("t_s", "busbw_Bps", "algbw_Bps"):
        assert data[key + "_p10"] <= data[key] <= data[key + "_p90"]
    code, out, _ = run_cli("model", "llama-3-8b", "--hw", "h100", "--phase", "decode",
                           "--batch", "8", "--expect", "--json")
    data = json.loads(out)["expected"]
    assert data["tpot_s_p10"] <= data["tpot_s"] <= data["tpot_s_p90"]
    assert data["interval"]["rows"] == bands()["decode"].rows
    code, out, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--expect", "--json")
    best = json.loads(out)["best"]["h100-sxm"]
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s"):  # (a plan's _pNN: its tails)
        assert best[key + "_lo80"] <= best[key] <= best[key + "_hi80"], key
    assert not math.isnan(best["ttft_s_hi80"])
