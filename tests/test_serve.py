"""roofline serve: the mixed continuous-batching step, the serving model's physics (compute
and HBM roofs, targets, disaggregation), queueing and speculative decoding against
independent simulations, fixed deployments, and the CLI."""

import json

import numpy as np
import pytest

from roofline.errors import RooflineError
from roofline.hardware import load_chip
from roofline.models import Parallel, Precision, analyze, decode, param_counts, prefill
from roofline.models.catalog import load_model
from roofline.models.memory import weight_bytes
from roofline.models.step import mixed
from roofline.serve import Load, Space, Targets, Workload, md1_wait_s, plan, spec_tokens_per_step

W = Workload.from_lengths(2048, 256)
SMALL = Space(tp=(1, 2), kv_dtypes=("fp8",), chunks=(512, 4096))


@pytest.fixture(scope="module")
def small_plan():
    return plan("llama-3.1-8b", ["h100", "mi300x"], W, Targets(ttft_s=2.0, tpot_s=0.03),
                Space(tp=(1, 2), kv_dtypes=("bf16", "fp8"), chunks=(512, 4096),
                      modes=("aggregated", "disaggregated")))


# --- the mixed step: one graph, decode and prefill chunk through the same weight reads -------


def test_mixed_step_does_the_decode_and_prefill_work_reading_the_weights_once():
    par = Parallel(tp=2)
    d = analyze("llama-3.1-8b", "h100", decode(32, 2048), par)
    p = analyze("llama-3.1-8b", "h100", prefill(1, 2048), par)
    m = analyze("llama-3.1-8b", "h100", mixed(32, 2048, 2048, 2048), par)
    # every FLOP of both steps, once (one logit for the prompt, as its prefill has)
    assert m.model_flops == pytest.approx(d.model_flops + p.model_flops, rel=1e-9)
    # but the weights stream once: fewer bytes, a step shorter than the two apart
    assert m.bytes["hbm"] < d.bytes["hbm"] + p.bytes["hbm"]
    assert max(d.t_lower_s, p.t_lower_s) <= m.t_lower_s < d.t_lower_s + p.t_lower_s


def test_mixed_step_with_prefix_hits_computes_only_the_uncached_tokens():
    full = analyze("llama-3.1-8b", "h100", mixed(8, 1024, 1024, 1024))
    half = analyze("llama-3.1-8b", "h100", mixed(8, 1024, 512, 1024, cached=512))
    assert half.flops < full.flops and half.t_lower_s < full.t_lower_s
    with pytest.raises(RooflineError, match="ride in a decode step"):
        from dataclasses import replace
        analyze("llama-3.1-8b", "h100", replace(prefill(1, 64), prefill_tokens=64))


# --- physics --------------------------------------------------------------------------------


def test_throughput_per_chip_never_exceeds_the_compute_roof_of_the_request_mix(small_plan):
    # a request needs at least 2 * N_body * (input + output) FLOPs through its layers and
    # 2 * N_lm_head * output through the LM head (logits only where a token is sampled: a
    # prompt's last one and each output; the embedding is a lookup); chips * peak / that is
    # the most requests/s
    c = small_plan.columns
    n = param_counts(load_model("llama-3.1-8b"))
    body = n.active - n.embedding - n.lm_head
    pairs = set(zip(c["hardware"].tolist(), c["dtype"].tolist(), strict=True))
    peaks = {(h, d): load_chip(h).peak_flops(d) for h, d in pairs}
    peak = np.array([peaks[h, d] for h, d in zip(c["hardware"], c["dtype"], strict=True)])
    roof = peak * W.output_len / (2 * body * (W.input_len + W.output_len)
                                  + 2 * n.lm_head * W.output_len)
    ok = c["feasible"] & c["fits"]
    assert ok.sum() > 100
    assert np.all(c["output_tokens_per_s_per_chip"][ok] <= roof[ok])


