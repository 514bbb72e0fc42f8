"""One answer per flag set (issue 35, items 4-6): `model`, `sweep model` and `serve` take the
same default weights; two chips with one id are refused, not merged; and no resource made
faster ever makes an expected time slower."""

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import load_chip
from roofline.expect.op import expected
from roofline.expect.step import expected_step
from roofline.hardware.catalog import CATALOG_DIR
from roofline.models import Parallel, analyze, decode, prefill, train
from roofline.ops import op_cost

# --- 4. one default for the weights --------------------------------------------------------

FLAGS = ("--hw", "h200", "--tp", "8", "--batch", "8", "--context", "4k", "--dtype", "bf16",
         "--kv-dtype", "bf16")


@pytest.mark.parametrize(("model", "weights"), [("deepseek-v3", "fp8"),
                                                ("gpt-oss-120b", "bf16+mxfp4 experts"),
                                                ("llama-3-8b", "bf16")])
def test_model_sweep_and_serve_take_the_checkpoints_weights(run_cli, model, weights):
    code, out, err = run_cli("model", model, *FLAGS, "--json")
    assert code == 0, err
    alone = json.loads(out)
    code, out, err = run_cli("sweep", "model", model, *FLAGS, "--json", "--all")
    assert code == 0, err
    points = json.loads(out)["points"]
    assert points["weight_dtype"] == [weights]
    # the same flags, the same bound and the same memory (to rounding: a sweep adds arrays)
    assert points["t_lower_s"] == pytest.approx([alone["t_lower_s"]], rel=1e-12)
    assert points["memory_bytes"] == pytest.approx([alone["memory"]["total_bytes"]], rel=1e-12)
    assert points["fits"] == [alone["memory"]["fits"]]
    code, out, err = run_cli("serve", model, "--hw", "h200", "--tp", "8", "--batch", "8",
                             "--kv-dtype", "bf16", "--dtype", "bf16", "--chunk", "512",
                             "--json", "--all")
    assert code == 0, err
    # serve searches the checkpoint's weights first (and fp8 beside them)
    assert json.loads(out)["all_points"]["weight_dtype"][0] == weights


def test_a_weight_dtype_given_is_taken_by_all_three(run_cli):
    flags = (*FLAGS, "--weight-dtype", "bf16")
    alone = json.loads(run_cli("model", "deepseek-v3", *flags, "--json")[1])
    points = json.loads(run_cli("sweep", "model", "deepseek-v3", *flags, "--json",
                                "--all")[1])["points"]
    assert points["weight_dtype"] == ["bf16"]
    assert points["t_lower_s"] == pytest.approx([alone["t_lower_s"]], rel=1e-12)


# --- 5. two chips with one id ----------------------------------------------------------------


def _chip_file(tmp_path, chip_id):
    text = (CATALOG_DIR / "h100-sxm.toml").read_text().replace('id = "h100-sxm"',
                                                               f'id = "{chip_id}"')
    path = tmp_path / f"{chip_id}.toml"
    path.write_text(text.replace("peak_clock_mhz = 1830", "peak_clock_mhz = 1900"))
    return str(path)


@pytest.mark.parametrize("command", [("sweep", "model", "llama-3-8b"),
                                     ("sweep", "op", "matmul", "--m", "8", "--n", "8",
                                      "--k", "8"),
                                     ("serve", "llama-3-8b", "--tp", "1")])
def test_two_chips_with_one_id_are_refused(tmp_path, run_cli, command):
    for hw in ("h100,h100", "h100,h100-sxm", f"h100,{_chip_file(tmp_path, 'h100-sxm')}"):
        code, _, err = run_cli(*command, "--hw", hw)
        assert code == 2 and err.count("\n") == 1, err
        assert "--hw:" in err and "give each chip once" in err
    code, _, err = run_cli(*command, "--hw", f"h100,{_chip_file(tmp_path, 'my-h100')}")
    assert code == 0, err  # its own id: two rows, two labels


