"""Reports: one standalone HTML page, and the same tables as Markdown and CSV.

The HTML page is a single file that fetches nothing when opened: the roofline is inline
SVG drawn from the same geometry as the matplotlib chart, the hover tooltips are a few
lines of inline vanilla JS, and a Content-Security-Policy that admits only that script and
that style (by hash) turns "no network" into a rule the browser enforces.
Every name (chip, op, level, source) is data: it goes through `html.escape`, and the
tooltip text is set with `textContent`, never as markup.

>>> import roofline as rl
>>> est = rl.evaluate(rl.matmul(128, 8192, 8192, name="<b>gemm</b>"), "h100")
>>> "&lt;b&gt;gemm&lt;/b&gt;" in html_report(rl.load_chip("h100"), [est])
True
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import math
from collections.abc import Iterable, Sequence

from .evaluate import Estimate
from .hardware import Chip, load_chip
from .plot import (
    Measured,
    OpResult,
    Roof,
    RooflineGeometry,
    bound_color,
    chip_resources,
    default_dtypes,
    has_point,
    intensity_label,
    op_points,
    op_results,
    roof_at,
    roofline_geometry,
)
from .report import bound_kind
from .units import format_bytes, format_si, format_time

Items = Iterable[Estimate | OpResult]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _attr(text: str) -> str:
    """An attribute value whose line breaks survive XML parsers too (they fold raw ones)."""
    return _e(text).replace("\n", "&#10;")


def _si(value: float, unit: str = "") -> str:
    return "-" if not math.isfinite(value) else format_si(value, unit)


# --- tables, shared by HTML and Markdown --------------------------------------------------

OPS_HEADERS = ["op", "bound", "t_lower", "t_upper", "FLOPs", "intensity vs ridge (FLOP/byte)",
               "attainable", "of peak"]


def _intensities(r: OpResult) -> str:
    parts = [f"{lv} {x:.4g} (ridge {r.ridge.get(lv, math.nan):.4g})"
             for lv, x in r.intensity.items() if math.isfinite(x)]
    return "; ".join(parts) or "-"


def _op_row(r: OpResult) -> list[str]:
    share = (r.attainable_flops_per_s / r.peak_flops_per_s if r.peak_flops_per_s > 0
             else math.nan)
    return [r.name, f"{r.bound} ({bound_kind(r.bound)})", format_time(r.t_lower_s),
            format_time(r.t_upper_s), _si(r.flops), _intensities(r),
            _si(r.attainable_flops_per_s, "FLOP/s"),
            f"{share:.1%}" if math.isfinite(share) else "-"]


def _measured_rows(geo: RooflineGeometry, measured: Sequence[Measured]) -> list[list[str]]:
    return [[name, f"{x:.4g}", format_si(y, "FLOP/s"), f"{y / roof_at(geo, x):.0%}"]
            for name, x, y in measured]


MEASURED_HEADERS = ["measured", "intensity (FLOP/byte)", "achieved", "of roof"]


def _hardware_tables(chip: Chip) -> list[tuple[str, list[str], list[list[str]]]]:
    """(caption, headers, rows) for peaks, memory levels, links and ridge points."""

    def src(text: str, estimated: bool = False) -> str:
        return text + (" (estimate)" if estimated else "")

    def capacity(cap: float | None, unit: float | None, units: int | None) -> str:
        if cap:
            return format_bytes(cap)
        return f"{format_bytes(unit)} × {units}" if unit and units else "-"

    tables = [
        ("dense peaks", ["dtype", "FLOP/s", "source"],
         [[p.dtype, format_si(p.flops_per_s, "FLOP/s"), src(p.source, p.estimated)]
          for p in chip.peaks.values()]),
        ("memory levels", ["level", "technology", "capacity", "bandwidth", "source"],
         [[m.name, m.technology, capacity(m.capacity_bytes, m.unit_capacity_bytes, m.units),
           format_si(m.bandwidth_Bps, "B/s"), src(m.source, m.estimated)]
          for m in chip.memory]),
    ]
    if chip.links:
        tables.append(("links (bandwidth per direction)",
                       ["link", "technology", "bandwidth", "alpha", "domain", "source"],
                       [[lk.name, lk.technology, format_si(lk.bandwidth_Bps, "B/s"),
                         format_time(lk.latency_s), str(lk.domain_size or "-"),
                         "; ".join(s for s in (lk.source, lk.latency_source) if s)]
                        for lk in chip.links.values()]))
    resources = chip_resources(chip)
    tables.append(("ridge points I* = peak / bandwidth (FLOP/byte)", ["dtype", *resources],
                   [[dt, *(f"{chip.ridge(dt, r):.4g}" for r in resources)]
                    for dt in chip.peaks]))
    return tables


def _derivation(r: OpResult) -> list[str]:
    times = [f"t_{res} = {format_time(t)}" for res, t in r.time_s.items()]
    return [*r.derivation, *times,
            f"t_lower = max = {format_time(r.t_lower_s)} ({r.bound}: {bound_kind(r.bound)}); "
            f"t_upper = sum = {format_time(r.t_upper_s)}"]


# --- HTML ---------------------------------------------------------------------------------


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


W, H = 760, 480  # SVG size in px
LEFT, RIGHT, TOP, BOTTOM = 100, 24, 16, 52  # plot-area margins


class _LogAxis:
    """Maps a value on a log axis [lo, hi] to a pixel between a and b."""

    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        self.lo, self.span, self.a, self.b = math.log10(lo), math.log10(hi / lo), a, b

    def __call__(self, v: float) -> float:
        return round(self.a + (math.log10(v) - self.lo) / self.span * (self.b - self.a), 2)

    def decades(self) -> list[float]:
        first = math.ceil(self.lo - 1e-9)
        return [10.0 ** k for k in range(first, math.floor(self.lo + self.span + 1e-9) + 1)]


def roofline_svg(chip: Chip, results: Sequence[OpResult], measured: Sequence[Measured] = (),
                 level: str = "hbm", dtypes: Sequence[str] | None = None,
                 levels: Sequence[str] | None = None) -> str:
    """The roofline as inline SVG; ops without a `level` intensity (collectives) are left out.

    Each op is a `.point` element whose `data-tip` holds its tooltip text.
    """
    placed = op_points(chip, [r for r in results if has_point(r, level)], level)
    geo = roofline_geometry(chip, dtypes or default_dtypes(chip, results), levels, level,
                            [(x, y) for _, x, y in placed] + [(x, y) for _, x, y in measured])
    sx = _LogAxis(*geo.xlim, LEFT, W - RIGHT)
    sy = _LogAxis(*geo.ylim, H - BOTTOM, TOP)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
             f'height="{H}" role="img" aria-labelledby="chart-title">',
             f'<title id="chart-title">{_e(f"Roofline of {chip.name}")}</title>']
    parts += _svg_frame(geo, sx, sy)
    parts += _svg_roofs(geo, sx, sy)
    for r, x, y in placed:
        tip = (f"{r.name}\nintensity {x:.4g} FLOP/byte ({level})\n"
               f"attainable {format_si(y, 'FLOP/s')}\ntime {format_time(r.t_lower_s)} "
               f"(lower bound)\nbound {r.bound} ({bound_kind(r.bound)})")
        parts.append(f'<circle class="point op" cx="{sx(x)}" cy="{sy(y)}" r="6" '
                     f'fill="{bound_color(r.bound)}" stroke="black" tabindex="0" '
                     f'data-name="{_e(r.name)}" data-tip="{_attr(tip)}" '
                     f'aria-label="{_attr(tip)}"/>')
        parts.append(_label(sx(x), sy(y) - 8, r.name))
    for name, x, y in measured:
        cx, cy = sx(x), sy(y)
        tip = (f"{name} (measured)\nintensity {x:.4g} FLOP/byte ({level})\n"
               f"achieved {format_si(y, 'FLOP/s')}\n{y / roof_at(geo, x):.0%} of the roof")
        parts.append(f'<path class="point measured" d="M{cx},{cy - 7}L{cx + 7},{cy}L{cx},'
                     f'{cy + 7}L{cx - 7},{cy}Z" fill="white" stroke="black" stroke-width="2" '
                     f'tabindex="0" data-name="{_e(name)}" data-tip="{_attr(tip)}" '
                     f'aria-label="{_attr(tip)}"/>')
        parts.append(_label(cx, cy + 16, f"{name} (measured)"))
    parts += _svg_legend(geo)
    parts.append("</svg>")
    return "\n".join(parts)


def _label(x: float, y: float, text: str) -> str:
    """A point's name beside it, on the side with room (left of points near the right edge)."""
    right = x > 0.7 * W
    anchor = ' text-anchor="end"' if right else ""
    return (f'<text class="point-label" x="{x - 9 if right else x + 9}" y="{y}"{anchor}>'
            f"{_e(text)}</text>")