def test_throughput_per_chip_never_exceeds_the_hbm_roof_at_its_batch():
    # every step streams each chip's weights at least once: B·s tokens per weight read
    p = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(1, 2, 4), kv_dtypes=("fp8",),
                                                      weight_dtypes=("bf16", "fp8"),
                                                      chunks=(512,)))
    c = p.columns
    bw = load_chip("h100").level("hbm").bandwidth_Bps
    spec = load_model("llama-3.1-8b")
    embedding = param_counts(spec).embedding  # a lookup reads rows, not the table
    for tp in (1, 2, 4):
        for wd, act in (("bf16", "bf16"), ("fp8", "fp8")):
            sel = (c["tp"] == tp) & (c["weight_dtype"] == wd)
            assert set(c["dtype"][sel]) == {act}
            prec = Precision(weights=wd, activations=act)
            read = weight_bytes(spec, Parallel(tp=tp), prec) - embedding / tp * (
                2 if prec.tables == "bf16" else 1)
            roof = c["running"][sel] * bw / read / tp
            assert np.all(c["output_tokens_per_s_per_chip"][sel] <= roof)


def test_a_tighter_tpot_never_raises_throughput_per_chip():
    p = plan("llama-3.1-8b", ["h100"], W, Targets(ttft_s=3.0), SMALL)
    best = []
    for tpot in (0.1, 0.04, 0.02, 0.012, 0.008):
        q = plan("llama-3.1-8b", ["h100"], W, Targets(ttft_s=3.0, tpot_s=tpot), SMALL)
        found = q.best().get("h100-sxm")
        best.append(found.output_tokens_per_s_per_chip if found else 0.0)
        if found:
            assert found.tpot_s <= tpot
    assert best == sorted(best, reverse=True) and best[0] > best[-1]
    assert p.best()["h100-sxm"].output_tokens_per_s_per_chip >= best[0]


def test_disaggregation_never_wins_when_the_kv_transfer_alone_exceeds_the_ttft_target():
    # a long bf16 prompt's cache over 50 GB/s per chip takes longer than the target
    w = Workload.from_lengths(32768, 256)
    space = Space(tp=(8,), kv_dtypes=("bf16",), chunks=(8192,),
                  modes=("aggregated", "disaggregated"))
    loose = plan("llama-3.1-70b", ["h100"], w, Targets(ttft_s=60.0), space)
    c = loose.columns
    dis = c["mode"] == "disaggregated"
    transfer = float(c["kv_transfer_s"][dis][0])
    assert transfer > 0 and np.all(c["ttft_s"][dis] >= transfer)
    tight = plan("llama-3.1-70b", ["h100"], w, Targets(ttft_s=0.9 * transfer), space)
    assert not np.any(tight.ok & (tight.columns["mode"] == "disaggregated"))
    assert any(loose.ok & dis)  # with room for the transfer it is a candidate again


def test_kv_capacity_limits_the_running_batch_in_whole_blocks(small_plan):
    c = small_plan.columns
    assert np.all(c["running"][c["fits"]] <= c["max_running"][c["fits"]])
    assert W.kv_tokens_per_sequence() % 16 == 0
    # an fp8 cache holds more sequences than bf16 on the same chips
    one = (c["hardware"] == "h100-sxm") & (c["tp"] == 1) & (c["weight_dtype"] == "bf16")
    bf16 = c["max_running"][one & (c["kv_dtype"] == "bf16")].max()
    fp8 = c["max_running"][one & (c["kv_dtype"] == "fp8")].max()
    assert fp8 > 1.8 * bf16


def test_prefix_hits_shorten_ttft_and_raise_throughput():
    cold = plan("llama-3.1-8b", ["h100"], W, Targets(ttft_s=1.0, tpot_s=0.03), SMALL)
    warm = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(2048, 256, prefix_hit=0.5),
                Targets(ttft_s=1.0, tpot_s=0.03), SMALL)
    a, b = cold.best()["h100-sxm"], warm.best()["h100-sxm"]
    assert b.output_tokens_per_s_per_chip > a.output_tokens_per_s_per_chip
    pin = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("bf16",), chunks=(4096,),
                batch=(16,))
    x = plan("llama-3.1-8b", ["h100"], W, space=pin).row(0)
    y = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(2048, 256, prefix_hit=0.5),
             space=pin).row(0)
    assert y["prefill_s"] < x["prefill_s"] and y["tpot_s"] < x["tpot_s"]


# --- queueing and speculative decoding against simulations ----------------------------------


def test_md1_wait_matches_a_seeded_simulation():
    rng = np.random.default_rng(7)
    service = 0.2
    for rho in (0.3, 0.7, 0.9):
        gaps = rng.exponential(service / rho, 400_000)
        wait, total = 0.0, 0.0
        for gap in gaps[:200_000]:  # Lindley's recursion
            wait = max(0.0, wait + service - gap)
            total += wait
        assert total / 200_000 == pytest.approx(float(md1_wait_s(rho, service)), rel=0.06)
    assert md1_wait_s(1.0, service) == np.inf


