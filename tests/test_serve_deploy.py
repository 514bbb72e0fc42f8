"""Deployments as they are launched: a total GPU budget filled with whole instances or whole
prefill and decode workers, a pinned disaggregated deployment, expert tensor parallelism
apart from EP, an expert load-imbalance factor on the expected time only, and the plan as
NVIDIA Dynamo's launch commands."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from roofline import RooflineError
from roofline.models import Parallel, analyze, decode, load_model
from roofline.models.memory import local_param_split
from roofline.serve import Load, Space, Targets, Workload, plan
from roofline.serve.disagg import splits

W = Workload.from_lengths(2048, 256)


def _rows(p, **where):
    c = p.columns
    keep = np.ones(len(p), dtype=bool)
    for k, v in where.items():
        keep &= c[k] == v
    return np.flatnonzero(keep)


def test_a_budget_is_filled_with_whole_instances() -> None:
    """--gpus 8 at TP 2: 4 replicas, 4x the throughput of one at the same point, every
    count an integer; 7 GPUs hold 3 (floor), never 3.5."""
    one = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(2,), chunks=(2048,)))
    for gpus, replicas in ((8, 4), (7, 3)):
        p = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(2,), chunks=(2048,), gpus=gpus))
        c = p.columns
        for k in ("gpus", "instances", "prefill_workers", "decode_workers"):
            assert c[k].dtype == np.int64, k
        assert set(c["instances"].tolist()) == {replicas}
        assert set(c["gpus"].tolist()) == {2 * replicas}
        assert np.allclose(c["output_tokens_per_s"], replicas * one.columns["output_tokens_per_s"])
        assert np.allclose(c["tpot_s"], one.columns["tpot_s"])  # each replica as alone


def test_a_budget_at_a_rate_spreads_it_over_the_replicas() -> None:
    """At 20 requests/s over 4 replicas each carries 5: the latency of one instance at 5
    (where one instance carries it alone; below that batch the plan without a budget adds
    instances)."""
    space = Space(tp=(2,), chunks=(2048,))
    four = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(2,), chunks=(2048,), gpus=8),
                load=Load(rate=20.0)).columns
    alone = plan("llama-3.1-8b", ["h100"], W, space=space, load=Load(rate=5.0)).columns
    assert set(four["instances"].tolist()) == {4}
    assert np.allclose(four["requests_per_s"], 20.0)
    one = alone["instances"] == 1
    assert one.sum() > 10
    assert np.allclose(four["tpot_s"][one], alone["tpot_s"][one])
    assert np.allclose(four["ttft_s"][one], alone["ttft_s"][one])


def test_a_layout_larger_than_the_budget_is_skipped_with_the_reason() -> None:
    p = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(1, 8), chunks=(2048,), gpus=4))
    assert set(p.columns["tp"].tolist()) == {1}
    assert any("gpus 4 < the 8 chips of one instance" in s for s in p.skipped)


def test_splits_of_a_budget() -> None:
    """Every decode-worker count the budget allows, the rest in prefill workers; pins."""
    d, p = splits(4, 2, 16)
    assert d.tolist() == [1, 2, 3] and p.tolist() == [6, 4, 2]
    assert all(di * 4 + pi * 2 <= 16 for di, pi in zip(d, p, strict=True))
    d, p = splits(4, 2, 16, decode_workers=2)
    assert (d.tolist(), p.tolist()) == ([2], [4])
    d, p = splits(4, 2, None, decode_workers=1, prefill_workers=3)
    assert (d.tolist(), p.tolist()) == ([1], [3])
    assert splits(4, 2, 9, decode_workers=1, prefill_workers=3)[0].size == 0  # 10 > 9


def test_disaggregated_budget_uses_whole_workers_and_the_best_split() -> None:
    """Under --gpus 16 every disaggregated point is whole decode and prefill workers within
    16 GPUs; its throughput is the decode workers' at most, and the prefill pool keeps up."""
    space = Space(tp=(2, 4), chunks=(2048,), modes=("disaggregated",), gpus=16)
    p = plan("llama-3.1-70b", ["h100"], W, Targets(ttft_s=2.0, tpot_s=0.05), space)
    c = p.columns
    used = c["decode_workers"] * c["tp"] + c["prefill_workers"] * c["prefill_tp"]
    assert np.all(used == c["gpus"]) and np.all(c["gpus"] <= 16)
    assert np.all(c["decode_workers"] >= 1) and np.all(c["prefill_workers"] >= 1)
    assert c["gpus"].dtype == np.int64 and c["prefill_workers"].dtype == np.int64
    ok = p.ok
    assert ok.any() and np.all(c["utilization"][ok] < 1)
    # the prefill pool passes at least what the deployment serves
    per_prompt = c["prefill_s"]  # one prompt per pass (chunk 2048 = the prompt)
    assert np.all(c["requests_per_s"][ok] <= c["prefill_workers"][ok] / per_prompt[ok])
    best = p.best()["h100-sxm"]
    # no other whole split of the same layouts beats the chosen point's goodput
    same = ok & (c["tp"] == best.tp) & (c["prefill_tp"] == best.prefill_tp)
    assert best.output_tokens_per_s == pytest.approx(c["output_tokens_per_s"][same].max())


