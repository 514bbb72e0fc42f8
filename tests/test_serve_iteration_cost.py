"""The expected serving iteration: the engine's per-iteration cost (host scheduling, each
collective's call), the chunk cycle engines run, and the TTFT of a burst of prompts."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.models import Parallel, analyze, decode
from roofline.serve import Load, Space, Workload, plan
from roofline.serve.burst import burst_ttft_s
from roofline.serve.iteration import collective_calls
from roofline.serve.runtime import ITERATION_COSTS, NO_COST, IterationCost, iteration_cost


def test_burst_ttft_by_hand() -> None:
    ms = 1e-3
    # one 1024-token prompt in an 8192-token budget: one iteration carrying 1/8 of a chunk
    assert burst_ttft_s(1, 1024, 8192, 10 * ms, 90 * ms) == pytest.approx(20 * ms)
    # four 4096-token prompts: two per full chunk; the first two after one full iteration
    # (90 ms), the last two after two (180 ms)
    assert burst_ttft_s(4, 4096, 8192, 10 * ms, 90 * ms) == pytest.approx(135 * ms)
    # three: the second iteration is half full (10 + 40 ms more)
    assert burst_ttft_s(3, 4096, 8192, 10 * ms, 90 * ms) == pytest.approx((90 + 90 + 140) / 3 * ms)
    # a prompt longer than the chunk spans ceil(L / chunk) iterations
    assert burst_ttft_s(1, 20000, 8192, 10 * ms, 90 * ms) == pytest.approx(
        (30 + 20000 / 8192 * 80) * ms)


def test_burst_ttft_broadcasts_and_grows_with_the_burst() -> None:
    k = np.array([[1.0, 8.0, 64.0]])
    t = burst_ttft_s(k, 2048, np.array([[2048.0], [8192.0]]), 0.01, 0.05)
    assert t.shape == (2, 3)
    assert np.all(np.diff(t, axis=1) > 0)  # more prompts ahead: a longer wait
    # a burst waits less where an iteration of the same time takes more of its prompts
    assert t[1, 2] < t[0, 2]


def test_collectives_per_step() -> None:
    tp8 = analyze("llama-3.1-70b", "b200", decode(8, 1024), Parallel(tp=8))
    tp1 = analyze("llama-3.1-70b", "b200", decode(8, 1024), Parallel(tp=1))
    assert collective_calls(tp8) == 2 * 80  # an all-reduce after attention and after the MLP
    assert collective_calls(tp1) == 0


def test_iteration_cost_per_engine() -> None:
    for name, cost in ITERATION_COSTS.items():
        assert min(cost.host_s, cost.sequence_s, cost.collective_s) >= 0
        assert 0 < cost.kernel_scale <= 1
        assert cost.source and iteration_cost(name) is cost
    assert iteration_cost("vllm-0.13.0+torchao") is ITERATION_COSTS["vllm"]
    assert iteration_cost(None) is NO_COST and iteration_cost("gpt-fast") is NO_COST
    assert NO_COST.seconds(0.01, 0.004, 64, 160) == pytest.approx(0.01)  # unchanged
    cost = IterationCost(1e-3, 10e-6, 5e-6, 0.5, "by hand")
    # 10 ms of kernels at half: 5 ms, + 1 ms + 64 sequences x 10 us + 160 collectives x 5 us
    assert cost.seconds(0.010, 0.002, 64, 160) == pytest.approx(7.44e-3)
    # never below the bound: 10 ms x 0.5 under an 8 ms bound is the bound's 8 ms
    assert cost.seconds(0.010, 0.008, 0, 0) == pytest.approx(9e-3)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm"])
def test_expected_closed_loop_stays_above_the_bound(engine: str) -> None:
    w = Workload.from_lengths(1024, 256)
    space = Space(tp=(8,), weight_dtypes=("fp8",), kv_dtypes=("fp8",), chunks=(8192.0,),
                  max_chips=8)
    args = dict(space=space, load=Load(concurrency=64))
    bound = plan("llama-3.1-70b", ["b200"], w, **args).columns
    exp = plan("llama-3.1-70b", ["b200"], w, expect=True, framework=engine, **args).columns
    assert np.all(exp["tpot_s"] >= bound["tpot_s"])
    assert np.all(exp["ttft_s"] >= bound["prefill_s"])
    # the burst: 64 prompts of 1024 tokens through an 8192-token budget take 8 full
    # iterations, so the mean client waits several, not one
    assert np.all(exp["ttft_s"] > 3 * exp["t_step_s"])


def test_prefill_burst_by_hand() -> None:
    """k prompts through a prefill replica, one pass each (100 ms): prompt i waits i passes,
    mean (k + 1) / 2 passes, (k - 1) / 2 beyond a lone prompt's; two a pass: half as many
    passes; pp passes in flight: a pp-th of the time between them."""
    from types import SimpleNamespace

    from roofline.serve.burst import prefill_burst_s

    w = Workload.from_lengths(1000, 100)
    one = SimpleNamespace(par=SimpleNamespace(dp=1, pp=1))
    assert prefill_burst_s(one, 1.0, w, 4.0, 0.1) == pytest.approx(0.15)
    assert prefill_burst_s(one, 1.0, w, 1.0, 0.1) == pytest.approx(0.0)
    # two a pass (2000 tokens): prompts 1-2 after one pass, 3-4 after two: mean 0.15 s; a
    # lone prompt fills half a pass (the pass's time linear in its tokens): 0.05 s
    assert prefill_burst_s(one, 2.0, w, 4.0, 0.1) == pytest.approx(0.10)
    piped = SimpleNamespace(par=SimpleNamespace(dp=1, pp=2))
    assert prefill_burst_s(piped, 1.0, w, 4.0, 0.1) == pytest.approx(0.075)


def test_disaggregated_expected_ttft_queues_the_burst_above_the_bound() -> None:
    """A pinned disaggregated deployment: the expected TTFT grows with the clients (their
    prompts queue through the prefill workers' passes), holds the hand-off between the pools,
    and never beats the bound, whose TTFT has no burst."""
    from roofline.expect.table import DEFAULTS
    from roofline.serve.burst import IN_STEP

    w = Workload.from_lengths(2048, 256)
    space = Space(tp=(8,), chunks=(2048.0,), modes=("disaggregated",), prefill_tp=(4,),
                  prefill_workers=2, decode_workers=1)

    def columns(clients: int, expect: bool) -> dict[str, np.ndarray]:
        p = plan("llama-3.1-70b", ["h100"], w, space=space, load=Load(concurrency=clients),
                 expect=expect, framework="tensorrt-llm" if expect else None)
        return {k: np.asarray(v) for k, v in p.columns.items()}

    few, many, bound = columns(2, True), columns(64, True), columns(64, False)
    assert np.all(many["ttft_s"] > few["ttft_s"])
    assert np.all(many["ttft_s"] >= bound["ttft_s"])
    assert np.all(bound["handoff_s"] == 0) and np.all(
        many["handoff_s"] == DEFAULTS["handoff_s.tensorrt-llm"].value)
    # 64 clients over 2 prefill workers: 32 prompts a worker, one a pass; the slot wait aside,
    # the burst's share of the queue is IN_STEP x 31 / 2 passes (a prefill pool's: every
    # engine's)
    t_p = many["prefill_s"]
    assert np.all(many["queue_s"] >= IN_STEP * 31 / 2 * t_p * (1 - 1e-9))
    assert np.allclose(many["ttft_s"], t_p + many["queue_s"] + many["kv_transfer_s"]
                       + many["handoff_s"] + many["request_s"])
    assert np.all(many["ttft_s_p99"] >= many["ttft_s_p50"])


def test_a_dense_graph_step_pays_each_collective_once() -> None:
    """A dense graph-replayed step charges each collective its kernel boundary
    (step_kernel_s, 5 us) where an MoE step charges a graph launch (1 us): the engine's
    per-collective cost (4 us beyond a graph launch) is already inside the dense step's."""
    from roofline import load_chip
    from roofline.expect.step import collective_kernel_s
    from roofline.expect.table import DEFAULTS
    from roofline.models import prefill

    dense = analyze("llama-3.1-70b", "b200", decode(8, 1024), Parallel(tp=8))
    moe = analyze("mixtral-8x7b", "b200", decode(8, 1024), Parallel(tp=8))
    first = analyze("llama-3.1-70b", "b200", prefill(1, 1024), Parallel(tp=8))
    step_kernel, launch = DEFAULTS["step_kernel_s"].value, DEFAULTS["graph_launch_s"].value
    assert collective_kernel_s(dense, load_chip("b200")) == pytest.approx(step_kernel - launch)
    assert collective_kernel_s(moe, load_chip("b200")) == 0.0
    assert collective_kernel_s(first, load_chip("b200")) == 0.0  # eager: no graph
    cost = IterationCost(1e-3, 0.0, 4e-6, 1.0, "by hand")
    # 160 collectives: 4 us each beside a graph launch, none where 4 us are charged already,
    # 1 us each where 3 us are
    assert cost.seconds(0.010, 0.002, 8, 160) == pytest.approx(0.011 + 160 * 4e-6)
    assert cost.seconds(0.010, 0.002, 8, 160, 4e-6) == pytest.approx(0.011)
    assert cost.seconds(0.010, 0.002, 8, 160, 3e-6) == pytest.approx(0.011 + 160 * 1e-6)
    assert cost.seconds(0.010, 0.002, 8, 160, 9e-6) == pytest.approx(0.011)  # never below
