"""Calibrated estimates: the roofline bound with each resource slowed to its measured
efficiency, labelled with what it was calibrated on.

A calibration file (TOML) holds efficiencies — achieved / roof, in (0, 1] — per resource:
compute per dtype, memory levels (hbm, l2, sram), links (scale-up, scale-out) and latency,
plus `[calibrated_on]` (device, date, what was measured, and the chip file it was measured
against). A calibration is a derated chip: `calibrate(est, load_calibration(path))`
multiplies each roof of the estimate's chip by its efficiency (`Chip.derated`) and runs the
one `evaluate` on it. A resource without an efficiency stays at its roof and is listed as
uncalibrated. Efficiencies are capped at 1, so a calibrated
estimate is never faster than the plain bound, which stays available as `.estimate`.

    schema_version = 1
    [calibrated_on]
    device = "NVIDIA H200 (132 SMs)"
    date = "2026-01-31"
    what = "roofline measure ops: 31 cases against chip 'h200-sxm'"
    hardware = "h200-sxm"
    [efficiency]
    hbm = 0.87
    [efficiency.compute]
    bf16 = 0.74
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost import LINKS, MEMORY_LEVELS
from ..derivation import Num, unwrap
from ..dtypes import dtype as lookup_dtype
from ..dtypes import dtype_names
from ..errors import RooflineError
from ..evaluate import COMPUTE, LATENCY, Estimate, evaluate
from ..files import read_toml, write_text
from ..hardware import Chip, System, load_chip
from ..hardware.model import MIN_EFFICIENCY
from ..render.text import table
from ..serialize import jsonable
from ..units import format_si, format_time

if TYPE_CHECKING:
    from .chipfile import MeasuredMachine
    from .comm import LinkFit
    from .ops import OpSweep

SCHEMA_VERSION = 1
RESOURCES = (*MEMORY_LEVELS, *LINKS, LATENCY)
_TOP_KEYS = {"schema_version", "calibrated_on", "efficiency"}
_ON_KEYS = {"device", "date", "what", "hardware"}


@dataclass(frozen=True)
class Calibration:
    """Measured efficiencies per resource and what they were measured on."""

    compute: Mapping[str, float]  # compute dtype -> efficiency
    resources: Mapping[str, float]  # hbm / l2 / sram / scale-up / scale-out / latency
    device: str
    date: str
    what: str
    hardware: str = ""  # the chip file the efficiencies are relative to
    origin: str = ""  # the file it was read from

    @property
    def description(self) -> str:
        return f"{self.device}, {self.date}: {self.what}"

    def efficiencies(self) -> dict[str, float]:
        """Flat view: 'compute.bf16', 'hbm', ..."""
        return {**{f"compute.{k}": v for k, v in self.compute.items()}, **self.resources}


def _error(path: str, where: str, message: str) -> RooflineError:
    return RooflineError(f"{path}: field '{where}': {message}")


def _efficiency(path: str, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not MIN_EFFICIENCY <= value <= 1:
        raise _error(path, where, f"must be an efficiency in [{MIN_EFFICIENCY:g}, 1], got "
                     f"{value!r}")
    return float(value)


def parse_calibration(data: Mapping[str, Any], path: str) -> Calibration:
    """Validate the parsed TOML of a calibration file."""
    extra = sorted(set(data) - _TOP_KEYS)
    if extra:
        raise _error(path, extra[0], f"unknown field (allowed: {', '.join(sorted(_TOP_KEYS))})")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise _error(path, "schema_version", f"must be {SCHEMA_VERSION}")
    on = data.get("calibrated_on")
    if not isinstance(on, dict):
        raise _error(path, "calibrated_on", "a [calibrated_on] table (device, date, what) "
                     "is required")
    extra = sorted(set(on) - _ON_KEYS)
    if extra:
        raise _error(path, f"calibrated_on.{extra[0]}",
                     f"unknown field (allowed: {', '.join(sorted(_ON_KEYS))})")
    texts: dict[str, str] = {}
    for key in sorted(_ON_KEYS):
        value = on.get(key, "" if key == "hardware" else None)
        if not isinstance(value, str) or (key != "hardware" and not value.strip()):
            raise _error(path, f"calibrated_on.{key}", "required non-empty string")
        texts[key] = value
    eff = data.get("efficiency")
    if not isinstance(eff, dict) or not eff:
        raise _error(path, "efficiency", "an [efficiency] table with at least one resource "
                     "is required")
    compute: dict[str, float] = {}
    resources: dict[str, float] = {}
    for key, value in eff.items():
        if key == "compute":
            if not isinstance(value, dict):
                raise _error(path, "efficiency.compute", "must be a table of dtype = efficiency")
            for dt, v in value.items():
                if dt not in dtype_names():
                    raise _error(path, f"efficiency.compute.{dt}",
                                 f"unknown dtype (allowed: {', '.join(dtype_names())})")
                compute[dt] = _efficiency(path, f"efficiency.compute.{dt}", v)
        elif key in RESOURCES:
            resources[key] = _efficiency(path, f"efficiency.{key}", value)
        else:
            allowed = ", ".join(["compute", *RESOURCES])
            raise _error(path, f"efficiency.{key}", f"unknown resource (allowed: {allowed})")
    if not compute and not resources:
        raise _error(path, "efficiency", "at least one efficiency is required")
    return Calibration(compute, resources, texts["device"], texts["date"], texts["what"],
                       texts["hardware"], path)


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration file."""
    return parse_calibration(read_toml(path, "calibration file"), str(Path(path)))


