"""Training steps: pipeline schedules, ZeRO stages, overlap, fp8 GEMMs (issue 13)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.errors import RooflineError
from roofline.models import Parallel, Precision, analyze, load_model, train
from roofline.models.memory import local_params
from roofline.models.schedule import Schedule


def test_bubbles_by_hand_llama_3_70b_pp8_16_microbatches(run_cli):
    par = Parallel(tp=8, pp=8, dp=1, microbatches=16)
    one = analyze("llama-3-70b", "h100", train(16, 4096), par, schedule=Schedule("1f1b"))
    assert one.bubble_fraction == 7 / 16 == 0.4375
    inter = analyze("llama-3-70b", "h100", train(16, 4096), par,
                    schedule=Schedule("interleaved", vpp=4))
    assert inter.bubble_fraction == 7 / 64
    assert inter.t_lower_s < one.t_lower_s  # a smaller bubble, the same work
    zb = analyze("llama-3-70b", "h100", train(16, 4096), par, schedule=Schedule("zero-bubble"))
    assert zb.bubble_fraction == 0 and zb.t_lower_s < inter.t_lower_s
    code, out, _ = run_cli("model", "llama-3-70b", "--phase", "train", "--batch", "16",
                           "--seq-len", "4096", "--tp", "8", "--pp", "8", "--microbatches", "16",
                           "--pp-schedule", "interleaved", "--vpp", "4", "--json")
    assert code == 0
    assert json.loads(out)["pipeline"] == {"schedule": "interleaved", "vpp": 4,
                                           "microbatches": 16, "bubble_fraction": 7 / 64}


def test_in_flight_activations_follow_the_schedule():
    par = Parallel(tp=8, pp=4, microbatches=16)
    acts = {s: analyze("llama-3-70b", "h100", train(16, 4096), par,
                       schedule=Schedule(s, 2 if s == "interleaved" else 1)
                       ).memory.activations_bytes
            for s in ("gpipe", "1f1b", "interleaved")}
    # GPipe holds all 16 micro-batches, 1F1B pp = 4, interleaved 4·(1 + 3/8)
    assert acts["gpipe"] > acts["interleaved"] > acts["1f1b"]


def test_zero_stages_memory_by_hand_and_zero_3_is_fsdp():
    spec = load_model("llama-3-8b")
    p = local_params(spec, Parallel(dp=8))
    mem = {z: analyze(spec, "h100", train(8, 2048), Parallel(dp=8, zero=z)).memory
           for z in range(4)}
    # 12 B of optimizer state and 2 B of gradients per parameter; weights 2 B
    assert mem[0].optimizer_bytes == pytest.approx(p * 14)
    assert mem[1].optimizer_bytes == pytest.approx(p * 12 / 8 + p * 2)
    assert mem[2].optimizer_bytes == pytest.approx(p * 14 / 8)
    assert mem[3].optimizer_bytes == pytest.approx(p * 14 / 8)
    assert mem[3].weights_bytes == pytest.approx(mem[0].weights_bytes / 8)
    fsdp = analyze(spec, "h100", train(8, 2048), Parallel(dp=8, fsdp=True))
    z3 = analyze(spec, "h100", train(8, 2048), Parallel(dp=8, zero=3))
    assert fsdp.t_lower_s == z3.t_lower_s and fsdp.memory == z3.memory
    names = {z: {op.name for op in analyze(spec, "h100", train(8, 2048),
                                           Parallel(dp=8, zero=z)).ops} for z in range(4)}
    assert "dp gradient all-reduce" in names[0]
    assert {"zero-1 gradient reduce-scatter", "zero-1 weight all-gather"} <= names[1]
    assert {"fsdp weight all-gather", "fsdp gradient reduce-scatter"} <= names[3]
    with pytest.raises(RooflineError, match="zero must be 0, 1, 2 or 3"):
        analyze(spec, "h100", train(8, 2048), Parallel(dp=8, zero=4))


def test_dp_gradients_hidden_but_the_last_bucket():
    spec = load_model("llama-3-8b")
    a = analyze(spec, "h100", train(64, 4096), Parallel(dp=8))
    serial = analyze(spec, "h100", train(64, 4096), Parallel(dp=8),
                     schedule=Schedule(overlap=False))
    sync = next(op for op in serial.ops if op.name == "dp gradient all-reduce")
    # exposed: one layer's bucket of the all-reduce; the rest hides behind the backward
    assert a.exposed_comm_s == pytest.approx(float(sync.t_lower_s) / spec.layers, rel=1e-9)
    assert a.hidden_comm_s == pytest.approx(float(sync.t_lower_s) * (1 - 1 / spec.layers),
                                            rel=1e-9)
    assert serial.t_lower_s - a.t_lower_s == pytest.approx(a.hidden_comm_s, rel=1e-9)
    assert a.t_floor_s <= a.t_lower_s <= a.t_upper_s
    row = next(op for op in a.ops if op.name == "dp gradient all-reduce")
    assert row.t_lower_s == pytest.approx(a.exposed_comm_s)  # its line is the exposed part


def test_tp_overlap_hides_the_tp_collectives():
    par = Parallel(tp=8)
    plain = analyze("llama-3-70b", "h100", train(8, 4096), par, schedule=Schedule())
    hidden = analyze("llama-3-70b", "h100", train(8, 4096), par,
                     schedule=Schedule(tp_overlap=True))
    assert hidden.t_lower_s < plain.t_lower_s
    assert hidden.exposed_comm_s < plain.exposed_comm_s
    assert hidden.t_lower_s >= hidden.t_floor_s


def test_fp8_gemms_with_bf16_attention():
    fp8 = analyze("llama-3-8b", "h100", train(8, 4096), Parallel(),
                  Precision(matmul="fp8"))
    bf16 = analyze("llama-3-8b", "h100", train(8, 4096), Parallel())
    assert set(fp8.flops_by_dtype) == {"fp8", "bf16"}  # attention stays bf16
    assert fp8.flops_by_dtype["fp8"] > 5 * fp8.flops_by_dtype["bf16"]  # 4k: attention ~15%
    assert fp8.t_lower_s < bf16.t_lower_s
    assert fp8.model_flops == pytest.approx(bf16.model_flops)  # the same useful work


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2, 8]), m=st.sampled_from([1, 4, 8]),
       zero=st.sampled_from([0, 1, 2, 3]),
       sched=st.sampled_from(["gpipe", "1f1b", "interleaved", "zero-bubble"]),
       tp_overlap=st.booleans(), overlap=st.booleans(), recompute=st.booleans())
def test_floor_lower_upper_ordering(tp, pp, dp, m, zero, sched, tp_overlap, overlap,
                                    recompute):
    if sched == "interleaved" and m % pp:
        m = pp
    par = Parallel(tp=tp, pp=pp, dp=dp, microbatches=m, zero=zero if dp > 1 else 0)
    a = analyze("llama-3-8b", "h100", train(m * dp * 2, 2048, recompute), par,
                schedule=Schedule(sched, 2 if sched == "interleaved" else 1, tp_overlap,
                                  False, overlap))
    assert a.t_floor_s <= a.t_lower_s * (1 + 1e-12)
    assert a.t_lower_s <= a.t_upper_s * (1 + 1e-12)
    assert sum(float(op.t_lower_s) for op in a.ops) == pytest.approx(a.t_lower_s, rel=1e-9)
    assert np.isfinite(a.mfu) and 0 < a.mfu <= 1


def test_schedule_errors_are_one_line(run_cli):
    code, _, err = run_cli("model", "llama-3-8b", "--phase", "train", "--pp", "2",
                           "--batch", "3", "--microbatches", "3", "--pp-schedule",
                           "interleaved", "--vpp", "2")
    assert code == 2 and "multiples of pp" in err
    code, _, err = run_cli("model", "llama-3-8b", "--phase", "train", "--pp-schedule", "x")
    assert code == 2 and "gpipe" in err
    code, _, err = run_cli("model", "llama-3-8b", "--zero", "1")
    assert code == 2 and "--zero applies to --phase train" in err


# --- no schedule named: the best published one, the common one beside it ------------------


def test_no_schedule_named_bounds_training_under_the_best_published_schedule():
    from roofline.models.schedule import COMMON, best_schedule

    par = Parallel(tp=8, pp=8, dp=2, microbatches=16)
    phase = train(32, 4096)
    head = analyze("llama-3-70b", "h100", phase, par)
    assert head.schedule == best_schedule(par) == Schedule("zero-bubble", tp_overlap=True,
                                                           ep_overlap=True)
    assert not head.schedule_named and head.bubble_fraction == 0  # m = 16 >= p = 8
    common = analyze("llama-3-70b", "h100", phase, par, schedule=COMMON)
    assert head.common_t_lower_s == pytest.approx(float(common.t_lower_s), rel=1e-12)
    assert head.common_tokens_per_s == pytest.approx(float(common.tokens_per_s), rel=1e-12)
    # 1F1B: 16 + 7 slots against 16, the TP collectives in series besides
    assert float(common.t_lower_s) > float(head.t_lower_s) * 23 / 16
    # the headline is no slower than any schedule named, and the relations hold
    for s in [Schedule(p, 2 if p == "interleaved" else 1, tp, ep) for p in
              ("gpipe", "1f1b", "interleaved", "zero-bubble") for tp in (False, True)
              for ep in (False, True)]:
        named = analyze("llama-3-70b", "h100", phase, par, schedule=s)
        assert named.schedule_named and named.common_t_lower_s is None
        assert float(named.t_lower_s) >= float(head.t_lower_s) * (1 - 1e-12)
    assert head.t_floor_s <= head.t_lower_s <= head.t_upper_s
    # inference keeps the common schedule and shows nothing beside it
    from roofline.models import decode

    serve = analyze("llama-3-70b", "h100", decode(8, 4096), Parallel(tp=8))
    assert serve.schedule == COMMON and serve.common_t_lower_s is None


def test_the_headline_says_any_schedule_and_prints_1f1b_beside_it(run_cli):
    args = ("model", "llama-3-70b", "--hw", "h100", "--phase", "train", "--batch", "32",
            "--seq-len", "4096", "--tp", "8", "--pp", "8", "--dp", "2", "--microbatches", "16")
    code, out, _ = run_cli(*args)
    assert code == 0 and "tokens/s, any schedule; 1F1B: " in out
    assert "pipeline: zero-bubble" in out
    code, out, _ = run_cli(*args, "--json")
    data = json.loads(out)
    assert data["schedule"]["pipeline"] == "zero-bubble" and data["schedule_named"] is False
    common = data["common_schedule"]
    assert common["tokens_per_s"] < data["tokens_per_s"]
    assert "TP collectives" in common["schedule"] and common["schedule"].startswith("1f1b")
    # a named schedule bounds that schedule: nothing beside it
    code, out, _ = run_cli(*args, "--pp-schedule", "1f1b")
    assert code == 0 and "any schedule" not in out and "pipeline: 1f1b" in out
    code, out, _ = run_cli(*args, "--tp-overlap", "--json")
    data = json.loads(out)
    assert data["schedule"]["pipeline"] == "1f1b" and data["common_schedule"] is None


def test_zero_bubble_keeps_the_slots_no_schedule_can_fill():
    # pp 8, one micro-batch: its chain is 8 forwards and 8 input gradients in order, then
    # the first stage's weight gradient, each a third of a slot: (2·8 + 1)/3 = 17/3 slots,
    # not the 1 a bubble-free pipeline would charge (MFU 61.9% there, 5.5x the chain allows)
    par = Parallel(tp=8, pp=8, microbatches=1)
    zb = analyze("llama-3-70b", "h100", train(1, 4096), par, schedule=Schedule("zero-bubble"))
    assert zb.bubble_fraction == pytest.approx(2 * 7 / 3)
    full = analyze("llama-3-70b", "h100", train(8, 4096), Parallel(tp=8, pp=8, microbatches=8),
                   schedule=Schedule("zero-bubble"))
    assert full.bubble_fraction == 0  # m >= p: none
    # one slot of work per stage stretched to 17/3: the per-micro-batch time is the same
    per_slot = float(full.t_lower_s) / 8
    assert float(zb.t_lower_s) == pytest.approx(per_slot * 17 / 3, rel=0.05)
    # never slower than 1F1B's (p - 1) idle slots, and fewer micro-batches never faster
    one_f = analyze("llama-3-70b", "h100", train(1, 4096), par, schedule=Schedule("1f1b"))
    assert zb.t_lower_s < one_f.t_lower_s
    ms = [analyze("llama-3-70b", "h100", train(m, 4096), Parallel(tp=8, pp=8, microbatches=m),
                  schedule=Schedule("zero-bubble")) for m in (1, 2, 4, 8)]
    per_seq = [float(a.t_lower_s) / m for a, m in zip(ms, (1, 2, 4, 8), strict=True)]
    assert per_seq == sorted(per_seq, reverse=True)
