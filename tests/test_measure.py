"""Measurement on the CPU (numpy only): timing, peaks, bandwidth levels, the empirical chip
file, predicted vs achieved, calibration, the alpha-beta fit and the `measure` CLI.

Real measurements use tiny sizes and are checked by relations and loose bounds (this runs on
a shared, noisy machine); exact numbers come from fake clocks and synthetic timings.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from roofline import RooflineError, evaluate, load_chip, matmul
from roofline.cost import Cost
from roofline.measure import (
    Calibration,
    calibrate,
    calibrated_text,
    calibration_from_link,
    calibration_from_ops,
    calibration_from_peaks,
    fit_alpha_beta,
    get_backend,
    load_calibration,
    measure_bandwidth,
    measure_peaks,
    write_calibration,
    write_chip,
)
from roofline.measure.bandwidth import (
    BandwidthPoint,
    BandwidthSweep,
    find_plateaus,
    read_levels,
    sweep_sizes,
)
from roofline.measure.calibration import calibration_toml
from roofline.measure.checks import device_mismatch, measure_reliably, run_problems
from roofline.measure.chipfile import MeasuredMachine, chip_toml
from roofline.measure.cli import main as measure_main
from roofline.measure.comm import CommPoint, CommSweep, comm_sizes, link_toml, model_terms
from roofline.measure.device import CacheInfo, DeviceInfo
from roofline.measure.ops import OpSweep, TimedOp, elementwise_case, matmul_case
from roofline.measure.peaks import PeakResult
from roofline.measure.progress import Progress
from roofline.measure.timing import Settings, Timing, WallTimer, looped, measure, threaded

TINY = Settings(repeats=3, warmup=1, min_sample_s=1e-3)
MiB = 2.0**20


@pytest.fixture(scope="module")
def cpu():
    return get_backend("cpu")


def fixed(seconds: float) -> Timing:
    return Timing((seconds, seconds, seconds), 1)


# --- timing -----------------------------------------------------------------------------------


def test_measure_grows_calls_until_a_sample_is_long_enough():
    now = [0.0]
    calls = []

    def work() -> None:  # each call "takes" 1 us on the fake clock
        now[0] += 1e-6
        calls.append(1)

    timing = measure(looped(work), WallTimer(clock=lambda: now[0]),
                     Settings(repeats=5, warmup=2, min_sample_s=1e-3))
    assert timing.calls >= 1000 and len(timing.samples_s) == 5
    assert timing.median_s == pytest.approx(1e-6)
    assert timing.spread == pytest.approx(0.0, abs=1e-6)


def test_timing_statistics():
    t = Timing((1.0, 3.0, 2.0, 10.0, 2.5), 4)
    assert t.median_s == 2.5 and t.min_s == 1.0 and t.max_s == 10.0
    assert t.spread == pytest.approx(9.0 / 2.5)
    assert t.to_dict()["calls"] == 4


def test_threaded_runs_every_worker_and_reraises():
    counts = [0, 0, 0]

    def worker(i: int):
        def fn() -> None:
            counts[i] += 1
        return fn

    threaded([worker(i) for i in range(3)])(7)
    assert counts == [7, 7, 7]

    def boom() -> None:
        raise ValueError("inside a worker")

    with pytest.raises(ValueError, match="inside a worker"):
        threaded([boom, worker(0)])(1)


def test_progress_draws_only_when_enabled():
    buf = io.StringIO()
    with Progress(4, "peaks", stream=buf, enabled=True) as bar:
        bar.step("fp32 n=512")
        bar.step("fp64 n=512")
    out = buf.getvalue()
    assert "peaks [" in out and "2/4 fp64 n=512" in out and out.endswith("\r")
    silent = io.StringIO()  # not a terminal: nothing drawn
    with Progress(4, "peaks", stream=silent) as bar:
        bar.step("x")
    assert silent.getvalue() == ""


# --- peaks and bandwidth (real, tiny) ---------------------------------------------------------


def test_cpu_peaks_are_positive_and_unsupported_dtypes_are_skipped(cpu):
    peaks, skipped = measure_peaks(cpu, ["fp64", "fp32", "bf16"], sizes=[128], settings=TINY)
    assert [p.dtype for p in peaks] == ["fp64", "fp32"]
    for p in peaks:
        assert p.flops_per_s > 1e6 and p.n == 128
        assert p.flops_per_s == pytest.approx(2 * 128**3 / p.timing.median_s)
        assert "numpy.matmul" in p.method
    assert "bf16" in skipped and "numpy backend" in skipped["bf16"]


def _llc(cpu) -> float:
    return cpu.info.caches[-1].total_bytes if cpu.info.caches else 32 * MiB


def test_cpu_bandwidth_main_memory_is_slower_than_cache(cpu):
    llc = _llc(cpu)
    if llc > 256 * MiB:
        pytest.skip(f"last cache of {llc / MiB:.0f} MiB: the sweep past it is too slow here")
    in_cache = [llc / 4] if cpu.info.caches else [llc / 64]
    # both sizes timed back to back, three rounds, the best of each kept: a burst of load
    # from other processes slows a round, never speeds one up
    rounds = [measure_bandwidth(cpu, ["copy"], [*in_cache, 8 * llc], threads=1,
                                settings=TINY).points for _ in range(3)]
    small, big = (max(same, key=lambda p: p.bandwidth_Bps) for same in zip(*rounds,
                                                                            strict=True))
    assert small.bandwidth_Bps > 0 and big.bandwidth_Bps > 0
    assert big.bandwidth_Bps < small.bandwidth_Bps  # the DRAM plateau is below the cache one
    if cpu.info.caches:
        levels = {lv.name: lv for lv in read_levels([small, big], cpu.info)}
        hbm, l2 = levels.get("hbm"), levels.get("l2")
        assert hbm is not None and l2 is not None
        assert hbm.bandwidth_Bps < l2.bandwidth_Bps
        assert l2.capacity_bytes == llc


def test_stream_kernels_count_the_bytes_they_move(cpu):
    for kernel, arrays, moved in [("read", 1, 1), ("copy", 2, 2), ("triad", 3, 5)]:
        case = cpu.stream(kernel, 3 * MiB, threads=2)
        assert case.working_set_bytes == pytest.approx(3 * MiB, rel=1e-3)
        assert case.bytes_moved == pytest.approx(case.working_set_bytes * moved / arrays)
        case.run(2)


def test_sweep_sizes_cover_the_range():
    sizes = sweep_sizes(16 * 1024, 256 * MiB)
    assert sizes[0] == 16 * 1024 and sizes[-1] == 256 * MiB and len(sizes) == 15
    assert len(sweep_sizes(16 * 1024, 256 * MiB, per_octave=2)) == 29


def _point(size: float, bw: float, kernel: str = "copy") -> BandwidthPoint:
    return BandwidthPoint(kernel, size, bw * 1e-3, fixed(1e-3))


SYNTHETIC = DeviceInfo("cpu", "Test CPU", "Test", 4, 64e9,
                       (CacheInfo(1, 32 * 1024, 4), CacheInfo(2, 1 * MiB, 4),
                        CacheInfo(3, 32 * MiB, 1)), "numpy")


def _synthetic_points() -> list[BandwidthPoint]:
    pts = []
    for size in sweep_sizes(16 * 1024, 1024 * MiB):
        bw = 400e9 if size <= 128 * 1024 else 200e9 if size <= 2 * MiB else \
            100e9 if size <= 32 * MiB else 20e9
        pts += [_point(size, bw, "copy"), _point(size, bw * 0.8, "read")]
    return pts


def test_levels_are_read_from_windows_inside_each_cache():
    pts = _synthetic_points()
    levels = {lv.name: lv for lv in read_levels(pts, SYNTHETIC)}
    assert levels["hbm"].bandwidth_Bps == pytest.approx(20e9)
    assert levels["l2"].bandwidth_Bps == pytest.approx(100e9) and levels["l2"].label == "L3"
    assert levels["sram"].bandwidth_Bps == pytest.approx(200e9)
    assert levels["sram"].units == 4 and levels["sram"].unit_capacity_bytes == MiB
    assert levels["hbm"].kernel == "copy"  # the faster kernel sets the roof


def test_plateaus_and_the_fallback_without_cache_sizes():
    pts = _synthetic_points()
    plateaus = find_plateaus(pts)
    assert [round(p.bandwidth_Bps / 1e9) for p in plateaus] == [400, 200, 100, 20]
    bare = DeviceInfo("cpu", "x", "x", 4, 64e9, (), "numpy")
    levels = {lv.name: lv for lv in read_levels(pts, bare, plateaus)}
    assert levels["hbm"].bandwidth_Bps == pytest.approx(20e9)
    assert levels["l2"].bandwidth_Bps == pytest.approx(400e9)
    assert "estimate" in levels["l2"].capacity_source


# --- the empirical chip file ------------------------------------------------------------------


def _machine(points=None) -> MeasuredMachine:
    pts = points or _synthetic_points()
    sweep = BandwidthSweep(SYNTHETIC, "numpy", (1, 4), tuple(pts),
                           read_levels(pts, SYNTHETIC), find_plateaus(pts))
    peaks = (PeakResult("fp64", 1e11, 1024, fixed(0.02), "numpy.matmul fp64"),
             PeakResult("fp32", 2e11, 1024, fixed(0.01), "numpy.matmul fp32"))
    return MeasuredMachine(SYNTHETIC, "2026-01-31", peaks, sweep, quick=True,
                           skipped={"bf16": "numpy cannot"})


def test_written_chip_file_loads_evaluates_and_says_it_is_measured(tmp_path):
    path = tmp_path / "mychip.toml"
    chip = write_chip(_machine(), path)
    assert chip.id == "measured-test-cpu" and load_chip(str(path)).id == chip.id
    assert chip.peak_flops("fp32") == 2e11 and chip.level("hbm").bandwidth_Bps == 20e9
    assert chip.level("sram").capacity_bytes == 4 * MiB
    assert "measured 2026-01-31 on Test CPU (4 cores)" in chip.notes and "--quick" in chip.notes
    sources = [p.source for p in chip.peaks.values()] + [m.source for m in chip.memory]
    assert all(s.startswith("measured 2026-01-31 on Test CPU") for s in sources)
    est = evaluate(matmul(1, 4096, 4096, "fp32"), str(path))
    assert est.bound == "hbm" and est.ridge["hbm"] == pytest.approx(2e11 / 20e9)


def test_chip_file_works_with_hw_on_the_main_cli(tmp_path, capsys):
    from roofline.cli import main

    path = tmp_path / "mychip.toml"
    write_chip(_machine(), path)
    assert main(["op", "matmul", "--hw", str(path), "--m", "8", "--k", "64", "--n", "64",
                 "--dtype", "fp32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"] == "measured-test-cpu"


def test_chip_file_needs_main_memory_and_a_peak():
    cache_only = [p for p in _synthetic_points() if p.working_set_bytes <= 8 * MiB]
    with pytest.raises(RooflineError, match="did not reach main memory"):
        chip_toml(_machine(cache_only))
    m = _machine()
    with pytest.raises(RooflineError, match="no peak"):
        chip_toml(MeasuredMachine(m.device, m.date, (), m.bandwidth))


# --- is a run trustworthy, and of the device it claims? --------------------------------------


def _noisy(machine: MeasuredMachine) -> MeasuredMachine:
    """The same machine with the fp32 peak's repeats at 1, 1 and 2 ms: spread 100%."""
    peaks = tuple(PeakResult(p.dtype, p.flops_per_s, p.n, Timing((1e-3, 1e-3, 2e-3), 1),
                             p.method) if p.dtype == "fp32" else p for p in machine.peaks)
    return dataclasses.replace(machine, peaks=peaks)