def test_without_a_budget_disaggregated_workers_are_whole() -> None:
    """The per-chip view rounds to the smallest whole deployment at the pool ratio: no
    fractional worker, and the ratio at scale stays in `prefill_ratio`."""
    space = Space(tp=(2, 4), chunks=(2048,), modes=("disaggregated",))
    c = plan("llama-3.1-70b", ["h100"], W, space=space).columns
    for k in ("prefill_workers", "decode_workers", "gpus", "chips"):
        assert np.all(np.mod(c[k], 1) == 0), k
    ratio = c["prefill_ratio"]
    # ratio >= 1: one decode worker and ceil(ratio) prefill; below: one prefill worker per
    # floor(1 / ratio) decode workers
    big = ratio >= 1
    assert np.all(c["decode_workers"][big] == 1)
    assert np.all(c["prefill_workers"][big] == np.ceil(ratio[big]))
    assert np.all(c["decode_workers"][~big] == np.floor(1 / ratio[~big]))
    assert np.all(c["utilization"] <= 0.95 + 1e-12)  # never above the rho searched


def test_a_pinned_disaggregated_deployment() -> None:
    """Prefill TP 4 x 2 workers and decode TP 8 x 1 at batch 64: one layout, one split,
    16 GPUs; throughput at most what the two prefill workers pass at 95% utilization."""
    space = Space(tp=(8,), batch=(64,), chunks=(2048,), modes=("disaggregated",),
                  prefill_tp=(4,), prefill_workers=2, decode_workers=1)
    p = plan("llama-3.1-70b", ["h100"], W, space=space)
    c = p.columns
    assert len(p) == 1
    assert (int(c["tp"][0]), int(c["prefill_tp"][0]), int(c["gpus"][0])) == (8, 4, 16)
    assert (int(c["prefill_workers"][0]), int(c["decode_workers"][0])) == (2, 1)
    assert c["requests_per_s"][0] <= 0.95 * 2 / c["prefill_s"][0] * (1 + 1e-12)
    assert c["requests_per_s"][0] <= 64 / (W.decode_steps * c["t_step_s"][0]) * (1 + 1e-12)


@pytest.mark.parametrize(("space", "message", "cli"), [
    (Space(modes=("disaggregated",), decode_workers=2),
     "decode_workers pins one pool: give the other's workers too, or gpus",
     "--decode-workers pins one pool: give the other's workers too, or --gpus"),
    (Space(prefill_tp=(4,)), "prefill_tp sets a disaggregated deployment: add modes",
     "--prefill-tp sets a disaggregated deployment: add --mode"),
    (Space(eplb=0.5), "eplb: the hottest", "--eplb: the hottest"),
])
def test_deployments_that_cannot_be_planned_say_why(space, message, cli) -> None:
    from roofline.cli.flags import cli_message

    with pytest.raises(RooflineError, match=message) as caught:
        plan("llama-3.1-8b", ["h100"], W, space=space)
    assert cli_message(caught.value).startswith(cli)  # the CLI names its flags


