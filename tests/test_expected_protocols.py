"""The library's protocol choice in a collective's expected time (expect/protocols.py): hand
numbers from NCCL's tuning constants, and the relations that must hold."""

import numpy as np
import pytest

from roofline.expect import expected
from roofline.expect.protocols import library_time, with_protocols
from roofline.hardware import load_chip
from roofline.ops.collectives import collective

H100 = load_chip("h100-sxm")
EFF = {"scale-up": 0.75, "scale-out": 0.75}


def test_one_node_large_message_runs_simple():
    # 2-rank ring all-reduce of 1 GB: 2 steps, 1 GB a direction, one call. Simple: 2 x 3.4 us
    # + 8.4 us + 1e9 / (450e9 x 0.75); LL128 and LL move the bytes at 0.92 and 0.5 of that
    cost = collective("all-reduce", 1e9, 2, algo="ring")
    t = library_time(cost, H100, EFF)
    assert t == pytest.approx(2 * 3.4e-6 + 8.4e-6 + 1e9 / 337.5e9, rel=1e-12)


def test_one_node_small_message_runs_ll():
    # 8 B: LL's 2 x 0.6 us + 6.6 us and 8 B at half the derated bandwidth
    cost = collective("all-reduce", 8, 2, algo="ring")
    assert library_time(cost, H100, EFF) == pytest.approx(7.8e-6 + 8 / 168.75e9, rel=1e-12)


def test_across_nodes_the_steps_add_up():
    # 16 ranks over 2 NVLink domains of 8: 14 steps inside (each at least the 1 us post
    # overhead under LL), 2 across at 2.7 us, a 6.6 us base on each link, all in sequence;
    # the bytes (1.75 x 8 B inside, 1 B across) at LL's 39 GB/s cap or its half bandwidth
    cost = collective("all-reduce", 8, 16, algo="ring", domain_size=8)
    latency = 14 * 1e-6 + 6.6e-6 + 2 * 2.7e-6 + 6.6e-6
    moved = max(14 / 39e9, 1 / (0.5 * 37.5e9))
    assert library_time(cost, H100, EFF) == pytest.approx(latency + moved, rel=1e-12)


def test_not_a_library_ring_keeps_the_chain():
    # an NVLS all-reduce and an engine's one-shot kernel run no NCCL protocol
    for algo in ("nvls", "one-shot"):
        cost = collective("all-reduce", 2**20, 8, algo=algo, chip=H100)
        assert np.isnan(library_time(cost, H100, EFF))
        assert with_protocols(1.0, cost, H100, EFF) == 1.0
    # a TPU's collectives are XLA's, not NCCL's
    tpu = load_chip("tpu-v5e")
    cost = collective("all-gather", 2**20, 4, algo="ring")
    assert with_protocols(1.0, cost, tpu, EFF) == 1.0


@pytest.mark.parametrize("ranks,domain", [(8, None), (16, 8), (64, 8)])
def test_never_faster_than_the_bound(ranks, domain):
    sizes = np.logspace(0, 10, 41)
    cost = collective("all-reduce", sizes, ranks, algo="auto", chip=H100, domain_size=domain)
    e = expected(cost, H100)
    assert np.all(np.asarray(e.t_s) >= np.asarray(e.bound.t_lower_s))
    # and a protocol's time is never below the single chain of best latency and bandwidth
    t = with_protocols(np.asarray(e.derated.t_lower_s), cost, H100, EFF)
    assert np.all(t >= np.asarray(e.derated.t_lower_s))


def test_mid_size_pays_a_protocol_the_chain_does_not():
    # 8 MiB ring all-gather on 8 H100s: no protocol has LL's latency and Simple's bandwidth
    cost = collective("all-gather", 8 * 2**20, 8, algo="ring")
    chain = 7 * 0.6e-6 + 6.6e-6 + 7 / 8 * 8 * 2**20 / 337.5e9
    assert library_time(cost, H100, EFF) > 1.2 * chain


def test_a_graph_replayed_engine_step_runs_its_own_collective_kernels():
    # 64 MiB ring all-reduce over 8 H100s: NCCL's Simple protocol pays 14 x 3.4 us steps, so
    # the library's time is above the bound's chain; in an engine's graph-replayed step its
    # own kernel runs on that chain (plus one graph kernel's launch, the same either way)
    cost = collective("all-reduce", 2**26, 8, algo="ring")
    library = expected(cost, H100)
    engine = expected(cost, H100, cuda_graphs=True)
    chain = np.asarray(engine.derated.t_lower_s)
    assert np.asarray(library.t_s) - np.asarray(library.overhead_s) > chain * 1.001
    assert np.asarray(engine.t_s) - np.asarray(engine.overhead_s) == pytest.approx(chain)
