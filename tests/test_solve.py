"""Critical points: seed golden numbers, closed form vs the numeric crossover, relations."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import Cost, RooflineError, dtype, evaluate, load_chip, matmul
from roofline.solve import critical_batch, critical_shard_dim, crossover, decode_critical_batch

# --- golden numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(("dtypes", "expected"), [
    ({}, 295),  # seed 001 Problem 5: 989e12 / 3.35e12
    ({"weight_dtype": "int8"}, 148),  # seed 003 §4.2: W8A16 halves it
    ({"weight_dtype": "int4"}, 74),  # seed 003 §4.3: W4A16 quarters it (~75)
    ({"dtype": "fp8"}, 295),  # W8A8 fp8: twice the peak, half the bytes
    ({"dtype": "int8"}, 295),
])
def test_h100_critical_batch(dtypes, expected):
    assert critical_batch("h100", **dtypes) == pytest.approx(expected, abs=0.5)


def test_large_dim_limit_is_s_w_p_over_2bw():
    chip = load_chip("h100")
    bw = chip.level("hbm").bandwidth_Bps
    assert critical_batch(chip) == 2 * chip.peak_flops("bf16") / (2 * bw)
    assert critical_batch(chip, weight_dtype="int4-g128") == pytest.approx(
        0.515625 * chip.peak_flops("bf16") / (2 * bw), rel=1e-15)


def test_tpu_v5e_seed_001_section_2_6():
    # 240 for bf16, 120 for int8 weights + bf16 activations, 240 for full int8
    assert critical_batch("tpu-v5e") == pytest.approx(240, abs=1)
    assert critical_batch("tpu-v5e", weight_dtype="int8") == pytest.approx(120, abs=0.5)
    assert critical_batch("tpu-v5e", dtype="int8") == pytest.approx(240, abs=1)


def test_finite_shape_matches_the_readme_sweep():
    # README: on h100 with K = N = 8192 the first compute-bound batch is 319 (bf16), 160 (int8)
    assert math.ceil(critical_batch("h100", 8192, 8192)) == 319
    assert math.ceil(critical_batch("h100", 8192, 8192, weight_dtype="int8")) == 160


def test_boundary_is_exact():
    for k, n, dt in [(8192, 8192, {}), (4096, 14336, {"weight_dtype": "int4"}),
                     (1024, 1024, {"dtype": "fp8", "out_dtype": "bf16"})]:
        m = critical_batch("h100", k, n, **dt)
        assert evaluate(matmul(m * (1 + 1e-9), k, n, **dt), "h100").bound == "compute"
        assert evaluate(matmul(m * (1 - 1e-9), k, n, **dt), "h100").bound == "hbm"


def test_never_compute_bound_is_inf():
    # tiny K, N: the activations alone need more bandwidth than the work can hide
    assert critical_batch("h100", 100, 100) == math.inf
    assert crossover(lambda m: matmul(m, 100, 100), "h100", 1, 1e9) == math.inf
    big = evaluate(matmul(1e9, 100, 100), "h100")
    assert big.bound == "hbm"


def test_one_dimension_given_takes_the_other_as_large():
    a = critical_batch("h100", k=4096)
    b = critical_batch("h100", k=4096, n=1e12)
    assert a == pytest.approx(b, rel=1e-6)
    c = critical_batch("h100", n=4096, dtype="bf16", out_dtype="fp32")
    d = critical_batch("h100", k=1e12, n=4096, out_dtype="fp32")
    assert c == pytest.approx(d, rel=1e-6)


def test_vectorized_equals_scalar():
    k = np.array([512, 1024, 4096, 8192, 28672])
    vec = critical_batch("mi300x", k, 8192, weight_dtype="int8")
    for i, kk in enumerate(k):
        assert vec[i] == critical_batch("mi300x", int(kk), 8192, weight_dtype="int8")
    assert isinstance(critical_batch("h100"), float)


# --- closed form vs the numeric crossover -----------------------------------------------------

WEIGHTS = ["bf16", "fp8", "int8", "int4", "int4-g128"]


def test_closed_form_agrees_with_crossover_on_random_shapes():
    rng = np.random.default_rng(5)
    for hw in ["h100", "h200", "a100", "mi300x", "b200", "tpu-v5e"]:
        k = np.exp(rng.uniform(np.log(64), np.log(65536), size=200))
        n = np.exp(rng.uniform(np.log(64), np.log(65536), size=200))
        for w in WEIGHTS:
            closed = critical_batch(hw, k, n, weight_dtype=w)
            numeric = crossover(lambda m, k=k, n=n, w=w: matmul(m, k, n, weight_dtype=w),
                                hw, 1e-3, 1e9)
            inside = closed < 1e8
            np.testing.assert_allclose(numeric[inside], closed[inside], rtol=1e-9)
            assert np.all(np.isinf(numeric[np.isinf(closed)]))


@given(st.integers(16, 1 << 17), st.integers(16, 1 << 17), st.sampled_from(WEIGHTS),
       st.sampled_from(["bf16", "fp32"]), st.sampled_from(["h100", "gb200", "tpu-v6e"]))
def test_closed_form_agrees_with_crossover(k, n, w, o, hw):
    closed = critical_batch(hw, k, n, weight_dtype=w, out_dtype=o)
    numeric = crossover(lambda m: matmul(m, k, n, weight_dtype=w, out_dtype=o), hw, 1e-3, 1e9)
    if math.isinf(closed) or closed > 1e9:
        assert math.isinf(numeric)
    else:
        assert numeric == pytest.approx(closed, rel=1e-9)


def test_crossover_returns_lo_when_already_compute_bound():
    assert crossover(lambda m: matmul(m, 8192, 8192), "h100", 1000, 1e6) == 1000
    out = crossover(lambda m: matmul(m, 8192, 8192), "h100", np.array([1, 500]), 1e6)
    assert out[1] == 500 and out[0] == pytest.approx(critical_batch("h100", 8192, 8192))


def test_crossover_broadcasts_closure_arrays():
    k = np.array([[1024], [8192]])
    n = np.array([1024, 4096, 16384])
    numeric = crossover(lambda m: matmul(m, k, n), "h100", 1, 1e7)
    assert numeric.shape == (2, 3)
    np.testing.assert_allclose(numeric, critical_batch("h100", k, n), rtol=1e-9)


def test_crossover_bad_range():
    with pytest.raises(RooflineError, match="lo: must be a positive finite number"):
        crossover(lambda m: matmul(m, 8, 8), "h100", 0, 10)
    with pytest.raises(RooflineError, match="hi: must be >= lo"):
        crossover(lambda m: matmul(m, 8, 8), "h100", 10, 1)


# --- relations ------------------------------------------------------------------------------


@given(st.sampled_from(["h100", "a100", "mi300x", "b200", "tpu-v5e"]),
       st.one_of(st.none(), st.integers(1024, 1 << 16)))
def test_critical_batch_monotone_in_bytes_per_weight(hw, dim):
    by_size = sorted(["int4", "int4-g128", "int8", "bf16", "fp32"], key=lambda w: dtype(w).bytes)
    values = [critical_batch(hw, dim, dim, weight_dtype=w) for w in by_size]
    assert values == sorted(values)
    assert values[0] < values[-1]


@given(st.integers(256, 1 << 16), st.integers(256, 1 << 16))
def test_finite_shapes_need_more_tokens_than_the_limit(k, n):
    limit = critical_batch("h100")
    assert critical_batch("h100", k, n) > limit
    bigger, base = critical_batch("h100", 2 * k, 2 * n), critical_batch("h100", k, n)
    assert bigger < base or math.isinf(base)
    assert math.isfinite(critical_batch("h100", 64 * k, 64 * n))


def test_decode_critical_batch_divides_by_q_len():
    tokens = critical_batch("h100", 8192, 28672, weight_dtype="int4")
    assert decode_critical_batch("h100", 8192, 28672, weight_dtype="int4") == tokens
    for q in [2, 4, 8]:
        seqs = decode_critical_batch("h100", 8192, 28672, weight_dtype="int4", q_len=q)
        assert seqs == pytest.approx(tokens / q, rel=1e-15)
    np.testing.assert_allclose(decode_critical_batch("h100", q_len=np.array([1, 5])),
                               [critical_batch("h100"), critical_batch("h100") / 5])
    with pytest.raises(RooflineError, match="q_len"):
        decode_critical_batch("h100", q_len=0)


# --- the sharded contraction: critical shard dimension -----------------------------------------


def test_h100_nvlink_critical_shard_is_2200_not_seed_003s_value():
    d = critical_shard_dim("h100")
    assert d == pytest.approx(2200, rel=0.001)  # 989.4e12 / 450e9 = 2198.7 (seed 001 §2.5)
    assert d == pytest.approx(2 * 989.4e12 / (2 * 450e9), rel=1e-12)
    # seed 003 §6.1 divides by the bidirectional 900 GB/s (DESIGN §4 item 4): per-chip shard
    # D/2 > 1099, half the right value
    seed_003 = 2 * 989.4e12 / (2 * 900e9)
    assert d == pytest.approx(2 * seed_003, rel=1e-12)


def test_h100_nic_critical_shard_is_20000():
    assert critical_shard_dim("h100", "scale-out") == pytest.approx(20000, rel=0.015)


def test_shard_dim_scales_with_bytes_factor_and_dtype():
    base = critical_shard_dim("h100")
    n = 8
    ring = critical_shard_dim("h100", bytes_factor=2 * (n - 1) / n)
    assert ring == pytest.approx(base * 1.75, rel=1e-15)
    # fp8: twice the peak, but the partial sums still leave the GEMM in bf16: twice the shard
    assert critical_shard_dim("h100", dtype="fp8") == pytest.approx(2 * base, rel=1e-3)


@given(st.integers(1, 1 << 14), st.integers(1, 1 << 16),
       st.sampled_from(["scale-up", "scale-out"]), st.sampled_from(["h100", "mi300x", "b200"]))
def test_shard_dim_matches_evaluate(b, f, link, hw):
    # the same question through evaluate: per chip 2·B·d·F FLOPs, B·F·s bytes on the link
    def sharded(d):
        return Cost(flops={"bf16": 2 * b * d * f}, link_bytes={link: b * f * 2.0})

    numeric = crossover(sharded, hw, 1, 1e7)
    assert numeric == pytest.approx(critical_shard_dim(hw, link), rel=1e-9)


def test_shard_dim_bad_input():
    with pytest.raises(RooflineError, match="no 'scale-out' link"):
        critical_shard_dim("l40s", "scale-out")
    with pytest.raises(RooflineError, match="has no fp8 peak"):
        critical_shard_dim("a100", dtype="fp8")
    with pytest.raises(RooflineError, match="bytes_factor"):
        critical_shard_dim("h100", bytes_factor=0)


def test_critical_batch_bad_input():
    with pytest.raises(RooflineError, match="has no fp8 peak"):
        critical_batch("a100", dtype="fp8")
    with pytest.raises(RooflineError, match="K"):
        critical_batch("h100", k=-1, n=10)
    with pytest.raises(RooflineError, match="unknown chip"):
        critical_batch("h1000")


def test_decode_critical_batch_kept_on_the_chip_only_as_a_number():
    # an array answer was kept and handed out by reference: a caller that changed it changed
    # every later answer
    from roofline import load_chip
    from roofline.solve import decode_critical_batch

    chip = load_chip("h100")
    first = decode_critical_batch(chip, k=(4096, 8192), n=8192)
    first[:] = -1
    assert (decode_critical_batch(chip, k=(4096, 8192), n=8192) > 0).all()
    assert decode_critical_batch(chip) == decode_critical_batch(chip)  # a number: kept
