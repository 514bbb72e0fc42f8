"""The catalog: every SKU present, sourced, dense, valid; user files validated field by field."""

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from roofline import RooflineError, list_chips, load_chip
from roofline.hardware.catalog import CATALOG_DIR

REQUIRED = ["h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "h800-sxm", "h20",
            "gh200", "l40s", "b200", "gb200", "a100-sxm-80gb", "a100-pcie-80gb", "mi300x",
            "mi325x", "mi355x", "gaudi2", "gaudi3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e",
            "tpu-7x"]
ALIASES = {"h100": "h100-sxm", "h200": "h200-sxm", "a100": "a100-sxm-80gb", "v5e": "tpu-v5e",
           "v6e": "tpu-v6e", "v5p": "tpu-v5p", "v4": "tpu-v4", "H100": "h100-sxm"}


def all_chips():
    return [load_chip(c) for c in list_chips()]


def test_every_required_sku_present():
    assert set(REQUIRED) <= set(list_chips())


@pytest.mark.parametrize(("alias", "chip_id"), ALIASES.items())
def test_aliases(alias, chip_id):
    assert load_chip(alias).id == chip_id


def test_ids_and_aliases_unique():
    seen: set[str] = set()
    for chip in all_chips():
        for name in (chip.id, *chip.aliases):
            assert name not in seen, name
            seen.add(name)


def test_every_figure_sourced_and_positive():
    for chip in all_chips():
        assert chip.peaks and chip.memory[0].name == "hbm"
        for p in chip.peaks.values():
            assert p.flops_per_s > 0 and len(p.source) > 10, (chip.id, p.dtype)
        for m in chip.memory:
            assert m.bandwidth_Bps > 0 and (m.capacity_bytes or 0) > 0 and m.source, (chip.id, m)
        for lk in chip.links.values():
            assert lk.bandwidth_Bps > 0 and lk.latency_s > 0 and lk.source, (chip.id, lk)


def test_every_tdp_has_its_source():
    """`roofline hw show` prints the TDP and `roofline serve` divides by it (tokens/J): a
    catalog number, so it names its source; `tdp_estimated` marks a derivation."""
    with_tdp = [c for c in all_chips() if c.tdp_w is not None]
    assert len(with_tdp) >= 25
    for chip in with_tdp:
        assert len(chip.tdp_source.strip()) > 20, chip.id
        assert chip.tdp_estimated == chip.tdp_source.startswith("estimated"), chip.id
    for chip in all_chips():  # no source without a figure
        assert chip.tdp_w is not None or not (chip.tdp_source or chip.tdp_estimated), chip.id
    assert load_chip("h100").tdp_source.startswith("NVIDIA H100 datasheet")
    assert load_chip("mi250x").tdp_estimated and not load_chip("mi300x").tdp_estimated


# Dense figures (TFLOP/s) from ../shared/reference/hw_specs.md; a sparse one would be 2x.
DENSE_BF16 = {"h100-sxm": 989.4, "h200-sxm": 989.4, "h800-sxm": 989.4, "gh200": 989.4,
              "a100-sxm-80gb": 312, "a100-pcie-80gb": 312, "h100-pcie": 756.5, "l40s": 362.05,
              "b200": 2250, "gb200": 2500, "mi300x": 1307.4, "mi325x": 1307.4, "gaudi2": 432,
              "tpu-v4": 275, "tpu-v5e": 197, "tpu-v5p": 459, "tpu-v6e": 918, "tpu-7x": 2307}


@pytest.mark.parametrize(("chip_id", "tflops"), DENSE_BF16.items())
def test_no_sparse_peak_slipped_in(chip_id, tflops):
    assert load_chip(chip_id).peak_flops("bf16") == pytest.approx(tflops * 1e12, rel=0.01)


def test_peak_ratios_plausible():
    for chip in all_chips():
        # V100 has no bf16 (Volta tensor cores are fp16 only): its fp16 peak is the reference
        bf16 = chip.peaks["bf16" if "bf16" in chip.peaks else "fp16"].flops_per_s
        for dt, p in chip.peaks.items():
            # fp8 / int8 at most ~2x bf16 (L40S: 733 vs 362.05), 4-bit at most ~4x
            limit = {"fp8": 2.05, "int8": 2.05, "fp6": 4.1, "fp4": 4.1, "int4": 4.1}.get(dt, 1.0)
            if chip.id in ("b300", "gb300") and dt == "fp4":  # Blackwell Ultra: 13.1-15 PF fp4,
                limit = 6.1  # 2.25-2.5 PF bf16
            if chip.id in ("rtx-4090", "rtx-5090", "l40") and dt in ("fp16", "fp8", "int8",
                                                                    "int4", "fp4"):
                limit *= 2  # bf16 (fp32 accumulate) at half rate; fp16 / fp8 (fp16
                # accumulate), integer and fp4 at the full rate
            assert p.flops_per_s <= limit * bf16 * 1.0001, (chip.id, dt)


