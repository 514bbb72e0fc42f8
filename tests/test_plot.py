"""Charts: figure objects inspected (scales, roofs, ridges, labelled points), not pixels; the
sweep against seed 001 Problem 3's own formula; the `plot` CLI writes real PNG / SVG / PDF."""

import json
import math
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from roofline import cli, collective, evaluate, gemv, load_chip, matmul
from roofline.errors import RooflineError
from roofline.plot import (
    matmul_batch_sweep,
    plot_breakdown,
    plot_matmul_sweep,
    plot_memory,
    plot_roofline,
    plot_sweep,
    save_figure,
)
from roofline.render.geometry import (
    BOUND_COLORS,
    CHART_RANGE,
    OTHER_COLOR,
    OpPoint,
    intensity_label,
    load_points,
    point_from_dict,
    roofline_geometry,
    to_points,
)

H100 = load_chip("h100")
ALL_ROOFS = ["hbm", "l2", "sram", "scale-up", "scale-out"]


def lines_by_gid(ax):
    return {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}


def texts(ax):
    return [t.get_text() for t in ax.texts]


def ops():
    return [evaluate(matmul(128, 8192, 8192), H100), evaluate(gemv(8192, 8192), H100)]


# --- the roofline chart ---------------------------------------------------------------------


def test_roofline_axes_roofs_ridges_and_points():
    ax = plot_roofline(H100, ops(), measured=[("my gemm", 124.0, 3e14)])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = lines_by_gid(ax)

    compute = [g for g in lines if g.startswith("roof:compute:")]
    assert compute == ["roof:compute:bf16"]  # one flat roof per dtype the ops use
    assert set(lines["roof:compute:bf16"].get_ydata()) == {989.4e12}

    slanted = [g.removeprefix("roof:") for g in lines if g.startswith("roof:") and
               g not in compute]
    assert slanted == ALL_ROOFS  # one slanted roof per memory level and per link
    for name in slanted:
        x, y = (np.asarray(v) for v in lines[f"roof:{name}"].get_data())
        np.testing.assert_allclose(y / x, H100.bandwidth_Bps(name))  # slope = bandwidth
        assert y[1] == pytest.approx(989.4e12)  # rises to the compute roof

    ridge_x = sorted(lines["ridges"].get_xdata())
    assert ridge_x == pytest.approx(sorted(989.4e12 / H100.bandwidth_Bps(r) for r in ALL_ROOFS))
    assert lines["ridges"].get_marker() == "o"

    points = {c.get_gid(): c.get_offsets() for c in ax.collections if c.get_gid()}
    np.testing.assert_allclose(points["op:matmul"], [[124.1212, 4.15806e14]], rtol=1e-4)
    assert points["op:gemv"][0][0] == pytest.approx(0.99976, rel=1e-4)
    assert {"matmul", "gemv", "my gemm (measured, 72% of roof)"} <= set(texts(ax))
    measured = lines["measured:my gemm"]
    assert measured.get_marker() == "D" and measured.get_markerfacecolor() == "none"

    assert {"memory-bound (hbm)", "compute-bound"} <= set(texts(ax))
    regions = {p.get_gid() for p in ax.patches}
    assert {"region:memory-bound", "region:compute-bound"} <= regions
    labels = ax.get_legend_handles_labels()[1]
    assert {"bf16 989 TFLOP/s", "hbm 3.35 TB/s", "scale-out 50 GB/s", "ridge points"} <= set(labels)


def test_roofs_follow_the_ops_dtypes_and_the_arguments():
    fp8 = evaluate(matmul(4096, 8192, 8192, dtype="fp8"), H100)
    ax = plot_roofline(H100, [*ops(), fp8])
    assert [g for g in lines_by_gid(ax) if g.startswith("roof:compute:")] == [
        "roof:compute:bf16", "roof:compute:fp8"]
    ax = plot_roofline("h100", dtypes=["bf16", "fp8", "int8"], levels=["hbm", "scale-up"])
    lines = lines_by_gid(ax)
    assert len([g for g in lines if g.startswith("roof:compute:")]) == 3
    assert [g for g in lines if g.startswith("roof:") and "compute" not in g] == [
        "roof:hbm", "roof:scale-up"]
    assert len(lines["ridges"].get_xdata()) == 3 * 2  # every dtype x every roof
    assert plot_roofline("v5e").get_title() == "Google TPU v5e: roofline"  # no ops: bf16


