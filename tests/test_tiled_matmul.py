"""Tiled matmul: the seed's tile intensities, relations to matmul, a loop-nest oracle."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import Cost, RooflineError, evaluate, matmul
from roofline.ops.tiled_matmul import tiled_matmul

# --- golden numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(("tile", "expected"), [(128, 64), (256, 128), (512, 256)])
def test_seed_tile_intensities(tile, expected):
    # seed 001 §2.4: AI of the tile loads = bm·bn/(bm + bn) for bf16: 64 / 128 / 256
    m = n = 8 * 512
    k = 1 << 16
    c = tiled_matmul(m, k, n, bm=tile, bn=tile, wm=64, wn=64)
    loads = c.bytes["hbm"] - m * n * 2  # the output write is not a tile load
    assert c.flops["bf16"] / loads == expected  # exact: M, N, K are multiples of the tile
    # with the output write the intensity approaches it as K grows
    est = evaluate(c, "h100")
    assert est.intensity["hbm"] == pytest.approx(expected, rel=expected / k * 1.01)
    assert est.intensity["hbm"] < expected


def test_rectangular_tiles_intensity_is_bm_bn_over_sum():
    c = tiled_matmul(1024, 4096, 1024, bm=128, bn=256)
    loads = c.bytes["hbm"] - 1024 * 1024 * 2
    assert c.flops["bf16"] / loads == pytest.approx(128 * 256 / (128 + 256), rel=1e-15)


def test_counts_by_hand():
    # M=300, N=200, K=100, 128x128 tiles: X read ceil(200/128)=2 times, W ceil(300/128)=3 times
    c = tiled_matmul(300, 100, 200, bm=128, bn=128, wm=64, wn=32)
    assert c.flops == {"bf16": 2 * 300 * 200 * 100}
    x, w, y = 300 * 100 * 2, 100 * 200 * 2, 300 * 200 * 2
    assert c.bytes["hbm"] == 2 * x + 3 * w + y
    # SRAM: tiles written once, then warps re-read: ceil(200/32)=7 warp columns, ceil(300/64)=5
    assert c.bytes["sram"] == (2 * x + 3 * w) + (7 * x + 5 * w)
    assert [t.name for t in c.terms] == ["FLOPs", "HBM bytes", "SRAM bytes"]
    assert c.explain()[1].startswith(
        "HBM bytes = M·K·s_x·ceil(N / bn) + K·N·s_w·ceil(M / bm) + M·N·s_o = "
        "300·100·2·ceil(200 / 128) + 100·200·2·ceil(300 / 128) + 300·200·2")


def test_one_tile_covering_the_matrix_is_plain_matmul():
    for m, k, n in [(1, 8192, 8192), (128, 4096, 128), (100, 77, 33)]:
        tm = tiled_matmul(m, k, n, bm=128, bn=8192, wm=128, wn=8192,
                          dtype="bf16", weight_dtype="int4", out_dtype="fp32")
        mm = matmul(m, k, n, dtype="bf16", weight_dtype="int4", out_dtype="fp32")
        assert tm.bytes["hbm"] == mm.bytes["hbm"]
        assert tm.flops == mm.flops


def test_l2_level_loads_from_l2_and_hbm_sees_each_operand_once():
    c = tiled_matmul(4096, 4096, 4096, level="l2")
    hbm = tiled_matmul(4096, 4096, 4096)
    assert c.bytes["l2"] == hbm.bytes["hbm"]
    assert c.bytes["hbm"] == matmul(4096, 4096, 4096).bytes["hbm"]
    assert c.bytes["sram"] == hbm.bytes["sram"]
    assert [t.name for t in c.terms] == ["FLOPs", "HBM bytes", "L2 bytes", "SRAM bytes"]
    est = evaluate(c, "h100")
    assert set(est.time_s) == {"compute", "hbm", "l2", "sram"}


def test_weight_only_dtypes_and_compute_dtype():
    c = tiled_matmul(256, 1024, 1024, weight_dtype="int4", compute_dtype="fp8")
    assert set(c.flops) == {"fp8"}
    # 256 rows in 128-row blocks: W (0.5 B/element) read twice
    assert c.bytes["hbm"] == 256 * 1024 * 2 * 8 + 1024 * 1024 * 0.5 * 2 + 256 * 1024 * 2


def test_vectorized_over_tiles_equals_scalar_calls():
    tiles = np.array([64, 128, 256, 512])
    vec = tiled_matmul(3000, 4096, 5000, bm=tiles, bn=tiles, wm=64, wn=64)
    for i, t in enumerate(tiles):
        one = tiled_matmul(3000, 4096, 5000, bm=int(t), bn=int(t))
        assert vec.bytes["hbm"][i] == one.bytes["hbm"]
        assert vec.bytes["sram"][i] == one.bytes["sram"]
    assert np.all(np.diff(vec.bytes["hbm"]) < 0)  # bigger tiles, less traffic


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"bm": 0}, "bm"),
    ({"bn": -128}, "bn"),
    ({"bk": 0}, "bk"),
    ({"bm": 100.5}, "bm: tile sizes must be whole numbers"),
    ({"wm": 256}, r"wm: a warp tile must divide the block tile bm \(so wm <= bm\)"),
    ({"wn": 48}, "wn: a warp tile must divide the block tile bn"),
    ({"level": "sram"}, "level: the tiles are loaded from one of hbm, l2"),
    ({"m": 0}, "M"),
])
def test_bad_input_rejected(kwargs, match):
    args = {"m": 128, "k": 128, "n": 128, **kwargs}
    with pytest.raises(RooflineError, match=match):
        tiled_matmul(**args)


# --- relations ------------------------------------------------------------------------------

dims = st.integers(1, 1 << 16)
pow2 = st.sampled_from([16, 32, 64, 128, 256])


@given(dims, dims, dims, pow2, pow2)
def test_tiled_traffic_at_least_untiled(m, k, n, bm, bn):
    tiled = tiled_matmul(m, k, n, bm=bm, bn=bn, wm=16, wn=16)
    assert tiled.bytes["hbm"] >= matmul(m, k, n).bytes["hbm"]
    assert tiled.bytes["sram"] >= tiled.bytes["hbm"] - m * n * 2  # every load lands in SRAM
    assert tiled.flops == matmul(m, k, n).flops


@given(dims, dims, dims, pow2, pow2, st.sampled_from(["bm", "bn"]))
def test_traffic_falls_as_tiles_grow(m, k, n, bm, bn, which):
    small = tiled_matmul(m, k, n, bm=bm, bn=bn, wm=16, wn=16)
    grown = {"bm": bm, "bn": bn}
    grown[which] *= 2
    big = tiled_matmul(m, k, n, wm=16, wn=16, **grown)
    assert big.bytes["hbm"] <= small.bytes["hbm"]
    assert big.bytes["sram"] <= small.bytes["sram"]


# --- oracle: run the loop nest and count every element moved --------------------------------


def simulate(m, k, n, bm, bn, bk, wm, wn, sx, sw, so):
    """The tiled GEMM's loop nest, counting per element how often it is loaded or read."""
    x_loads, w_loads = np.zeros((m, k)), np.zeros((k, n))  # from the level into SRAM
    x_reads, w_reads = np.zeros((m, k)), np.zeros((k, n))  # from SRAM by warps
    y_writes = np.zeros((m, n))
    macs = 0
    for i0 in range(0, m, bm):
        for j0 in range(0, n, bn):
            i1, j1 = min(i0 + bm, m), min(j0 + bn, n)
            for k0 in range(0, k, bk):
                k1 = min(k0 + bk, k)
                x_loads[i0:i1, k0:k1] += 1
                w_loads[k0:k1, j0:j1] += 1
                for wi in range(i0, i1, wm):
                    for wj in range(j0, j1, wn):
                        wi1, wj1 = min(wi + wm, i1), min(wj + wn, j1)
                        x_reads[wi:wi1, k0:k1] += 1
                        w_reads[k0:k1, wj:wj1] += 1
                        macs += (wi1 - wi) * (wj1 - wj) * (k1 - k0)
            y_writes[i0:i1, j0:j1] += 1
    assert np.all(y_writes == 1)
    level = x_loads.sum() * sx + w_loads.sum() * sw + y_writes.sum() * so
    sram = (x_loads.sum() + x_reads.sum()) * sx + (w_loads.sum() + w_reads.sum()) * sw
    return 2 * macs, level, sram, x_loads, w_loads


