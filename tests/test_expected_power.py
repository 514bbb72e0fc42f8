"""A GEMM's power-limited fraction of the dense peak (roofline.expect.power)."""

from __future__ import annotations

import pytest

from roofline import RooflineError, load_chip
from roofline.expect import expected
from roofline.expect.power import KERNEL_FRACTION, power_figures, power_fraction
from roofline.expect.table import DEFAULTS, figures, lookup
from roofline.ops.matmul import matmul


def test_h100_sxm_fp8_golden():
    # 1.6e12 FLOP/s/W x 700 W = 1.12e15 of the 1.9789e15 fp8 peak: 0.56597; its cube root
    # 0.82717 (0.82717^3 = 0.56596), times 0.80 = 0.66174
    assert power_fraction(1978.9e12, 700.0) == pytest.approx(0.66174, abs=2e-5)


def test_a_board_with_headroom_keeps_the_full_clock():
    # L40's bf16: 181.05e12 / 300 W = 0.60 TFLOP/s per W, under 1.6: the kernel's fraction
    assert power_fraction(181.05e12, 300.0) == KERNEL_FRACTION
    assert power_fraction(1.6e12 * 500, 500.0) == pytest.approx(KERNEL_FRACTION)


def test_more_power_never_lowers_and_more_peak_never_raises_the_fraction():
    powers = [power_fraction(2000e12, w) for w in (300.0, 500.0, 700.0, 1000.0, 1500.0)]
    assert powers == sorted(powers)
    peaks = [power_fraction(p, 700.0) for p in (500e12, 1000e12, 2000e12, 4000e12)]
    assert peaks == sorted(peaks, reverse=True)
    # the FLOP/s it promises never rise when the clock falls: peak x fraction grows slower
    # than the peak (the cube root of the power shortfall)
    assert power_fraction(4000e12, 700.0) * 4000 > power_fraction(2000e12, 700.0) * 2000
    assert all(0 < f <= 1 for f in powers + peaks)


def test_bad_power_or_peak_is_an_error():
    with pytest.raises(RooflineError, match="tdp_w"):
        power_fraction(1e15, 0.0)


def test_a_chip_file_figure_and_a_specific_default_win():
    h100 = figures(load_chip("h100-sxm"))
    assert h100["matmul.bf16"].value == 0.803  # MAMF, in the chip file
    assert h100["matmul.fp4"] is DEFAULTS["matmul.fp4"]  # block-scaled 4-bit: its own
    h800 = figures(load_chip("h800-sxm"))  # no figure of its own for fp8
    assert h800["matmul.fp8"].value == pytest.approx(power_fraction(1978.9e12, 700.0))
    assert h800["matmul.fp8"].source == "fitted"


def test_a_chip_without_board_power_takes_the_generic_figure():
    chip = load_chip("tpu-v6e")
    assert chip.tdp_w is None and power_figures(chip) == {}
    assert lookup(figures(chip), "matmul", "int8")[1] is DEFAULTS["matmul"]


def test_a_step_keeps_the_generic_figure():
    chip = load_chip("h800-sxm")
    key, fig = lookup(figures(chip, step=True), "matmul", "fp8")
    assert (key, fig) == ("matmul", DEFAULTS["matmul"])
    assert lookup(figures(chip), "matmul", "fp8")[0] == "matmul.fp8"


def test_a_lower_clock_leaves_more_headroom():
    slow = load_chip("h100-sxm@915MHz")  # half the peak on the same board power
    assert figures(slow)["matmul.fp8"].value > figures(load_chip("h800-sxm"))["matmul.fp8"].value


def test_the_forecast_stays_above_the_bound():
    for chip in ("h800-sxm", "l40s", "mi355x", "b200", "rtx-pro-6000"):
        e = expected(matmul(8192, 8192, 8192, "fp8"), chip)
        assert e.t_s >= e.bound.t_lower_s
