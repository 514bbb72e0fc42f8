"""First ops: seed golden numbers, hand calculations, properties, and an independent oracle."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import Cost, RooflineError, dot, elementwise, evaluate, gemv, load_chip, matmul
from roofline.ops import ELEMENTWISE_KINDS

# --- golden numbers -------------------------------------------------------------------------


def test_matmul_counts_by_hand():
    c = matmul(128, 8192, 8192)
    assert c.flops == {"bf16": 2 * 128 * 8192 * 8192}  # 1.72e10
    assert c.bytes == {"hbm": 2 * (128 * 8192 + 8192 * 8192 + 128 * 8192)}
    assert c.explain()[0] == "FLOPs = 2·M·N·K = 2·128·8192·8192 = 1.718e+10"


def test_matmul_intensity_approaches_batch_when_small():
    # seed 001 §2.4: I = BDF/(BD + DF + BF) ≈ B for B << D, F (bf16)
    for b in [1, 16, 64, 200]:
        est = evaluate(matmul(b, 65536, 65536), "h100")
        assert est.intensity["hbm"] == pytest.approx(b, rel=0.01)


def test_square_gemm_intensity_is_2n_over_3s():
    # seed 000 §2.1: M = N = K = n gives I = 2n/(3s)
    for dt, s in [("bf16", 2), ("fp8", 1), ("fp32", 4)]:
        for n in [64, 1000, 8192]:
            est = evaluate(matmul(n, n, n, dtype=dt), "h100")
            assert est.intensity["hbm"] == pytest.approx(2 * n / (3 * s), rel=1e-12)


def test_dot_product_intensity_is_half():
    # seed 001 §2.2: x·y over bf16[N] is 0.5 FLOP/byte
    est = evaluate(dot(10**7), "h100")
    assert est.intensity["hbm"] == pytest.approx(0.5, rel=1e-6)
    assert est.bound == "hbm"


@pytest.mark.parametrize(("weight", "expected"), [("bf16", 1.0), ("int8", 2.0), ("int4", 4.0)])
def test_gemv_intensity_is_2_over_s(weight, expected):
    # seed 000 §2.2: matrix x vector, I ≈ 2/s for the weight's element size s
    est = evaluate(gemv(16384, 16384, weight_dtype=weight), "h100")
    assert est.intensity["hbm"] == pytest.approx(expected, rel=0.001)
    assert est.flops_by_dtype == {"bf16": 2 * 16384 * 16384}  # weight-only: bf16 peak


def test_seed_001_batch_sweep_computed_correctly():
    # seed 001 §2.9 with D = F = 8192 on H100: its printed 127.5 / 504 / 3641 are wrong
    # (DESIGN §4 item 2); BDF/(BD+DF+BF) gives 124.1 / 455.1 / 2048.
    batches = np.array([1, 8, 32, 128, 256, 512, 1024, 4096])
    est = evaluate(matmul(batches, 8192, 8192), "h100")
    ai = est.intensity["hbm"]
    np.testing.assert_allclose(ai[[3, 5, 7]], [124.12, 455.11, 2048.0], rtol=1e-4)
    assert ai[0] == pytest.approx(1.0, rel=1e-3)
    assert list(est.bound) == ["hbm"] * 5 + ["compute"] * 3
    # predicted throughput = min(peak, I·beta): ~416 TFLOP/s at B = 128, peak from B = 512
    assert est.attainable_flops_per_s[3] == pytest.approx(124.12 * 3.35e12, rel=1e-4)
    assert est.attainable_flops_per_s[5] == pytest.approx(989.4e12)


def _critical_batch(chip, **dtypes):
    b = np.arange(1, 4000)
    est = evaluate(matmul(b, 65536, 65536, **dtypes), chip)
    return int(b[np.argmax(est.bound == "compute")])


def test_critical_batch_v5e_and_weight_only_int8_halves_it():
    # seed 001 §2.6: bf16 critical B ≈ 240 on TPU v5e; int8 weights + bf16 activations ≈ 120;
    # full int8 at twice the peak ≈ 240 again.
    bf16 = _critical_batch("tpu-v5e")
    w8 = _critical_batch("tpu-v5e", weight_dtype="int8")
    int8 = _critical_batch("tpu-v5e", dtype="int8")
    assert 235 <= bf16 <= 250
    assert w8 == pytest.approx(bf16 / 2, abs=2)
    assert int8 == pytest.approx(bf16, abs=5)


def test_h100_critical_batch_about_295():
    # seed 001 Problem 5: 989e12 / 3.35e12 ≈ 295 tokens
    assert 290 <= _critical_batch("h100") <= 300


def test_elementwise_intensity_is_c_over_2s():
    # seed 000 §2.3: I ≈ c / (2s)
    for kind in ["relu", "silu", "rmsnorm", "softmax"]:
        c = ELEMENTWISE_KINDS[kind].ops_per_element
        est = evaluate(elementwise(10**6, kind), "h100")
        assert est.intensity["hbm"] == pytest.approx(c / 4)
        assert est.bound == "hbm"
    add = elementwise(1000, "add", dtype="fp32")
    assert add.bytes["hbm"] == 1000 * (2 * 4 + 4)


def test_elementwise_overrides_and_out_dtype():
    c = elementwise(100, ops_per_element=3, inputs=2, dtype="bf16", out_dtype="fp32")
    assert c.flops == {} and c.vector_flops == {"bf16": 300.0}  # the vector units
    assert c.bytes == {"hbm": 100 * (2 * 2 + 4)}


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x", np.array([1, 0]),
                                 np.array([]), np.array([1.0, np.nan]), np.array([np.inf])])
def test_bad_sizes_rejected(bad):
    with pytest.raises(RooflineError, match="M"):
        matmul(bad, 8, 8)


def test_bad_names_rejected():
    with pytest.raises(RooflineError, match="unknown dtype"):
        matmul(1, 1, 1, weight_dtype="int3")
    with pytest.raises(RooflineError, match=r"unknown elementwise kind 'rmsnrom'.*'rmsnorm'"):
        elementwise(10, "rmsnrom")


# --- an independent reference, written without Cost / Expr / evaluate ------------------------

SIZES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp32": 4}


def reference_matmul(chip, m, k, n, x, w, o):
    flops = 2.0 * m * n * k
    traffic = m * k * SIZES[x] + k * n * SIZES[w] + m * n * SIZES[o]
    t_compute = flops / chip.peaks[x].flops_per_s
    t_mem = traffic / chip.memory[0].bandwidth_Bps
    return flops / traffic, max(t_compute, t_mem), t_compute + t_mem


dims = st.integers(1, 1 << 17)


@given(dims, dims, dims, st.sampled_from(["bf16", "fp8", "int8"]),
       st.sampled_from(["bf16", "fp8", "int8", "int4"]), st.sampled_from(["bf16", "fp32"]),
       st.sampled_from(["h100", "h200", "mi300x", "b200"]))
def test_matmul_matches_reference(m, k, n, x, w, o, hw):
    chip = load_chip(hw)
    ai, lower, upper = reference_matmul(chip, m, k, n, x, w, o)
    est = evaluate(matmul(m, k, n, dtype=x, weight_dtype=w, out_dtype=o), chip)
    assert est.intensity["hbm"] == pytest.approx(ai, rel=1e-12)
    assert est.t_lower_s == pytest.approx(lower, rel=1e-12)
    assert est.t_upper_s == pytest.approx(upper, rel=1e-12)
    assert np.isfinite(est.t_lower_s) and est.t_lower_s > 0


@given(dims, dims, dims, st.sampled_from(["m", "k", "n"]), st.integers(1, 1000))
def test_time_monotonic_in_each_dimension(m, k, n, which, extra):
    base = {"m": m, "k": k, "n": n}
    grown = dict(base, **{which: base[which] + extra})
    a = evaluate(matmul(**base), "h100")
    b = evaluate(matmul(**grown), "h100")
    assert b.t_lower_s >= a.t_lower_s
    assert b.t_upper_s >= a.t_upper_s
    assert b.flops > a.flops


@given(st.integers(1, 10**9), st.sampled_from(list(ELEMENTWISE_KINDS)))
def test_elementwise_positive_finite(n, kind):
    est = evaluate(elementwise(n, kind), "h100")
    for v in [est.t_lower_s, est.intensity["hbm"], *est.time_s.values()]:
        assert np.isfinite(v) and v > 0


def test_ops_return_costs_with_derivations():
    for cost in [matmul(2, 3, 4), gemv(3, 4), dot(5), elementwise(6, "add")]:
        assert isinstance(cost, Cost)
        assert [t.name for t in cost.terms] == ["FLOPs", "HBM bytes"]
    silu = elementwise(6, "silu")  # one exp per element: the special-function units
    assert [t.name for t in silu.terms] == ["FLOPs", "of which transcendentals "
                                            "(special-function units)", "HBM bytes"]
    assert silu.special_ops == {"exp": 6.0} and silu.vector_flops == {"bf16": 18.0}