SIZES = {"bf16": 2, "fp8": 1, "int4": 0.5, "fp32": 4}


@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.sampled_from([2, 4, 8]), st.integers(1, 4), st.sampled_from([2, 4, 8]),
       st.integers(1, 4), st.integers(2, 16),
       st.sampled_from(["bf16", "fp8"]), st.sampled_from(["bf16", "int4"]),
       st.sampled_from(["bf16", "fp32"]))
def test_matches_loop_nest(m, k, n, wm, rm, wn, rn, bk, x, w, o):
    bm, bn = wm * rm, wn * rn
    flops, level, sram, x_loads, w_loads = simulate(m, k, n, bm, bn, bk, wm, wn,
                                                    SIZES[x], SIZES[w], SIZES[o])
    c = tiled_matmul(m, k, n, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn,
                     dtype=x, weight_dtype=w, out_dtype=o)
    assert c.flops == {x: flops}
    assert c.bytes["hbm"] == pytest.approx(level, rel=1e-12)
    assert c.bytes["sram"] == pytest.approx(sram, rel=1e-12)
    # the convention in one line: X once per block column, W once per block row
    assert np.all(x_loads == math.ceil(n / bn))
    assert np.all(w_loads == math.ceil(m / bm))


def test_seeded_random_shapes_against_loop_nest():
    rng = np.random.default_rng(2024)
    for _ in range(25):
        m, k, n = (int(v) for v in rng.integers(1, 60, size=3))
        wm, wn = (int(v) for v in rng.choice([2, 4, 8], size=2))
        bm, bn = wm * int(rng.integers(1, 5)), wn * int(rng.integers(1, 5))
        bk = int(rng.integers(1, 20))
        flops, level, sram, _, _ = simulate(m, k, n, bm, bn, bk, wm, wn, 2, 2, 2)
        c = tiled_matmul(m, k, n, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn)
        assert (c.flops["bf16"], c.bytes["hbm"], c.bytes["sram"]) == (flops, level, sram)


