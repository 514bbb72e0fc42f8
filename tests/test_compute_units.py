"""Compute units other than tensor cores (vector, special functions), the clock a chip runs
at, and the capacity a device exposes (issue 12)."""

import dataclasses
import json

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError
from roofline.expect import expected
from roofline.ops import attention, elementwise

H100 = rl.load_chip("h100")


def test_elementwise_runs_on_the_vector_units_not_the_tensor_cores(run_cli):
    # 2000 ops per element: far right of every ridge, so the vector roof holds it
    code, out, _ = run_cli("op", "elementwise", "--n", "16777216", "--kind", "softmax",
                           "--ops-per-element", "2000", "--json")
    data = json.loads(out)
    assert code == 0 and data["bound"] == "vector"
    assert data["attainable_flops_per_s"] <= 134e12  # not the 989 TFLOP/s tensor-core peak
    # by hand: 1999 vector FLOPs per element at 133.8 TFLOP/s (bf16, non-tensor)
    assert data["time_s"]["vector"] == pytest.approx(1999 * 16777216 / 133.8e12)


def test_an_exp_per_element_meets_the_special_function_roof():
    # one exp per element on the special-function units (what the expected time assumes)
    alone = rl.evaluate(elementwise(1e8, "silu"), H100, shared_special=False)
    assert alone.time_s["sfu"] == pytest.approx(1e8 / 3.9e12)
    assert alone.time_s["vector"] == pytest.approx(3e8 / 133.8e12)
    assert alone.bound == "hbm"  # still memory-bound: 4 B per element
    # the bound lets the vector units emulate a share (FA4's software exp2, 8 FLOPs of the
    # fp32 peak each): both units finish together, by hand
    # (3e8 / 133.8e12 + 1e8 · 8 / 66.9e12) / (1 + 3.9e12 · 8 / 66.9e12) = 9.68 us
    est = rl.evaluate(elementwise(1e8, "silu"), H100)
    per = 8 / 66.9e12
    assert est.time_s["sfu"] == pytest.approx((3e8 / 133.8e12 + 1e8 * per) / (1 + 3.9e12 * per))
    assert est.time_s["vector"] <= est.time_s["sfu"] < alone.time_s["sfu"]


def test_the_derivation_shows_the_split_it_computed():
    from roofline.render.estimate import time_derivation

    shared = time_derivation(rl.evaluate(elementwise(1e8, "silu"), H100))
    alone = time_derivation(rl.evaluate(elementwise(1e8, "silu"), H100, shared_special=False))
    line = next(x for x in shared if x.startswith("t_sfu"))
    assert "emulating a share at c = 8" in line and line.endswith("= 9.68 us")
    assert next(x for x in alone if x.startswith("t_sfu")).endswith("100 M / 3.9 Top/s = 25.6 us")


@pytest.mark.parametrize(("d", "bound"), [(64, "sfu"), (128, "compute"), (256, "compute")])
def test_attention_exp_is_a_wall_at_small_head_dims(d, bound):
    # FlashAttention-3 §3.1: per score 4·d matmul FLOPs at 989 TFLOP/s against one exp at
    # 3.9 T/s; at d = 64 the exp takes as long as the GEMMs (256/989e12 vs 1/3.9e12)
    cost = attention(4, 8192, 8192, 16, head_dim=d, impl="flash", causal=False, block_q=128)
    est = rl.evaluate(cost, H100, shared_special=False)
    ratio = est.time_s["sfu"] / est.time_s["compute"]
    assert ratio == pytest.approx(989.4e12 / 3.9e12 / (4 * d), rel=1e-9)
    assert (est.bound == "sfu") == (ratio > 1) and est.bound in (bound, "hbm", "l2")
    # a kernel that emulates a share of its exps on the vector units (FlashAttention-4) is
    # bounded below that wall: the bound's special-function time is the balanced split
    shared = rl.evaluate(cost, H100)
    assert shared.time_s["vector"] <= shared.time_s["sfu"] < est.time_s["sfu"]
    assert shared.t_lower_s <= est.t_lower_s


def test_the_vector_rate_widens_narrow_dtypes_and_falls_back_to_the_tensor_peak():
    assert H100.vector_flops("fp8") == H100.vector_flops("bf16") == 133.8e12
    assert H100.vector_flops("tf32") == H100.vector_flops("fp32") == 66.9e12
    bare = dataclasses.replace(H100, vector={})
    # a file without vector figures: the tensor peak of the dtype stands in (loose, valid)
    assert bare.vector_flops("bf16") == 989.4e12