def _svg_frame(geo: RooflineGeometry, sx: _LogAxis, sy: _LogAxis) -> list[str]:
    """Shaded regions, decade grid and ticks, axis titles."""
    x0, x1, y0, y1, xb = sx(geo.xlim[0]), sx(geo.xlim[1]), sy(geo.ylim[0]), sy(geo.ylim[1]), \
        sx(geo.boundary)
    out = [f'<rect class="region" data-region="memory-bound" x="{x0}" y="{y1}" '
           f'width="{xb - x0}" height="{y0 - y1}" fill="{bound_color(geo.level)}" '
           f'fill-opacity="0.08"/>',
           f'<rect class="region" data-region="compute-bound" x="{xb}" y="{y1}" '
           f'width="{x1 - xb}" height="{y0 - y1}" fill="{bound_color("compute")}" '
           f'fill-opacity="0.05"/>']
    for v in sx.decades():
        out.append(f'<line class="grid" x1="{sx(v)}" y1="{y1}" x2="{sx(v)}" y2="{y0}" '
                   f'stroke="#ccc"/><text class="tick" x="{sx(v)}" y="{y0 + 16}" '
                   f'text-anchor="middle">{intensity_label(v)}</text>')
    for v in sy.decades():
        out.append(f'<line class="grid" x1="{x0}" y1="{sy(v)}" x2="{x1}" y2="{sy(v)}" '
                   f'stroke="#ccc"/><text class="tick" x="{x0 - 6}" y="{sy(v) + 4}" '
                   f'text-anchor="end">{_e(format_si(v, "FLOP/s"))}</text>')
    out += [f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" '
            f'stroke="#555"/>',
            f'<text class="axis-title" x="{(x0 + x1) / 2}" y="{H - 10}" text-anchor="middle">'
            f"arithmetic intensity (FLOP per byte of {_e(geo.level)} traffic)</text>",
            f'<text class="axis-title" transform="rotate(-90)" x="{-(y0 + y1) / 2}" y="14" '
            f'text-anchor="middle">attainable FLOP/s</text>',
            f'<text class="region-label" x="{xb - 6}" y="{y1 + 16}" text-anchor="end" '
            f'fill="{bound_color(geo.level)}">memory-bound ({_e(geo.level)})</text>',
            f'<text class="region-label" x="{xb + 6}" y="{y1 + 16}" '
            f'fill="{bound_color("compute")}">compute-bound</text>',
            f'<text class="ridge-label" x="{xb - 4}" y="{y0 - 6}" text-anchor="end" '
            f'fill="{bound_color(geo.level)}">I* = {geo.boundary:.4g}</text>']
    return out