def test_budget_columns_are_integers_in_json_and_csv(run_cli, tmp_path) -> None:
    out_csv = tmp_path / "plan.csv"
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--mode",
                           "disaggregated", "--tp", "2,4", "--gpus", "16", "--json",
                           "--csv", str(out_csv))
    assert code == 0
    best = json.loads(out)["best"]["h100-sxm"]
    for k in ("gpus", "instances", "prefill_workers", "decode_workers"):
        assert isinstance(best[k], int), k
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert rows and all(r["gpus"].isdigit() and r["prefill_workers"].isdigit() for r in rows)
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--mode",
                           "disaggregated", "--tp", "2,4", "--gpus", "16")
    assert code == 0 and "decode worker(s)" in out and "prefill worker(s)" in out


def test_pins_on_the_command_line(run_cli) -> None:
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--prefill-tp", "4",
                           "--prefill-workers", "2", "--decode-tp", "8", "--decode-workers",
                           "1", "--decode-batch", "64", "--chunk", "2048", "--json")
    assert code == 0
    best = json.loads(out)["best"]["h100-sxm"]
    assert (best["mode"], best["gpus"], best["running"]) == ("disaggregated", 16, 64)
    code, _, err = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--decode-workers", "2")
    assert code == 2 and "--decode-workers pins one pool" in err


# --- expert tensor parallelism ---------------------------------------------------------------


def test_moe_tp_shards_experts_by_moe_tp_times_ep() -> None:
    """Mixtral-8x7B (8 experts of 3 x 4096 x 14336, top-2, 32 layers) at attention tp 2 x
    dp 4, experts moe_tp 2 x ep 4: each chip holds 8/4 = 2 experts, half of each:
    2 x 3 x 4096 x 14336 / 2 = 176,160,768 parameters per layer, 5,637,144,576 in all.
    A decode step of 64 sequences routes 128 (token, expert) pairs, 32 per EP rank, each
    2 x 4096 x 3 x 14336 / 2 FLOPs on this chip's half: 5,637,144,576 FLOPs per layer."""
    spec = load_model("mixtral-8x7b")
    par = Parallel(tp=2, dp=4, ep=4, moe_tp=2)
    assert par.expert_tp == 2
    assert local_param_split(spec, par)[1] == 2 * 3 * 4096 * 14336 / 2 * 32
    a = analyze(spec, "h100", decode(64, 1024), par)
    flops = sum(op.cost.flops["bf16"] for op in a.ops
                if op.name in ("experts up/gate", "experts down"))
    assert flops == pytest.approx(32 * 2 * 4096 * 3 * 14336 / 2)
    up = next(op for op in a.ops if op.name == "experts up/gate")
    # the bound, any routing: top_k / ep = 2 / 4 of one expert's up/gate half (2 x 4096 x
    # 7168 bf16) a rank, plus the 32 pairs' input (4096) and output (7168) activations
    assert up.cost.bytes["hbm"] == pytest.approx(
        0.5 * 2 * 4096 * 7168 * 2 + 32 * (4096 + 7168) * 2, rel=1e-12)
    # the expected time, uniform routing: both of the rank's experts' up/gate halves
    assert up.cost.runs is not None and up.cost.runs.bytes["hbm"] == pytest.approx(
        2 * 2 * 4096 * 7168 * 2 + 32 * (4096 + 7168) * 2, rel=1e-4)


def test_moe_tp_matches_the_implied_layouts() -> None:
    """moe_tp = tp without EP and moe_tp 1 with EP are the layouts ep alone implied: the
    same step time to the last bit."""
    spec = load_model("mixtral-8x7b")
    for implied, explicit in ((Parallel(tp=8), Parallel(tp=8, moe_tp=8)),
                              (Parallel(tp=2, dp=4, ep=8), Parallel(tp=2, dp=4, ep=8,
                                                                    moe_tp=1))):
        a, b = (analyze(spec, "h100", decode(64, 1024), p) for p in (implied, explicit))
        assert a.t_lower_s == b.t_lower_s


