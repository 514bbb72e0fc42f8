"""The evaluator: golden numbers from the seeds and relations that must hold."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import Cost, RooflineError, evaluate, load_chip, matmul


def test_1e12_flops_on_h100_take_1_01_ms():
    # seed 001 §2.1.1: 1e12 / 9.89e14 ≈ 1.01 ms
    est = evaluate(Cost(flops={"bf16": 1e12}), "h100")
    assert est.t_lower_s == pytest.approx(1.01e-3, rel=0.005)
    assert est.bound == "compute"


def test_compute_times_of_mixed_dtypes_add():
    chip = load_chip("h100")
    est = evaluate(Cost(flops={"bf16": 1e12, "fp8": 1e12}), chip)
    expected = 1e12 / chip.peak_flops("bf16") + 1e12 / chip.peak_flops("fp8")
    assert est.time_s["compute"] == pytest.approx(expected)
    # the effective peak is the time-weighted one
    assert est.peak_flops_per_s == pytest.approx(2e12 / expected)


def test_link_time_is_alpha_plus_beta():
    chip = load_chip("h100")
    link = chip.link("scale-up")
    est = evaluate(Cost(link_bytes={"scale-up": 1e9}, link_steps={"scale-up": 14}), chip)
    assert est.time_s["scale-up"] == pytest.approx(1e9 / 450e9)  # the bandwidth wall
    assert est.time_s["latency"] == pytest.approx(14 * link.latency_s)  # the latency wall
    assert est.t_upper_s == pytest.approx(14 * link.latency_s + 1e9 / 450e9)  # alpha-beta
    assert est.bound == "scale-up"
    tiny = evaluate(Cost(link_bytes={"scale-up": 1e3}, link_steps={"scale-up": 14}), chip)
    assert tiny.bound == "latency"


def test_tie_goes_to_compute():
    chip = load_chip("h100")
    bw = chip.level("hbm").bandwidth_Bps
    peak = chip.peak_flops("bf16")
    est = evaluate(Cost(flops={"bf16": peak}, bytes={"hbm": bw}), chip)
    assert est.bound == "compute"


def test_missing_level_and_dtype_are_clear_errors():
    with pytest.raises(RooflineError, match="no memory level 'sram'"):
        evaluate(Cost(flops={"bf16": 1.0}, bytes={"sram": 1.0}), _chip_without("sram"))
    with pytest.raises(RooflineError, match="has no fp8 peak"):
        evaluate(Cost(flops={"fp8": 1.0}), "a100")
    with pytest.raises(RooflineError, match="no 'scale-up' link"):
        evaluate(Cost(link_bytes={"scale-up": 1.0}), replace(load_chip("h100"), links={}))


def _chip_without(level: str):
    from dataclasses import replace

    chip = load_chip("h100")
    return replace(chip, memory=tuple(m for m in chip.memory if m.name != level))


def test_attainable_is_min_of_roofs():
    # P(I) = min(pi, I·beta) for a single-level cost (seed 000 §1)
    chip = load_chip("h100")
    pi, beta = chip.peak_flops("bf16"), chip.level("hbm").bandwidth_Bps
    for intensity in [0.5, 10.0, 295.0, 1000.0]:
        est = evaluate(Cost(flops={"bf16": intensity * 1e9}, bytes={"hbm": 1e9}), chip)
        assert est.attainable_flops_per_s == pytest.approx(min(pi, intensity * beta))
        assert est.intensity["hbm"] == pytest.approx(intensity)
        assert est.ridge["hbm"] == pytest.approx(pi / beta)


def test_scalar_in_scalar_out():
    est = evaluate(matmul(128, 4096, 4096), "h100")
    assert isinstance(est.t_lower_s, float)
    assert isinstance(est.bound, str)
    assert isinstance(est.intensity["hbm"], float)


def test_to_dict_is_json_ready():
    import json

    est = evaluate(matmul(np.array([1, 512]), 4096, 4096), "h100")
    data = json.loads(json.dumps(est.to_dict()))
    assert data["bound"] == ["hbm", "compute"]
    assert len(data["t_lower_s"]) == 2


def test_no_flops_cost():
    est = evaluate(Cost(bytes={"hbm": 3.35e9}), "h100")
    assert est.t_lower_s == pytest.approx(1e-3)
    assert est.bound == "hbm"
    assert est.to_dict()["ridge"] == {} and est.intensity == {}
    assert list(est.time_s) == ["hbm"]  # no compute resource for pure data movement


costs = st.builds(
    lambda f, b, l2, lb, ls: Cost(flops={"bf16": f}, bytes={"hbm": b, "l2": l2},
                                  link_bytes={"scale-up": lb}, link_steps={"scale-up": ls}),
    st.floats(0, 1e18), st.floats(0, 1e13), st.floats(0, 1e13), st.floats(0, 1e12),
    st.integers(0, 1000).map(float),
)


@given(costs)
def test_lower_le_upper_le_n_times_lower(cost):
    est = evaluate(cost, "h100")
    n = len(est.time_s)
    assert est.t_lower_s <= est.t_upper_s <= n * est.t_lower_s * (1 + 1e-12)
    # compute and memory overlap; each link's latency and bytes add (alpha-beta)
    comm = {r: t for r, t in est.time_s.items() if r in ("scale-up", "scale-out", "latency")}
    local = {r: t for r, t in est.time_s.items() if r not in comm}
    assert est.t_lower_s == pytest.approx(max([*local.values(), *est.chain_s.values()]),
                                          rel=1e-12)
    group = comm if est.bound in comm else local
    assert est.time_s[est.bound] == max(group.values())


@given(costs)
def test_never_faster_than_physics(cost):
    chip = load_chip("h100")
    est = evaluate(cost, chip)
    assert est.t_lower_s >= cost.flops["bf16"] / chip.peak_flops("bf16") * (1 - 1e-12)
    assert est.t_lower_s >= cost.bytes["hbm"] / chip.level("hbm").bandwidth_Bps * (1 - 1e-12)
    if est.t_lower_s > 0:
        assert est.attainable_flops_per_s <= chip.peak_flops("bf16") * (1 + 1e-12)


def test_vectorized_equals_scalar():
    rng = np.random.default_rng(0)
    m, k, n = (rng.integers(1, 20000, size=50) for _ in range(3))
    vec = evaluate(matmul(m, k, n), "h200")
    for i in range(50):
        one = evaluate(matmul(int(m[i]), int(k[i]), int(n[i])), "h200")
        assert vec.t_lower_s[i] == pytest.approx(one.t_lower_s, rel=1e-12)
        assert vec.bound[i] == one.bound
        assert vec.intensity["hbm"][i] == pytest.approx(one.intensity["hbm"], rel=1e-12)
        assert math.isclose(vec.t_upper_s[i], one.t_upper_s, rel_tol=1e-12)