def _svg_roofs(geo: RooflineGeometry, sx: _LogAxis, sy: _LogAxis) -> list[str]:
    out = []
    for roof in geo.roofs:
        width = 2.5 if roof.kind in ("compute", geo.level) else 1.5
        out.append(f'<polyline class="roof" data-kind="{_e(roof.kind)}" '
                   f'points="{sx(roof.x[0])},{sy(roof.y[0])} {sx(roof.x[1])},{sy(roof.y[1])}" '
                   f'fill="none" stroke="{bound_color(roof.kind)}" stroke-width="{width}"'
                   f"{_dash(geo, roof)}><title>{_e(roof.label)}</title></polyline>")
    for r in geo.ridges:
        out.append(f'<circle class="ridge" cx="{sx(r.intensity)}" cy="{sy(r.flops_per_s)}" '
                   f'r="3.5" fill="white" stroke="black"><title>'
                   f"{_e(f'ridge {r.dtype} / {r.level}: I* = {r.intensity:.4g} FLOP/byte')}"
                   f"</title></circle>")
    return out


def _svg_legend(geo: RooflineGeometry) -> list[str]:
    x, y = W - RIGHT - 190, H - BOTTOM - 18 * len(geo.roofs) - 10
    out = [f'<rect class="legend" x="{x - 8}" y="{y - 14}" width="190" '
           f'height="{18 * len(geo.roofs) + 8}" fill="white" fill-opacity="0.9" stroke="#ccc"/>']
    for i, roof in enumerate(geo.roofs):
        yy = y + 18 * i
        out.append(f'<line x1="{x}" y1="{yy - 4}" x2="{x + 24}" y2="{yy - 4}" '
                   f'stroke="{bound_color(roof.kind)}" stroke-width="2.5"{_dash(geo, roof)}/>'
                   f'<text x="{x + 30}" y="{yy}">{_e(roof.label)}</text>')
    return out


