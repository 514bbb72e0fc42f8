"""Catalog chip data for issue 12: vector (non-tensor) peaks, special-function rates, clocks and
the HBM capacity a device exposes. Relations every sourced figure must keep, so a typo (a wrong
unit, a sparse figure, a swapped dtype) fails here."""

import json

import pytest

import roofline as rl

CHIPS = [rl.load_chip(c) for c in rl.list_chips()]
WITH_VECTOR = [c for c in CHIPS if c.vector]

# The marketing label of every chip whose capacity is now the device-reported total
# (nvidia-smi / rocm-smi / hl-smi): the reported figure is never below the label and at most
# ~7.5% above it (GiB vs GB, minus reserved memory).
LABEL_BYTES = {
    "a100-sxm-80gb": 80e9, "a100-pcie-80gb": 80e9, "h100-sxm": 80e9, "h100-pcie": 80e9,
    "h100-nvl": 94e9, "h200-sxm": 141e9, "h200-nvl": 141e9, "gh200": 144e9, "h800-sxm": 80e9,
    "h20": 96e9, "l40s": 48e9, "b200": 180e9, "gb200": 186e9, "mi300x": 192e9,
    "mi325x": 256e9, "mi355x": 288e9,
    "gaudi2": 96e9, "gaudi3": 128e9,
}


def test_every_chip_has_vector_peaks_estimated_where_unpublished():
    # TPUs, Gaudi 2 and Trainium 2 publish no vector figure: their files carry estimated
    # upper figures (else bf16 elementwise work fell back to the tensor peak)
    assert {c.id for c in WITH_VECTOR} == {c.id for c in CHIPS}
    for c in CHIPS:
        if c.vendor == "Google" or c.id in ("gaudi2", "trainium2"):
            assert all(p.estimated for p in c.vector.values()), c.id


@pytest.mark.parametrize("chip", WITH_VECTOR, ids=lambda c: c.id)
def test_vector_peaks_never_exceed_the_tensor_peaks(chip):
    top = max(p.flops_per_s for p in chip.peaks.values())
    for dtype, v in chip.vector.items():
        tensor = chip.peaks[dtype].flops_per_s if dtype in chip.peaks else top
        assert 0 < v.flops_per_s <= tensor, (chip.id, dtype)
        assert len(v.source) > 20, (chip.id, dtype)


@pytest.mark.parametrize("chip", WITH_VECTOR, ids=lambda c: c.id)
def test_vector_rates_are_ordered_by_precision(chip):
    # a narrower float is never slower on the vector units, fp64 never faster than fp32
    v = {k: p.flops_per_s for k, p in chip.vector.items()}
    if "fp32" in v:
        assert all(v[k] >= v["fp32"] for k in ("bf16", "fp16") if k in v), chip.id
        assert v.get("fp64", 0) <= v["fp32"], chip.id


@pytest.mark.parametrize("chip", [c for c in CHIPS if c.special], ids=lambda c: c.id)
def test_special_functions_are_slower_than_vector_fp32(chip):
    assert chip.special is not None and "fp32" in chip.vector, chip.id
    assert 0 < chip.special.flops_per_s < chip.vector["fp32"].flops_per_s, chip.id


@pytest.mark.parametrize("chip", [c for c in CHIPS if c.peak_clock_mhz], ids=lambda c: c.id)
def test_clocks_are_plausible_and_sourced(chip):
    assert 500 <= chip.peak_clock_mhz <= 3500, chip.id  # MHz, not GHz or Hz (GeForce max: ~3.1 GHz)
    assert "MHz" in chip.clock_source, chip.id
    same = chip.at_clock(chip.peak_clock_mhz)
    dt = "bf16" if "bf16" in chip.peaks else "fp16"  # V100: fp16-only tensor cores
    assert same.peak_flops(dt) == chip.peak_flops(dt)


@pytest.mark.parametrize(("chip_id", "label"), sorted(LABEL_BYTES.items()))
def test_capacity_is_device_reported_and_near_the_label(chip_id, label):
    hbm = rl.load_chip(chip_id).level("hbm")
    assert label <= hbm.capacity_bytes <= 1.15 * label, chip_id
    assert "reports" in hbm.source, chip_id  # the figure says which tool reported it


def test_softmax_with_many_ops_per_element_stays_under_the_h100_vector_roof(run_cli):
    code, out, _ = run_cli("op", "elementwise", "--n", "16777216", "--kind", "softmax",
                           "--ops-per-element", "2000", "--json")
    assert code == 0
    assert json.loads(out)["attainable_flops_per_s"] <= 134e12


@pytest.mark.parametrize("chip", [c for c in WITH_VECTOR if "bf16" in c.vector],
                         ids=lambda c: c.id)
def test_elementwise_attains_at_most_the_vector_rate_on_every_chip(chip):
    # the exp goes to the special-function units, which run beside the vector units
    est = rl.evaluate(rl.ops.elementwise(16777216, "softmax", ops_per_element=2000), chip)
    roof = chip.vector["bf16"].flops_per_s + (chip.special_ops() or 0.0)
    assert est.bound == "vector" and est.attainable_flops_per_s <= roof, chip.id