def test_draws_on_the_given_axes_and_a_sweep_is_one_series():
    ax = Figure().add_subplot()
    sweep = evaluate(matmul(np.array([1, 16, 256, 4096]), 8192, 8192), H100)
    assert plot_roofline(H100, [sweep], ax=ax) is ax
    (points,) = [c for c in ax.collections if c.get_gid() == "op:matmul"]
    assert len(points.get_offsets()) == 4
    colours = [tuple(c) for c in points.get_facecolors()]
    assert colours[0] == to_rgba(BOUND_COLORS["hbm"])  # each point coloured by its bound
    assert colours[-1] == to_rgba(BOUND_COLORS["compute"])
    assert "sweep:matmul" in lines_by_gid(ax)


def test_json_results_plot_where_estimates_do(capsys):
    cli.main(["op", "matmul", "--m", "128", "--k", "8192", "--n", "8192", "--json"])
    result = point_from_dict(json.loads(capsys.readouterr().out), "out.json")
    a, b = plot_roofline(H100, [result]), plot_roofline(H100, ops()[:1])
    offsets = [next(c.get_offsets() for c in ax.collections if c.get_gid() == "op:matmul")
               for ax in (a, b)]
    np.testing.assert_allclose(*offsets)


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"estimates": [evaluate(matmul(1, 2, 3), "a100")]}, "evaluated on 'a100-sxm-80gb'"),
    ({"estimates": [evaluate(collective("all-reduce", nbytes=1e6, ranks=8), "h100")]},
     "does no arithmetic"),
    ({"level": "l3"}, "no memory level 'l3'"),
    ({"dtypes": ["fp99"]}, "unknown dtype"),
    ({"estimates": ops(), "level": "scale-up"}, "no scale-up intensity"),
])
def test_roofline_bad_input(kwargs, needle):
    with pytest.raises(RooflineError, match=needle):
        plot_roofline(H100, **kwargs)


@pytest.mark.parametrize(("measured", "needle"), [
    ([("a", 1e308, 1.0)], "measured point 'a': intensity 1e+308 FLOP/byte is outside the range"),
    ([("a", 1e-300, 1.0)], "measured point 'a': intensity 1e-300 FLOP/byte is outside the range"),
    ([("a", 100.0, 1e-300)], "measured point 'a': 1e-300 FLOP/s is outside the range"),
    ([("a", 0.0, 1.0)], "intensity 0 FLOP/byte"),
])
def test_points_a_chart_cannot_show_are_named(measured, needle):
    with pytest.raises(RooflineError, match=re.escape(needle)):
        plot_roofline(H100, ops(), measured)


def test_geometry_and_ops_a_chart_cannot_show_are_errors():
    with pytest.raises(RooflineError, match="a point: intensity 1e\\+308 FLOP/byte is outside"):
        roofline_geometry(H100, points=[(1e308, 1.0)])  # _decade_ceil overflowed
    far = replace(to_points(ops())[0], intensity={"hbm": 1e308})
    with pytest.raises(RooflineError, match="op 'matmul': intensity 1e\\+308 FLOP/byte"):
        plot_roofline(H100, [far])


def test_the_widest_chart_draws_with_every_tick_labelled():
    # 300 decades: matplotlib also labels ticks past the view, which underflow to 0.0
    lo, hi = CHART_RANGE
    ax = plot_roofline(H100, ops(), [("a", lo, lo), ("b", hi, 1.0), ("c", 1.0, hi)])
    ax.figure.canvas.draw()
    assert ax.get_xlim() == (lo / 10, hi * 10)
    assert intensity_label(0.0) == "0" and intensity_label(math.inf) == "inf"
    assert [intensity_label(v) for v in (1e-150, 0.01, 1000.0, 1e5)] == ["1e-150", "0.01",
                                                                       "1000", "100 k"]