def _inverted() -> MeasuredMachine:
    """Caches measured slower than DRAM (the l2 window read while something else ran)."""
    pts = [dataclasses.replace(p, bytes_moved=p.bytes_moved * (0.05 if 2 * MiB < p.working_set_bytes
                                                                <= 32 * MiB else 1.0))
           for p in _synthetic_points()]
    return _machine(pts)


def test_a_noisy_or_non_monotone_run_is_a_problem_and_a_clean_one_is_not():
    assert run_problems(_machine()) == []
    assert run_problems(_noisy(_machine())) == ["fp32 peak repeats spread 100%"]
    inverted = _inverted()
    assert inverted.bandwidth.level("l2").bandwidth_Bps < inverted.bandwidth.level(
        "hbm").bandwidth_Bps
    (problem,) = run_problems(inverted)
    assert problem.startswith("l2 (") and "slower than hbm" in problem


def test_a_suspect_run_is_measured_again_then_marked_unreliable(tmp_path):
    warnings: list[str] = []
    runs = iter([_noisy(_machine()), _machine()])
    machine = measure_reliably(lambda: next(runs), warnings.append)
    assert machine.unreliable == () and len(warnings) == 1 and "measuring again" in warnings[0]
    warnings.clear()
    runs = iter([_inverted(), _inverted()])
    machine = measure_reliably(lambda: next(runs), warnings.append)
    assert len(warnings) == 2 and "marked unreliable" in warnings[1]
    assert machine.unreliable and "slower than hbm" in machine.unreliable[0]
    chip = write_chip(machine, tmp_path / "shaky.toml")  # the validator accepts the marking
    assert chip.notes.startswith("UNRELIABLE: still noisy or inconsistent after a retry")
    assert chip.name.endswith("unreliable)") and "UNRELIABLE" in (tmp_path / "shaky.toml"
                                                                   ).read_text().splitlines()[1]
    clean = write_chip(_machine(), tmp_path / "fine.toml")
    assert "UNRELIABLE" not in clean.notes and "unreliable" not in clean.name
    calls = []
    measure_reliably(lambda: calls.append(1) or _machine(), warnings.append)
    assert calls == [1]  # a clean run is not repeated