def test_links_are_per_direction():
    assert load_chip("h100").link("scale-up").bandwidth_Bps == 450e9  # not 900
    assert load_chip("b200").link("scale-up").bandwidth_Bps == 900e9  # not 1800
    assert load_chip("h800").link("scale-up").bandwidth_Bps == 200e9


@pytest.mark.parametrize(("chip_id", "ridge", "tol"), [
    ("h100", 295, 2),   # seed 000 §1.1: ~295 (seed 001 rounds to ~298 with 1e15)
    ("h200", 206, 1),   # seed 000 §1.1
    ("v5e", 240, 2),    # seed 001 §2.2: 240
])
def test_seed_ridge_points(chip_id, ridge, tol):
    assert load_chip(chip_id).ridge("bf16", "hbm") == pytest.approx(ridge, abs=tol)


def test_h100_network_ridges():
    # seed 001 §2.5/2.9: NVLink ~2200, IB ~20000, SMEM ~33 FLOP/byte
    chip = load_chip("h100")
    assert chip.ridge("bf16", "scale-up") == pytest.approx(2200, rel=0.02)
    assert chip.ridge("bf16", "scale-out") == pytest.approx(19800, rel=0.02)
    assert chip.ridge("bf16", "sram") == pytest.approx(33, rel=0.1)


def test_catalog_files_named_by_id():
    for path in CATALOG_DIR.glob("*.toml"):
        assert tomllib.loads(path.read_text())["id"] == path.stem


def test_unknown_chip_did_you_mean():
    with pytest.raises(RooflineError, match=r"unknown chip 'h1000'.*did you mean 'h100'"):
        load_chip("h1000")


# --- user chip files ------------------------------------------------------------------------

GOOD = (CATALOG_DIR / "h100-sxm.toml").read_text()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "mychip.toml"
    p.write_text(text)
    return p


def test_user_file_loads(tmp_path):
    p = write(tmp_path, GOOD.replace('id = "h100-sxm"', 'id = "my-gpu"'))
    chip = load_chip(str(p))
    assert chip.id == "my-gpu" and chip.origin == str(p)


@pytest.mark.parametrize(("edit", "field"), [
    (("flops_per_s = 989.4e12", "flops_per_s = -1"), "peak.bf16.flops_per_s"),
    (("flops_per_s = 989.4e12", 'flops_per_s = "fast"'), "peak.bf16.flops_per_s"),
    (("[peak.fp8]", "[peak.fp9]"), "peak.fp9"),
    (('source = "NVIDIA H100 datasheet: 80 GB HBM3, 3.35 TB/s; nvidia-smi reports 81559MiB '
      'total (= 85.52e9 B) on H100 80GB HBM3"', 'source = ""'),
     "memory[0].source"),
    (('name = "hbm"', 'name = "dram"'), "memory[0].name"),
    (("bandwidth_Bps = 3.35e12", "bandwidth = 3.35e12"), "memory[0].bandwidth"),
    (("latency_s = 0.6e-6", "latency_s = 0"), "link.scale-up.latency_s"),
    (("[link.scale-out]", "[link.infiniband]"), "link.infiniband"),
    (("domain_size = 8", "domain_size = 8.5"), "link.scale-up.domain_size"),
    (("domain_size = 8", "domain_size = 9223372036854775807"), "link.scale-up.domain_size"),
    (("flops_per_s = 989.4e12", "flops_per_s = 1" + "0" * 400), "peak.bf16.flops_per_s"),
    (("flops_per_s = 989.4e12", "flops_per_s = 1e-300"), "peak.bf16.flops_per_s"),
    (("bandwidth_Bps = 3.35e12", "bandwidth_Bps = 1e-320"), "memory[0].bandwidth_Bps"),
    (("latency_s = 0.6e-6", "latency_s = 1e-15"), "link.scale-up.latency_s"),
    (("schema_version = 1", "schema_version = 7"), "schema_version"),
    (('id = "h100-sxm"', 'id = "H100 SXM"'), "id"),
    # absurd figures: each field has a sane range, stated in the error
    (("latency_s = 0.6e-6", "latency_s = 1e300"), "link.scale-up.latency_s"),
    (("flops_per_s = 989.4e12", "flops_per_s = 1e30"), "peak.bf16.flops_per_s"),
    (("bandwidth_Bps = 3.35e12", "bandwidth_Bps = 3.35e30"), "memory[0].bandwidth_Bps"),
    (("domain_size = 8", "domain_size = 1000000000"), "link.scale-up.domain_size"),
    # control characters never reach the terminal: ids, names and notes are printable
    (('id = "h100-sxm"', 'id = "h100\\u001b[2J"'), "id"),
    (('name = "NVIDIA H100 SXM', 'name = "\\u001b]0;pwned\\u0007NVIDIA H100 SXM'), "name"),
    (('name = "NVIDIA H100 SXM', 'name = "NVIDIA\\nH100 SXM'), "name"),
    (('name = "NVIDIA H100 SXM', 'name = "\\u202eNVIDIA H100 SXM'), "name"),
    (('aliases = ["h100"', 'aliases = ["h\\u0000100"'), "aliases[0]"),
])
def test_invalid_file_names_file_and_field(tmp_path, edit, field):
    old, new = edit
    assert old in GOOD
    p = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(RooflineError) as info:
        load_chip(str(p))
    message = str(info.value)
    assert str(p) in message and f"'{field}'" in message and "\n" not in message