def test_geometry_limits_are_decades_that_hold_every_ridge_and_point():
    geo = roofline_geometry(H100, points=[(0.5, 1.7e12), (1e6, 9e14)])
    lo, hi = geo.xlim
    assert math.log10(lo).is_integer() and math.log10(hi).is_integer()
    assert lo <= 0.5 and hi >= 1e6
    assert all(lo <= r.intensity <= hi and geo.ylim[0] <= r.flops_per_s <= geo.ylim[1]
               for r in geo.ridges)
    for roof in geo.roofs:
        assert all(lo <= x <= hi for x in roof.x)
        assert all(geo.ylim[0] * 0.999 <= y <= geo.ylim[1] for y in roof.y)
    assert geo.boundary == pytest.approx(295.34, rel=1e-4)


# --- sweep, breakdown, memory ------------------------------------------------------------


def seed_problem3(batch, d, f, peak, bw):
    """Seed 001 Problem 3, its own code: int8 weights, bf16 activations, exact bytes."""
    flops = 2 * batch * d * f
    return flops / np.maximum(flops / peak, (2 * batch * d + d * f + 2 * batch * f) / bw)


def test_matmul_sweep_reproduces_seed_001_problem_3():
    v5e = load_chip("v5e")
    batch, series = matmul_batch_sweep()
    assert batch[0] == 1 and batch[-1] == 512
    assert list(series) == ["F = D = 4096", "F = D = 1024"]
    for d, y in zip((4096, 1024), series.values(), strict=True):
        peak, bw = v5e.peak_flops("bf16"), v5e.level("hbm").bandwidth_Bps
        np.testing.assert_allclose(y, seed_problem3(batch, d, d, peak, bw), rtol=1e-12)
        assert np.all(np.diff(y) >= -1e-9 * y[1:])  # non-decreasing (up to rounding)
        assert y.max() == pytest.approx(197e12)
    # int8 weights halve the weight bytes: the big matmul saturates near B = 240 / 2
    first = batch[np.argmax(series["F = D = 4096"] >= 197e12 * (1 - 1e-12))]
    assert 120 < first < 140


def test_sweep_metrics_and_chart():
    batch, tokens = matmul_batch_sweep("h100", [8192], 64, metric="tokens")
    _, time = matmul_batch_sweep("h100", [8192], 64, metric="time")
    np.testing.assert_allclose(tokens["F = D = 8192"], batch / time["F = D = 8192"])
    ax = plot_matmul_sweep()
    lines = lines_by_gid(ax)
    assert {"series:F = D = 4096", "series:F = D = 1024"} <= set(lines)
    assert set(lines["hline:peak bf16 197 TFLOP/s"].get_ydata()) == {197e12}
    assert ax.get_xscale() == "log" and "TPU v5e" in ax.get_title()
    with pytest.raises(RooflineError, match="unknown metric"):
        matmul_batch_sweep(metric="speed")


def test_plot_sweep_checks_lengths_and_broadcasts_scalars():
    ax = plot_sweep([1, 2, 4], {"a": [1, 2, 3], "flat": 5.0}, "x", "y", logx=False)
    assert list(lines_by_gid(ax)["series:flat"].get_ydata()) == [5, 5, 5]
    assert ax.get_xscale() == "linear" and ax.get_xlabel() == "x"
    with pytest.raises(RooflineError, match="series 'b' has 2 values for 3"):
        plot_sweep([1, 2, 3], {"b": [1, 2]}, "x", "y")


def test_plot_sweep_log_axis_with_nothing_positive_is_an_error():
    with pytest.raises(RooflineError, match="a log y axis needs a positive y value"):
        plot_sweep([1, 2], {"a": [np.nan, np.nan]}, "x", "y", logy=True, hlines={"peak": 5.0})
    with pytest.raises(RooflineError, match="a log x axis needs a positive x value"):
        plot_sweep([0, -1], {"a": [1, 2]}, "x", "y")


