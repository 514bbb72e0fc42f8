"""The kernel-level figures of the expected time: a batched / grouped GEMM's tiles on Hopper
hold the warpgroup MMA's 64 rows, named decode kernels stream the KV cache at their own share
of the HBM figure, fp4 GEMMs' generic fraction, and a training framework's own factor."""

from __future__ import annotations

import numpy as np
import pytest

from roofline import load_chip
from roofline.expect import expected, expected_step, figures
from roofline.expect.physics import gemm_utilization, mma_rows, tile_utilization
from roofline.expect.table import DEFAULTS
from roofline.ops.attention import attention
from roofline.ops.matmul import matmul
from roofline.ops.moe import batched_matmul


def test_a_tile_holds_at_least_min_rows_by_hand():
    # 32 products of 2 x 4096 on 78 SMs: 32 x 1 x 32 = 1024 tiles of 64 x 128 in
    # ceil(1024 / 78) = 14 waves: 32·2·4096 useful outputs over 14·78·64·128 slots
    assert gemm_utilization(2, 4096, 78, 32, min_rows=64) == pytest.approx(
        32 * 2 * 4096 / (14 * 78 * 64 * 128))
    # 16-row tiles (the default) waste a quarter as much
    assert gemm_utilization(2, 4096, 78, 32) == pytest.approx(
        32 * 2 * 4096 / (14 * 78 * 16 * 128))
    # rows enough to fill the floor: the floor changes nothing
    assert gemm_utilization(256, 4096, 78, 32, min_rows=64) == gemm_utilization(256, 4096, 78, 32)


def test_hopper_pads_batched_and_grouped_gemms_to_its_mma_rows():
    h20, a100 = load_chip("h20"), load_chip("a100-sxm-80gb")
    assert mma_rows(h20) == 64.0 and mma_rows(a100) == 16.0
    # a batched product of 2 rows pays for 64 on Hopper (32 x fewer useful outputs a tile)
    batched = batched_matmul(32, 2, 7168, 4096, "fp8")
    assert tile_utilization(batched, h20) == pytest.approx(
        float(gemm_utilization(2, 4096, 78, 32, min_rows=64)))
    # one product of 2 rows swaps its operands: 16-row tiles, as before; so do 32 repeats
    # of it (a step's layers: 32 calls, each its own kernel)
    single = matmul(2, 7168, 4096, "fp8")
    assert tile_utilization(single, h20) == pytest.approx(float(gemm_utilization(2, 4096, 78)))
    assert tile_utilization(32 * single, h20) == pytest.approx(
        float(gemm_utilization(2, 4096, 78, 32)))
    # which makes the batched small-M GEMM compute-bound on H20, never below its bound
    e = expected(batched, h20)
    assert e.derated.bound == "compute" and e.t_s >= e.bound.t_lower_s
    # on Ampere (mma.sync m16n8k16) the same bf16 product keeps its 16-row tiles
    bf16 = batched_matmul(32, 2, 7168, 4096)
    assert tile_utilization(bf16, a100) == pytest.approx(float(gemm_utilization(2, 4096, 108, 32)))


def test_a_named_decode_kernel_streams_at_its_share_of_the_hbm_figure():
    chip = load_chip("h200")
    decode = attention(1, 1, 131072, 32, 4, 128, impl="decode")
    plain, fa3 = expected(decode, chip), expected(decode, chip, kernel="fa3")
    share = figures(chip)["decode_hbm.fa3"].value
    assert fa3.efficiency["hbm"] == pytest.approx(plain.efficiency["hbm"] * share)
    assert "decode_hbm.fa3" in fa3.sources and "decode_hbm" not in plain.sources
    # HBM-bound: the stream takes 1 / share as long; still never below the bound
    stream = plain.derated.time_s["hbm"]
    assert fa3.derated.time_s["hbm"] == pytest.approx(stream / share)
    assert fa3.t_s >= fa3.bound.t_lower_s
    # a prefill over the same kernel keeps the HBM figure (its blocks are not a decode's)
    prefill = attention(1, 4096, 4096, 32, 4, 128, block_q=128)
    assert expected(prefill, chip, kernel="fa3").efficiency["hbm"] == pytest.approx(
        expected(prefill, chip).efficiency["hbm"])
    # a kernel without a decode figure keeps the HBM figure
    assert expected(decode, chip, kernel="cudnn").efficiency["hbm"] == pytest.approx(
        plain.efficiency["hbm"])
    # every decode share is a fraction of the roof
    assert all(0 < f.value <= 1 for k, f in figures(chip).items() if k.startswith("decode_hbm"))


def test_fp4_gemms_take_their_own_generic_fraction():
    b200, mi300x = load_chip("b200"), load_chip("mi300x")
    assert figures(b200)["matmul.fp4"].value == DEFAULTS["matmul.fp4"].value == 0.55
    big = matmul(8192, 8192, 8192, "nvfp4")
    e = expected(big, b200)
    assert e.efficiency["compute"] == pytest.approx(0.55 * float(tile_utilization(big, b200)))
    # MI300X's fp8 GEMMs: its own fitted figure, the bf16 one unchanged
    assert figures(mi300x)["matmul.fp8"].value == 0.48
    assert figures(mi300x)["matmul.bf16"].value == 0.511


def test_torchtitan_training_takes_its_own_framework_factor():
    from roofline.models import Parallel, analyze, train

    a = analyze("llama-3.1-8b", "h100", train(16, 8192), Parallel(dp=8, fsdp=True))
    plain, titan = expected_step(a), expected_step(a, framework="torchtitan")
    assert titan.efficiency["framework"] == 0.45 and plain.efficiency["framework"] == 0.75
    assert float(titan.t_s) == pytest.approx(float(plain.t_s) * 0.75 / 0.45)
    assert np.all(np.asarray(titan.t_s) >= np.asarray(a.t_lower_s))