def test_moe_tp_sends_each_slice_its_tokens() -> None:
    """With EP, each of an expert's moe_tp slices needs the token: at the same EP group
    and tokens per chip, moe_tp 2 dispatches twice the bytes of whole experts (one copy per
    destination rank aside)."""
    spec = load_model("mixtral-8x7b")
    whole = analyze(spec, "h100", decode(64, 1024), Parallel(tp=1, dp=4, ep=4))
    split = analyze(spec, "h100", decode(128, 1024), Parallel(tp=1, dp=8, ep=4, moe_tp=2))

    def dispatch(a):
        return next(op for op in a.ops if op.name == "ep dispatch all-to-all")

    # 16 tokens per chip in both, over 4 EP ranks; each pair goes to 2 slices instead of 1
    assert dispatch(split).cost.link_bytes["scale-up"] == pytest.approx(
        2 * dispatch(whole).cost.link_bytes["scale-up"], rel=1e-12)


@pytest.mark.parametrize(("par", "message"), [
    (Parallel(tp=2, dp=4, ep=2, moe_tp=2), r"moe_tp \(2\) x ep \(2\) must equal tp·dp \(8\)"),
    (Parallel(tp=2, dp=2, moe_tp=4), "without EP is not modelled"),
])
def test_moe_tp_layouts_that_do_not_split_are_refused(par, message) -> None:
    with pytest.raises(RooflineError, match=message):
        analyze("mixtral-8x7b", "h100", decode(64, 1024), par)
    with pytest.raises(RooflineError, match="needs an MoE model"):
        analyze("llama-3.1-8b", "h100", decode(64, 1024), Parallel(tp=2, moe_tp=2))


def test_serve_searches_moe_tp_with_ep_derived(run_cli) -> None:
    p = plan("mixtral-8x7b", ["h100"], W, space=Space(tp=(2,), dp=(4,), moe_tp=(1, 2),
                                                      chunks=(2048,)))
    c = p.columns
    assert sorted(set(zip(c["moe_tp"].tolist(), c["ep"].tolist(), strict=True))) == \
        [(1, 8), (2, 4)]
    code, out, _ = run_cli("serve", "mixtral-8x7b", "--hw", "h100", "--tp", "2", "--dp", "4",
                           "--moe-tp", "2", "--json")
    assert code == 0 and json.loads(out)["best"]["h100-sxm"]["moe_tp"] == 2


# --- expert load imbalance -------------------------------------------------------------------


def test_eplb_slows_the_expected_expert_gemms_never_the_bound() -> None:
    """The hottest EP rank's load over the mean stretches the expected expert GEMMs on the
    math roof linearly (imbalance 3 adds twice what 2 adds), leaves weight-streaming ones
    (a small decode batch reads each expert once whatever its tokens) and the bound alone;
    without EP (every rank serves every expert's share) it changes nothing."""
    from roofline.expect import expected_step

    spec = load_model("mixtral-8x7b")
    a = analyze(spec, "h100", decode(16384, 1024), Parallel(tp=1, dp=8, ep=8))
    t1, t2, t3 = (float(expected_step(a, imbalance=k).t_s) for k in (1.0, 2.0, 3.0))
    assert t1 < t2 < t3 and t3 - t1 == pytest.approx(2 * (t2 - t1), rel=1e-9)
    small = analyze(spec, "h100", decode(8, 1024), Parallel(tp=1, dp=8, ep=8))
    assert float(expected_step(small, imbalance=3.0).t_s) == \
        float(expected_step(small, imbalance=1.0).t_s)
    bound = plan(spec, ["h100"], W, space=Space(tp=(1,), dp=(8,), ep=(8,), chunks=(2048,),
                                                eplb=1.5))
    even = plan(spec, ["h100"], W, space=Space(tp=(1,), dp=(8,), ep=(8,), chunks=(2048,)))
    assert np.array_equal(bound.columns["tpot_s"], even.columns["tpot_s"])
    hot, cool = (plan(spec, ["h100"], W, space=Space(tp=(1,), dp=(8,), ep=(8,),
                                                    chunks=(2048,), batch=(2048,), eplb=k),
                      expect=True) for k in (1.5, 1.0))
    assert np.all(hot.columns["tpot_s"] > cool.columns["tpot_s"])
    no_ep = [plan(spec, ["h100"], W, space=Space(tp=(8,), ep=(1,), chunks=(2048,),
                                                 batch=(2048,), eplb=k), expect=True)
             for k in (1.0, 1.5)]
    assert np.array_equal(no_ep[0].columns["tpot_s"], no_ep[1].columns["tpot_s"])