def test_breakdown_bars_coloured_by_bound():
    rows = [("attention", 3e-5, "hbm"), ("mlp", 5e-5, "compute"), ("all-reduce", 1e-5, "latency"),
            ("mystery", 2e-6, "l9")]
    ax = plot_breakdown(rows)
    bars = {p.get_gid().removeprefix("bar:"): p for p in ax.patches}
    assert list(bars) == [name for name, _, _ in rows]
    for name, seconds, bound in rows:
        assert bars[name].get_width() == pytest.approx(seconds)
        assert bars[name].get_facecolor() == to_rgba(BOUND_COLORS.get(bound, OTHER_COLOR))
    assert [t.get_text() for t in ax.get_yticklabels()] == [name for name, _, _ in rows]
    assert bars["attention"].get_y() < bars["mlp"].get_y()  # first row on top (inverted axis)
    assert ax.yaxis_inverted()
    with pytest.raises(RooflineError, match="non-negative"):
        plot_breakdown([("x", -1.0, "hbm")])


def test_memory_bar_against_capacity():
    ax = plot_memory({"weights": 140e9, "kv cache": 30e9}, 141e9)
    segments = {p.get_gid(): p for p in ax.patches}
    assert segments["segment:kv cache"].get_x() == pytest.approx(140e9)
    assert sum(p.get_width() for p in segments.values()) == pytest.approx(170e9)
    assert list(lines_by_gid(ax)["capacity"].get_xdata()) == [141e9, 141e9]
    assert "does not fit" in ax.get_title()
    assert "fits" in plot_memory({"weights": 16e9}, 80e9).get_title()
    with pytest.raises(RooflineError):
        plot_memory({"weights": -1.0}, 80e9)


def test_missing_matplotlib_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(RooflineError, match=r"pip install 'roofline\[plot\]'"):
        plot_roofline(H100)


def test_importing_the_cli_and_plot_modules_does_not_import_matplotlib():
    code = ("import argparse, sys, roofline.cli, roofline.plot, roofline.render.pages\n"
            "from roofline.plot_cli import register\n"
            "p = roofline.cli.build_parser()\n"
            "sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))\n"
            "'plot' in sub.choices or register(sub)\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_charts_leave_pyplot_alone():
    code = ("import sys, roofline.plot as p\n"
            "p.plot_roofline('h100'); p.plot_matmul_sweep(); p.plot_breakdown([('a', 1, 'hbm')])\n"
            "assert 'matplotlib' in sys.modules and 'matplotlib.pyplot' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# --- results files ---------------------------------------------------------------------------

GOOD = {"hardware": "h100-sxm", "name": "matmul", "bound": "hbm", "t_lower_s": 4.1e-5,
        "attainable_flops_per_s": 4.2e14, "intensity": {"hbm": 124.1}}


@pytest.mark.parametrize(("data", "needle"), [
    ([], "expected a JSON object"),
    ({k: v for k, v in GOOD.items() if k != "intensity"}, "missing field 'intensity'"),
    ({k: v for k, v in GOOD.items() if k != "hardware"}, "missing field 'hardware'"),
    ({**GOOD, "t_lower_s": "fast"}, "field 't_lower_s' must be a non-negative number"),
    ({**GOOD, "t_lower_s": -1}, "field 't_lower_s' must be a non-negative number"),
    ({**GOOD, "t_lower_s": True}, "field 't_lower_s'"),
    ({**GOOD, "intensity": {"hbm": "x"}}, "field 'intensity.hbm'"),
    ({**GOOD, "intensity": [1]}, "field 'intensity' must be an object"),
    ({**GOOD, "name": 3}, "field 'name' must be a string"),
    ({**GOOD, "derivation": [1]}, "field 'derivation'"),
    # beyond a float: math.isfinite(10**400) raised OverflowError
    ({**GOOD, "flops": 10**400}, "field 'flops' must be a non-negative number up to 1.798e+308, "
                                 "got a 401-digit integer"),
    ({**GOOD, "intensity": {"hbm": -10**400}}, "field 'intensity.hbm' must be a non-negative"),
])
def test_result_validation_names_the_field(data, needle):
    with pytest.raises(RooflineError, match=re.escape(needle)):
        point_from_dict(data, "r.json")


def test_load_points(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "name": "b", "peak_flops_per_s": None}]))
    a, b = load_points(path)
    assert isinstance(a, OpPoint) and a.intensity == {"hbm": 124.1} and b.name == "b"
    assert math.isnan(b.peak_flops_per_s) and a.t_upper_s == a.t_lower_s
    for text, needle in [("{nope", "not valid JSON"), ("[]", "empty list"),
                         ('{"t_lower_s": NaN}', "missing field"),
                         (json.dumps({**GOOD, "t_lower_s": float("nan")}), "non-negative")]:
        path.write_text(text)
        with pytest.raises(RooflineError, match=needle):
            load_points(path)
    with pytest.raises(RooflineError, match="cannot read"):
        load_points(tmp_path / "missing.json")