def test_returns_cost():
    assert isinstance(tiled_matmul(8, 8, 8), Cost)


def test_tiles_must_fit_one_sms_sram():
    from roofline import load_chip
    from roofline.levers import TILED_MATMUL_LEVERS, what_if
    from roofline.ops.tiled_matmul import tiles_fit

    h100 = load_chip("h100")  # 228 KiB = 233,472 B of shared memory per SM
    fits = dict(m=8192, k=8192, n=8192, bm=256, bn=256, bk=128)  # 128·(256+256)·2 = 131 kB
    assert tiles_fit(fits, h100) is fits
    with pytest.raises(RooflineError, match=r"tiles need 2\.621e\+05 B of SRAM per block"):
        tiles_fit({**fits, "bm": 512, "bn": 512}, h100)  # 262 kB > 233 kB
    base = evaluate(tiled_matmul(**fits), h100)
    labels = {r.label for r in what_if(tiled_matmul, fits, h100, TILED_MATMUL_LEVERS, base)}
    assert "2x larger block tiles (bm, bn)" not in labels  # the doubled tiles would not fit
    assert "tiles re-read from L2 instead of HBM" in labels


def test_tiled_matmul_cli_refuses_tiles_larger_than_sram(run_cli):
    code, _, err = run_cli("op", "tiled-matmul", "--m", "8192", "--k", "8192", "--n", "8192",
                           "--bm", "4096", "--bn", "4096", "--bk", "4096")
    assert code == 2 and "more than the 2.335e+05 B one SM of h100-sxm has" in err