def test_measuring_one_device_against_another_chip_says_so(tmp_path):
    h100, h200 = load_chip("h100"), load_chip("h200")
    assert "against chip 'h100-sxm'" in device_mismatch(SYNTHETIC, h100)  # a CPU vs a GPU
    gpu = DeviceInfo("cuda", "NVIDIA H100 80GB HBM3", "NVIDIA", 132, 80e9, (), "torch")
    assert device_mismatch(gpu, h100) == ""
    assert "a different device" in device_mismatch(gpu, h200)
    gh = dataclasses.replace(gpu, name="NVIDIA GH200 480GB")
    assert device_mismatch(gh, h200) != "" and device_mismatch(gh, load_chip("gh200")) == ""
    mine = write_chip(_machine(), tmp_path / "mine.toml")
    assert device_mismatch(SYNTHETIC, mine) == ""
    assert device_mismatch(dataclasses.replace(SYNTHETIC, name="Other CPU"), mine) != ""


def test_cli_peaks_retries_a_noisy_run_and_marks_the_chip_file(capsys, tmp_path, monkeypatch):
    import roofline.measure.bandwidth as bandwidth_mod
    import roofline.measure.peaks as peaks_mod

    calls = []

    def noisy_peaks(backend, dtypes, quick, sizes, progress=None):
        calls.append(1)
        return list(_noisy(_machine()).peaks), {}

    monkeypatch.setattr(peaks_mod, "measure_peaks", noisy_peaks)
    monkeypatch.setattr(bandwidth_mod, "measure_bandwidth",
                        lambda *args, **kwargs: _machine().bandwidth)
    out_file = tmp_path / "shaky.toml"
    code, out, err = run_cli(capsys, "peaks", "--quick", "--out", str(out_file), "--json")
    assert code == 0, err
    assert calls == [1, 1] and "measuring again" in err and "marked unreliable" in err
    assert json.loads(out)["unreliable"] == ["fp32 peak repeats spread 100%"]
    assert load_chip(str(out_file)).notes.startswith("UNRELIABLE")