def test_array_estimates_become_one_result_per_element():
    rows = to_points([evaluate(matmul(np.array([1, 4096]), 8192, 8192), H100)])
    assert [r.name for r in rows] == ["matmul[0]", "matmul[1]"]
    assert [r.bound for r in rows] == ["hbm", "compute"]
    assert rows[1].t_lower_s == pytest.approx(2 * 4096 * 8192**2 / 989.4e12)


# --- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run(run_cli):
    return run_cli


MATMUL = "matmul --m 128 --k 8192 --n 8192"


@pytest.mark.parametrize(("ext", "magic"), [
    ("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml"), ("pdf", b"%PDF-")])
def test_cli_plot_roofline_writes_by_extension(run, tmp_path, ext, magic):
    out = tmp_path / f"chart.{ext}"
    code, stdout, _ = run("plot", "roofline", "--hw", "h100", "--op", MATMUL,
                          "--op", "gemv --k 8192 --n 8192", "--measured", "mine,100,2e14",
                          "-o", str(out))
    assert code == 0 and str(out) in stdout
    assert out.read_bytes().startswith(magic)
    if ext == "svg":
        assert b"<svg" in out.read_bytes() and b"matmul" in out.read_bytes()


def test_cli_plot_from_op_json(run, tmp_path):
    code, out, _ = run("op", "matmul", "--hw", "mi300x", "--m", "64", "--k", "4096", "--n",
                       "4096", "--json")
    results = tmp_path / "results.json"
    results.write_text(out)
    png = tmp_path / "chart.png"
    assert run("plot", "roofline", "--op-json", str(results), "-o", str(png))[0] == 0
    assert png.read_bytes()[:4] == b"\x89PNG"  # the chip came from the file (mi300x)
    code, _, err = run("plot", "roofline", "--hw", "h100", "--from", str(results), "-o", str(png))
    assert code == 2 and "evaluated on 'mi300x'" in err


def test_cli_sweep_and_breakdown(run, tmp_path):
    sweep, bars = tmp_path / "sweep.pdf", tmp_path / "bars.svg"
    assert run("plot", "sweep", "--hw", "v5e", "--weight-dtype", "int8", "-o", str(sweep))[0] == 0
    assert sweep.read_bytes().startswith(b"%PDF-")
    code, _, _ = run("plot", "breakdown", "--op", MATMUL, "--op",
                     "allreduce --bytes 64MiB --ranks 8", "-o", str(bars))
    assert code == 0 and b"<svg" in bars.read_bytes()


def _one_line_error(code, err, *needles):
    assert code == 2
    assert err.startswith("roofline: error:") and err.count("\n") == 1
    for needle in needles:
        assert needle in err


def test_cli_bad_extension(run, tmp_path):
    code, _, err = run("plot", "roofline", "--op", MATMUL, "-o", str(tmp_path / "chart.jpg"))
    _one_line_error(code, err, "chart.jpg", "'.jpg'", ".png, .svg or .pdf")
    assert not (tmp_path / "chart.jpg").exists()


