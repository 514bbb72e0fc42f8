"""The remaining chips of issue 14 (GB300, A100 40GB, V100, L4, L40, RTX 4090 / 5090, RTX PRO 6000,
MI250X, MI210, Trainium2): a few figures per chip pinned to their cited sources, the conventions
that are easy to get wrong (GeForce FP32-accumulate rates, MI250X per GCD, PCIe instead of
NVLink), and the published measurements on these chips kept below their bounds."""

import csv
import json
import re
from pathlib import Path

import pytest

import roofline as rl
from roofline import RooflineError, load_chip

NEW = ["gb300", "a100-sxm-40gb", "v100-sxm2-32gb", "l4", "l40", "rtx-4090", "rtx-5090",
       "rtx-pro-6000", "mi250x", "mi210", "trainium2"]
PCIE_ONLY = ["l4", "l40", "rtx-4090", "rtx-5090", "rtx-pro-6000"]  # no NVLink on these
GEFORCE = ["rtx-4090", "rtx-5090"]  # stock driver: no peer-to-peer
# the vendor's label, against which the device-reported capacity is checked
LABEL_BYTES = {"a100-sxm-40gb": 40e9, "v100-sxm2-32gb": 32e9, "l4": 24e9, "l40": 48e9,
               "rtx-4090": 24e9, "rtx-5090": 32e9, "rtx-pro-6000": 96e9, "mi250x": 64e9,
               "mi210": 64e9}
ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "validation" / "systems.csv"


def test_every_new_chip_is_in_the_catalog_and_loads():
    assert set(NEW) <= set(rl.list_chips())
    for alias, chip_id in [("v100", "v100-sxm2-32gb"), ("4090", "rtx-4090"),
                           ("mi250x-gcd", "mi250x"), ("trn2", "trainium2"),
                           ("a100-40gb", "a100-sxm-40gb"), ("rtx-pro-6000-blackwell",
                                                            "rtx-pro-6000")]:
        assert load_chip(alias).id == chip_id


def test_geforce_bf16_is_the_fp32_accumulate_rate():
    # Ada whitepaper (RTX 4090): 165.2 TF dense with FP32 accumulate, 330.3 with FP16 accumulate,
    # at the rated 2520 MHz boost clock
    chip = load_chip("rtx-4090")
    rated = chip.at_clock(2520)
    assert rated.peak_flops("bf16") == pytest.approx(165.2e12, rel=1e-3)
    # fp16 and fp8 may accumulate in fp16 (SageAttention's PV does): the bound takes that
    # full rate, 2x; cuBLAS fp16 GEMMs accumulate in fp32, at half of it (their efficiency)
    assert rated.peak_flops("fp16") == pytest.approx(330.3e12, rel=1e-3)
    assert chip.peak_flops("fp16") == pytest.approx(2 * chip.peak_flops("bf16"), rel=1e-3)
    assert chip.efficiency["matmul.fp16"].value == pytest.approx(0.72 / 2)
    assert "FP32 accumulate" in chip.peaks["fp16"].source and "330.3" in chip.peaks["fp16"].source
    # integer math is not halved: int8 at 4x the bf16 (fp32-accumulate) figure
    assert chip.peak_flops("int8") == pytest.approx(4 * chip.peak_flops("bf16"), rel=1e-3)
    # RTX 5090: half of NVIDIA's 419 dense FP16(-accumulate) figure (838 with sparsity)
    assert load_chip("rtx-5090").at_clock(2407).peak_flops("bf16") == pytest.approx(838e12 / 4,
                                                                                    rel=1e-3)


@pytest.mark.parametrize(("chip_id", "rated_mhz", "top_mhz", "measured"), [
    # cuBLAS GEMMs measured past the rated-clock peaks (zzc0721/torch-performance-test-data):
    # RTX 4090 fp16 168.38 TF at 4096^3 and tf32 85.65 at 8192^3 (#78), RTX 5090 bf16 240.05 and
    # tf32 122.19 at 10240^3 (#96)
    ("rtx-4090", 2520, 3105, {"tf32": 85.65e12}),
    ("rtx-5090", 2407, 3090, {"bf16": 240.05e12, "tf32": 122.19e12}),
])
def test_geforce_peaks_hold_at_the_maximum_boost_clock(chip_id: str, rated_mhz: float,
                                                       top_mhz: float,
                                                       measured: dict[str, float]) -> None:
    # a GeForce card boosts past its rated clock; the bound takes its maximum graphics clock,
    # and at the rated clock the measurements above would beat it
    chip = load_chip(chip_id)
    assert chip.peak_clock_mhz == top_mhz
    for dt, flops in measured.items():
        assert flops <= chip.peak_flops(dt)
        assert flops > chip.at_clock(rated_mhz).peak_flops(dt)


def test_l40_runs_bf16_at_half_the_l40s_rate_and_l4_figures():
    # NVIDIA datasheets: L40 181.05 dense, L40S 362.05 dense (same AD102 die and clock)
    assert load_chip("l40").peak_flops("bf16") == pytest.approx(
        load_chip("l40s").peak_flops("bf16") / 2, rel=1e-3)
    l4 = load_chip("l4")
    assert l4.level("hbm").bandwidth_Bps == 300e9  # NVIDIA L4 datasheet: GDDR6, 300 GB/s
    assert l4.peak_flops("bf16") == 242e12 / 2  # 242 TF with sparsity, halved