def test_speculative_tokens_per_step_match_a_simulation_and_raise_throughput():
    rng = np.random.default_rng(3)
    for k, a in ((4, 0.7), (2, 0.5), (6, 0.9)):
        accepted = rng.random((100_000, k)) < a
        # the prefix of accepted drafts, plus the target model's own token
        gained = np.argmin(np.c_[accepted, np.zeros(len(accepted), bool)], axis=1) + 1
        assert gained.mean() == pytest.approx(spec_tokens_per_step(k, a), rel=0.01)
    assert spec_tokens_per_step(0, 0.0) == 1 and spec_tokens_per_step(3, 1.0) == 4
    pin = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("bf16",), chunks=(4096,),
                batch=(1,))
    plain = plan("llama-3.1-8b", ["h100"], W, space=pin).row(0)
    spec = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(2048, 256, spec_k=4,
                                                                accept=0.7), space=pin).row(0)
    assert spec["tpot_s"] < plain["tpot_s"]  # draft model not counted: a lower bound


# --- fixed deployments and loads -------------------------------------------------------------


def test_closed_loop_concurrency_is_the_running_batch_with_no_queue():
    pin = Space(tp=(8,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(2048,))
    w = Workload.from_lengths(1024, 1024)
    p = plan("llama-3.1-70b", ["h100"], w, space=pin, load=Load(concurrency=64))
    (r,) = [p.row(i) for i in range(len(p))]
    # 64 clients, each a short prefill then 1023 decode iterations: nearly all decode at
    # once (63 of 64), none waits, and Little's law holds: requests/s x E2E = the clients
    assert r["running"] == 63 and r["queue_s"] == 0 and r["chips"] == 8
    assert r["requests_per_s"] * r["e2e_s"] == pytest.approx(64, rel=1e-9)
    # TPOT: the mixed iteration of those decodes and the other clients' prompt tokens, no
    # slower than every slot decoding beside the steady prompt stream (the old reading)
    full = analyze("llama-3.1-70b", "h100", mixed(64, w.decode_context, 64 * 1024 / 1023,
                                                  1024), Parallel(tp=8),
                   Precision("fp8", "fp8", "fp8"))
    alone = analyze("llama-3.1-70b", "h100", decode(63, w.decode_context), Parallel(tp=8),
                    Precision("fp8", "fp8", "fp8"))
    assert alone.t_floor_s < r["tpot_s"] <= full.t_floor_s  # the bound: the floor
    assert r["e2e_s"] == pytest.approx(r["ttft_s"] + 1023 * r["tpot_s"])
    # disaggregated too: no request waits for a prefill server in a closed loop
    both = plan("llama-3.1-70b", ["h100"], w, space=Space(
        tp=(8,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(2048,),
        modes=("disaggregated",)), load=Load(concurrency=64))
    assert len(both) and np.all(both.columns["queue_s"] == 0)


def test_a_closed_loop_the_prefill_budget_cannot_keep_up_with_settles_and_queues():
    # 64 clients, 8192-token prompts, 16 output tokens, 2048-token chunks: 64 decoding would
    # admit 64·8192/15 prompt tokens per iteration, 17x the chunk. Every point was marked
    # infeasible ("0 meet the targets" with no targets); the loop settles where the budget
    # admits the prompts: 15·2048/8192 = 3.75 -> 3 decoding, the chunk full every iteration,
    # the other clients waiting (Little's law over wait + prefill + 15 iterations)
    pin = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(2048,),
                modes=("aggregated",))
    w = Workload.from_lengths(8192, 16)
    p = plan("llama-3.1-8b", ["h100"], w, space=pin, load=Load(concurrency=64))
    assert len(p) == 1
    r = p.row(0)
    assert r["feasible"] and r["running"] == 3
    prec = Precision("fp8", "fp8", "fp8")
    full = analyze("llama-3.1-8b", "h100", mixed(3, w.decode_context, 2048, 8192), Parallel(),
                   prec)
    alone = analyze("llama-3.1-8b", "h100", decode(3, w.decode_context), Parallel(), prec)
    assert alone.t_floor_s < r["tpot_s"] <= full.t_floor_s  # floor; others' prompts beside
    # the prompts the chunk admits per second, at the step's own time: the loop's rate
    assert r["requests_per_s"] == pytest.approx(2048 / 8192 / r["t_step_s"], rel=1e-9)
    assert r["requests_per_s"] * r["e2e_s"] == pytest.approx(64, rel=1e-9)  # Little
    assert r["queue_s"] == pytest.approx(r["ttft_s"] - r["prefill_s"]) and r["queue_s"] > 3
    # a loop the budget keeps up with: nearly all decode (the rest in prefill), no queue
    easy = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(512, 512), space=pin,
                load=Load(concurrency=64)).row(0)
    assert easy["running"] == 63 and easy["queue_s"] == 0
    # one client of 8192-token prompts and 2 output tokens: it decodes alone (TPOT was the
    # step with a whole prompt beside it, 30x), and req/s x E2E is that one client
    one = plan("llama-3.1-8b", ["h100"], Workload.from_lengths(8192, 2), space=Space(
        tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(8192,),
        modes=("aggregated",)), load=Load(concurrency=1)).row(0)
    solo = analyze("llama-3.1-8b", "h100", decode(1, 8193), Parallel(), prec)
    assert one["tpot_s"] == pytest.approx(solo.t_lower_s, rel=1e-9)
    # its bound and time by resource are that step's too (they were the full-load step's)
    assert one["bound"] == solo.bound == "hbm"
    assert sum(v for k, v in one.items() if k.startswith("time_")) == pytest.approx(
        one["t_step_s"], rel=1e-9)
    assert one["requests_per_s"] * one["e2e_s"] == pytest.approx(1, rel=1e-9)