@pytest.mark.parametrize(("content", "needles"), [
    ("{not json", ["bad.json", "not valid JSON", "line 1"]),
    (json.dumps({k: v for k, v in GOOD.items() if k != "bound"}), ["bad.json", "'bound'"]),
    (json.dumps({**GOOD, "intensity": "high"}), ["bad.json", "'intensity'"]),
    ("__import__('os').system('echo pwned')", ["bad.json", "not valid JSON"]),
])
def test_cli_malformed_json(run, tmp_path, content, needles):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run("plot", "roofline", "--from", str(bad), "-o", str(tmp_path / "c.png"))
    _one_line_error(code, err, *needles)
    assert "pwned" not in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["--op", "matmull --m 1 --k 1 --n 1"], "did you mean 'matmul'"),
    (["--op", "matmul --m 0 --k 1 --n 1"], "--m"),
    (["--op", "matmul --hw a100 --m 1 --k 1 --n 1"], "give the chip once"),
    (["--op", "matmul --m '1"], "--op"),
    (["--op", "allreduce --bytes 1MB --ranks 8"], "does no arithmetic"),
    (["--measured", "x,1"], "NAME,INTENSITY,FLOPS"),
    (["--measured", "x,1e308,1"], "numbers from 1e-150 to 1e+150"),
    (["--measured", "x,1e-300,1"], "numbers from 1e-150 to 1e+150"),
    (["--dtype", "fp99"], "unknown dtype"),
    (["--hw", "h1000"], "unknown chip"),
])
def test_cli_plot_bad_input_is_one_line(run, tmp_path, argv, needle):
    code, _, err = run("plot", "roofline", *argv, "-o", str(tmp_path / "c.png"))
    _one_line_error(code, err, needle)


@pytest.mark.parametrize(("change", "needle"), [
    ({"flops": 10**400}, "field 'flops' must be a non-negative number up to 1.798e+308, got a "
                         "401-digit integer"),
    ({"intensity": {"hbm": 1e308}}, "op 'matmul': intensity 1e+308 FLOP/byte is outside the "
                                    "range a chart can show (1e-150 to 1e+150)"),
    ({"attainable_flops_per_s": 1e-300}, "op 'matmul': 1e-300 FLOP/s is outside the range"),
])
@pytest.mark.parametrize("command", ["report", "plot"])
def test_cli_numbers_out_of_range_in_a_file_are_one_line(run, tmp_path, change, needle, command):
    code, out, _ = run("op", *MATMUL.split(), "--json")
    path = tmp_path / "big.json"
    path.write_text(json.dumps({**json.loads(out), **change}))
    argv = (["report", "--html", str(tmp_path / "r.html")] if command == "report"
            else ["plot", "roofline", "-o", str(tmp_path / "c.png")])
    code, _, err = run(*argv, "--from", str(path))
    _one_line_error(code, err, needle)


def test_cli_report_measured_outside_the_chart_is_one_line(run, tmp_path):
    code, _, err = run("report", "--op", MATMUL, "--measured", "a,1e308,1", "--html",
                       str(tmp_path / "r.html"))
    _one_line_error(code, err, "--measured", "numbers from 1e-150 to 1e+150", "'a,1e308,1'")


def test_cli_without_matplotlib(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, _, err = run("plot", "roofline", "-o", str(tmp_path / "c.png"))
    _one_line_error(code, err, "pip install 'roofline[plot]'")


def test_save_figure_rejects_unknown_formats(tmp_path):
    ax = plot_roofline(H100)
    with pytest.raises(RooflineError, match="unknown output format"):
        save_figure(ax, tmp_path / "chart")
    save_figure(ax.figure, tmp_path / "chart.PNG")  # case-insensitive; a Figure works too
    assert (tmp_path / "chart.PNG").read_bytes()[:4] == b"\x89PNG"


def test_dollar_signs_in_names_are_text_not_mathtext():
    name = "cost $x^{$ b"  # an unbalanced TeX group would make matplotlib's mathtext raise
    ax = plot_roofline(H100, [evaluate(matmul(128, 8192, 8192, name=name), H100)],
                       measured=[(name, 10.0, 1e13)])
    plot_breakdown([(name, 1e-3, "hbm")], ax=Figure().add_subplot())
    plot_memory({name: 1e9}, 2e9, ax=Figure().add_subplot())
    ax.figure.canvas.draw()  # renders every text; raises on bad mathtext
    assert "cost \\$x^{\\$ b" in texts(ax)


def test_plot_model_breakdown_and_memory():
    from roofline.models import Parallel, analyze, decode
    from roofline.plot import plot_model

    a = analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4))
    fig = plot_model(a, top=8)
    bars, memory = fig.axes[:2]
    labels = [t.get_text() for t in bars.get_yticklabels()]
    assert len(labels) == 8 and labels[0].startswith("mlp up/gate")
    assert memory.get_title().endswith("fits")
    with pytest.raises(RooflineError, match="one configuration"):
        plot_model(analyze("gpt2", "h100", decode(np.array([1, 2]), 128)))