def test_unstated_eplb_is_unbalanced_only_where_attention_dp_feeds_ep() -> None:
    """No balancer stated: attention-DP replicas feeding one EP group run TensorRT-LLM's
    measured unbalanced experts (UNBALANCED_EXPERTS = 1 + 1.564); tensor-parallel attention
    over EP runs balanced."""
    from roofline.serve.iteration import UNBALANCED_EXPERTS

    assert abs(UNBALANCED_EXPERTS - 2.564) < 1e-12
    spec = load_model("mixtral-8x7b")

    def tpot(eplb: float | None, **par: tuple[int, ...]) -> np.ndarray:
        return plan(spec, ["h100"], W, space=Space(**par, chunks=(2048,), batch=(2048,),
                                                   eplb=eplb), expect=True).columns["tpot_s"]

    adp = dict(tp=(1,), dp=(8,), ep=(8,))
    assert np.array_equal(tpot(None, **adp), tpot(UNBALANCED_EXPERTS, **adp))
    assert np.all(tpot(None, **adp) > tpot(1.0, **adp))
    tp_ep = dict(tp=(8,), dp=(1,), ep=(8,))
    assert np.array_equal(tpot(None, **tp_ep), tpot(1.0, **tp_ep))


def test_hottest_rank_stretches_token_work_not_the_weight_stream() -> None:
    """slowest_rank: a rank with F x the mean's tokens takes max(weight stream, F x math);
    hand-worked: math 1 ms, HBM 2 ms -> F 3: 3 ms / 2 ms = 1.5; F 1.5: still 2 ms (1.0);
    links are not token work (a collective's wait is its own)."""
    from roofline.expect.step import slowest_rank

    assert slowest_rank({"compute": 1e-3, "hbm": 2e-3}, 3.0) == pytest.approx(1.5)
    assert slowest_rank({"compute": 1e-3, "hbm": 2e-3}, 1.5) == pytest.approx(1.0)
    assert slowest_rank({"compute": 1e-3, "vector": 2e-3}, 2.0) == pytest.approx(2.0)
    assert slowest_rank({"scale-up": 1e-3}, 4.0) == pytest.approx(1.0)
    swept = np.asarray(slowest_rank({"compute": np.array([1.0, 3.0]), "hbm": np.array([2.0,
                                                                                  2.0])}, 2.0))
    assert swept == pytest.approx([1.0, 2.0])


