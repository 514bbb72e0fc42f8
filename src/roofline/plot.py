"""Charts: the roofline (a stack of roofs), sweeps, time breakdowns and memory footprints.

matplotlib is an optional extra (`pip install 'roofline[plot]'`), imported inside the
functions that draw, so `import roofline.plot` is cheap and works without it. Each chart
draws on the Axes it is given, or on a new `Figure` it makes itself (never through pyplot,
so no global state changes), and returns the Axes.

The inputs are plain: Estimates, or `OpResult` records (one op as scalars, also read from
the JSON `roofline op ... --json` prints), and the roof geometry is plain data too, so the
HTML report draws the same chart as inline SVG without matplotlib.

>>> import roofline as rl
>>> geo = roofline_geometry(rl.load_chip("h100"), dtypes=["bf16"], levels=["hbm"])
>>> [r.label for r in geo.roofs], round(geo.ridges[0].intensity, 1)
(['bf16 989 TFLOP/s', 'hbm 3.35 TB/s'], 295.3)
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .cost import LINKS
from .dtypes import dtype as lookup_dtype
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .files import STDOUT, read_json, write_bytes
from .hardware import Chip, load_chip
from .ops import matmul
from .units import format_bytes, format_si, format_time

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "pip install 'roofline[plot]'"
FORMATS = ("png", "svg", "pdf")

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


def bound_color(resource: str) -> str:
    """The fixed colour of a resource (compute, a memory level, a link, latency)."""
    return BOUND_COLORS.get(resource, OTHER_COLOR)


def _plain(text: str) -> str:
    """Data (an op or chip name) as literal text: matplotlib reads $...$ as math."""
    return text.replace("$", r"\$")


# --- inputs: one op as plain scalars ------------------------------------------------------


@dataclass(frozen=True)
class OpResult:
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


def op_results(items: Iterable[Estimate | OpResult]) -> list[OpResult]:
    """Plain records for tables; an array-valued Estimate becomes one record per element."""
    out: list[OpResult] = []
    for item in items:
        out += [item] if isinstance(item, OpResult) else _from_estimate(item)
    return out


def _from_estimate(est: Estimate) -> list[OpResult]:
    shape = np.shape(est.t_lower_s)
    name = est.cost.name or "op"

    def at(value: Any, idx: tuple[int, ...]) -> float:
        return float(np.broadcast_to(np.asarray(value, dtype=float), shape)[idx])

    def each(values: Mapping[str, Any], idx: tuple[int, ...]) -> dict[str, float]:
        return {k: at(v, idx) for k, v in values.items()}

    bounds = np.broadcast_to(np.asarray(est.bound), shape)
    return [OpResult(
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


def result_from_dict(data: Any, where: str) -> OpResult:
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
    return OpResult(
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


def load_results(path: str | Path) -> list[OpResult]:
    """Read a JSON file holding one object (or a list of them) from `roofline op ... --json`.

    Only JSON is parsed: nothing in the file is evaluated or unpickled.
    """
    data = read_json(path)
    if isinstance(data, list):
        if not data:
            raise RooflineError(f"{path}: empty list, expected op results")
        return [result_from_dict(item, f"{path}[{i}]") for i, item in enumerate(data)]
    return [result_from_dict(data, str(path))]


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


def chip_resources(chip: Chip) -> list[str]:
    """Memory levels (outermost first), then links: every bandwidth roof the chip has."""
    return [m.name for m in chip.memory] + [k for k in LINKS if k in chip.links]


def default_dtypes(chip: Chip, results: Iterable[OpResult | Estimate] = ()) -> list[str]:
    """The compute dtypes the ops use, or bf16 (else the chip's first peak) when none do."""
    used: list[str] = []
    for r in results:
        names = r.dtypes if isinstance(r, OpResult) else tuple(r.flops_by_dtype)
        used += [lookup_dtype(d).peak for d in names if lookup_dtype(d).peak in chip.peaks]
    used = list(dict.fromkeys(used))
    return used or (["bf16"] if "bf16" in chip.peaks else list(chip.peaks)[:1])


def intensity_label(v: float) -> str:
    """A short tick label for a decade on the intensity axis: 0.1, 1, 1000, 1e5."""
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"1e{round(math.log10(v))}"


def _decade_floor(v: float) -> float:
    return float(10.0 ** math.floor(math.log10(v)))


def _decade_ceil(v: float) -> float:
    return float(10.0 ** math.ceil(math.log10(v)))


def roofline_geometry(chip: Chip, dtypes: Sequence[str] | None = None,
                      levels: Sequence[str] | None = None, level: str = "hbm",
                      points: Iterable[tuple[float, float]] = ()) -> RooflineGeometry:
    """Roofs, ridge points and axis limits for a chip; `points` (x, y) widen the limits.

    Each bandwidth roof rises until it meets the highest compute roof; each compute roof
    starts where it meets the fastest bandwidth roof. Limits are whole decades.
    """
    dtypes = [lookup_dtype(d).peak for d in (dtypes or default_dtypes(chip))]
    levels = list(levels) if levels else chip_resources(chip)
    peaks = {d: chip.peak_flops(d) for d in dtypes}  # raises for a dtype the chip lacks
    bws = {lv: chip.bandwidth_Bps(lv) for lv in levels}  # raises for a missing level
    axis_bw = chip.bandwidth_Bps(level)
    top, fastest = max(peaks.values()), max(bws.values())
    ridges = tuple(Ridge(d, lv, p / bw, p) for d, p in peaks.items() for lv, bw in bws.items())

    shown = [(x, y) for x, y in points if x > 0 and y > 0]
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


def has_point(r: OpResult, level: str) -> bool:
    """Whether an op has a place on a roofline over `level` (collectives do no arithmetic)."""
    x = r.intensity.get(level, math.nan)
    return math.isfinite(x) and x > 0 and r.attainable_flops_per_s > 0


def _point(r: OpResult, level: str) -> tuple[float, float]:
    if not has_point(r, level) and not r.intensity:
        raise RooflineError(f"op {r.name!r} does no arithmetic, so it has no place on a "
                            "roofline (plot its time with a breakdown chart)")
    if not has_point(r, level):
        raise RooflineError(f"op {r.name!r} has no {level} intensity to place on a roofline "
                            f"(it has: {', '.join(r.intensity)}); choose another level")
    return r.intensity[level], r.attainable_flops_per_s


def op_points(chip: Chip, results: Iterable[OpResult], level: str = "hbm",
              ) -> list[tuple[OpResult, float, float]]:
    """Each result with its (intensity on `level`, attainable FLOP/s); checks the chip."""
    out = []
    for r in results:
        if r.hardware != chip.id:
            raise RooflineError(f"op {r.name!r} was evaluated on {r.hardware!r}, not on "
                                f"{chip.id!r}")
        out.append((r, *_point(r, level)))
    return out


def roof_at(geo: RooflineGeometry, intensity: float) -> float:
    """Attainable FLOP/s at an intensity under the first dtype's roof and the axis level."""
    return min(geo.peak, intensity * geo.bandwidth_Bps)


# --- matplotlib ---------------------------------------------------------------------------


def _matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise RooflineError(f"plotting needs matplotlib: {INSTALL_HINT}") from None


def new_axes(figsize: tuple[float, float] = (8.0, 5.5)) -> Axes:
    """Axes on a new Figure with its own Agg canvas: no pyplot, no global state."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig.add_subplot()


def save_figure(fig_or_ax: Figure | Axes, path: str | Path) -> None:
    """Write a chart as PNG, SVG or PDF, chosen by the file's extension."""
    fmt = check_format(path)
    _matplotlib()
    from matplotlib.axes import Axes

    fig: Any = fig_or_ax.figure if isinstance(fig_or_ax, Axes) else fig_or_ax
    # no timestamps, so the same chart gives the same file
    metadata = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt, {})
    buf = io.BytesIO()  # drawn in full first: write_bytes replaces the file atomically
    fig.savefig(buf, format=fmt, dpi=150, metadata=metadata)
    write_bytes(path, buf.getvalue())