def _dash(geo: RooflineGeometry, roof: Roof) -> str:
    """A dash pattern per compute dtype (the first solid), as an SVG attribute."""
    if roof.kind != "compute":
        return ""
    compute = [r.dtype for r in geo.roofs if r.kind == "compute"]
    dash = ["", "8 4", "2 3", "8 3 2 3"][compute.index(roof.dtype) % 4]
    return f' stroke-dasharray="{dash}"' if dash else ""


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1040px;
       padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
caption { text-align: left; font-weight: 600; padding: 0.25rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left;
         vertical-align: top; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; padding: 0.75rem; overflow-x: auto; font-size: 0.85rem; }
.note { color: #555; font-size: 0.9rem; }
#chart { position: relative; display: inline-block; max-width: 100%; }
#chart svg { max-width: 100%; height: auto; }
#chart svg text { font-size: 11px; }
#chart svg text:not([fill]) { fill: #333; }
#chart .point { cursor: pointer; }
#chart .point:hover, #chart .point:focus { stroke-width: 3; outline: none; }
#tooltip { position: absolute; background: #222; color: #fff; padding: 0.4rem 0.6rem;
           border-radius: 4px; font-size: 0.8rem; white-space: pre; pointer-events: none; }
#tooltip[hidden] { display: none; }
"""

# Hover (or keyboard focus) on a point shows its data-tip; textContent keeps it plain text.
_JS = """
"use strict";
(function () {
  var chart = document.getElementById("chart");
  var tip = document.getElementById("tooltip");
  function show(point) {
    tip.textContent = point.getAttribute("data-tip");
    tip.hidden = false;
    var p = point.getBoundingClientRect(), c = chart.getBoundingClientRect();
    var left = p.right - c.left + 8;
    if (left + tip.offsetWidth > chart.clientWidth) {
      left = p.left - c.left - tip.offsetWidth - 8;
    }
    tip.style.left = left + "px";
    tip.style.top = (p.top - c.top) + "px";
  }
  function hide() { tip.hidden = true; }
  chart.querySelectorAll(".point").forEach(function (point) {
    point.addEventListener("mouseover", function () { show(point); });
    point.addEventListener("focus", function () { show(point); });
    point.addEventListener("mouseout", hide);
    point.addEventListener("blur", hide);
  });
})();
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