# --- predicted vs achieved --------------------------------------------------------------------


def _fastest_interleaved(cpu, runs, rounds: int = 15) -> list[float]:
    """Seconds per call of each run: the fastest of `rounds` samples, the runs taking turns
    sample by sample. Load from other processes only ever adds time, so the fastest samples
    of kernels timed milliseconds apart are the ones it left alone."""
    calls = [measure(run, cpu.timer(), TINY).calls for run in runs]  # also the warm-up
    best = [math.inf] * len(runs)
    timer = cpu.timer()
    for _ in range(rounds):
        for i, (run, n) in enumerate(zip(runs, calls, strict=True)):
            timer.start()
            run(n)
            best[i] = min(best[i], timer.stop() / n)
    return best


def test_no_measured_op_beats_its_measured_roof(cpu):
    """Memory-bound ops against the streaming roof at the same working set, all timed in one
    interleaved loop on one thread (CI shares machines: a roof timed alone under a burst of
    load would look low and an op above it). A miscounted byte shows in every sample."""
    ws = 24 * MiB
    streams = [cpu.stream(kernel, ws, threads=1) for kernel in ("copy", "triad")]
    cases = [elementwise_case("add", int(ws / 12), "fp32"),
             elementwise_case("silu", int(ws / 8), "fp32")]
    times = _fastest_interleaved(cpu, [*(s.run for s in streams),
                                       *(looped(case.build(cpu)) for case in cases)])
    roof_Bps = max(s.bytes_moved / t for s, t in zip(streams, times[:2], strict=True))
    h100 = load_chip("h100")  # its main memory slowed to the measured roof
    chip = h100.derated({"hbm": roof_Bps / h100.level("hbm").bandwidth_Bps})
    assert chip.level("hbm").bandwidth_Bps == pytest.approx(roof_Bps)
    eff = {case.label: float(evaluate(case.cost, chip).time_s["hbm"]) / t
           for case, t in zip(cases, times[2:], strict=True)}
    assert all(0 < e < 1.5 for e in eff.values()), f"above the measured roof: {eff}"
    assert eff[cases[1].label] < 1.0, eff  # numpy silu: four passes where the Cost counts one


def test_a_matmul_at_the_peak_kernel_sits_exactly_on_the_compute_roof(cpu):
    """The peak is 2n³ over the time of an n³ matmul; the op's Cost counts the same 2n³, so
    the kernel that set the peak is exactly on its roof. (Timing it against itself would
    only measure the scheduler: BLAS threads on a shared machine.)"""
    n = 128
    (peak,), _ = measure_peaks(cpu, ["fp32"], sizes=[n], settings=TINY)
    case = matmul_case(n, n, n, "fp32")
    h100 = load_chip("h100")
    chip = h100.derated({"compute.fp32": peak.flops_per_s / h100.peak_flops("fp32")})
    est = evaluate(case.cost, chip)
    assert est.time_s["compute"] == pytest.approx(peak.timing.median_s, rel=1e-9)


def test_op_point_figures_from_synthetic_times():
    est = evaluate(matmul(4096, 8192, 8192), "h100")  # compute-bound: t_lower = t_compute
    p = TimedOp("matmul", "mm", "bf16", est, fixed(2 * est.t_lower_s), None)
    assert p.efficiency == pytest.approx(0.5)
    assert p.achieved_flops_per_s == pytest.approx(est.flops / (2 * est.t_lower_s))
    assert p.achieved_Bps == pytest.approx(est.bytes["hbm"] / (2 * est.t_lower_s))
    assert p.clearly_bound()
    gemv = evaluate(matmul(1, 8192, 8192), "h100")
    q = TimedOp("matmul", "gemv", "bf16", gemv, fixed(gemv.t_lower_s / 0.8), None)
    ridge = evaluate(matmul(300, 8192, 8192), "h100")  # near the ridge: not clearly bound
    r = TimedOp("matmul", "ridge", "bf16", ridge, fixed(ridge.t_lower_s), None)
    cached = TimedOp("matmul", "cached", "bf16", gemv, fixed(gemv.t_lower_s / 3), "l2")
    info = DeviceInfo("cuda", "GPU", "NVIDIA", 132, 80e9, (), "torch")
    sweep = OpSweep("h100-sxm", info, "torch", "2026-01-31", (p, q, r, cached), {})
    assert sweep.summary() == pytest.approx({"compute.bf16": 0.5, "hbm": 0.8})
    cal = calibration_from_ops(sweep)
    assert cal.compute == {"bf16": pytest.approx(0.5)} and cal.hardware == "h100-sxm"
    assert "4 timed cases" in cal.what