TDP_SOURCE = re.search(r"(?m)^tdp_source = .*\n", GOOD).group(0)


def test_a_tdp_without_its_source_is_refused_in_one_line(tmp_path, run_cli):
    p = write(tmp_path, GOOD.replace(TDP_SOURCE, "", 1))
    with pytest.raises(RooflineError) as info:
        load_chip(str(p))
    message = str(info.value)
    assert message.startswith(f"{p}: field 'tdp_source': required with tdp_w")
    assert "\n" not in message
    code, out, err = run_cli("hw", "show", str(p))
    assert code == 2 and not out and "'tdp_source': required with tdp_w" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("old", "new", "needle"), [
    ('tdp_source = "', 'tdp_source = " ', None),  # still a source: loads
    (TDP_SOURCE, 'tdp_source = ""\n', "field 'tdp_source': required non-empty string"),
    (TDP_SOURCE, TDP_SOURCE + "tdp_estimated = 1\n", "field 'tdp_estimated': must be true or"),
    ("tdp_w = 700\n", "", "field 'tdp_source': only with tdp_w"),
    ("tdp_w = 700\n" + TDP_SOURCE, "tdp_estimated = true\n",
     "field 'tdp_estimated': only with tdp_w"),
])
def test_tdp_fields_are_validated(tmp_path, old, new, needle):
    assert old in GOOD
    p = write(tmp_path, GOOD.replace(old, new, 1))
    if needle is None:
        assert load_chip(str(p)).tdp_w == 700
        return
    with pytest.raises(RooflineError, match=re.escape(needle)) as info:
        load_chip(str(p))
    assert str(p) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("old", "new", "needle"), [
    ("latency_s = 0.6e-6", "latency_s = 1e300", "must be at most 0.01 s (the sane range is 1e-12 "
     "to 0.01 s), got 1e+300"),
    ("flops_per_s = 989.4e12", "flops_per_s = 1e30", "at most 1e+19 FLOP/s"),
    ("latency_s = 0.6e-6", "latency_s = 1e-15", "must be at least 1e-12 s"),
    # unit slips the old floors let through: TFLOP/s without e12, a latency in us as s
    ("flops_per_s = 989.4e12", "flops_per_s = 989.4", "must be at least 1e+09 FLOP/s"),
    ("latency_s = 0.6e-6", "latency_s = 0.6", "must be at most 0.01 s"),
    ("capacity_bytes = 50e6", "capacity_bytes = 500e9", "more than main memory"),  # L2
])
def test_absurd_figures_name_the_sane_range(tmp_path, old, new, needle):
    with pytest.raises(RooflineError, match=re.escape(needle)):
        load_chip(str(write(tmp_path, GOOD.replace(old, new, 1))))


def test_notes_may_span_lines_but_not_hold_escapes(tmp_path):
    def with_notes(text):
        return write(tmp_path, re.sub(r"(?m)^notes = .*$", lambda _: f"notes = {text}", GOOD,
                                      count=1))

    chip = load_chip(str(with_notes('"line one\\nline two\\ttabbed"')))
    assert chip.notes == "line one\nline two\ttabbed"
    with pytest.raises(RooflineError, match=r"field 'notes'.*control character \('\\x1b'\)"):
        load_chip(str(with_notes('"\\u001b[31mred"')))


def test_large_integer_figures_load_as_floats(tmp_path):
    # a 20 PFLOP/s peak written as an integer is fine; counts beyond 2**53 are not
    p = write(tmp_path, GOOD.replace("flops_per_s = 989.4e12", "flops_per_s = " + "2" + "0" * 16,
                                     1))
    assert load_chip(str(p)).peaks["bf16"].flops_per_s == 2e16


def test_malformed_toml(tmp_path):
    p = write(tmp_path, "id = [unclosed")
    with pytest.raises(RooflineError, match="not valid TOML"):
        load_chip(str(p))


def test_missing_file():
    with pytest.raises(RooflineError, match="chip file not found"):
        load_chip("no/such/chip.toml")


def test_memory_levels_must_be_ordered(tmp_path):
    chip = load_chip("h100")
    assert [m.name for m in chip.memory] == ["hbm", "l2", "sram"]
    swapped = GOOD.replace('name = "l2"', 'name = "TMP"').replace('name = "sram"', 'name = "l2"')
    swapped = swapped.replace('name = "TMP"', 'name = "sram"')
    with pytest.raises(RooflineError, match="ordered outermost first"):
        load_chip(str(write(tmp_path, swapped)))


def test_sram_capacity_from_units():
    sram = load_chip("h100").level("sram")
    assert sram.units == 132 and sram.unit_capacity_bytes == 228 * 1024
    assert sram.capacity_bytes == 132 * 228 * 1024


def test_chip_is_immutable_value():
    chip = load_chip("h100")
    other = replace(chip, id="x")
    assert chip.id == "h100-sxm" and other.id == "x"