# Nothing may load: no default source, only this script and this style (by hash).
CSP = (f"default-src 'none'; script-src '{_sha256(_JS)}'; style-src '{_sha256(_CSS)}'; "
       "img-src data:; base-uri 'none'; form-action 'none'")


def html_report(chip: Chip | str, estimates: Items, title: str = "roofline report",
                measured: Iterable[Measured] = (), level: str = "hbm",
                summary: Sequence[str] = ()) -> str:
    """One self-contained HTML page: the interactive roofline, the ops table, the hardware
    with its sources, and each op's derivation; `summary` lines (plain text, escaped) open
    the page, e.g. a model step's totals and memory footprint."""
    from . import __version__  # here, not at import: roofline/__init__ may import this module

    chip = load_chip(chip)
    results = op_results(estimates)
    measured = [(str(n), float(x), float(y)) for n, x, y in measured]
    svg = roofline_svg(chip, results, measured, level)
    geo = roofline_geometry(chip, default_dtypes(chip, results), None, level)
    left_out = [r.name for r in results if not has_point(r, level)]
    note = ("Not on the chart (no FLOPs per " + _e(level) + " byte): "
            + _e(", ".join(left_out)) + ". ") if left_out else ""
    body = [
        f"<header><h1>{_e(title)}</h1>",
        f'<p class="note">{_e(chip.name)} ({_e(chip.id)}) · {len(results)} op(s) · '
        f"roofline {_e(__version__)}. Times are lower bounds (perfect overlap); peaks are "
        "dense; link bandwidth is per direction.</p></header>",
        *([f'<section id="summary"><h2>Summary</h2><pre>{_e(chr(10).join(summary))}</pre>'
           "</section>"] if summary else []),
        '<section id="roofline"><h2>Roofline</h2>',
        f'<div id="chart">{svg}<div id="tooltip" role="tooltip" hidden></div></div>',
        f'<p class="note">{note}Hover over or tab to a point for its numbers. The x axis is '
        f"the intensity on {_e(level)}; the other slanted roofs show the chip's other memory "
        "levels and links.</p></section>",
        '<section id="ops"><h2>Ops</h2>', _html_table(OPS_HEADERS, [_op_row(r) for r in results]),
    ]
    if measured:
        body.append(_html_table(MEASURED_HEADERS, _measured_rows(geo, measured)))
    body.append("</section>")
    body.append(f'<section id="hardware"><h2>Hardware: {_e(chip.name)} ({_e(chip.id)})</h2>')
    body += [_html_table(h, rows, cap) for cap, h, rows in _hardware_tables(chip)]
    if chip.notes:
        body.append(f'<p class="note">{_e(chip.notes)}</p>')
    body.append('</section><section id="derivations"><h2>Derivations</h2>')
    for r in results:
        derivation = "\n".join(_derivation(r))
        body.append(f"<h3>{_e(r.name)}</h3><pre>{_e(derivation)}</pre>")
    body.append("</section>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        '<link rel="icon" href="data:,">',  # or the browser asks the server for /favicon.ico
        f"<style>{_CSS}</style>", "</head>", "<body>", *body,
        f"<script>{_JS}</script>", "</body>", "</html>", ""])


