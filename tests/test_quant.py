"""Quantization table: seed 003 §4.3 on H100, the missing-peak rule, relations on every chip."""

import dataclasses

import numpy as np
import pytest

from roofline import dtype, list_chips, load_chip, matmul
from roofline.quant import SCHEMES, QuantRow, half_dtype, quant_table
from roofline.solve import critical_batch, crossover


def rows_by_scheme(hw, **kw):
    return {r.scheme: r for r in quant_table(hw, **kw)}


def test_h100_reproduces_seed_003_table():
    # seed 003 §4.3 (H100): bf16 2 B 989 T 295 | int8 weight-only 1 B 989 T ~150 |
    # int4 weight-only 0.5 B 989 T ~75 | int8 full 1 B 1979 T 295 | fp8 full 1 B 1979 T 295
    t = rows_by_scheme("h100")
    expected = {
        "bf16": (2.0, 989.4e12, 295),
        "int8 weight-only": (1.0, 989.4e12, 148),
        "int4-g128 weight-only": (0.515625, 989.4e12, 76),  # 0.5 B + fp16 scale per 128
        "int8": (1.0, 1978.9e12, 295),
        "fp8": (1.0, 1978.9e12, 295),
    }
    for scheme, (bpp, peak, crit) in expected.items():
        row = t[scheme]
        assert row.bytes_per_param == bpp
        assert row.peak_flops_per_s == pytest.approx(peak)
        assert row.critical_batch == pytest.approx(crit, abs=0.5)
    assert t["int8 weight-only"].notation == "W8A16"
    assert t["int4-g128 weight-only"].notation == "W4A16"
    assert t["fp8"].notation == "W8A8"


def test_h100_has_no_fp4_rows():
    # seed 003 lists "fp4 full precision 3958 T" for H100; H100 has no fp4 tensor cores
    schemes = rows_by_scheme("h100")
    assert "nvfp4" not in schemes and "mxfp4" not in schemes


def test_b200_nvfp4_row():
    t = rows_by_scheme("b200")
    chip = load_chip("b200")
    row = t["nvfp4"]
    assert (row.notation, row.compute_dtype) == ("W4A4", "nvfp4")
    assert row.bytes_per_param == 0.5625  # 4 bits + an 8-bit scale per 16
    assert row.peak_flops_per_s == chip.peak_flops("fp4")
    bw = chip.level("hbm").bandwidth_Bps
    assert row.critical_batch == pytest.approx(0.5625 * chip.peak_flops("fp4") / (2 * bw))
    # the scales cost: a little above the bf16 critical batch instead of equal to it
    assert t["bf16"].critical_batch < row.critical_batch < 1.2 * t["bf16"].critical_batch
    assert t["mxfp4"].bytes_per_param == 0.53125


@pytest.mark.parametrize(("hw", "missing"), [
    ("a100", {"fp8", "nvfp4", "mxfp4"}),
    ("tpu-v5e", {"fp8", "nvfp4", "mxfp4"}),
    ("tpu-7x", {"int8", "nvfp4", "mxfp4"}),
    ("h100", {"nvfp4", "mxfp4"}),
])
def test_rows_without_a_peak_are_skipped(hw, missing):
    schemes = set(rows_by_scheme(hw))
    assert not schemes & missing
    assert "bf16" in schemes and "int4-g128 weight-only" in schemes


@pytest.mark.parametrize("hw", list_chips())
def test_every_chip_row_rule_and_formula(hw):
    chip = load_chip(hw)
    rows = quant_table(chip)
    present = {r.scheme for r in rows}
    half = half_dtype(chip)  # the 16-bit roles: bf16, or fp16 on a chip without it (V100)
    for s in SCHEMES:
        name, compute = s.scheme.replace("bf16", half), s.compute_dtype.replace("bf16", half)
        assert (name in present) == (dtype(compute).peak in chip.peaks)
    bw = chip.level("hbm").bandwidth_Bps
    for r in rows:
        s_w = dtype(r.weight_dtype).bytes
        assert r.bytes_per_param == s_w
        assert r.critical_batch == pytest.approx(s_w * r.peak_flops_per_s / (2 * bw), rel=1e-12)


def test_weight_only_critical_batch_monotone_in_bytes_per_param():
    for hw in ["h100", "a100", "mi300x", "b200", "tpu-v5e"]:
        weight_only = [r for r in quant_table(hw) if r.activation_dtype == "bf16"]
        weight_only.sort(key=lambda r: r.bytes_per_param)
        crit = [r.critical_batch for r in weight_only]
        assert crit == sorted(crit)
        assert crit[0] < crit[-1]


def test_full_quantization_keeps_the_critical_batch():
    # W8A8 at twice the peak with half the bytes: the same critical batch as bf16
    for hw in ["h100", "h200", "b200", "mi300x"]:
        t = rows_by_scheme(hw)
        ratio = t["fp8"].peak_flops_per_s / t["bf16"].peak_flops_per_s
        assert t["fp8"].critical_batch == pytest.approx(t["bf16"].critical_batch * ratio / 2)


def test_with_shapes_matches_the_numeric_crossover():
    k, n = 8192, np.array([1024, 8192, 28672])
    for row in quant_table("h100", k, n):
        def cost(m, row=row):
            return matmul(m, k, n, dtype=row.activation_dtype, weight_dtype=row.weight_dtype,
                          out_dtype=row.out_dtype, compute_dtype=row.compute_dtype)

        numeric = crossover(cost, "h100", 1e-3, 1e9)
        np.testing.assert_allclose(row.critical_batch, numeric, rtol=1e-9)
        assert np.all(row.critical_batch > critical_batch("h100", dtype=row.activation_dtype,
                                                          weight_dtype=row.weight_dtype,
                                                          compute_dtype=row.compute_dtype))


def test_rows_are_frozen_typed_records():
    row = quant_table("h100")[0]
    assert isinstance(row, QuantRow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.critical_batch = 1.0
    assert [f.name for f in dataclasses.fields(QuantRow)] == [
        "scheme", "notation", "weight_dtype", "activation_dtype", "compute_dtype", "out_dtype",
        "bytes_per_param", "peak_flops_per_s", "critical_batch"]


def test_a_chip_without_bf16_takes_its_fp16(run_cli):
    """V100 has no bf16 peak: critical-batch --json / --explain failed and quant-table was
    empty; its fp16 plays the 16-bit part (s_w·P / (2·BW) = 2·125e12 / (2·900e9) = 138.9)."""
    import json

    code, out, err = run_cli("critical-batch", "--hw", "v100", "--json")
    assert code == 0, err
    assert json.loads(out)["critical_batch"] == pytest.approx(2 * 125e12 / (2 * 900e9))
    code, out, _ = run_cli("quant-table", "--hw", "v100", "--json")
    rows = {r["scheme"]: r for r in json.loads(out)["rows"]}
    assert rows["fp16"]["critical_batch"] == pytest.approx(138.9, rel=1e-3)
    assert rows["int8 weight-only"]["activation_dtype"] == "fp16"
    code, out, _ = run_cli("quant-table", "--hw", "h100", "--explain")
    assert "int8: M* = s_w·P / (2·BW)" in out  # --explain printed nothing more