def test_a_closed_loop_never_gets_slower_with_a_client_less_than_a_unit():
    # dp 2: 7 clients ran 6 and charged the 7th a whole cycle of queue (TTFT 77 ms against
    # 11 ms for 8 clients); a remainder under one dp·pp unit does not wait
    pin = Space(tp=(1,), dp=(2,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(256,),
                modes=("aggregated",))
    w = Workload.from_lengths(1000, 200)
    rows = [plan("llama-3.1-8b", ["h100"], w, space=pin, load=Load(concurrency=c)).row(0)
            for c in (6, 7, 8)]
    assert rows[1]["queue_s"] == 0 and rows[1]["ttft_s"] == rows[0]["ttft_s"]
    assert rows[2]["requests_per_s"] >= rows[1]["requests_per_s"]


def test_a_rate_sizes_whole_instances_and_latency_is_taken_at_the_load_they_carry():
    pin = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(4096,))
    cap = plan("llama-3.1-8b", ["h100"], W, space=pin)
    top = max(cap.columns["requests_per_s"])
    p = plan("llama-3.1-8b", ["h100"], W, Targets(tpot_s=0.03), pin, Load(rate=3 * top))
    c = p.columns
    assert np.allclose(c["output_tokens_per_s"], 3 * top * W.output_len)
    assert np.all(c["chips"] == c["instances"]) and c["instances"].min() >= 3
    best = p.best()["h100-sxm"]
    assert best.tpot_s <= 0.03 and best.requests_per_s == pytest.approx(3 * top)


def test_a_pinned_batch_with_a_rate_is_refused_the_load_sets_the_batch():
    # an open loop keeps rate x decode time sequences running (Little's law): a batch of 64
    # pinned under a load that keeps 5 in flight reported 64's TPOT (30.3 ms, not 11.5 ms)
    pin = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(4096,),
                batch=(64,))
    with pytest.raises(RooflineError, match=r"^batch pins the running batch, rate sets it"):
        plan("llama-3.1-8b", ["h100"], W, space=pin, load=Load(rate=1.0))
    plan("llama-3.1-8b", ["h100"], W, space=pin)  # the capacity at that batch: fine
    grid = Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(4096,),
                 batch=(1, 8, 64))  # a grid: the load picks from it
    plan("llama-3.1-8b", ["h100"], W, space=grid, load=Load(rate=1.0))


def test_mixed_request_lengths_enter_through_their_weighted_means():
    w = Workload.from_lengths([1000, 3000], [101, 301])
    assert w.input_len == 2000 and w.output_len == 201
    # decode steps weight the context: (100·(1000+50.5) + 300·(3000+150.5)) / 400
    assert w.decode_context == pytest.approx((100 * 1050.5 + 300 * 3150.5) / 400)
    with pytest.raises(RooflineError, match="at least 2 output tokens"):
        Workload.from_lengths(100, 1)