def test_mi250x_is_one_gcd_of_the_package():
    gcd = load_chip("mi250x")
    # AMD per package: FP64 matrix 95.7 TF, FP16/BF16 383 TF, 3.2768 TB/s; two GCDs per package
    assert 2 * gcd.peak_flops("fp64") == pytest.approx(95.7e12)
    assert 2 * gcd.peak_flops("bf16") == pytest.approx(383e12)
    assert 2 * gcd.level("hbm").bandwidth_Bps == pytest.approx(3.2768e12)
    assert gcd.level("hbm").capacity_bytes == 68702699520  # rocm-smi per GCD (64 GiB - 16 MiB)
    assert gcd.level("sram").units == 110  # CUs per GCD (220 per package)
    # MI210 is one such GCD with 104 CUs: FP64 matrix 45.3 TF
    assert load_chip("mi210").peak_flops("fp64") == 45.3e12


def test_pcie_cards_have_no_nvlink_class_link():
    for chip_id in PCIE_ONLY:
        up = load_chip(chip_id).link("scale-up")
        assert up.technology.startswith("PCIe"), chip_id
        assert up.bandwidth_Bps <= 63e9, chip_id  # at most PCIe Gen5 x16 per direction
        assert "scale-out" not in load_chip(chip_id).links, chip_id  # the NIC is the host's
    for chip_id in GEFORCE:  # P2P disabled by the stock driver: staged through host memory
        assert "host memory" in load_chip(chip_id).link("scale-up").technology
    # every NVLink-class scale-up link in the catalog is faster than any PCIe link here
    nvlink = [c.link("scale-up").bandwidth_Bps for c in map(load_chip, rl.list_chips())
              if "scale-up" in c.links and "NVLink" in c.link("scale-up").technology.split(" (")[0]]
    assert min(nvlink) > 63e9


def test_gb300_figures_and_hw_compare(run_cli):
    chip = load_chip("gb300")
    assert chip.peak_flops("fp4") == 15e15  # NVIDIA: 15 PF dense NVFP4
    assert chip.special is not None and chip.special.flops_per_s == 10.7e12
    assert not chip.special.estimated  # NVIDIA's 10.7 TeraExponentials/s, not a derivation
    assert chip.link("scale-up").domain_size == 72
    code, out, err = run_cli("hw", "compare", "b200,b300,gb300", "--json")
    assert code == 0 and not err
    rows = {r["figure"]: r["values"] for r in json.loads(out)["figures"]}
    assert rows["fp4 peak (dense)"] == [9e15, 13.125e15, 15e15]
    assert rows["hbm bandwidth"] == [8e12, 8e12, 8e12]


def test_v100_has_fp16_tensor_cores_but_no_bf16():
    chip = load_chip("v100")
    assert chip.peak_flops("fp16") == 125e12
    with pytest.raises(RooflineError, match=r"no bf16 peak.*fp16"):
        chip.peak_flops("bf16")
    est = rl.evaluate(rl.ops.matmul(4096, 4096, 4096, dtype="fp16"), chip)
    assert est.t_lower_s == pytest.approx(2 * 4096**3 / 125e12)  # compute-bound


def test_a100_40gb_differs_from_80gb_only_in_memory():
    small, big = load_chip("a100-sxm-40gb"), load_chip("a100-sxm-80gb")
    assert {k: p.flops_per_s for k, p in small.peaks.items()} == \
        {k: p.flops_per_s for k, p in big.peaks.items()}
    assert small.level("hbm").bandwidth_Bps == 1.555e12
    assert small.level("hbm").capacity_bytes == 40960 * 2**20  # nvidia-smi: 40960MiB


def test_trainium2_figures():
    chip = load_chip("trainium2")
    assert chip.peak_flops("bf16") == 667e12 and chip.peak_flops("fp8") == 1299e12
    hbm = chip.level("hbm")
    assert hbm.bandwidth_Bps == 2.9e12 and hbm.capacity_bytes == 96 * 2**30
    up = chip.link("scale-up")
    assert (up.topology, up.torus_axis, up.ports, up.domain_size) == ("torus", 4, 4, 16)


@pytest.mark.parametrize(("chip_id", "label"), sorted(LABEL_BYTES.items()))
def test_capacity_is_device_reported_and_near_the_label(chip_id, label):
    hbm = load_chip(chip_id).level("hbm")
    assert label <= hbm.capacity_bytes <= 1.15 * label, chip_id
    assert "reports" in hbm.source, chip_id  # says which tool reported it


@pytest.mark.parametrize("chip_id", sorted(set(NEW) - set(LABEL_BYTES)))
def test_a_label_capacity_says_so(chip_id):
    assert "label" in load_chip(chip_id).level("hbm").source, chip_id


@pytest.mark.parametrize("chip_id", NEW)
def test_every_figure_has_a_source(chip_id):
    chip = load_chip(chip_id)
    sources = [p.source for p in (*chip.peaks.values(), *chip.vector.values())]
    sources += [m.source for m in chip.memory] + [lk.source for lk in chip.links.values()]
    sources += [lk.latency_source for lk in chip.links.values()]
    assert all(len(s) > 20 for s in sources), chip_id
    assert chip.notes and chip.form_factor, chip_id


def test_published_bandwidth_on_one_mi250x_gcd_stays_below_the_bound():
    # gpt-fast README: Llama-2-7B decode reads 1028.7 GB/s on one MI250X GCD
    row = next(r for r in csv.DictReader(ROWS.open()) if r["id"] == "gf-mi250x-llama2-7b-bf16-bw")
    chip = load_chip(row["chip"])
    measured = float(row["value"]) * 1e9
    assert chip.id == "mi250x" and measured <= chip.level("hbm").bandwidth_Bps
    assert re.search(r"per GCD", row["notes"])


def test_docs_catalog_line_counts_every_chip():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "ops.md").read_text()
    found = re.search(r"`roofline hw list` — the catalog \((\d+) SKUs", readme)
    assert found and int(found.group(1)) == len(rl.list_chips())