def check_format(path: str | Path) -> str:
    """The output format named by a path's extension; RooflineError for any other."""
    if str(path) == STDOUT:  # stdout takes the text format
        return "svg"
    ext = Path(path).suffix.lower().lstrip(".")
    if ext not in FORMATS:
        shown = f"'.{ext}'" if ext else "no extension"
        raise RooflineError(f"{path}: unknown output format {shown} (use .png, .svg or .pdf)")
    return ext


def _series(item: Estimate | OpResult, level: str) -> tuple[str, np.ndarray, np.ndarray, list[str]]:
    """Name, x, y and bounds of one op; an array-valued Estimate gives a whole sweep."""
    if isinstance(item, OpResult):
        x, y = _point(item, level)
        return item.name, np.array([x]), np.array([y]), [item.bound]
    results = _from_estimate(item)
    points = [_point(r, level) for r in results]
    return (item.cost.name or "op", np.array([p[0] for p in points]),
            np.array([p[1] for p in points]), [r.bound for r in results])


def plot_roofline(chip: Chip | str, estimates: Iterable[Estimate | OpResult] = (),
                  measured: Iterable[Measured] = (), ax: Axes | None = None,
                  dtypes: Sequence[str] | None = None, levels: Sequence[str] | None = None,
                  level: str = "hbm", title: str | None = None) -> Axes:
    """The roofline chart: a flat roof per compute dtype, a slanted roof per memory level and
    link, the ridge points, and the ops at (intensity on `level`, attainable FLOP/s).

    `measured` points are (name, intensity, achieved FLOP/s). Note that an op's intensity on
    `level` only compares with that level's roof; the other roofs show the chip's stack.
    """
    chip = load_chip(chip)
    estimates = list(estimates)
    for item in estimates:
        if item.hardware != chip.id:
            name = item.name if isinstance(item, OpResult) else item.cost.name
            raise RooflineError(f"op {name!r} was evaluated on {item.hardware!r}, not on "
                                f"{chip.id!r}")
    series = [_series(item, level) for item in estimates]
    measured = [(str(n), float(x), float(y)) for n, x, y in measured]
    points = [(float(x), float(y)) for _, xs, ys, _ in series for x, y in zip(xs, ys, strict=True)]
    geo = roofline_geometry(chip, dtypes or default_dtypes(chip, estimates), levels, level,
                            points + [(x, y) for _, x, y in measured])
    ax = ax if ax is not None else new_axes()
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*geo.xlim)
    ax.set_ylim(*geo.ylim)
    _regions(ax, geo)
    dashes = ("-", "--", ":", "-.")  # one line style per compute dtype
    for i, roof in enumerate(r for r in geo.roofs if r.kind == "compute"):
        ax.plot(roof.x, roof.y, color=bound_color("compute"), lw=2, ls=dashes[i % 4],
                label=_plain(roof.label), gid=f"roof:compute:{roof.dtype}")
    for roof in (r for r in geo.roofs if r.kind != "compute"):
        ax.plot(roof.x, roof.y, color=bound_color(roof.kind), lw=2 if roof.kind == level else 1.2,
                label=_plain(roof.label), gid=f"roof:{roof.kind}")
    ax.plot([r.intensity for r in geo.ridges], [r.flops_per_s for r in geo.ridges], ls="none",
            marker="o", ms=4, mfc="white", mec="black", label="ridge points", gid="ridges")
    for name, xs, ys, bounds in series:
        if len(xs) > 1:  # a sweep: join its points in order
            ax.plot(xs, ys, color="black", lw=0.8, gid=f"sweep:{name}")
        ax.scatter(xs, ys, s=40, c=[bound_color(b) for b in bounds], edgecolors="black",
                   zorder=3, gid=f"op:{name}")
        ax.annotate(_plain(name), (xs[-1], ys[-1]), xytext=(6, 6), textcoords="offset points",
                    fontsize="small", gid=f"label:{name}")
    for name, x, y in measured:
        share = y / roof_at(geo, x)
        ax.plot([x], [y], ls="none", marker="D", ms=7, mfc="none", mec="black", mew=1.5,
                gid=f"measured:{name}")
        ax.annotate(_plain(f"{name} (measured, {share:.0%} of roof)"), (x, y), xytext=(6, -12),
                    textcoords="offset points", fontsize="small", gid=f"label:{name}")
    ax.set_xlabel(f"arithmetic intensity (FLOP per byte of {level} traffic)")
    ax.set_ylabel("attainable FLOP/s")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: intensity_label(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_si(v, "FLOP/s")))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(title if title is not None else _plain(f"{chip.name}: roofline"))
    return ax