# --- CLI -------------------------------------------------------------------------------------


def test_cli_plan_text_json_and_csv(run_cli, tmp_path):
    argv = ["serve", "llama-3.1-8b", "--hw", "h100,h200", "--input-len", "2048",
            "--output-len", "256", "--ttft", "2s", "--tpot", "30ms", "--tp", "1,2",
            "--kv-dtype", "fp8", "--chunk", "2048", "--price", "h100=2.5"]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    assert "best per chip kind" in out and "h200-sxm" in out and "batch limited by" in out
    code, out, _ = run_cli(*argv, "--json", "--csv", str(tmp_path / "p.csv"))
    data = json.loads(out)
    best = data["best"]["h100-sxm"]
    assert best["tpot_s"] <= 0.03 and best["ttft_s"] <= 2
    assert best["usd_per_mtok"] == pytest.approx(
        2.5 / 3600 / best["output_tokens_per_s_per_chip"] * 1e6)
    assert best["e2e_s"] == pytest.approx(best["ttft_s"] + 255 * best["tpot_s"])
    assert best["limit"] and best["what_would_move_it"]
    header = (tmp_path / "p.csv").read_text().splitlines()[0].split(",")
    assert {"output_tokens_per_s_per_chip", "ttft_s", "tpot_s", "tokens_per_joule"} <= set(header)


def test_tokens_per_joule_names_the_tdp_and_its_source(run_cli, tmp_path):
    """tok/J divides by the chip file's TDP: the notes, the JSON sources and every CSV row
    say which watts and where they come from; a chip without a TDP says so."""
    import csv

    argv = ["serve", "llama-3.1-8b", "--hw", "h100,v5e", "--tp", "1", "--kv-dtype", "fp8",
            "--chunk", "2048", "--json", "--csv", str(tmp_path / "p.csv")]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    data = json.loads(out)
    h100 = load_chip("h100")
    assert data["sources"]["h100-sxm"]["tdp_w"] == h100.tdp_source
    assert "tpu-v5e" not in data["sources"]  # no TDP, so nothing to source
    energy = data["notes"][-1]
    assert f"h100-sxm: 700 W, source: {h100.tdp_source}" in energy
    assert "tpu-v5e: no TDP in its chip file" in energy
    best = data["best"]["h100-sxm"]
    assert best["tdp_w"] == 700
    assert best["tokens_per_joule"] == pytest.approx(best["output_tokens_per_s_per_chip"] / 700)
    rows = list(csv.DictReader((tmp_path / "p.csv").read_text().splitlines()))
    assert {(r["hardware"], r["tdp_source"]) for r in rows} == {
        ("h100-sxm", h100.tdp_source), ("tpu-v5e", "")}


@pytest.mark.parametrize("argv, needle", [
    (["--tpot", "50"], "no unit"),
    (["--rate", "2", "--concurrency", "4"], "not allowed with"),
    (["--tp", "3"], "tp (3) must divide"),
    (["--prefix-hit", "1.5"], "--prefix-hit: must be 0 to 1"),
    (["--accept", "0.5"], "--accept needs --spec-k"),
    (["--mode", "neither"], "unknown mode"),
    (["--price", "h100"], "CHIP=USD_PER_HOUR"),
])
def test_cli_bad_input_is_one_line_exit_2(run_cli, argv, needle):
    code, _, err = run_cli("serve", "llama-3.1-8b", "--tp", "1", *argv)
    assert code == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_plot_and_html_files(run_cli, tmp_path):
    png, html = tmp_path / "front.png", tmp_path / "plan.html"
    code, _, err = run_cli("serve", "llama-3.1-8b", "--tp", "1", "--kv-dtype", "fp8",
                           "--chunk", "2048", "--tpot", "20ms", "--ttft", "1s",
                           "--plot", str(png), "--html", str(html))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_serve_expect_is_labelled_and_never_faster_than_the_bound(run_cli):
    import json

    args = ["serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--input-len", "512",
            "--output-len", "256", "--concurrency", "16", "--json"]
    code, out, _ = run_cli(*args)
    code_e, out_e, _ = run_cli(*args, "--expect")
    assert code == code_e == 0
    bound, expected = json.loads(out), json.loads(out_e)
    assert expected["expected"] is True and bound["expected"] is False
    assert expected["notes"][0].startswith("Expected, not bounds")
    b, e = bound["best"]["h100-sxm"], expected["best"]["h100-sxm"]
    assert e["tpot_s"] >= b["tpot_s"] and e["output_tokens_per_s_per_chip"] <= b[
        "output_tokens_per_s_per_chip"]


