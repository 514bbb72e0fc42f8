"""The model page's chart is built from the step's own Estimates: an fp8 step draws the fp8
roof its GEMM points sit under, no point sits above the highest roof drawn, and each point's
figures are one occurrence's (its FLOPs beside its time, as its derivation shows them)."""

from __future__ import annotations

import re

import pytest

from roofline.hardware import load_chip
from roofline.models import Parallel, Precision, analyze, decode, train
from roofline.render.geometry import default_dtypes, has_point, roofline_geometry
from roofline.render.pages import model_html, step_points

CASES = {
    "fp8 GEMMs (train)": ("llama-3-8b", "h100", train(8, 2048), Parallel(tp=2),
                          Precision(matmul="fp8")),
    "fp8 weights (decode)": ("llama-3-70b", "h100", decode(64, 4096), Parallel(tp=4),
                             Precision(weights="fp8", activations="fp8")),
    "bf16 MoE (decode)": ("mixtral-8x7b", "mi300x", decode(32, 4096), Parallel(tp=2),
                          Precision()),
}


@pytest.fixture(params=list(CASES), scope="module")
def step(request):
    return analyze(*CASES[request.param])


def test_no_point_sits_above_the_highest_roof_drawn(step):
    chip = load_chip(step.hardware)
    points = step_points(step)
    geo = roofline_geometry(chip, default_dtypes(chip, points))
    highest = max(r.y[1] for r in geo.roofs if r.kind == "compute")
    placed = [p for p in points if has_point(p, "hbm")]
    assert placed
    for p in placed:
        x, y = p.intensity["hbm"], p.attainable_flops_per_s
        assert y <= highest * (1 + 1e-12), p.name
        assert y <= x * chip.bandwidth_Bps("hbm") * (1 + 1e-12), p.name  # under its slope


def test_an_fp8_step_draws_the_fp8_roof(step):
    chip = load_chip(step.hardware)
    drawn = default_dtypes(chip, step_points(step))
    gemm = step.precision.gemm
    assert chip.peak_flops(gemm) in {chip.peak_flops(d) for d in drawn}
    if gemm == "fp8":  # the roof the GEMMs run under is on the chart, above bf16's
        assert max(chip.peak_flops(d) for d in drawn) == chip.peak_flops("fp8")


def test_each_point_is_one_occurrence_of_its_row(step):
    points = {p.name: p for p in step_points(step)}
    for op, est in zip(step.ops, step.parts.core.ests, strict=False):
        p = points[f"{op.group}: {op.name}"]
        assert p.flops == float(est.flops) and p.t_lower_s == float(est.t_lower_s)
        assert p.flops * op.count == pytest.approx(float(op.flops), rel=1e-12)
        if p.t_lower_s > 0:
            assert p.attainable_flops_per_s == pytest.approx(p.flops / p.t_lower_s, rel=1e-12)
        assert repr(p.peak_flops_per_s) == repr(float(est.peak_flops_per_s))  # nan: no FLOPs


def test_the_page_draws_the_fp8_roof_its_gemms_pass_bf16s_under():
    a = analyze("llama-3-8b", "h100", train(64, 4096), Parallel(tp=1),
                Precision(matmul="fp8"))
    chip = load_chip("h100")
    gemms = [p for p in step_points(a) if "fp8" in p.dtypes]
    assert gemms and all(p.peak_flops_per_s == chip.peak_flops("fp8") for p in gemms)
    # GEMMs above the bf16 roof: without the fp8 roof they would float above the chart's
    assert any(p.attainable_flops_per_s > chip.peak_flops("bf16") for p in gemms)
    page = model_html(a, "h100")
    assert re.search(r"fp8 1\.98 PFLOP/s", page)  # the fp8 roof's label
