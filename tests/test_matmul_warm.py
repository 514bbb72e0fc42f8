"""The warm GEMM bound (`matmul(..., warm_l2_bytes=...)`, `roofline op matmul --warm`): a
benchmark loop over the same operands keeps up to the L2's capacity of them between calls."""

from __future__ import annotations

import json

import numpy as np
import pytest

import roofline as rl
from roofline import RooflineError, load_chip
from roofline.ops import resolve_op, run_op
from roofline.ops.matmul import warm_capacity


def test_warm_moves_what_l2_holds_off_hbm_by_hand():
    # L40S: 96 MB of L2. A 1 x 6144 x 16384 fp8 GEMV moves 6144 + 100,663,296 + 16,384 B =
    # 100,685,824 B: 4,685,824 B past the L2 must come from HBM; all of it passes the L2
    cold = rl.matmul(1, 6144, 16384, "fp8")
    warm = rl.matmul(1, 6144, 16384, "fp8", warm_l2_bytes=96e6)
    assert cold.bytes == {"hbm": 100_685_824.0}
    assert warm.bytes == {"hbm": 4_685_824.0, "l2": 100_685_824.0}
    assert warm.flops == cold.flops
    est = rl.evaluate(warm, "l40s")
    # L2 at 8.1 TB/s (the chip file's estimate) sets it: 12.4 us, not the cold 116.5 us
    assert est.bound == "l2" and est.t_lower_s == pytest.approx(100_685_824 / 8.1e12)
    assert rl.evaluate(cold, "l40s").t_lower_s == pytest.approx(100_685_824 / 864e9)


def test_warm_is_never_slower_than_cold_and_fits_entirely_when_small():
    rng = np.random.default_rng(3)
    chip = load_chip("h100")
    l2 = chip.level("l2").capacity_bytes
    for _ in range(50):
        m, k, n = (int(v) for v in rng.integers(1, 20000, 3))
        cold = rl.evaluate(rl.matmul(m, k, n), chip)
        warm = rl.evaluate(rl.matmul(m, k, n, warm_l2_bytes=l2), chip)
        assert warm.t_lower_s <= cold.t_lower_s * (1 + 1e-12)
        moved = 2.0 * (m * k + k * n + m * n)
        assert warm.cost.bytes["hbm"] == pytest.approx(max(0.0, moved - l2))
    # vectorized like every size
    sweep = rl.matmul(np.array([1.0, 4096.0]), 8192, 8192, warm_l2_bytes=l2)
    assert np.shape(sweep.bytes["hbm"]) == (2,)


def test_the_cli_flag_takes_the_chips_l2_and_refuses_a_chip_without_one():
    kwargs = resolve_op("gemv", "l40s", k=6144, n=16384, dtype="fp8", warm_l2_bytes="l2")
    assert kwargs["warm_l2_bytes"] == load_chip("l40s").level("l2").capacity_bytes
    assert "warm_l2_bytes" not in resolve_op("gemv", "l40s", k=6144, n=16384)
    assert resolve_op("gemv", "l40s", k=1, n=1, warm_l2_bytes="64MiB")["warm_l2_bytes"] == 2**26
    assert run_op("matmul", "h100", m=1, k=4096, n=4096, warm_l2_bytes="l2").bound == "l2"
    with pytest.raises(RooflineError, match="no l2 level"):
        resolve_op("matmul", "tpu-v5e", m=1, k=4096, n=4096, warm_l2_bytes="l2")


def test_warm_on_the_command_line(run_cli):
    code, out, err = run_cli("op", "gemv", "--k", "6144", "--n", "16384", "--dtype", "fp8",
                             "--hw", "l40s", "--warm", "l2", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["inputs"]["warm_l2_bytes"] == 96e6 and data["bound"] == "l2"
    code, _, err = run_cli("op", "gemv", "--k", "8", "--n", "8", "--hw", "v5e", "--warm", "l2")
    assert code == 2 and "no l2 level" in err


def test_warm_explains_itself():
    text = "\n".join(rl.matmul(1, 6144, 16384, "fp8", warm_l2_bytes=96e6).explain())
    assert "HBM bytes beyond what L2 keeps warm" in text and "L2" in text


def test_amd_keeps_its_infinity_cache_warm_too():
    # behind MI300X's 32 MiB of L2 sits a 256 MiB Infinity Cache the file names for warm
    # loops (not a level of its own): a 268 MB fp16 GEMV fits, so no HBM byte is charged
    chip = load_chip("mi300x")
    assert warm_capacity(chip) == 32 * 2**20 + 256 * 2**20
    est = run_op("gemv", chip, k=8192, n=16384, warm_l2_bytes="l2")
    assert est.cost.bytes["hbm"] == 0.0 and est.bound == "l2"
    assert warm_capacity(load_chip("h100")) == load_chip("h100").level("l2").capacity_bytes


@pytest.mark.parametrize(("edit", "why"), [
    ("capacity_bytes = 50e6", "at least its capacity_bytes"),  # below the L2's own size
])
def test_a_warm_capacity_below_the_cache_is_refused(tmp_path, edit, why):
    from roofline.hardware.catalog import CATALOG_DIR

    text = (CATALOG_DIR / "h100-sxm.toml").read_text()
    assert text.count(edit) == 1
    path = tmp_path / "chip.toml"
    path.write_text(text.replace(edit, edit + "\nwarm_capacity_bytes = 1e6"))
    with pytest.raises(RooflineError, match=why):
        load_chip(str(path))
