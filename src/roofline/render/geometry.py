"""The roofline's geometry as plain data (no matplotlib): roofs, ridge points, axis limits,
the ops as points, and where their labels go. The matplotlib chart and the SVG writer both
draw from it.

>>> import roofline as rl
>>> geo = roofline_geometry(rl.load_chip("h100"), dtypes=["bf16"], levels=["hbm"])
>>> [r.label for r in geo.roofs], round(geo.ridges[0].intensity, 1)
(['bf16 989 TFLOP/s', 'hbm 3.35 TB/s'], 295.3)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import dtype as lookup_dtype
from ..errors import ParameterError, RooflineError, brief
from ..evaluate import Estimate
from ..files import read_json
from ..hardware import Chip
from ..units import format_si

# One fixed colour per resource (Paul Tol's "vibrant" set, colour-blind safe), shared by
# the roofs, the op points, the breakdown bars and the HTML report.
BOUND_COLORS = {
    "compute": "#CC3311",
    "hbm": "#0077BB",
    "l2": "#33BBEE",
    "sram": "#009988",
    "scale-up": "#EE7733",
    "scale-out": "#EE3377",
    "latency": "#888888",
}
OTHER_COLOR = "#BBBBBB"  # a resource this palette does not know

Measured = tuple[str, float, float]  # (name, intensity in FLOP/byte, achieved FLOP/s)

# What a chart can place: whole-decade axes reaching both ends still span finite floats.
CHART_RANGE = (1e-150, 1e150)


def bound_color(resource: str) -> str:
    """The fixed colour of a resource (compute, a memory level, a link, latency)."""
    return BOUND_COLORS.get(resource, OTHER_COLOR)


# --- inputs: one op as plain scalars ------------------------------------------------------


@dataclass(frozen=True)
class OpPoint:
    """One op's bound as plain scalars, from an Estimate or from `roofline op ... --json`."""

    name: str
    hardware: str
    bound: str
    t_lower_s: float
    t_upper_s: float
    flops: float
    attainable_flops_per_s: float
    peak_flops_per_s: float  # nan where the op does no arithmetic
    intensity: Mapping[str, float]  # level or link -> FLOP/byte
    ridge: Mapping[str, float]
    time_s: Mapping[str, float]  # resource -> seconds
    bytes: Mapping[str, float] = field(default_factory=dict)  # level or link -> bytes moved
    dtypes: tuple[str, ...] = ()  # compute dtypes with FLOPs
    derivation: tuple[str, ...] = ()


def to_points(items: Iterable[Estimate | OpPoint]) -> list[OpPoint]:
    """Plain records for tables; an array-valued Estimate becomes one record per element."""
    out: list[OpPoint] = []
    for item in items:
        out += [item] if isinstance(item, OpPoint) else estimate_points(item)
    return out


def estimate_points(est: Estimate) -> list[OpPoint]:
    shape = np.shape(est.t_lower_s)
    name = est.cost.name or "op"

    def at(value: Any, idx: tuple[int, ...]) -> float:
        return float(np.broadcast_to(np.asarray(value, dtype=float), shape)[idx])

    def each(values: Mapping[str, Any], idx: tuple[int, ...]) -> dict[str, float]:
        return {k: at(v, idx) for k, v in values.items()}

    bounds = np.broadcast_to(np.asarray(est.bound), shape)
    return [OpPoint(
        name=f"{name}[{', '.join(map(str, idx))}]" if shape else name,
        hardware=est.hardware, bound=str(bounds[idx]),
        t_lower_s=at(est.t_lower_s, idx), t_upper_s=at(est.t_upper_s, idx),
        flops=at(est.flops, idx), attainable_flops_per_s=at(est.attainable_flops_per_s, idx),
        peak_flops_per_s=at(est.peak_flops_per_s, idx),
        intensity=each(est.intensity, idx), ridge=each(est.ridge, idx),
        time_s=each(est.time_s, idx), bytes=each({**est.bytes, **est.link_bytes}, idx),
        dtypes=tuple(est.flops_by_dtype),
        derivation=tuple(est.cost.explain()),
    ) for idx in np.ndindex(shape)]


