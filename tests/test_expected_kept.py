"""What the forecast keeps between ops and steps (figure lookups, tile utilizations, derated
chips) changes no number: each kept figure is the one computed afresh, a step's per-kind
array pass gives each op its own figure, and a dropped figures table is read again."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline import load_chip
from roofline.expect import expected, expected_step
from roofline.expect import op as expect_op
from roofline.expect import utilization as expect_utilization
from roofline.expect.physics import tile_utilization
from roofline.expect.step import weight_only
from roofline.expect.table import DEFAULTS
from roofline.hardware.model import Efficiency
from roofline.models import Parallel, Precision, analyze, decode, prefill, train
from roofline.ops.matmul import matmul

STEPS = [  # dense GQA, MoE with expert parallelism, MLA + MoE, a training step
    ("llama-3-70b", "h100", decode(24, 4096), Parallel(tp=4), Precision()),
    ("mixtral-8x7b", "h100", prefill(8, 2048), Parallel(tp=1, dp=4, ep=4), Precision()),
    ("deepseek-v3", "h200", decode(96, 4096), Parallel(tp=8), Precision(weights="fp8")),
    ("llama-3-8b", "a100", train(16, 4096), Parallel(tp=2, dp=4), Precision()),
]


@pytest.mark.parametrize("step", STEPS, ids=[s[0] for s in STEPS])
def test_a_steps_utilizations_are_each_ops_own(step):
    model, chip_name, phase, par, prec = step
    chip = load_chip(chip_name)
    chip.memo.pop("expect.utilization", None)  # none kept: the per-kind array pass runs
    costs = [row.cost for row in analyze(model, chip, phase, par, prec).parts.rows]
    found = expect_utilization.utilizations(costs, chip)
    alone = [tile_utilization(c, chip) if c.flops else None for c in costs]
    assert found == alone  # the same bits: each op's figure is the one it gets alone
    assert sum(f is not None for f in found) >= 4  # GEMMs and attention, not a vacuous pass
    assert expect_utilization.utilizations(costs, chip) == alone  # and kept, the same again


def test_kept_utilizations_stay_bounded(monkeypatch):
    chip = load_chip("h100")
    monkeypatch.setattr(expect_utilization, "UTILIZATIONS", 8)
    for m in range(1, 40):
        cost = matmul(m, 4096, 4096)
        assert expect_utilization.utilizations([cost], chip) == [tile_utilization(cost, chip)]
        assert len(chip.memo["expect.utilization"]) <= 8


def test_an_array_valued_shape_is_found_not_kept():
    chip = load_chip("h100")
    cost = matmul(np.array([1.0, 100.0, 4096.0]), 8192, 8192)
    (found,) = expect_utilization.utilizations([cost], chip)
    np.testing.assert_array_equal(found, tile_utilization(cost, chip))


def test_the_step_forecast_reads_the_figures_again_once_they_are_dropped(monkeypatch):
    chip = load_chip("h100")
    a = analyze("llama-3-8b", chip, prefill(4, 2048))
    before = expected_step(a).t_s
    # a fit that tries a figure drops the chip's figures table to read it (fit_kernels.py)
    monkeypatch.setitem(DEFAULTS, "launch_s", Efficiency(1e-3, "fitted", "a trial"))
    assert expected_step(a).t_s == before  # the table is kept until dropped
    chip.memo.pop("expect.figures")
    assert expected_step(a).t_s > before + 1e-3
    monkeypatch.undo()
    chip.memo.pop("expect.figures")
    assert expected_step(a).t_s == before


def test_a_derated_chip_is_a_chip_of_its_own():
    chip = load_chip("h100")
    chip.peak_flops("bf16")  # something kept on the parent
    derated = chip.derated({"compute.bf16": 0.5, "vector.fp32": 0.25, "hbm": 0.8})
    assert type(derated) is type(chip) and derated.memo == {} and derated.memo is not chip.memo
    assert dataclasses.replace(derated) == derated  # every field set, as replace would
    assert derated.peak_flops("bf16") == chip.peak_flops("bf16") * 0.5
    assert derated.vector_flops("fp32") == chip.vector_flops("fp32") * 0.25
    assert derated.peaks["fp8"] is chip.peaks["fp8"]  # what is not derated is the parent's
    assert list(derated.peaks) == list(chip.peaks) and list(derated.vector) == list(chip.vector)
    with pytest.raises(dataclasses.FrozenInstanceError):
        derated.id = "other"


@pytest.mark.parametrize("step", STEPS[:3], ids=[s[0] for s in STEPS[:3]])
def test_an_op_forecast_in_a_step_is_its_forecast_alone(step):
    model, chip_name, phase, par, prec = step
    chip = load_chip(chip_name)
    a = analyze(model, chip, phase, par, prec)
    costs = [row.cost for row in a.parts.rows]
    utils = expect_utilization.utilizations(costs, chip)  # what the step holds for each op
    for cost, est, util in zip(costs, a.parts.core.ests, utils, strict=True):
        dequant = weight_only(cost)
        alone = expected(cost, chip, cuda_graphs=True, dequant=dequant)
        held = expect_op.expected_from(cost, chip, expect_op.figure_lookups(chip), est, util,
                                       cuda_graphs=True, dequant=dequant)
        assert (held.t_s, held.overhead_s) == (alone.t_s, alone.overhead_s)
        assert held.efficiency == alone.efficiency and held.sources == alone.sources
        assert held.bound.t_lower_s == alone.bound.t_lower_s <= held.t_s