def test_attention_dp_straggle_slows_mixed_steps_only() -> None:
    """ADP_STRAGGLE (1 / TensorRT-LLM's measured mean / max tokens per rank, 54.11%) stretches
    the token work of every op but the routed experts in an aggregated step of attention-DP replicas
    over EP that carries prompt chunks; a decode-only step, the bound and replicas without
    EP are untouched."""
    from roofline import load_chip
    from roofline.expect import expected_step
    from roofline.models import model_precision
    from roofline.models.step import MemoryBudget, mixed
    from roofline.serve.iteration import ADP_STRAGGLE, Engine, attention_dp_straggle

    assert abs(ADP_STRAGGLE - 1.848) < 1e-3
    spec = load_model("mixtral-8x7b")
    par = Parallel(tp=1, dp=8, ep=8)
    a = analyze(spec, "h100", mixed(64, 1024, 8 * 2048, 2048), par)
    plain = float(expected_step(a).t_s)
    slowed = float(expected_step(a, straggle=ADP_STRAGGLE).t_s)
    assert plain < slowed < ADP_STRAGGLE * plain
    dec = analyze(spec, "h100", decode(64, 1024), par)
    assert attention_dp_straggle(par, dec.phase) == 1.0
    assert attention_dp_straggle(par, a.phase) == ADP_STRAGGLE
    assert attention_dp_straggle(Parallel(dp=8), a.phase) == 1.0
    swept = mixed(64, 1024, np.array([0.0, 2048.0]), 2048)  # a sweep: one point decode-only
    assert np.asarray(attention_dp_straggle(par, swept)).tolist() == [1.0, ADP_STRAGGLE]
    budget = MemoryBudget(0.9)
    bound = Engine(spec, load_chip("h100"), par, model_precision(spec), budget)
    assert float(bound.step_time(a)) == float(a.t_floor_s)
    expect = Engine(spec, load_chip("h100"), par, model_precision(spec), budget, expect=True)
    assert float(expect.step_time(a)) == pytest.approx(slowed)
    assert float(expect.step_time(dec)) == pytest.approx(float(expected_step(dec).t_s))


# --- Dynamo ----------------------------------------------------------------------------------


def test_emit_dynamo_disaggregated(run_cli) -> None:
    """A frontend, then one worker line per prefill worker (--is-prefill-worker) and per
    decode worker, each with its pool's parallel size."""
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--prefill-tp", "4",
                           "--prefill-workers", "2", "--decode-tp", "8", "--decode-workers",
                           "1", "--decode-batch", "64", "--chunk", "2048", "--emit", "dynamo",
                           "--json")
    assert code == 0
    lines = json.loads(out)["launch"]["h100-sxm"].splitlines()
    assert lines[0] == "python -m dynamo.frontend --http-port 8000 &"
    # two 4-GPU prefill workers fill node 0, the 8-GPU decode worker node 1
    assert lines[1:] == [
        "# node 0", lines[2], lines[3], "# node 1", lines[5]]
    prefill, decode_ = lines[2:4], lines[5]
    assert prefill[0].startswith("CUDA_VISIBLE_DEVICES=0,1,2,3 python -m dynamo.vllm --model "
                                 "meta-llama/Llama-3.1-70B --tensor-parallel-size 4")
    assert prefill[1].startswith("CUDA_VISIBLE_DEVICES=4,5,6,7 ")
    assert all(x.endswith("--is-prefill-worker &") and "--max-num-batched-tokens 2048" in x
               for x in prefill)
    assert decode_.startswith("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m dynamo.vllm")
    assert "--tensor-parallel-size 8" in decode_ and "--max-num-seqs 64" in decode_
    assert "--is-prefill-worker" not in decode_ and not decode_.endswith("&")


def test_emit_dynamo_sglang_and_replicas(run_cli) -> None:
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--tp", "4", "--gpus",
                           "8", "--engine", "sglang", "--emit", "dynamo", "--json")
    assert code == 0
    lines = [x for x in json.loads(out)["launch"]["h100-sxm"].splitlines()
             if not x.startswith("#")]
    assert [x.split(" python")[0] for x in lines[1:]] == ["CUDA_VISIBLE_DEVICES=0,1,2,3",
                                                         "CUDA_VISIBLE_DEVICES=4,5,6,7"]
    assert all("python -m dynamo.sglang --model-path " in x and "--tp 4" in x
               for x in lines[1:])
    code, out, _ = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--prefill-tp", "4",
                           "--prefill-workers", "1", "--decode-workers", "1", "--tp", "4",
                           "--engine", "sglang", "--emit", "sglang", "--json")
    lines = [x for x in json.loads(out)["launch"]["h100-sxm"].splitlines()
             if not x.startswith("#")]
    assert code == 0 and [x.split("--disaggregation-mode ")[1].split()[0] for x in lines] == \
        ["prefill", "decode"]
    code, _, err = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--prefill-tp", "4",
                           "--prefill-workers", "1", "--decode-workers", "1", "--tp", "4",
                           "--emit", "vllm")
    assert code == 2 and "--emit dynamo prints them" in err
    code, _, err = run_cli("serve", "llama-3.1-70b", "--hw", "h100", "--tp", "4",
                           "--engine", "tensorrt-llm", "--emit", "dynamo")
    assert code == 2 and "emit dynamo: workers run vllm or sglang" in err