def test_plot_model_sweep_lines(tmp_path):
    from roofline.plot import plot_model_sweep
    from roofline.sweep import sweep_model

    r = sweep_model("llama-3-70b", ["h100", "mi300x"], "decode", [1, 8, 64, 512], [1024],
                    tp=[1, 8])
    ax = plot_model_sweep(r)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) >= {"h100-sxm tp 1", "h100-sxm tp 8", "mi300x tp 1", "mi300x tp 8"}
    assert np.all(np.isnan(lines["h100-sxm tp 1"].get_ydata()))  # 141 GB never fits in 80 GB
    assert not np.any(np.isnan(lines["mi300x tp 8"].get_ydata()))


def test_plot_model_sweep_where_nothing_fits_says_so():
    from roofline.plot import plot_model_sweep
    from roofline.sweep import sweep_model

    r = sweep_model("llama-3.1-405b", ["h100"], "decode", [1, 2], [131072])
    assert not np.any(r.columns["fits"])
    ax = plot_model_sweep(r)  # a log y axis of no positive value raised at drawing
    ax.figure.canvas.draw()
    assert ax.get_yscale() == "linear" and ax.get_xlim() == (1 / 1.25, 2 * 1.25)
    assert "no configuration fits in memory" in texts(ax)
    assert ax.get_title().endswith("(nothing fits in memory)")


@pytest.mark.parametrize("argv", [
    ["llama-3.1-405b", "--batch", "1,2", "--context", "128k"],
    ["llama-3-8b", "--phase", "train", "--batch", "8"],
])
def test_cli_sweep_plot_where_nothing_fits(run, tmp_path, argv):
    out = tmp_path / "nofit.svg"
    code, _, err = run("sweep", "model", *argv, "--plot", str(out))
    assert code == 0, err
    assert "no configuration fits in memory" in out.read_text()


def test_plot_model_and_sweep_cli(tmp_path, capsys):
    from roofline.cli import main

    out = tmp_path / "model.svg"
    assert main(["plot", "model", "qwen3-30b-a3b", "--batch", "8", "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml")
    png = tmp_path / "sweep.png"
    assert main(["sweep", "model", "llama-3-8b", "--batch", "1:64:x4", "--context", "1k",
                 "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_points_with_one_name_get_distinct_labels():
    ests = [evaluate(matmul(128, 8192, 8192), H100), evaluate(matmul(4096, 8192, 8192), H100)]
    ax = plot_roofline(H100, ests)
    labels = [t.get_text() for t in ax.texts if t.get_gid() and t.get_gid().startswith("label:")]
    assert labels == ["matmul", "matmul (2)"]


def test_a_result_from_an_edited_chip_file_is_not_drawn_on_the_catalog_chip(run_cli, tmp_path):
    """The id alone matched: a result evaluated on h100-sxm with 2 TB/s of HBM was drawn on
    the catalog h100-sxm's roofline (3.35 TB/s)."""
    from roofline.hardware.catalog import CATALOG_DIR

    slow = tmp_path / "slow.toml"
    slow.write_text((CATALOG_DIR / "h100-sxm.toml").read_text().replace(
        "bandwidth_Bps = 3.35e12", "bandwidth_Bps = 2.0e12", 1))
    code, out, _ = run_cli("op", "matmul", "--hw", str(slow), "--m", "128", "--k", "8192",
                           "--n", "8192", "--json")
    result = tmp_path / "s.json"
    result.write_text(out)
    code, _, err = run_cli("report", "--from", str(result))
    assert code == 2 and "hbm bandwidth is 2e+12 B/s" in err and "--hw" in err
    code, _, err = run_cli("report", "--from", str(result), "--hw", str(slow))
    assert code == 0, err