def test_bf16_elementwise_without_a_bf16_vector_figure_runs_at_the_fp32_vector_rate():
    # MI300X publishes FP32 vector (packed) 163.4 TFLOP/s and no 16-bit vector rate: bf16
    # elementwise math runs there, not on the 1307.4 TFLOP/s bf16 matrix cores
    mi300x = rl.load_chip("mi300x")
    assert mi300x.vector_flops("bf16") == mi300x.vector_flops("fp8") == 163.4e12
    # by hand: 2000 ops per element over 2^24 elements (1999 on the vector units, one exp)
    est = rl.evaluate(elementwise(2**24, "softmax", ops_per_element=2000), mi300x)
    assert est.time_s["vector"] == pytest.approx(1999 * 2**24 / 163.4e12)  # 205 us, not 26
    assert est.bound == "vector"


@pytest.mark.parametrize("chip", rl.list_chips())
def test_every_catalog_chip_has_a_vector_figure_below_its_tensor_peak(chip):
    c = rl.load_chip(chip)
    assert "fp32" in c.vector  # TPU, Gaudi 2, Trainium 2: estimated upper figures, said so
    for dt in ("fp32", "bf16"):
        tensor = max(p.flops_per_s for p in c.peaks.values())
        assert c.vector_flops(dt) < tensor
    # packed 16-bit lanes: at most 2x (Gaudi 3: its published 28.7 over a rounded 14.3)
    assert c.vector_flops("bf16") <= 2.01 * c.vector_flops("fp32")


def test_a_lower_clock_scales_every_compute_peak_and_nothing_else():
    slow = H100.at_clock(1500)
    f = 1500 / 1830
    assert slow.peak_flops("bf16") == pytest.approx(989.4e12 * f)
    assert slow.vector_flops("bf16") == pytest.approx(133.8e12 * f)
    assert slow.special_ops() == pytest.approx(3.9e12 * f)
    assert slow.level("hbm").bandwidth_Bps == H100.level("hbm").bandwidth_Bps
    m = rl.matmul(np.array([1, 8192]), 8192, 8192)
    fast, capped = rl.evaluate(m, H100), rl.evaluate(m, slow)
    assert capped.t_lower_s[0] == fast.t_lower_s[0]  # memory-bound: the clock does not matter
    assert capped.t_lower_s[1] == pytest.approx(fast.t_lower_s[1] / f)  # compute-bound
    with pytest.raises(RooflineError, match="at most 1830 MHz"):
        H100.at_clock(2000)


def test_clock_option_on_the_cli(run_cli):
    _, out, _ = run_cli("op", "matmul", "--m", "8192", "--k", "8192", "--n", "8192",
                        "--clock-mhz", "915", "--json")
    data = json.loads(out)
    assert data["hardware"] == "h100-sxm@915MHz"
    assert data["peak_flops_per_s"] == pytest.approx(989.4e12 / 2)
    code, _, err = run_cli("op", "matmul", "--m", "1", "--k", "1", "--n", "1",
                           "--clock-mhz", "0")
    assert code == 2 and "--clock-mhz" in err and "\n" not in err.strip()


def test_capacity_is_what_the_device_exposes():
    code = H100.level("hbm").capacity_bytes
    assert code == pytest.approx(81559 * 2**20, rel=1e-4)  # nvidia-smi: 81559MiB


def test_a_clocked_result_names_a_chip_that_loads_back(run_cli, tmp_path):
    # `report --from` a result run with --clock-mhz failed: unknown chip 'h100-sxm@915MHz'
    from roofline import load_chip

    again = load_chip("h100-sxm@915MHz")
    assert again.id == H100.at_clock(915).id
    assert again.peak_flops("bf16") == pytest.approx(989.4e12 / 2)
    assert load_chip("H100@915mhz").id == again.id  # an alias and any case, as --hw takes
    _, out, _ = run_cli("op", "matmul", "--m", "8192", "--k", "8192", "--n", "8192",
                        "--clock-mhz", "915", "--json")
    saved = tmp_path / "clocked.json"
    saved.write_text(out)
    code, _, err = run_cli("report", "--from", str(saved), "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    code, _, err = run_cli("op", "matmul", "--m", "1", "--k", "1", "--n", "1",
                           "--hw", "h100@9000MHz")
    assert code == 2 and "at most 1830 MHz" in err


