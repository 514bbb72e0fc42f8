"""Text views of measurement results (tables for people; `--json` uses the to_dict()s)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..hardware import Chip
from ..render.text import table
from ..units import format_bytes, format_si, format_time
from .bandwidth import BandwidthSweep, best_per_size
from .chipfile import MeasuredMachine
from .comm import CommSweep, LinkFit
from .ops import OpSweep


def binary(nbytes: float) -> str:
    """Working sets read best in binary units: 16 KiB, 1.5 MiB, 2 GiB."""
    for scale, unit in [(2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB")]:
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.0f}%"


def peaks_text(machine: MeasuredMachine, compare: Chip | None = None) -> str:
    lines = [f"{machine.measured_on()}: {machine.device.software}", ""]
    if machine.unreliable:
        lines[1:1] = [f"UNRELIABLE (still after a retry): {'; '.join(machine.unreliable)}"]
    head = ["peak", "FLOP/s", "best n", "spread"]
    if compare:
        head.append(f"of {compare.id}")
    rows = []
    for p in machine.peaks:
        row = [p.dtype, format_si(p.flops_per_s, "FLOP/s"), str(p.n), pct(p.timing.spread)]
        if compare:
            ref = compare.peaks.get(p.dtype)
            row.append(pct(p.flops_per_s / ref.flops_per_s) if ref else "-")
        rows.append(row)
    if rows:
        lines.append(table(head, rows))
    lines += [f"not measured: {dt} ({why})" for dt, why in machine.skipped.items()]
    if machine.bandwidth is not None:
        lines += ["", bandwidth_text(machine.bandwidth, compare)]
    return "\n".join(lines)


def bandwidth_text(sweep: BandwidthSweep, compare: Chip | None = None) -> str:
    kernels = list(dict.fromkeys(p.kernel for p in sweep.points))
    grid: dict[float, dict[str, float]] = {}
    for p in sweep.points:
        grid.setdefault(round(p.working_set_bytes / 4096) * 4096.0, {})[p.kernel] = \
            p.bandwidth_Bps
    best = {size: kernel for size, _, kernel in best_per_size(sweep.points)}
    rows = [[binary(size), *(format_si(v[k], "B/s") + ("*" if best.get(size) == k else " ")
                             if k in v else "-" for k in kernels)]
            for size, v in sorted(grid.items())]
    unit = (f"best of {' and '.join(map(str, sweep.threads))} threads per point"
            if sweep.device.kind == "cpu" else sweep.backend)
    lines = [f"bandwidth sweep ({unit}; * = best kernel at that working set):",
             table(["working set", *kernels], rows)]
    if sweep.plateaus:
        lines += ["", "plateaus: " + "; ".join(
            f"{format_si(p.bandwidth_Bps, 'B/s')} over {binary(p.lo_bytes)}-{binary(p.hi_bytes)}"
            for p in sweep.plateaus)]
    if sweep.levels:
        head = ["level", "bandwidth", "capacity", "kernel", "working sets", "spread"]
        if compare:
            head.append(f"of {compare.id}")
        rows = []
        for lv in sweep.levels:
            lo, hi = lv.window
            row = [f"{lv.name} <- {lv.label}", format_si(lv.bandwidth_Bps, "B/s"),
                   format_bytes(lv.capacity_bytes), lv.kernel,
                   f">= {binary(lo)}" if lv.name == "hbm" else f"{binary(lo)}-{binary(hi)}",
                   pct(lv.spread)]
            if compare:
                ref = next((m for m in compare.memory if m.name == lv.name), None)
                row.append(pct(lv.bandwidth_Bps / ref.bandwidth_Bps) if ref else "-")
            rows.append(row)
        lines += ["", "memory levels (roofline name <- what it is here):", table(head, rows)]
    else:
        lines += ["", "no memory level could be read off (sweep beyond the last cache)"]
    return "\n".join(lines)


def ops_text(sweep: OpSweep) -> str:
    lines = [f"predicted vs achieved on {sweep.device.description} ({sweep.backend}, "
             f"{sweep.date}) against chip {sweep.hardware!r}",
             "efficiency = t_lower / t_measured = achieved / roof", ""]
    rows = []
    for p in sweep.points:
        note = f"fits in {p.resident}" if p.resident and p.bound != "compute" else ""
        if not p.fused:
            note = "unfused: several passes"
        if p.efficiency > 1.1 and not note:
            note = "above the roof"
        rows.append([p.label, p.dtype, p.bound, format_time(float(p.estimate.t_lower_s)),
                     format_time(p.time_s), pct(p.timing.spread),
                     format_si(p.achieved_flops_per_s, "FLOP/s"),
                     format_si(p.achieved_Bps, "B/s"), pct(p.efficiency), note])
    if rows:
        lines.append(table(["case", "dtype", "bound", "predicted", "measured", "spread",
                            "achieved", "bandwidth", "efficiency", "note"], rows))
    summary = sweep.summary()
    if summary:
        lines += ["", "efficiency by bound resource (median over clearly bound, fused cases, "
                  "not in cache): " + ", ".join(f"{k} {pct(v)}" for k, v in summary.items())]
    lines += [f"skipped {label}: {why}" for label, why in sweep.skipped.items()]
    return "\n".join(lines)


def fit_line(fit: LinkFit) -> str:
    return (f"alpha = {format_time(fit.alpha_s)} per step, beta = "
            f"{format_si(fit.beta_Bps, 'B/s')} per direction (rms error "
            f"{pct(fit.rms_rel_error)} over {fit.points} points)")


def comm_text(sweep: CommSweep, fits: Mapping[str, LinkFit | str]) -> str:
    lines = [f"collectives on {sweep.device}: {sweep.backend}, {sweep.ranks} ranks, "
             f"{sweep.dtype} ({sweep.date}); sizes as nccl-tests counts them, time of the "
             "slowest rank", ""]
    rows = [[p.kind, binary(p.nbytes), format_time(p.time_s), pct(p.timing.spread),
             format_si(p.algbw_Bps, "B/s"), format_si(p.busbw_Bps, "B/s")]
            for p in sweep.points]
    if rows:
        lines.append(table(["collective", "size", "time", "spread", "algbw", "busbw"], rows))
    lines += [f"skipped {k}: {why}" for k, why in sweep.skipped.items()]
    lines += ["", "alpha-beta fit, ring model t = steps·alpha + bytes/beta:"]
    for name, fit in fits.items():
        lines.append(f"  {name}: " + (fit_line(fit) if isinstance(fit, LinkFit) else fit))
    return "\n".join(lines)