# --- calibration ------------------------------------------------------------------------------


CAL = Calibration({"bf16": 0.8}, {"hbm": 0.5}, "NVIDIA H100 (132 SMs)", "2026-01-31",
                  "roofline measure ops", "h100-sxm")


def test_calibrate_divides_each_time_by_its_efficiency():
    est = evaluate(matmul(128, 8192, 8192), "h100")
    rec = calibrate(est, CAL)
    assert rec.calibrated and rec.estimate is est
    assert rec.time_s["hbm"] == pytest.approx(est.time_s["hbm"] / 0.5)
    assert rec.time_s["compute"] == pytest.approx(est.time_s["compute"] / 0.8)
    assert rec.t_lower_s == pytest.approx(max(rec.time_s.values()))
    assert rec.t_upper_s == pytest.approx(sum(rec.time_s.values()))
    assert rec.bound == "hbm" and rec.uncalibrated == ()
    assert rec.attainable_flops_per_s == pytest.approx(est.flops / rec.t_lower_s)
    text = calibrated_text(rec)
    assert text.startswith("calibrated estimate (on NVIDIA H100 (132 SMs), 2026-01-31: ")
    assert "plain bound" in text and "note:" not in text
    data = rec.to_dict()
    assert data["calibrated"] is True and data["bound_estimate"]["bound"] == "hbm"
    assert data["calibrated_on"]["hardware"] == "h100-sxm"


def test_calibration_can_move_the_bound_and_never_speeds_up():
    est = evaluate(matmul(512, 8192, 8192), "h100")  # just compute-bound
    rec = calibrate(est, Calibration({}, {"hbm": 0.3}, "d", "2026", "w"))
    assert est.bound == "compute" and rec.bound == "hbm"
    assert rec.uncalibrated == ("compute.bf16",) and "not calibrated" in calibrated_text(rec)
    batch = np.arange(1, 2049)
    sweep = evaluate(matmul(batch, 8192, 8192), "h100")
    rec = calibrate(sweep, CAL)
    assert np.all(np.asarray(rec.t_lower_s) >= np.asarray(sweep.t_lower_s))
    assert np.asarray(rec.bound).shape == batch.shape
    assert "2048 points" in calibrated_text(rec)


def test_calibrating_mixed_dtypes_uses_the_peaks_and_warns_on_another_chip():
    cost = matmul(64, 4096, 4096, "bf16") + matmul(64, 4096, 4096, "fp8")
    est = evaluate(cost, "h100")
    rec = calibrate(est, Calibration({"bf16": 0.5, "fp8": 0.25}, {}, "d", "2026", "w", "h200"))
    chip = load_chip("h100")
    expect = (est.flops_by_dtype["bf16"] / (chip.peak_flops("bf16") * 0.5)
              + est.flops_by_dtype["fp8"] / (chip.peak_flops("fp8") * 0.25))
    assert rec.time_s["compute"] == pytest.approx(expect)
    assert "calibrated against chip 'h200'" in rec.note
    latency = evaluate(Cost(link_bytes={"scale-up": 1e3}, link_steps={"scale-up": 14.0}), "h100")
    rec = calibrate(latency, Calibration({}, {"latency": 0.5}, "d", "2026", "w"))
    assert rec.time_s["latency"] == pytest.approx(2 * latency.time_s["latency"])
    assert rec.uncalibrated == ("scale-up",)


def test_a_calibration_is_a_derated_chip_through_the_one_evaluator():
    chip = load_chip("h100")
    derated = chip.derated(CAL.efficiencies())
    assert derated.id == "h100-sxm-calibrated" and "(calibrated)" in derated.name
    assert derated.peak_flops("bf16") == pytest.approx(0.8 * chip.peak_flops("bf16"))
    assert derated.peak_flops("fp8") == chip.peak_flops("fp8")  # no efficiency: the roof
    assert derated.level("hbm").bandwidth_Bps == pytest.approx(0.5 * 3.35e12)
    assert derated.level("l2") == chip.level("l2") and "x 0.5 (calibrated)" in \
        derated.level("hbm").source
    slow_links = chip.derated({"scale-up": 0.25, "latency": 0.5}).link("scale-up")
    assert slow_links.bandwidth_Bps == pytest.approx(0.25 * chip.link("scale-up").bandwidth_Bps)
    assert slow_links.latency_s == pytest.approx(2 * chip.link("scale-up").latency_s)
    costs = [matmul(np.arange(1, 2049), 8192, 8192),
             matmul(64, 4096, 4096, "bf16") + matmul(64, 4096, 4096, "fp8"),
             Cost(flops={"bf16": 1e9}, bytes={"hbm": 1e6},
                  link_bytes={"scale-up": 1e6}, link_steps={"scale-up": 14.0})]
    cal = Calibration({"bf16": 0.8, "fp8": 0.3}, {"hbm": 0.5, "scale-up": 0.7, "latency": 0.4},
                      "d", "2026", "w")
    for cost in costs:
        rec = calibrate(evaluate(cost, chip), cal)
        direct = evaluate(cost, chip.derated(cal.efficiencies()))
        assert set(rec.time_s) == set(direct.time_s)
        for r, t in direct.time_s.items():
            np.testing.assert_array_equal(rec.time_s[r], t)
        np.testing.assert_array_equal(rec.t_lower_s, direct.t_lower_s)
        np.testing.assert_array_equal(rec.t_upper_s, direct.t_upper_s)
        np.testing.assert_array_equal(rec.bound, direct.bound)
        assert np.all(np.asarray(rec.t_lower_s) >= np.asarray(rec.estimate.t_lower_s))


