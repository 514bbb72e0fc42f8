"""Charts: the roofline (a stack of roofs), sweeps, time breakdowns and memory footprints.

matplotlib is an optional extra (`pip install 'roofline[plot]'`), imported inside the
functions that draw, so `import roofline.plot` is cheap and works without it. Each chart
draws on the Axes it is given, or on a new `Figure` it makes itself (never through pyplot,
so no global state changes), and returns the Axes.

The inputs are plain: Estimates, or `OpPoint` records (one op as scalars, also read from
the JSON `roofline op ... --json` prints). The geometry (roofs, ridges, limits) comes from
`render.geometry`, which the HTML report's SVG draws from too; this module only draws.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import dtype as lookup_dtype
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .files import STDOUT, write_bytes
from .hardware import Chip, load_chip
from .ops import matmul
from .plot_labels import label_points
from .render.geometry import (
    Measured,
    OpPoint,
    RooflineGeometry,
    bound_color,
    check_chartable,
    default_dtypes,
    estimate_points,
    intensity_label,
    point_xy,
    roof_at,
    roofline_geometry,
)
from .render.labels import distinct
from .units import format_bytes, format_si, format_time

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "pip install 'roofline[plot]'"
FORMATS = ("png", "svg", "pdf")


def _plain(text: str) -> str:
    """Data (an op or chip name) as literal text: matplotlib reads $...$ as math."""
    return text.replace("$", r"\$")


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


def _series(item: Estimate | OpPoint, level: str) -> tuple[str, np.ndarray, np.ndarray, list[str]]:
    """Name, x, y and bounds of one op; an array-valued Estimate gives a whole sweep."""
    if isinstance(item, OpPoint):
        x, y = point_xy(item, level)
        return item.name, np.array([x]), np.array([y]), [item.bound]
    results = estimate_points(item)
    points = [point_xy(r, level) for r in results]
    return (item.cost.name or "op", np.array([p[0] for p in points]),
            np.array([p[1] for p in points]), [r.bound for r in results])


def plot_roofline(hw: Chip | str, estimates: Iterable[Estimate | OpPoint] = (),
                  measured: Iterable[Measured] = (), ax: Axes | None = None,
                  dtypes: Sequence[str] | None = None, levels: Sequence[str] | None = None,
                  level: str = "hbm", title: str | None = None) -> Axes:
    """The roofline chart: a flat roof per compute dtype, a slanted roof per memory level and
    link, the ridge points, and the ops at (intensity on `level`, attainable FLOP/s).

    `measured` points are (name, intensity, achieved FLOP/s). Note that an op's intensity on
    `level` only compares with that level's roof; the other roofs show the chip's stack.
    """
    chip = load_chip(hw)
    estimates = list(estimates)
    for item in estimates:
        if item.hardware != chip.id:
            name = item.name if isinstance(item, OpPoint) else item.cost.name
            raise RooflineError(f"op {name!r} was evaluated on {item.hardware!r}, not on "
                                f"{chip.id!r}")
    series = [_series(item, level) for item in estimates]
    names = distinct([name for name, *_ in series])  # two ops of one name: (2), (3), ...
    series = [(n, xs, ys, bounds) for n, (_, xs, ys, bounds) in zip(names, series, strict=True)]
    measured = [(str(n), float(x), float(y)) for n, x, y in measured]
    for name, x, y in measured:
        check_chartable(f"measured point {name!r}", x, y)
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
    for name, x, y in measured:
        ax.plot([x], [y], ls="none", marker="D", ms=7, mfc="none", mec="black", mew=1.5,
                gid=f"measured:{name}")
    ax.set_xlabel(f"arithmetic intensity (FLOP per byte of {level} traffic)")
    ax.set_ylabel("attainable FLOP/s")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: intensity_label(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_si(v, "FLOP/s")))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_title(_plain(title if title is not None else f"{chip.name}: roofline"))
    labelled = [(_plain(name), xs[-1], ys[-1], f"label:{name}") for name, xs, ys, _ in series]
    labelled += [(_plain(f"{name} (measured, {y / roof_at(geo, x):.0%} of roof)"), x, y,
                  f"label:{name}") for name, x, y in measured]
    label_points(ax, labelled, points + [(x, y) for _, x, y in measured],
                 [ax.get_legend(), *(t for t in ax.texts if t.get_gid() in CAPTIONS)])
    return ax


CAPTIONS = ("text:memory-bound", "text:compute-bound", "text:ridge")


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
    columns = {}
    for label, y in series.items():
        ys = np.broadcast_to(np.asarray(y, dtype=float), xs.shape) if np.ndim(y) == 0 \
            else np.asarray(y, dtype=float)
        if ys.shape != xs.shape:
            raise RooflineError(f"series {label!r} has {ys.size} values for {xs.size} x values")
        columns[label] = ys
    for axis, log, values in (("x", logx, [xs]), ("y", logy, list(columns.values()))):
        if log and not any(np.any(np.isfinite(v) & (v > 0)) for v in values):
            raise RooflineError(f"a log {axis} axis needs a positive {axis} value; every one is "
                                "zero, negative or missing")
    ax = ax if ax is not None else new_axes((8.0, 4.5))
    for label, ys in columns.items():
        ax.plot(xs, ys, lw=2, label=_plain(label), gid=f"series:{label}")
    for label, value in (hlines or {}).items():
        ax.axhline(value, color="black", ls="--", lw=1, alpha=0.6, label=_plain(label),
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
        ax.set_title(_plain(title))
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

    The defaults are the JAX Scaling Book's Question 3 (https://jax-ml.github.io/scaling-book/roofline/):
    int8 weights and bf16 activations on TPU v5e with exact bytes (2BD + DF + 2BF),
    F = D = 4096 and 1024. One vectorized call per size.
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
    """`matmul_batch_sweep` drawn; the defaults reproduce the Scaling Book's Question 3."""
    chip = load_chip(hw)
    batch, series = matmul_batch_sweep(chip, sizes, max_batch, dtype, weight_dtype, metric)
    compute = lookup_dtype(dtype).peak
    hlines = ({f"peak {compute} {format_si(chip.peak_flops(compute), 'FLOP/s')}":
               chip.peak_flops(compute)} if metric == "flops" else {})
    weights = weight_dtype or dtype
    ax = plot_sweep(batch, series, "batch B (tokens)", SWEEP_METRICS[metric], ax=ax,
                    logy=metric != "flops", hlines=hlines,
                    title=f"matmul, {weights} weights + {dtype} activations on {chip.name}")
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
    ax.margins(x=0.2)  # room for the last value past the longest bar
    bounds = list(dict.fromkeys(b for _, _, b in rows))
    ax.legend(handles=[Patch(color=bound_color(b), label=_plain(b)) for b in bounds],
              title="bound", fontsize="small", loc="upper left",
              bbox_to_anchor=(1.01, 1.0))  # beside the bars: over no bar nor value
    if title:
        _title(ax, title)
    return ax