def test_under_a_budget_the_best_point_serves_the_most() -> None:
    """The budget is paid for whole: the best point has the most output tokens/s of the
    deployment among those meeting the targets, not the most per GPU used."""
    space = Space(tp=(2, 4, 8), chunks=(512, 8192), modes=("disaggregated",), gpus=16)
    p = plan("llama-3.1-70b", ["h100"], W, Targets(ttft_s=2.0, tpot_s=0.05), space)
    best = p.best()["h100-sxm"]
    assert best.output_tokens_per_s == p.columns["output_tokens_per_s"][p.ok].max()


def test_workers_are_placed_node_by_node() -> None:
    from roofline.serve.launch import _placed

    text = _placed([("a", 4), ("b", 6), ("c", 16), ("d", 2)], 8, "front")
    assert text.splitlines() == [
        "front &", "# node 0", "CUDA_VISIBLE_DEVICES=0,1,2,3 a &", "# node 1",
        "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5 b &",
        "# nodes 2-3: one worker over 16 GPUs (the engine's multi-node launch)", "c &",
        "# node 4", "CUDA_VISIBLE_DEVICES=0,1 d"]


def test_published_expert_tp_inside_ep_is_read_as_stated() -> None:
    """NVIDIA's SGLang DeepSeek-R1 row with tp 64, moe_tp 8 x moe_ep 8 is that layout (it
    was read as ep 64 before moe_tp existed), and its bound holds."""
    import silicon  # benchmarks/validation (tests/conftest.py)

    cases, _ = silicon.cases()
    c = next(c for c in cases if c.id == "dsr1_b200_sglang_fp4_agg_1024x8192_c4_cfg201")
    assert (c.layout.tp, c.layout.dp, c.layout.ep, c.layout.moe_tp) == (64, 1, 8, 8)
    assert not c.layout.approx
    assert silicon.evaluate(c).beats <= 1


# --- speculative decoding: drafting --------------------------------------------------------


def test_drafting_costs_k_one_layer_passes_in_the_expected_step_only() -> None:
    """A step verifying k drafts per sequence spends k passes of a one-layer draft module
    (draft_module: an MoE layer for DeepSeek, its MTP module) on the expected time: linear in
    k, nothing without drafts or in a prefill pass, a small share of DeepSeek-R1's 61-layer
    step, never on the bound."""
    from roofline import load_chip
    from roofline.expect import expected_step
    from roofline.models import model_precision, prefill
    from roofline.models.step import MemoryBudget
    from roofline.serve.iteration import Engine

    spec = load_model("deepseek-r1")
    par = Parallel(tp=8, ep=8)
    args = (spec, load_chip("b200"), par, model_precision(spec), MemoryBudget(0.9))
    e = Engine(*args, expect=True)
    one, two, four = (analyze(spec, "b200", decode(64, 2048, k), par) for k in (1, 2, 4))
    assert e.drafting_s(one) == 0.0 and e.drafting_s(analyze(spec, "b200", prefill(1, 512),
                                                             par)) == 0.0
    assert float(e.drafting_s(four)) == pytest.approx(3 * float(e.drafting_s(two)))
    assert 0 < float(e.drafting_s(two)) < 0.1 * float(expected_step(one).t_s)
    assert float(e.step_time(four)) == pytest.approx(float(expected_step(four).t_s) +
                                                     float(e.drafting_s(four)))
    assert float(Engine(*args).step_time(four)) == float(four.t_floor_s)
