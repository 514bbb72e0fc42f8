"""NVLS latency: NCCL's tuner charges an intra-node NVLS call 25 us (tuning.cc hwLat
[NVLINK][NVLS][Simple], with baseLat 0); published runs are faster, so the bound keeps only
the call's two NVLink steps (0.6 us each, NCCL's LL alpha)."""

import pytest

import roofline as rl
from roofline.ops.collectives import collective

NCCL_NVLS_INTRA_LATENCY_S = 25e-6  # NVIDIA/nccl src/graph/tuning.cc, hwLat NVLINK / NVLS


@pytest.mark.parametrize("ranks, nbytes, chip, measured_s", [
    (2, 128, "h100", 6.0e-6),  # NVIDIA/nccl#1259: NVLSTree, CUDA graph, "approximately 6us"
    (8, 2048, "h200", 8.5e-6),  # flashinfer PR #3759: symm_mem multimem all-reduce
])
def test_published_nvls_calls_beat_nccls_25_us_but_not_the_bound(ranks, nbytes, chip,
                                                                 measured_s):
    est = rl.evaluate(collective("all-reduce", nbytes, ranks, algo="nvls"), chip)
    link = rl.load_chip(chip).link("scale-up")
    # by hand: two steps at 0.6 us, no base latency, plus m / bandwidth each way (the switch
    # reduces: each rank sends its m once and receives the sum once)
    assert est.t_lower_s == pytest.approx(2 * 0.6e-6 + nbytes / link.bandwidth_Bps,
                                          rel=1e-3)
    assert est.t_lower_s <= measured_s < NCCL_NVLS_INTRA_LATENCY_S