def test_a_clocked_chip_is_not_exported_as_its_full_clock_file(run_cli):
    # `hw export h100@915MHz` printed the full-clock file, which reads back at 1830 MHz
    code, out, err = run_cli("hw", "export", "h100@915MHz")
    assert code == 2 and out == "" and "--clock-mhz 915" in err


def test_a_clocked_chip_rents_at_its_parts_price():
    from roofline.serve import Load, Space, Workload, plan

    p = plan("llama-3.1-8b", ["h100@915MHz"], Workload.from_lengths(1024, 256),
             space=Space(tp=(1,), kv_dtypes=("fp8",), weight_dtypes=("fp8",), chunks=(2048,),
                         modes=("aggregated",)), load=Load(concurrency=16),
             prices={"h100-sxm": 2.5})
    assert np.isfinite(p.row(0)["usd_per_mtok"])


def test_amd_capacities_are_their_gib_labels_less_16_mib_as_rocm_smi_reports():
    # rocm-smi: MI300X 206141652992 B = 192 GiB - 16 MiB, MI355X 309220868096 = 288 GiB -
    # 16 MiB; MI325X's "256 GB" is the same kind of figure: 274861129728 B, not 256e9
    for chip, gib in [("mi300x", 192), ("mi325x", 256), ("mi355x", 288)]:
        assert rl.load_chip(chip).level("hbm").capacity_bytes == gib * 2**30 - 16 * 2**20
    from roofline.models import Parallel, analyze, decode
    # 7.4% more room: Llama-3.1-405B bf16 on 4 MI325X at 4K context holds a larger batch
    a = analyze("llama-3.1-405b", "mi325x", decode(1, 4096), Parallel(tp=4))
    weights = a.memory.weights_bytes
    assert weights < 256e9 < 274861129728  # the weights alone fit either way
    per_seq = a.memory.kv_cache_bytes + a.memory.activations_bytes
    assert a.memory.max_batch == int((274861129728 - weights) // per_seq)


def test_blackwell_ultra_parts_share_the_doubled_exp_rate():
    # NVIDIA "Inside NVIDIA Blackwell Ultra": SFU (MUFU.EX2) throughput doubled over
    # Blackwell, 10.7 TeraExponentials/s; B300 had no figure and left exps unbounded
    b300, gb300, b200 = (rl.load_chip(c) for c in ("b300", "gb300", "b200"))
    assert b300.special_ops() == gb300.special_ops() == 10.7e12
    assert b300.special_ops() >= 2 * b200.special_ops() * 0.99
    # by hand: 2^30 exps alone on the special-function units take 2^30 / 10.7e12 s
    est = rl.evaluate(elementwise(2**30, "silu"), b300, shared_special=False)
    assert est.time_s["sfu"] == pytest.approx(2**30 / 10.7e12)


@pytest.mark.parametrize(("chip_id", "cus", "ghz"), [("mi300x", 304, 2.1), ("mi325x", 304, 2.1),
                                                     ("mi355x", 256, 2.4)])
def test_cdna_exps_run_at_a_quarter_of_the_fp32_lanes(chip_id, cus, ghz):
    # LLVM AMDGPU SISchedule.td: F32 transcendentals (v_exp_f32) are quarter rate, 16 a clock
    # per CU of its 64 FP32 lanes; by hand 16 x CUs x clock
    chip = rl.load_chip(chip_id)
    assert chip.special_ops() == pytest.approx(16 * cus * ghz * 1e9, rel=0.002)
    # MI355X, head dim 64: one exp per score against 4·64 bf16 FLOPs at 2516.6 TFLOP/s, so
    # the exps take as long as the GEMMs (2516.6e12 / 256 = 9.83e12): never faster than
    # either, and the bound never above what the expected time allows
    cost = attention(4, 8192, 8192, 16, head_dim=64, impl="flash", causal=False, block_q=128)
    alone = rl.evaluate(cost, chip, shared_special=False)
    ratio = alone.time_s["sfu"] / alone.time_s["compute"]
    assert ratio == pytest.approx(chip.peak_flops("bf16") / chip.special_ops() / 256, rel=1e-9)
    assert rl.evaluate(cost, chip).t_lower_s <= alone.t_lower_s
    assert expected(cost, chip).t_s >= alone.t_lower_s