def point_from_dict(data: Any, where: str) -> OpPoint:
    """Validate one object as printed by `roofline op ... --json`; errors name `where` and the
    field. Extra fields are ignored."""
    hint = "(expected the JSON that 'roofline op ... --json' prints)"
    if not isinstance(data, dict):
        raise RooflineError(f"{where}: expected a JSON object {hint}, got {type(data).__name__}")

    def missing(key: str) -> RooflineError:
        return RooflineError(f"{where}: missing field '{key}' {hint}")

    def get(key: str, kind: type, what: str, required: bool) -> Any:
        if key not in data:
            if required:
                raise missing(key)
            return None
        if not isinstance(data[key], kind):
            raise RooflineError(f"{where}: field '{key}' must be {what}, got {data[key]!r:.60}")
        return data[key]

    def checked(value: Any, label: str, nullable: bool) -> float:
        if value is None and nullable:  # jsonable writes NaN as null (a collective's peak)
            return math.nan
        if isinstance(value, int) and abs(value) > sys.float_info.max:  # isfinite overflows
            raise RooflineError(f"{where}: field '{label}' must be a non-negative number up to "
                                f"{sys.float_info.max:.4g}, got {brief(value)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise RooflineError(f"{where}: field '{label}' must be a non-negative number, "
                                f"got {value!r:.60}")
        return float(value)

    def number(key: str, required: bool = True) -> float:
        if key not in data:
            if required:
                raise missing(key)
            return math.nan
        return checked(data[key], key, nullable=not required)

    def numbers(key: str, required: bool = False) -> dict[str, float]:
        table = get(key, dict, "an object of numbers", required) or {}
        return {str(k): checked(v, f"{key}.{k}", nullable=True) for k, v in table.items()}

    name = get("name", str, "a string", True)
    hardware = get("hardware", str, "a string", True)
    bound = get("bound", str, "a string", True)
    if not hardware.strip() or not bound.strip():
        raise RooflineError(f"{where}: fields 'hardware' and 'bound' must not be empty")
    derivation = get("derivation", list, "a list of strings", False) or []
    if not all(isinstance(line, str) for line in derivation):
        raise RooflineError(f"{where}: field 'derivation' must be a list of strings")
    t_lower = number("t_lower_s")
    t_upper = number("t_upper_s", required=False)
    return OpPoint(
        name=name or "op", hardware=hardware, bound=bound, t_lower_s=t_lower,
        t_upper_s=t_lower if math.isnan(t_upper) else t_upper,
        flops=number("flops", required=False),
        attainable_flops_per_s=number("attainable_flops_per_s"),
        peak_flops_per_s=number("peak_flops_per_s", required=False),
        intensity=numbers("intensity", required=True), ridge=numbers("ridge"),
        time_s=numbers("time_s"), bytes={**numbers("bytes"), **numbers("link_bytes")},
        dtypes=tuple(numbers("flops_by_dtype")),
        derivation=tuple(derivation),
    )


def load_points(path: str | Path) -> list[OpPoint]:
    """Read a JSON file holding one object (or a list of them) from `roofline op ... --json`.

    Only JSON is parsed: nothing in the file is evaluated or unpickled.
    """
    data = read_json(path)
    if isinstance(data, list):
        if not data:
            raise RooflineError(f"{path}: empty list, expected op results")
        return [point_from_dict(item, f"{path}[{i}]") for i, item in enumerate(data)]
    return [point_from_dict(data, str(path))]


# --- the roofline's geometry (shared with the SVG in the HTML report) --------------------


@dataclass(frozen=True)
class Roof:
    """One roof segment: a flat compute roof (kind 'compute') or a slanted bandwidth roof."""

    kind: str  # "compute", or the memory level / link name
    label: str
    dtype: str  # the compute roof's dtype; "" for a bandwidth roof
    x: tuple[float, float]
    y: tuple[float, float]


@dataclass(frozen=True)
class Ridge:
    """Where a bandwidth roof meets a compute roof: I* = peak / bandwidth."""

    dtype: str
    level: str
    intensity: float
    flops_per_s: float


@dataclass(frozen=True)
class RooflineGeometry:
    roofs: tuple[Roof, ...]
    ridges: tuple[Ridge, ...]
    xlim: tuple[float, float]  # FLOP/byte, whole decades
    ylim: tuple[float, float]  # FLOP/s, whole decades
    level: str  # the level whose intensity the x axis shows
    boundary: float  # ridge of the first dtype on `level`: memory-bound to its left
    peak: float  # the first dtype's peak
    bandwidth_Bps: float  # `level`'s bandwidth


def default_dtypes(chip: Chip, results: Iterable[OpPoint | Estimate] = ()) -> list[str]:
    """The compute dtypes the ops use, or bf16 (else the chip's first peak) when none do."""
    used: list[str] = []
    for r in results:
        names = r.dtypes if isinstance(r, OpPoint) else tuple(r.flops_by_dtype)
        used += [lookup_dtype(d).peak for d in names if lookup_dtype(d).peak in chip.peaks]
    used = list(dict.fromkeys(used))
    return used or (["bf16"] if "bf16" in chip.peaks else list(chip.peaks)[:1])


def intensity_label(v: float) -> str:
    """A short tick label for a decade on the intensity axis: 0.1, 1, 1000, 100 k."""
    if not 0 < v < math.inf:  # matplotlib labels ticks past the view too; these underflow
        return f"{v:g}"
    return f"{v:g}" if 1e-3 <= v < 1e5 else format_si(v)  # '100 k', '1 M', '100 u'


def _decade_floor(v: float) -> float:
    return float(10.0 ** math.floor(math.log10(v)))


def _decade_ceil(v: float) -> float:
    return float(10.0 ** math.ceil(math.log10(v)))


def check_chartable(what: str, x: float, y: float) -> None:
    """RooflineError naming `what` unless its intensity and FLOP/s are in CHART_RANGE."""
    lo, hi = CHART_RANGE
    for value, text in ((x, f"intensity {x:.4g} FLOP/byte"), (y, f"{y:.4g} FLOP/s")):
        if not lo <= value <= hi:
            raise RooflineError(f"{what}: {text} is outside the range a chart can show "
                                f"({lo:g} to {hi:g})")