def estimate_html(est: Estimate) -> str:
    """An HTML fragment for notebooks (`_repr_html_`): per-resource table, bound, derivation.
    An array-valued Estimate shows one row per element (the first 50)."""
    results = op_results([est])
    if len(results) > 1:
        more = len(results) - 50
        tail = f'<p class="note">… and {more} more</p>' if more > 0 else ""
        return (f"<div>{_html_table(OPS_HEADERS, [_op_row(r) for r in results[:50]])}"
                f"{tail}</div>")
    (r,) = results
    rows = [[res, format_time(t), f"{t / r.t_lower_s:.1%}" if r.t_lower_s > 0 else "-",
             format_bytes(r.bytes[res]) if res in r.bytes else "-",
             f"{r.intensity[res]:.4g}" if res in r.intensity else "-",
             f"{r.ridge[res]:.4g}" if res in r.ridge else "-"]
            for res, t in r.time_s.items()]
    caption = f"{r.name} on {r.hardware}: bound by {r.bound} ({bound_kind(r.bound)})"
    summary = (f"t_lower {format_time(r.t_lower_s)} · t_upper {format_time(r.t_upper_s)} · "
               f"attainable {_si(r.attainable_flops_per_s, 'FLOP/s')} of peak "
               f"{_si(r.peak_flops_per_s, 'FLOP/s')}")
    headers = ["resource", "time", "of bound", "bytes", "FLOP/byte", "ridge"]
    derivation = "\n".join(_derivation(r))
    return (f"<div>{_html_table(headers, rows, caption)}<p>{_e(summary)}</p>"
            f"<details><summary>derivation</summary><pre>{_e(derivation)}</pre></details></div>")


# --- Markdown and CSV ---------------------------------------------------------------------


def _md_cell(text: str) -> str:
    # Markdown renders inline HTML, so names are escaped here too; | would end the cell.
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; every cell escaped (names are data)."""
    lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def estimates_markdown(estimates: Items) -> str:
    """The ops table as a Markdown (GFM) table."""
    return markdown_table(OPS_HEADERS, [_op_row(r) for r in op_results(estimates)])


def markdown_report(chip: Chip | str, estimates: Items, title: str = "roofline report",
                    measured: Iterable[Measured] = (), level: str = "hbm") -> str:
    """The HTML report's tables and derivations as Markdown (no chart)."""
    chip = load_chip(chip)
    results = op_results(estimates)
    measured = [(str(n), float(x), float(y)) for n, x, y in measured]
    out = [f"# {_md_cell(title)}", "", f"{_md_cell(chip.name)} ({_md_cell(chip.id)}). Times "
           "are lower bounds (perfect overlap); peaks are dense; link bandwidth is per "
           "direction.", "", "## Ops", "", estimates_markdown(results), ""]
    if measured:
        geo = roofline_geometry(chip, default_dtypes(chip, results), None, level)
        out += [markdown_table(MEASURED_HEADERS, _measured_rows(geo, measured)), ""]
    out += [f"## Hardware: {_md_cell(chip.name)}", ""]
    for caption, headers, rows in _hardware_tables(chip):
        out += [f"**{_md_cell(caption)}**", "", markdown_table(headers, rows), ""]
    out += ["## Derivations", ""]
    for r in results:
        out += [f"### {_md_cell(r.name)}", "", "```text", *_derivation(r), "```", ""]
    return "\n".join(out)


def estimates_csv(estimates: Items) -> str:
    """The ops table as CSV in SI units (seconds, FLOP, FLOP/s, FLOP/byte); empty = none."""
    results = op_results(estimates)
    levels = list(dict.fromkeys(k for r in results for k in r.intensity))
    resources = list(dict.fromkeys(k for r in results for k in r.time_s))
    header = ["name", "hardware", "bound", "t_lower_s", "t_upper_s", "flops",
              "attainable_flops_per_s", "peak_flops_per_s",
              *(f"intensity_{lv}" for lv in levels), *(f"ridge_{lv}" for lv in levels),
              *(f"time_{res}_s" for res in resources)]

    def num(v: float | None) -> str:
        return "" if v is None or not math.isfinite(v) else repr(float(v))

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for r in results:
        writer.writerow([r.name, r.hardware, r.bound, num(r.t_lower_s), num(r.t_upper_s),
                         num(r.flops), num(r.attainable_flops_per_s), num(r.peak_flops_per_s),
                         *(num(r.intensity.get(lv)) for lv in levels),
                         *(num(r.ridge.get(lv)) for lv in levels),
                         *(num(r.time_s.get(res)) for res in resources)])
    return buf.getvalue()