# --- 6. faster is never slower -------------------------------------------------------------

RESOURCES = ("peak", "hbm", "scale-up", "scale-out")


def faster(chip, resource, factor):
    """The chip with one resource `factor` times faster (an id of its own)."""
    if resource == "peak":
        changed = {"peaks": {k: replace(p, flops_per_s=p.flops_per_s * factor)
                             for k, p in chip.peaks.items()},
                   "vector": {k: replace(p, flops_per_s=p.flops_per_s * factor)
                              for k, p in chip.vector.items()}}
    elif resource == "hbm":
        changed = {"memory": tuple(replace(m, bandwidth_Bps=m.bandwidth_Bps * factor)
                                   if m.name == "hbm" else m for m in chip.memory)}
    else:
        changed = {"links": {k: replace(v, bandwidth_Bps=v.bandwidth_Bps * factor)
                             if k == resource else v for k, v in chip.links.items()}}
    return replace(chip, id=f"{chip.id}-{resource}-x{factor:g}", **changed)


def test_the_reported_case_gaudi2_with_hbm_doubled():
    # the campaign's case: a training step whose link is busier than its path
    gaudi = load_chip("gaudi2")
    quick = faster(gaudi, "hbm", 2.0)
    step = train(8, 4096)
    par = Parallel(tp=4, dp=2)
    slow = expected_step(analyze("qwen3-30b-a3b", gaudi, step, par), gaudi).t_s
    fast = expected_step(analyze("qwen3-30b-a3b", quick, step, par), quick).t_s
    assert fast <= slow * (1 + 1e-12)


STEPS = [("qwen3-30b-a3b", train(8, 4096), Parallel(tp=4, dp=2)),
         ("llama-3-8b", train(8, 4096), Parallel(dp=8)),
         ("llama-3-70b", decode(64, 4096), Parallel(tp=8)),
         ("mixtral-8x7b", prefill(4, 4096), Parallel(tp=2, ep=2, dp=2))]


@pytest.mark.parametrize("chip_id", ["gaudi2", "h100", "mi300x"])
@pytest.mark.parametrize(("model", "step", "par"), STEPS)
def test_a_faster_resource_never_slows_an_expected_step(chip_id, model, step, par):
    chip = load_chip(chip_id)
    base = expected_step(analyze(model, chip, step, par), chip).t_s
    for resource in RESOURCES:
        if resource in ("peak", "hbm") or resource in chip.links:
            for factor in (1.25, 2.0, 8.0):
                quick = faster(chip, resource, factor)
                t = expected_step(analyze(model, quick, step, par), quick).t_s
                assert t <= base * (1 + 1e-9), (resource, factor, t, base)


OP_CASES = [("matmul", {"m": (1, 16384), "n": (64, 16384), "k": (64, 16384)}),
            ("attention", {"batch": (1, 64), "q_len": (1, 8192), "kv_len": (8192, 32768),
                           "heads": (8, 64)}),
            ("allreduce", {"nbytes": (1000, 10**10), "ranks": (2, 8)}),
            ("elementwise", {"n": (1, 10**9)})]


@given(case=st.sampled_from(OP_CASES), chip_id=st.sampled_from(["gaudi2", "h100", "mi300x"]),
       resource=st.sampled_from(RESOURCES), factor=st.floats(1.01, 16), data=st.data())
def test_a_faster_resource_never_slows_an_expected_op(case, chip_id, resource, factor, data):
    name, ranges = case
    chip = load_chip(chip_id)
    if resource not in ("peak", "hbm") and resource not in chip.links:
        return
    given_ = {k: data.draw(st.integers(lo, hi)) for k, (lo, hi) in ranges.items()}
    cost = op_cost(name, chip, **given_)
    quick = faster(chip, resource, factor)
    assert expected(cost, quick).t_s <= expected(cost, chip).t_s * (1 + 1e-9)