def calibration_toml(cal: Calibration) -> str:
    """The file text for a calibration (round-trips through load_calibration)."""
    from .chipfile import _toml

    lines = ["# roofline calibration: measured efficiency (achieved / roof) per resource.",
             "# calibrate(estimate, load_calibration(this file)) evaluates the estimate's Cost",
             "# on the chip derated by these efficiencies; resources not listed stay at the roof.",
             f"schema_version = {SCHEMA_VERSION}", "", "[calibrated_on]"]
    for key in ("device", "date", "what", "hardware"):
        if getattr(cal, key):
            lines.append(f"{key} = {_toml(getattr(cal, key))}")
    lines += ["", "[efficiency]"]
    lines += [f"{k} = {_toml(float(f'{v:.4g}'))}" for k, v in cal.resources.items()]
    if cal.compute:
        lines += ["", "[efficiency.compute]"]
        lines += [f"{k} = {_toml(float(f'{v:.4g}'))}" for k, v in cal.compute.items()]
    text = "\n".join(lines) + "\n"
    parse_calibration(tomllib.loads(text), "<calibration>")
    return text


def write_calibration(cal: Calibration, path: str | Path) -> None:
    write_text(path, calibration_toml(cal))


# --- applying a calibration -------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CalibratedEstimate:
    """A bound with measured efficiencies applied: `evaluate(cost, chip.derated(...))`.
    `estimate` is the plain bound, `derated` the estimate on the calibrated chip."""

    estimate: Estimate
    derated: Estimate
    calibration: Calibration
    efficiency: Mapping[str, Num]  # resource -> efficiency applied to it (1: uncalibrated)
    uncalibrated: tuple[str, ...] = ()  # resources left at their roof
    calibrated: bool = field(default=True, init=False)

    @property
    def hardware(self) -> str:
        return self.estimate.hardware

    @property
    def time_s(self) -> Mapping[str, Num]:
        return self.derated.time_s

    @property
    def t_lower_s(self) -> Num:
        return self.derated.t_lower_s

    @property
    def t_upper_s(self) -> Num:
        return self.derated.t_upper_s

    @property
    def bound(self) -> Any:
        return self.derated.bound

    @property
    def attainable_flops_per_s(self) -> Num:
        return self.derated.attainable_flops_per_s

    @property
    def calibrated_on(self) -> str:
        return self.calibration.description

    @property
    def note(self) -> str:
        """A warning when the calibration was measured against another chip."""
        hw = self.calibration.hardware
        if hw and hw != self.estimate.hardware:
            return (f"calibrated against chip {hw!r} but applied to {self.estimate.hardware!r}"
                    ": the efficiencies may not carry over")
        return ""

    def to_dict(self) -> dict[str, Any]:
        cal = self.calibration
        return jsonable({
            "calibrated": True,
            "calibrated_on": {"device": cal.device, "date": cal.date, "what": cal.what,
                              "hardware": cal.hardware, "file": cal.origin},
            "hardware": self.hardware, "derated_chip": self.derated.hardware,
            "efficiency": dict(self.efficiency),
            "time_s": dict(self.time_s), "t_lower_s": self.t_lower_s,
            "t_upper_s": self.t_upper_s, "bound": self.bound,
            "attainable_flops_per_s": self.attainable_flops_per_s,
            "uncalibrated": list(self.uncalibrated), "note": self.note,
            "bound_estimate": self.estimate.to_dict(),
        })