def _regions(ax: Axes, geo: RooflineGeometry) -> None:
    """Shade the memory-bound side of the axis level's ridge and name both sides."""
    ax.axvspan(geo.xlim[0], geo.boundary, color=bound_color(geo.level), alpha=0.07, lw=0,
               gid="region:memory-bound")
    ax.axvspan(geo.boundary, geo.xlim[1], color=bound_color("compute"), alpha=0.04, lw=0,
               gid="region:compute-bound")
    y = geo.ylim[1] / 1.6
    ax.text(geo.boundary / 1.3, y, f"memory-bound ({geo.level})", ha="right", va="top",
            fontsize="small", color=bound_color(geo.level), gid="text:memory-bound")
    ax.text(geo.boundary * 1.3, y, "compute-bound", ha="left", va="top", fontsize="small",
            color=bound_color("compute"), gid="text:compute-bound")
    ax.annotate(f"I* = {geo.boundary:.4g} FLOP/byte", (geo.boundary, geo.ylim[0]),
                xytext=(-4, 6), textcoords="offset points", rotation=90, ha="right",
                va="bottom", fontsize="small", color=bound_color(geo.level), gid="text:ridge")


def plot_sweep(x: Any, series: Mapping[str, Any], xlabel: str, ylabel: str,
               ax: Axes | None = None, logx: bool = True, logy: bool = False,
               hlines: Mapping[str, float] | None = None, title: str | None = None) -> Axes:
    """One line per configuration against a swept parameter; `hlines` are reference levels
    (a peak) drawn dashed."""
    xs = np.asarray(x, dtype=float)
    ax = ax if ax is not None else new_axes((8.0, 4.5))
    for label, y in series.items():
        ys = np.broadcast_to(np.asarray(y, dtype=float), xs.shape) if np.ndim(y) == 0 \
            else np.asarray(y, dtype=float)
        if ys.shape != xs.shape:
            raise RooflineError(f"series {label!r} has {ys.size} values for {xs.size} x values")
        ax.plot(xs, ys, lw=2, label=label, gid=f"series:{label}")
    for label, value in (hlines or {}).items():
        ax.axhline(value, color="black", ls="--", lw=1, alpha=0.6, label=label,
                   gid=f"hline:{label}")
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