def _title(ax: Axes, title: str) -> None:
    """A title wrapped at spaces to fit the figure (constrained layout never shrinks a
    title: one wider than the room on either side of its axes' centre is cut off)."""
    ax.set_title(_plain(title))
    fit_titles(ax.figure)


def fit_titles(fig: Any) -> None:
    """Re-wrap each axes' title that the laid-out figure would cut off."""
    import textwrap

    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    for ax in fig.axes:
        text = ax.title.get_text()
        box = ax.title.get_window_extent(renderer)
        if not text or (box.x0 >= fig.bbox.x0 and box.x1 <= fig.bbox.x1):
            continue
        centre = (box.x0 + box.x1) / 2
        room = 2 * min(centre - fig.bbox.x0, fig.bbox.x1 - centre) * 0.95
        longest = max(len(line) for line in text.splitlines())
        ax.title.set_text(textwrap.fill(" ".join(text.split()),
                                        max(12, int(longest * room / box.width))))
    fig.draw_without_rendering()


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
    ax.legend(fontsize="small", loc="upper left", ncol=2)  # 4 wide overran the figure
    share = left / capacity_bytes
    verdict = "fits" if left <= capacity_bytes else "does not fit"
    _title(ax, title or f"memory {format_bytes(left)} of {format_bytes(capacity_bytes)} "
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
        f"{analysis.model} on {analysis.hardware}, {p.kind} batch {p.batch}: step lower "
        f"bound {format_time(float(analysis.t_lower_s))}, {analysis.bound}-bound"))
    m = analysis.memory
    items = {"weights": m.weights_bytes, "KV cache": float(m.kv_cache_bytes),
             "activations": float(m.activations_bytes)}
    if m.optimizer_bytes:
        items["optimizer"] = m.optimizer_bytes
    plot_memory(items, m.capacity_bytes, ax=memory)
    fit_titles(fig)  # laid out again with both charts in place
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
    fits = any(np.any(np.isfinite(v) & (v > 0)) for v in series.values())
    ax = plot_sweep(x, series, "batch (sequences)", "tokens/s (upper bound)", ax=ax, logx=True,
                    logy=fits, title=f"{result.phase}, length {shortest:g}: throughput bound "
                    f"({'gaps: does not fit' if fits else 'nothing fits in memory'})")
    if not fits:  # no line to draw: say so where the lines would be
        ax.set_yticks([])
        ax.set_xlim(x[0] / 1.25, x[-1] * 1.25)  # no data to scale to: the batches swept
        ax.text(0.5, 0.5, "no configuration fits in memory", transform=ax.transAxes,
                ha="center", va="center", gid="text:nothing-fits")
    return ax