def _chip_for(est: Estimate, chip: Chip | System | str | None) -> Chip:
    """The chip the plain bound was evaluated on (a measured chip file has to be passed)."""
    try:
        found = load_chip(chip if chip is not None else est.hardware)
    except RooflineError:
        raise RooflineError(f"calibrating needs the chip the estimate used ({est.hardware!r}):"
                            " pass chip=... (the chip or its file)") from None
    if found.id != est.hardware:
        raise RooflineError(f"the estimate was made on chip {est.hardware!r}, not "
                            f"{found.id!r}: pass the chip it used")
    return found


def calibrate(est: Estimate, calibration: Calibration,
              chip: Chip | System | str | None = None) -> CalibratedEstimate:
    """Apply a calibration to a plain bound: the same Cost evaluated on the chip derated to
    the measured efficiencies (`Chip.derated`). Works on array-valued (sweep) estimates.

    `chip` is the chip the estimate used; needed when it is not in the catalog (a file)."""
    derated = evaluate(est.cost, _chip_for(est, chip).derated(calibration.efficiencies()))
    applied: dict[str, Num] = {}
    uncalibrated: list[str] = []
    for resource in est.time_s:
        if resource == COMPUTE:
            effs = {dt: calibration.compute.get(lookup_dtype(dt).peak)
                    for dt in est.flops_by_dtype}
            uncalibrated += [f"compute.{dt}" for dt, e in effs.items() if e is None]
            one = {1.0 if e is None else e for e in effs.values()}
            if len(one) == 1:
                applied[resource] = one.pop()
            else:  # several dtypes: the work-weighted efficiency, plain over calibrated time
                plain, slow = (np.asarray(e.time_s[COMPUTE], dtype=float)
                               for e in (est, derated))
                with np.errstate(divide="ignore", invalid="ignore"):
                    applied[resource] = unwrap(np.where(slow > 0, plain / slow, 1.0))
        else:
            eff = calibration.resources.get(resource)
            if eff is None:
                uncalibrated.append(resource)
            applied[resource] = 1.0 if eff is None else eff
    return CalibratedEstimate(est, derated, calibration, applied, tuple(uncalibrated))