@pytest.mark.parametrize(("efficiency", "needle"), [
    ({"nvlink": 0.5}, "unknown resource"), ({"compute.bf17": 0.5}, "unknown resource"),
    ({"hbm": 1.5}, "(0, 1]"), ({"hbm": 0.0}, "(0, 1]"), ({"hbm": math.nan}, "(0, 1]"),
])
def test_derating_refuses_unknown_resources_and_speedups(efficiency, needle):
    with pytest.raises(RooflineError, match=None) as info:
        load_chip("h100").derated(efficiency)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_calibrating_needs_the_chip_the_estimate_used(tmp_path):
    path = tmp_path / "mine.toml"
    write_chip(_machine(), path)
    est = evaluate(matmul(8, 64, 64, "fp32"), str(path))
    cal = Calibration({}, {"hbm": 0.5}, "d", "2026", "w")
    with pytest.raises(RooflineError, match="pass chip="):
        calibrate(est, cal)  # a measured file is not in the catalog
    assert calibrate(est, cal, chip=str(path)).t_lower_s >= est.t_lower_s
    with pytest.raises(RooflineError, match="not 'h100-sxm'"):
        calibrate(est, cal, chip="h100")


def test_measure_has_no_second_evaluator():
    """Times are combined (max / sum / argmax over resources) only in evaluate()."""
    import pathlib
    import re

    import roofline.measure as measure_pkg

    root = pathlib.Path(measure_pkg.__file__).parent
    pattern = re.compile(r"argmax|np\.stack\(|max_argmax|axis=0")
    found = [f"{p.name}:{i}" for p in sorted(root.glob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, f"resource times combined outside evaluate(): {found}"


def test_calibration_file_round_trip_and_strict_validation(tmp_path):
    path = tmp_path / "calib.toml"
    write_calibration(CAL, path)
    back = load_calibration(path)
    assert back.compute == {"bf16": 0.8} and back.resources == {"hbm": 0.5}
    assert back.description == CAL.description and back.origin == str(path)
    good = tomllib.loads(calibration_toml(CAL))
    bad_cases = [
        ({**good, "extra": 1}, "field 'extra': unknown field"),
        ({**good, "efficiency": {"hbm": 1.5}}, "'efficiency.hbm': must be an efficiency"),
        ({**good, "efficiency": {"hbm": 0}}, "[1e-06, 1]"),
        ({**good, "efficiency": {"nvlink": 0.5}}, "unknown resource"),
        ({**good, "efficiency": {"compute": {"bf17": 0.5}}}, "unknown dtype"),
        ({**good, "efficiency": {}}, "at least one"),
        ({k: v for k, v in good.items() if k != "calibrated_on"}, "calibrated_on"),
        ({**good, "calibrated_on": {"device": "d", "date": "x"}}, "calibrated_on.what"),
        ({**good, "schema_version": 2}, "schema_version"),
    ]
    from roofline.measure.calibration import parse_calibration

    for data, needle in bad_cases:
        with pytest.raises(RooflineError, match=None) as info:
            parse_calibration(data, "c.toml")
        assert needle in str(info.value) and str(info.value).startswith("c.toml: field")
    with pytest.raises(RooflineError, match="not found"):
        load_calibration(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text("= =")
    with pytest.raises(RooflineError, match="not valid TOML"):
        load_calibration(tmp_path / "broken.toml")


def test_calibration_from_peaks_caps_at_one():
    chip = load_chip("h100")
    m = _machine()
    cal = calibration_from_peaks(m, chip)
    assert cal.compute["fp64"] == pytest.approx(1e11 / chip.peak_flops("fp64"))
    assert cal.resources["hbm"] == pytest.approx(20e9 / 3.35e12)
    assert cal.resources["sram"] <= 1.0 and cal.hardware == "h100-sxm"
    slow = calibrate(evaluate(matmul(1, 4096, 4096, "fp32"), chip), cal)
    assert slow.t_lower_s > 10 * evaluate(matmul(1, 4096, 4096, "fp32"), chip).t_lower_s


# --- collectives: the alpha-beta fit ----------------------------------------------------------


def _comm_times(alpha, beta, ranks, kinds, sizes, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for kind in kinds:
        for size in sizes:
            steps, moved = model_terms(kind, size, ranks)
            t = float(steps * alpha + moved / beta) * (1 + noise * rng.standard_normal())
            rows.append((kind, size, t))
    return rows


def test_alpha_beta_fit_recovers_known_parameters():
    sizes = comm_sizes(1024, 2**30, 4)
    kinds = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]
    rows = _comm_times(8e-6, 150e9, 8, kinds, sizes)
    fit = fit_alpha_beta(*zip(*[(k, s) for k, s, _ in rows], strict=True), 8,
                         [t for *_, t in rows])
    assert fit.alpha_s == pytest.approx(8e-6, rel=1e-6)
    assert fit.beta_Bps == pytest.approx(150e9, rel=1e-6)
    assert fit.rms_rel_error < 1e-9 and fit.points == len(rows)
    noisy = _comm_times(8e-6, 150e9, 8, kinds, sizes, noise=0.05, seed=1)
    fit = fit_alpha_beta([k for k, *_ in noisy], [s for _, s, _ in noisy], 8,
                         [t for *_, t in noisy])
    assert fit.alpha_s == pytest.approx(8e-6, rel=0.1)
    assert fit.beta_Bps == pytest.approx(150e9, rel=0.1)
    assert fit.predict("all-reduce", 2**30, 8) == pytest.approx(
        14 * fit.alpha_s + 2 * 7 / 8 * 2**30 / fit.beta_Bps)


def test_alpha_beta_fit_edge_cases():
    rows = _comm_times(0.0, 10e9, 4, ["all-reduce"], [1e6, 1e7, 1e8])
    fit = fit_alpha_beta(["all-reduce"] * 3, [s for _, s, _ in rows], 4, [t for *_, t in rows])
    assert fit.alpha_s == pytest.approx(0.0, abs=1e-12) and fit.beta_Bps == pytest.approx(10e9)
    with pytest.raises(RooflineError, match="two message sizes"):
        fit_alpha_beta(["all-reduce"], [1e6], 4, [1e-3])
    with pytest.raises(RooflineError, match="do not grow"):
        fit_alpha_beta(["all-reduce"] * 2, [1e3, 1e6], 4, [1e-3, 1e-4])
    assert comm_sizes(1024, 1024 * 64, 4) == [1024, 4096, 16384, 65536]
    with pytest.raises(RooflineError):
        comm_sizes(0, 10)


@pytest.mark.parametrize("factor", [math.nan, math.inf, -math.inf, 1.0, 0.5])
def test_comm_sizes_needs_a_finite_factor_above_1(factor):
    with pytest.raises(RooflineError, match="factor: the size step") as info:
        comm_sizes(1024, 2**20, factor)
    assert "\n" not in str(info.value)


def test_comm_sweep_reports_nccl_test_bandwidths_and_a_link_profile(tmp_path):
    rows = _comm_times(20e-6, 5e9, 2, ["all-reduce", "all-gather"], comm_sizes(1024, 2**24))
    points = tuple(CommPoint(k, s, 2, fixed(t)) for k, s, t in rows)
    sweep = CommSweep("gloo", 2, "Test CPU (4 cores), 2 processes", "2026-01-31", "fp32", points)
    ar = points[-1 - len(points) // 2]
    assert ar.kind == "all-reduce" and ar.busbw_Bps == pytest.approx(ar.algbw_Bps * 2 * 1 / 2)
    ag = points[-1]
    assert ag.busbw_Bps == pytest.approx(ag.algbw_Bps / 2)
    fit = sweep.fit()
    assert fit.alpha_s == pytest.approx(20e-6) and fit.beta_Bps == pytest.approx(5e9)
    data = sweep.to_dict()
    assert set(data["fit_by_kind"]) == {"all-reduce", "all-gather"}
    link_file = tmp_path / "link.toml"
    link_file.write_text(link_toml(sweep, fit))
    from roofline.measure.chipfile import read_links

    chip = write_chip(_machine(), tmp_path / "chip.toml", links=read_links(link_file))
    link = chip.link("scale-up")
    assert link.bandwidth_Bps == pytest.approx(5e9) and link.latency_s == pytest.approx(20e-6)
    assert link.domain_size == 2 and link.source.startswith("measured 2026-01-31")
    cal = calibration_from_link(fit, load_chip("h100"), "scale-up", sweep.device, sweep.date)
    assert cal.resources["scale-up"] == pytest.approx(5e9 / 450e9)
    nvlink_alpha = load_chip("h100").link("scale-up").latency_s  # the catalog's, not measured
    assert cal.resources["latency"] == pytest.approx(nvlink_alpha / 20e-6)


# --- the CLI ----------------------------------------------------------------------------------


def run_cli(capsys, *argv):
    try:
        code = measure_main(list(argv))
    except SystemExit as exc:  # argparse rejects bad flags itself
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_peaks_json_and_calibration(capsys, tmp_path):
    cal = tmp_path / "cal.toml"
    code, out, err = run_cli(capsys, "peaks", "--quick", "--dtypes", "fp32", "--no-bandwidth",
                             "--json", "--hw", "h100", "--calibration-out", str(cal))
    assert code == 0, err
    assert "warning: measuring" in err and "against chip 'h100-sxm'" in err  # a CPU, not H100
    data = json.loads(out)
    assert data["peaks"][0]["dtype"] == "fp32" and data["peaks"][0]["flops_per_s"] > 0
    assert data["bandwidth"] is None and "compute.fp32" in data["calibration"]
    assert load_calibration(cal).hardware == "h100-sxm"


@pytest.mark.slow  # a real bandwidth sweep to 8x the last cache
def test_cli_peaks_writes_a_chip_file(capsys, tmp_path):
    llc = _llc(get_backend("cpu"))
    if llc > 64 * MiB:
        pytest.skip("last cache too large for a quick sweep past it")
    out_file = tmp_path / "mine.toml"
    code, out, err = run_cli(capsys, "peaks", "--quick", "--dtypes", "fp32", "--kernels",
                             "copy", "--threads", "1", "--max-bytes", f"{int(8 * llc)}",
                             "--out", str(out_file), "--id", "my-box")
    assert code == 0, err
    assert "memory levels" in out and f"use --hw {out_file}" in out
    assert load_chip(str(out_file)).id == "my-box"


def test_cli_ops_json_calibration_and_plot(capsys, tmp_path):
    chip = tmp_path / "chip.toml"
    write_chip(_machine(), chip)
    cal = tmp_path / "cal.toml"
    code, out, err = run_cli(capsys, "ops", "--hw", str(chip), "--quick", "--only",
                             "elementwise", "--json", "--calibration-out", str(cal))
    assert code == 0, err
    data = json.loads(out)
    assert {p["family"] for p in data["points"]} == {"elementwise"}
    assert all(p["time_s"] > 0 and p["bound"] == "hbm" for p in data["points"])
    assert load_calibration(cal).hardware == "measured-test-cpu"
    assert set(load_calibration(cal).resources) == {"hbm"}
    code, _, err = run_cli(capsys, "ops", "--hw", str(chip), "--plot", "chart.gif")
    assert code == 2 and "unknown output format" in err
    pytest.importorskip("matplotlib", reason="matplotlib not installed")
    svg = tmp_path / "ops.svg"
    code, out, err = run_cli(capsys, "ops", "--hw", str(chip), "--quick", "--only",
                             "elementwise", "--plot", str(svg))
    assert code == 0, err
    assert "measured" in svg.read_text() and f"wrote {svg}" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["ops", "--quick"], "--hw"),
    (["ops", "--hw", "h1000"], "unknown chip"),
    (["ops", "--hw", "h100", "--only", "conv"], "--only: unknown 'conv'"),
    (["peaks", "--device", "tpu"], "--device"),
    (["peaks", "--dtypes", "bf17", "--no-bandwidth"], "unknown dtype"),
    (["peaks", "--calibration-out", "x.toml", "--no-bandwidth"], "needs --hw"),
    (["peaks", "--max-bytes", "-3"], "--max-bytes"),
    (["peaks", "--kernels", "scale"], "--kernels"),
    (["peaks", "--threads", "0"], "--threads"),
    (["peaks", "--quick", "--threads", "100000"], "at most"),  # failed after ~15 s of work
    (["peaks", "--id", "My Box", "--out", "x.toml"], "--id"),
    (["peaks", "--no-bandwidth", "--out", "x.toml"], "--out needs the bandwidth"),
    (["peaks", "--link", "missing.toml"], "cannot read a link profile"),
    (["peaks", "--backend", "numpy", "--device", "cuda"], "CPU only"),
    (["comm"], "runs under torchrun"),
    (["comm", "--kinds", "gossip"], "--kinds"),
    (["comm", "--factor", "nan"], "--factor"),
    (["comm", "--factor", "inf"], "--factor"),
    (["comm", "--factor", "1"], "--factor"),
])
def test_cli_bad_input_one_line_exit_2(capsys, monkeypatch, argv, needle):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and needle in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_torch_is_one_line_with_the_install_hint(capsys, monkeypatch):
    import importlib

    real = importlib.import_module

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_torch)
    code, _, err = run_cli(capsys, "peaks", "--device", "cuda")
    assert code == 2 and "pip install torch==2.13.0" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "ops", "--hw", "h100", "--backend", "torch")
    assert code == 2 and "needs torch" in err


def test_register_adds_measure_to_a_parser_and_imports_no_torch():
    code = ("import sys, argparse, roofline.cli as c, roofline.measure.cli as m; "
            "p = c._Parser(prog='roofline'); "
            "m.register(p.add_subparsers(dest='command', parser_class=c._Parser)); "
            "a = p.parse_args(['measure', 'ops', '--hw', 'h100', '--quick']); "
            "assert a.func.__name__ == '_cmd_ops'; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_device_description_and_chip_id():
    from roofline.measure.chipfile import default_chip_id

    assert SYNTHETIC.description == "Test CPU (4 cores)"
    assert default_chip_id(SYNTHETIC) == "measured-test-cpu"
    cpu = get_backend("cpu").info
    assert cpu.units >= 1 and cpu.memory_bytes > 0 and cpu.kind == "cpu"
    assert all(c.size_bytes > 0 and c.instances >= 1 for c in cpu.caches)
    assert math.isfinite(cpu.memory_bytes)