SWEEP_METRICS = {
    "flops": "attainable FLOP/s",
    "time": "time lower bound (s)",
    "tokens": "tokens/s (batch / t_lower)",
}


def matmul_batch_sweep(hw: Chip | str = "v5e", sizes: Sequence[int] = (4096, 1024),
                       max_batch: int = 512, dtype: str = "bf16",
                       weight_dtype: str | None = "int8", metric: str = "flops",
                       ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Batch 1..max_batch against a metric for square [D, F = D] matmuls, one series per D.

    The defaults are seed 001 Problem 3: int8 weights and bf16 activations on TPU v5e with
    exact bytes (2BD + DF + 2BF), F = D = 4096 and 1024. One vectorized call per size.
    """
    if metric not in SWEEP_METRICS:
        raise RooflineError(f"unknown metric {metric!r} (allowed: {', '.join(SWEEP_METRICS)})")
    if not 1 <= max_batch <= 1_000_000:  # one point per batch size: a chart, not a sweep
        raise RooflineError(f"max_batch must be between 1 and 1000000, got {max_batch}")
    batch = np.arange(1, max_batch + 1)
    series = {}
    for d in sizes:
        est = evaluate(matmul(batch, d, d, dtype=dtype, weight_dtype=weight_dtype), hw)
        t = np.asarray(est.t_lower_s, dtype=float)
        series[f"F = D = {d}"] = {"flops": np.asarray(est.attainable_flops_per_s, dtype=float),
                                  "time": t, "tokens": batch / t}[metric]
    return batch, series


def plot_matmul_sweep(hw: Chip | str = "v5e", sizes: Sequence[int] = (4096, 1024),
                      max_batch: int = 512, dtype: str = "bf16",
                      weight_dtype: str | None = "int8", metric: str = "flops",
                      ax: Axes | None = None) -> Axes:
    """`matmul_batch_sweep` drawn; the defaults reproduce seed 001 Problem 3 in one call."""
    chip = load_chip(hw)
    batch, series = matmul_batch_sweep(chip, sizes, max_batch, dtype, weight_dtype, metric)
    compute = lookup_dtype(dtype).peak
    hlines = ({f"peak {compute} {format_si(chip.peak_flops(compute), 'FLOP/s')}":
               chip.peak_flops(compute)} if metric == "flops" else {})
    weights = weight_dtype or dtype
    ax = plot_sweep(batch, series, "batch B (tokens)", SWEEP_METRICS[metric], ax=ax,
                    logy=metric != "flops", hlines=hlines,
                    title=_plain(f"matmul, {weights} weights + {dtype} activations on "
                                 f"{chip.name}"))
    from matplotlib.ticker import FuncFormatter

    tick = {"flops": lambda v: format_si(v, "FLOP/s"), "time": format_time,
            "tokens": lambda v: format_si(v, "tok/s")}[metric]
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: tick(v)))
    return ax


def plot_breakdown(rows: Sequence[tuple[str, float, str]], ax: Axes | None = None,
                   title: str | None = None) -> Axes:
    """A horizontal bar per (name, time_s, bound) row, coloured by its bound, top to bottom."""
    rows = [(str(n), float(t), str(b)) for n, t, b in rows]
    for name, t, _ in rows:
        if not math.isfinite(t) or t < 0:
            raise RooflineError(f"row {name!r}: time must be a non-negative number, got {t}")
    ax = ax if ax is not None else new_axes((8.0, 1.5 + 0.4 * max(len(rows), 1)))
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    for i, (name, t, bound) in enumerate(rows):
        ax.barh(i, t, color=bound_color(bound), gid=f"bar:{name}")
        ax.text(t, i, f" {format_time(t)}", va="center", fontsize="small")
    ax.set_yticks(range(len(rows)), [_plain(name) for name, _, _ in rows])
    ax.invert_yaxis()  # first row on top, as in a table
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_time(v)))
    ax.set_xlabel("time (lower bound)")
    ax.margins(x=0.15)
    bounds = list(dict.fromkeys(b for _, _, b in rows))
    ax.legend(handles=[Patch(color=bound_color(b), label=_plain(b)) for b in bounds],
              title="bound", fontsize="small", loc="lower right")
    if title:
        ax.set_title(title)
    return ax


def plot_memory(items: Mapping[str, float], capacity_bytes: float, ax: Axes | None = None,
                title: str | None = None) -> Axes:
    """The memory footprint as one stacked bar (weights, KV cache, ...) against capacity."""
    for name, size in items.items():
        if not math.isfinite(float(size)) or float(size) < 0:
            raise RooflineError(f"{name!r}: bytes must be a non-negative number, got {size}")
    if not capacity_bytes > 0:
        raise RooflineError(f"capacity must be positive, got {capacity_bytes}")
    ax = ax if ax is not None else new_axes((8.0, 2.5))
    from matplotlib.ticker import FuncFormatter

    left = 0.0
    for i, (name, size) in enumerate(items.items()):
        ax.barh(0, float(size), left=left, color=f"C{i % 10}",
                label=_plain(f"{name} {format_bytes(float(size))}"), gid=f"segment:{name}")
        left += float(size)
    ax.axvline(capacity_bytes, color="black", ls="--", lw=1.5,
               label=f"capacity {format_bytes(capacity_bytes)}", gid="capacity")
    ax.set_yticks([])
    ax.set_ylim(-0.6, 1.4)  # room above the bar for the legend
    ax.set_xlim(0, max(left, capacity_bytes) * 1.05)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(v)))
    ax.legend(fontsize="small", loc="upper left", ncol=4)
    share = left / capacity_bytes
    verdict = "fits" if left <= capacity_bytes else "does not fit"
    ax.set_title(title or f"memory {format_bytes(left)} of {format_bytes(capacity_bytes)} "
                 f"({share:.0%}): {verdict}")
    return ax


def plot_model(analysis: Any, top: int = 20, title: str | None = None) -> Figure:
    """A model step: the `top` ops by time (bars coloured by bound) above the memory
    footprint against HBM capacity. Takes a scalar ModelAnalysis."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if np.ndim(analysis.t_lower_s):
        raise RooflineError("plot_model takes one configuration, not a sweep")
    ops = sorted(analysis.ops, key=lambda op: -float(op.t_lower_s))[:top]
    rows = [(f"{op.name} ({op.group})" if op.group != "model" else op.name,
             float(op.t_lower_s), str(op.bound)) for op in ops]
    fig = Figure(figsize=(9.0, 2.5 + 0.35 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)
    bars, memory = fig.subplots(2, 1, height_ratios=[max(len(rows), 1), 3])
    p = analysis.phase
    plot_breakdown(rows, ax=bars, title=title or (
        f"{analysis.model} on {analysis.hardware}, {p.kind} batch {p.batch}: step >= "
        f"{format_time(float(analysis.t_lower_s))}, {analysis.bound}-bound"))
    m = analysis.memory
    items = {"weights": m.weights_bytes, "KV cache": float(m.kv_cache_bytes),
             "activations": float(m.activations_bytes)}
    if m.optimizer_bytes:
        items["optimizer"] = m.optimizer_bytes
    plot_memory(items, m.capacity_bytes, ax=memory)
    return fig


def plot_model_sweep(result: Any, ax: Axes | None = None) -> Axes:
    """Tokens/s against batch for every configuration of a model sweep, at its shortest
    length; points that do not fit in memory are left out (gaps in the lines)."""
    c = result.columns
    shortest = c["length"].min()
    keys = ("hardware", "tp", "pp", "dp", "ep", "weight_dtype", "kv_dtype")
    at = c["length"] == shortest
    shown = [k for k in keys if k in c and (k == "hardware" or len(np.unique(c[k])) > 1)]
    labels = np.array([" ".join(str(c[k][i]) if k == "hardware" else f"{k} {c[k][i]}"
                                for k in shown) for i in range(len(c["length"]))])
    series: dict[str, Any] = {}
    xs: dict[str, Any] = {}
    for label in dict.fromkeys(labels[at]):
        pick = at & (labels == label)
        order = np.argsort(c["batch"][pick])
        xs[label] = c["batch"][pick][order]
        series[label] = np.where(c["fits"][pick][order], c["tokens_per_s"][pick][order], np.nan)
    x = next(iter(xs.values()))
    if any(len(v) != len(x) or np.any(v != x) for v in xs.values()):
        raise RooflineError("plot_model_sweep needs the same batch axis in every configuration")
    return plot_sweep(x, series, "batch (sequences)", "tokens/s (upper bound)", ax=ax, logx=True,
                      logy=True, title=f"{result.phase}, length {shortest:g}: throughput "
                      "bound (gaps: does not fit)")