def calibrated_text(rec: CalibratedEstimate) -> str:
    """Human view: says it is a calibrated estimate and on what, next to the plain bound."""
    est = rec.estimate
    lines = [f"calibrated estimate (on {rec.calibrated_on})"]
    if np.ndim(rec.t_lower_s) or np.ndim(est.t_lower_s):
        arr = np.asarray(rec.t_lower_s, dtype=float)
        lines.append(f"{arr.size} points: calibrated t_lower from "
                     f"{format_time(float(arr.min()))} to {format_time(float(arr.max()))}")
    else:
        rows = []
        for resource, t in rec.time_s.items():
            eff = float(np.asarray(rec.efficiency[resource]))
            rows.append([resource + (" <- bound" if resource == rec.bound else ""),
                         format_time(float(est.time_s[resource])), f"{100 * eff:.1f}%",
                         format_time(float(t))])
        lines += [table(["resource", "bound", "efficiency", "calibrated"], rows), "",
                  f"calibrated time t_lower = {format_time(float(rec.t_lower_s))} "
                  f"({rec.bound}); plain bound {format_time(float(est.t_lower_s))} "
                  f"({est.bound})",
                  f"calibrated time with no overlap t_upper = "
                  f"{format_time(float(rec.t_upper_s))}"]
        if est.flops_by_dtype:
            lines.append(f"calibrated attainable "
                         f"{format_si(float(rec.attainable_flops_per_s), 'FLOP/s')}")
    if rec.uncalibrated:
        lines.append(f"not calibrated (kept at the roof): {', '.join(rec.uncalibrated)}")
    if rec.note:
        lines.append(f"note: {rec.note}")
    return "\n".join(lines)


# --- deriving a calibration from measurements ---------------------------------------------------


def _split(flat: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    compute = {k.removeprefix("compute."): min(1.0, v) for k, v in flat.items()
               if k.startswith("compute.") and v > 0}
    other = {k: min(1.0, v) for k, v in flat.items() if k in RESOURCES and v > 0}
    return compute, other


def _make(flat: Mapping[str, float], device: str, date: str, what: str,
          hardware: str) -> Calibration:
    compute, other = _split(flat)
    if not compute and not other:
        raise RooflineError("nothing to calibrate: no clearly bound measurement to take an "
                            "efficiency from")
    return Calibration(compute, other, device, date, what, hardware)


def calibration_from_ops(sweep: OpSweep) -> Calibration:
    """Median efficiency per bound resource over clearly bound, not cache-resident cases."""
    flat = sweep.summary()
    mode = " --quick" if sweep.quick else ""
    what = (f"roofline measure ops{mode} ({sweep.backend}): median achieved / roof of "
            f"{len(sweep.points)} timed cases, per bound resource, against chip "
            f"{sweep.hardware!r}")
    return _make(flat, sweep.device.description, sweep.date, what, sweep.hardware)


def calibration_from_peaks(machine: MeasuredMachine, chip: Chip) -> Calibration:
    """Measured peaks and level bandwidths over the chip file's figures."""
    flat: dict[str, float] = {}
    for peak in machine.peaks:
        if peak.dtype in chip.peaks:
            flat[f"compute.{peak.dtype}"] = peak.flops_per_s / chip.peaks[peak.dtype].flops_per_s
    if machine.bandwidth is not None:
        for level in machine.bandwidth.levels:
            if any(m.name == level.name for m in chip.memory):
                flat[level.name] = level.bandwidth_Bps / chip.level(level.name).bandwidth_Bps
    mode = " --quick" if machine.quick else ""
    what = (f"roofline measure peaks{mode}: measured matmul peaks and streaming bandwidths "
            f"over chip {chip.id!r}'s figures")
    return _make(flat, machine.device.description, machine.date, what, chip.id)


def calibration_from_link(fit: LinkFit, chip: Chip, link: str, device: str,
                          date: str) -> Calibration:
    """A fitted link (alpha, beta) over the chip file's link figures."""
    ref = chip.link(link)
    flat = {link: fit.beta_Bps / ref.bandwidth_Bps, LATENCY: ref.latency_s / fit.alpha_s
            if fit.alpha_s > 0 else 1.0}
    what = (f"roofline measure comm: alpha-beta fit over {fit.points} timed collectives, "
            f"against chip {chip.id!r}'s {link} link")
    return _make(flat, device, date, what, chip.id)