# --- serve --lengths: a CSV of requests, each cell read as --input-len / --output-len -------

LENGTHS_ARGS = ("serve", "llama-3.1-8b", "--tp", "1", "--chunk", "2048", "--kv-dtype", "fp8")


def test_cli_lengths_csv_takes_a_bom_sizes_like_1k_and_other_columns(run_cli, tmp_path):
    path = tmp_path / "r.csv"
    # Excel's "CSV UTF-8": a BOM and CRLF; columns in any order, others ignored
    path.write_bytes(b'\xef\xbb\xbfid,output_len,input_len\r\na,"1k", 2048 \r\nb,256,4k\r\n')
    code, out, err = run_cli(*LENGTHS_ARGS, "--lengths", str(path), "--json")
    assert code == 0, err
    w = json.loads(out)["workload"]
    assert w["input_len"] == (2048 + 4096) / 2 and w["output_len"] == (1024 + 256) / 2


@pytest.mark.parametrize("text, needle", [
    ("input_len,output_len\n1e308,10\n", "line 2, column input_len: expected a positive whole "
     "number such as 8192, 8k (= 8192) or 1e6 (at most 2**53), got '1e308'"),
    ("input_len,output_len\n100,10\n1.5,10\n", "line 3, column input_len: expected a positive "
     "whole number"),
    ("input_len,output_len\nnan,10\n", "line 2, column input_len: expected a positive whole"),
    ("input_len,output_len\n0,10\n", "line 2, column input_len: expected a positive whole"),
    ("input_len,output_len\n100,\n", "line 2, column output_len: expected a positive whole"),
    ("input_len,output_len\n100,10\n\n100,1\n", "line 4, column output_len: every request "
     "needs at least 2 output tokens"),
    ("input_len,output_len\n100\n", "line 2: no output_len cell"),
    ("input_len,output_len\n1,024,10\n", "line 2: 3 cells, the header has 2"),
    ("prompt,output_len\n100,10\n", "needs a header naming input_len and output_len"),
    ("input_len,input_len,output_len\n1,2,10\n", "input_len and output_len once each"),
    ("input_len,output_len\n", "no requests after the header"),
    ("input_len,output_len\n" + "9" * 1000 + ",10\n", "got '" + "9" * 40 + "...'"),
    ("input_len,output_len\n" + "1" * 200_000 + ",10\n", "line 2: not valid CSV"),
], ids=["overflow", "fraction", "nan", "zero", "empty-cell", "one-output-token", "short-row",
        "unquoted-comma", "no-header", "duplicate-column", "no-rows", "long-cell",
        "over-field-limit"])
def test_cli_lengths_csv_bad_cell_names_file_line_and_column(run_cli, tmp_path, recwarn,
                                                              text, needle):
    path = tmp_path / "r.csv"
    path.write_text(text)
    code, _, err = run_cli(*LENGTHS_ARGS, "--lengths", str(path))
    assert code == 2 and f"--lengths {path}" in err and needle in err, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400 and "--input-len" not in err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_plan_names_its_times_in_every_output(run_cli, tmp_path):
    """Expected plans say so in the notes, the CSV, the chart and the page, and name their
    efficiencies' sources; a bound plan calls TTFT's queue an estimate, not a bound."""
    import csv
    import json

    base = ("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1")
    code, out, _ = run_cli(*base, "--json")
    notes = json.loads(out)["notes"]
    assert code == 0 and "TPOT a lower bound" in notes[0] and "not a bound" in notes[1]
    code, out, _ = run_cli(*base, "--expect", "--json", "--csv", str(tmp_path / "e.csv"),
                           "--html", str(tmp_path / "e.html"))
    data = json.loads(out)
    assert code == 0
    assert data["notes"][0].startswith("Expected, not bounds")
    assert "fitted to" in data["sources"]["h100-sxm"]["matmul"]
    rows = list(csv.DictReader((tmp_path / "e.csv").read_text().splitlines()))
    assert {r["step_times"] for r in rows} == {"expected"}
    page = (tmp_path / "e.html").read_text()
    assert "Expected times" in page and "Bounds, not forecasts" not in page