def roofline_geometry(chip: Chip, dtypes: Sequence[str] | None = None,
                      levels: Sequence[str] | None = None, level: str = "hbm",
                      points: Iterable[tuple[float, float]] = ()) -> RooflineGeometry:
    """Roofs, ridge points and axis limits for a chip; `points` (x, y) widen the limits.

    Each bandwidth roof rises until it meets the highest compute roof; each compute roof
    starts where it meets the fastest bandwidth roof. Limits are whole decades.
    """
    dtypes = [lookup_dtype(d).peak for d in (dtypes or default_dtypes(chip))]
    levels = list(levels) if levels else chip.resources()
    peaks = {d: chip.peak_flops(d) for d in dtypes}  # raises for a dtype the chip lacks
    bws = {lv: chip.bandwidth_Bps(lv) for lv in levels}  # raises for a missing level
    axis_bw = chip.bandwidth_Bps(level)
    top, fastest = max(peaks.values()), max(bws.values())
    ridges = tuple(Ridge(d, lv, p / bw, p) for d, p in peaks.items() for lv, bw in bws.items())

    shown = [(x, y) for x, y in points if x > 0 and y > 0]
    for x, y in shown:
        check_chartable("a point", x, y)
    xs = [r.intensity for r in ridges] + [x for x, _ in shown]
    xlim = (_decade_floor(min(xs) / 5), _decade_ceil(max(xs) * 5))
    ylim = (_decade_floor(min([top / 1e3] + [y / 2 for _, y in shown])), _decade_ceil(top * 2))

    roofs = [Roof("compute", f"{d} {format_si(p, 'FLOP/s')}", d,
                  (max(xlim[0], p / fastest), xlim[1]), (p, p)) for d, p in peaks.items()]
    for lv, bw in bws.items():
        x0, x1 = max(xlim[0], ylim[0] / bw), min(xlim[1], top / bw)
        roofs.append(Roof(lv, f"{lv} {format_si(bw, 'B/s')}", "", (x0, x1), (x0 * bw, x1 * bw)))
    first = peaks[dtypes[0]]
    return RooflineGeometry(tuple(roofs), ridges, xlim, ylim, level, first / axis_bw, first,
                            axis_bw)


def has_point(r: OpPoint, level: str) -> bool:
    """Whether an op has a place on a roofline over `level` (collectives do no arithmetic)."""
    x = r.intensity.get(level, math.nan)
    return math.isfinite(x) and x > 0 and r.attainable_flops_per_s > 0


def point_xy(r: OpPoint, level: str) -> tuple[float, float]:
    if not has_point(r, level) and not r.intensity:
        raise RooflineError(f"op {r.name!r} does no arithmetic, so it has no place on a "
                            "roofline (plot its time with a breakdown chart)")
    if not has_point(r, level):
        raise RooflineError(f"op {r.name!r} has no {level} intensity to place on a roofline "
                            f"(it has: {', '.join(r.intensity)}); choose another level")
    check_chartable(f"op {r.name!r}", r.intensity[level], r.attainable_flops_per_s)
    return r.intensity[level], r.attainable_flops_per_s


def placed_points(chip: Chip, results: Iterable[OpPoint], level: str = "hbm",
              ) -> list[tuple[OpPoint, float, float]]:
    """Each result with its (intensity on `level`, attainable FLOP/s); checks the chip."""
    out = []
    for r in results:
        check_chip(r, chip, figures=False)  # a step's rows: their times hold pipeline slots
        out.append((r, *point_xy(r, level)))
    return out


def check_chip(r: OpPoint, chip: Chip, where: str = "", figures: bool = True) -> None:
    """RooflineError unless `r` was evaluated on `chip`: its id and, with `figures` (a result
    read from a file, `roofline op --json`: one occurrence of one op), the bandwidth its
    bytes and times imply for each memory level (a chip file edited under the same id is
    another chip: its result drawn on this one's roofline would mix the two)."""
    if r.hardware != chip.id:
        raise RooflineError(f"{where}op {r.name!r} was evaluated on {r.hardware!r}, not on "
                            f"{chip.id!r}")
    for m in chip.memory if figures else ():
        moved, took = r.bytes.get(m.name, 0.0), r.time_s.get(m.name, 0.0)
        if moved > 0 and took > 0 and abs(moved / took / m.bandwidth_Bps - 1) > 1e-6:
            raise ParameterError("hw", "must be that chip file", where=(
                f"{where}op {r.name!r} was evaluated on a {r.hardware!r} whose {m.name} "
                f"bandwidth is {moved / took:.4g} B/s, not {m.bandwidth_Bps:.4g}: "))


def roof_at(geo: RooflineGeometry, intensity: float) -> float:
    """Attainable FLOP/s at an intensity under the first dtype's roof and the axis level."""
    return min(geo.peak, intensity * geo.bandwidth_Bps)