def test_a_batch_list_keeps_what_each_layout_can_split(run_cli):
    """--batch 2,3 with --dp 2 ran nothing ('batch (3) must be divisible by dp'); with
    --dp 1,2 every dp 2 configuration was dropped. Each layout keeps the values it splits."""
    import json

    code, out, err = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--dp", "1,2",
                             "--batch", "2,3", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert not data["skipped"]
    code, _, err = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--dp", "2",
                           "--batch", "3")
    assert code == 2 and "multiple of dp·pp (2)" in err


def test_fp8_weights_keep_a_checkpoints_narrower_experts():
    """gpt-oss's experts are MXFP4: the fp8 option widened them to fp8 (and the row said
    just 'fp8'); they stay MXFP4 and the row names the mix."""
    w = Workload.from_lengths(1024, 128)
    p = plan("gpt-oss-120b", ["h100"], w, space=Space(tp=(2,), weight_dtypes=("bf16", "fp8")))
    labels = set(p.columns["weight_dtype"].tolist())
    assert labels == {"bf16+mxfp4 experts", "fp8+mxfp4 experts"}
    # by default only the checkpoint's own mix is planned (no fp8 a bf16 checkpoint lacks)
    native = plan("gpt-oss-120b", ["h100"], w, space=Space(tp=(2,)))
    assert set(native.columns["weight_dtype"].tolist()) == {"bf16+mxfp4 experts"}


def test_moe_prompts_spread_over_every_step_bound_as_in_full_chunks():
    """Under uniform routing a MoE step's expert reads are concave in its tokens: spreading
    the prompts evenly over the decode steps read most experts every step, and InferenceX's
    gpt-oss-120b at 8k/1k, concurrency 4-16 on B200 / H100 / H200 (vLLM, SGLang,
    TensorRT-LLM) ran 1.05-1.34x faster than that even spread allowed; the cycle with the
    prompts in full chunks, the rest decoding alone, was the bound. The any-routing read
    (top_k experts a layer once a step has a token, ops.moe) is flat in the tokens, so the
    cycle is the even spread, as for a dense model."""
    from roofline.models.step import MemoryBudget, model_precision
    from roofline.serve.grid import _chunked_cycle
    from roofline.serve.iteration import Engine

    w = Workload.from_lengths(8192, 1024)
    for model in ("gpt-oss-120b", "llama-3.1-8b"):
        spec = load_model(model)
        e = Engine(spec, load_chip("b200"), Parallel(), model_precision(spec),
                   MemoryBudget())
        running, cap = np.array([8.0]), np.array([8192.0])
        prompts = running * w.uncached_len / w.decode_steps  # the even spread's per step
        even = np.asarray(e.step_time(e.iteration(running, w, prompts)))
        alone = np.asarray(e.step_time(e.iteration(running, w, 0)))
        cycle = _chunked_cycle(e, w, running, prompts, cap, even)
        assert alone[0] < even[0]
        assert cycle[0] == pytest.approx(even[0], rel=1e-12)


def test_trtllm_expected_batch_reserves_each_requests_whole_length():
    # GUARANTEED_NO_EVICT admits a request with blocks for prompt + output reserved: 1024 +
    # 8192 = 9216 tokens (576 whole 16-token blocks), a 50% prefix hit held once (512 fewer)
    w = Workload.from_lengths(1024, 8192)
    assert w.kv_tokens_per_sequence(reserve_full=True) == 9216
    assert Workload.from_lengths(1024, 8192, prefix_hit=0.5).kv_tokens_per_sequence(True) == 8704
    assert w.kv_tokens_per_sequence() < 9216  # the mean context's

    from roofline.models.step import MemoryBudget

    space = Space(tp=(1,), weight_dtypes=("fp8",), kv_dtypes=("fp8",), chunks=(8192,))

    def most(framework: str | None) -> float:
        p = plan("llama-3.1-70b", ["b200"], w, space=space, load=Load(concurrency=128),
                 budget=MemoryBudget(1.0), expect=framework is not None,
                 framework=framework, engine_limits=False)
        return float(np.max(p.columns["max_running"]))

    trt, vllm, bound = most("tensorrt-llm"), most("vllm"), most(None)
    assert vllm == bound  # engines that allocate as sequences grow: the mean context
    # the same KV bytes over a longer reservation, within one sequence's rounding
    ratio = w.kv_tokens_per_sequence() / 9216
    assert trt < vllm and abs(trt - vllm * ratio) <= 1 + ratio
