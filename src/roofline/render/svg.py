"""The roofline as inline SVG, drawn from the same geometry as the matplotlib chart.

Each op is a `.point` element whose `data-tip` holds its tooltip text and `data-index` its
number in the page's table; labels never overlap (see `labels`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..hardware import Chip
from ..units import format_number, format_si, format_time
from .estimate import bound_kind
from .geometry import (
    Measured,
    OpPoint,
    Roof,
    RooflineGeometry,
    bound_color,
    default_dtypes,
    has_point,
    intensity_label,
    placed_points,
    roof_at,
    roofline_geometry,
)
from .labels import Box, distinct, place_labels
from .safe import xml_attr, xml_text

W, H = 760, 480  # SVG size in px
LEFT, RIGHT, TOP, BOTTOM = 100, 24, 16, 52  # plot-area margins


class _LogAxis:
    """Maps a value on a log axis [lo, hi] to a pixel between a and b."""

    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        self.lo, self.a, self.b = math.log10(lo), a, b
        self.span = math.log10(hi) - self.lo  # hi / lo overflows past ~308 decades

    def __call__(self, v: float) -> float:
        return round(self.a + (math.log10(v) - self.lo) / self.span * (self.b - self.a), 2)

    def decades(self) -> list[float]:
        first = math.ceil(self.lo - 1e-9)
        return [10.0 ** k for k in range(first, math.floor(self.lo + self.span + 1e-9) + 1)]


def roofline_svg(chip: Chip, results: Sequence[OpPoint], measured: Sequence[Measured] = (),
                 level: str = "hbm", dtypes: Sequence[str] | None = None,
                 levels: Sequence[str] | None = None) -> str:
    """The roofline; ops without a `level` intensity (collectives) are left out. Points are
    numbered in the order of `results` (1-based, counting the ones left out too)."""
    shown = [(i, r) for i, r in enumerate(results, 1) if has_point(r, level)]
    placed = placed_points(chip, [r for _, r in shown], level)
    geo = roofline_geometry(chip, dtypes or default_dtypes(chip, results), levels, level,
                            [(x, y) for _, x, y in placed] + [(x, y) for _, x, y in measured])
    sx = _LogAxis(*geo.xlim, LEFT, W - RIGHT)
    sy = _LogAxis(*geo.ylim, H - BOTTOM, TOP)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
             f'height="{H}" role="img" aria-labelledby="chart-title">',
             f'<title id="chart-title">{xml_text(f"Roofline of {chip.name}")}</title>']
    parts += _svg_frame(geo, sx, sy)
    parts += _svg_roofs(geo, sx, sy)
    legend, legend_box = _svg_legend(geo)
    xy = [(sx(x), sy(y)) for _, x, y in placed] + [(sx(x), sy(y)) for _, x, y in measured]
    names = distinct([r.name for r, _, _ in placed] + [f"{n} (measured)"
                                                       for n, _, _ in measured])
    numbers = [str(i) for i, _ in shown] + [f"m{j}" for j in range(1, len(measured) + 1)]
    labels = place_labels(xy, names, (LEFT, TOP, W - RIGHT, H - BOTTOM),
                          [legend_box, *_frame_text_boxes(geo, sx, sy)], numbers=numbers)
    for (r, x, y), (cx, cy), name, number in zip(placed, xy, names, numbers, strict=False):
        tip = (f"{number}. {name}\nintensity {format_number(x)} FLOP/byte ({level})\n"
               f"attainable {format_si(y, 'FLOP/s')}\ntime {format_time(r.t_lower_s)} "
               f"(lower bound)\nbound {r.bound} ({bound_kind(r.bound)})")
        parts.append(f'<circle class="point op" cx="{cx}" cy="{cy}" r="6" '
                     f'fill="{bound_color(r.bound)}" stroke="black" tabindex="0" '
                     f'data-index="{number}" data-name="{xml_attr(r.name)}" '
                     f'data-tip="{xml_attr(tip)}" aria-label="{xml_attr(tip)}"/>')
    for (name, x, y), (cx, cy), number in zip(measured, xy[len(placed):],
                                              numbers[len(placed):], strict=True):
        tip = (f"{number}. {name} (measured)\nintensity {format_number(x)} FLOP/byte ({level})\n"
               f"achieved {format_si(y, 'FLOP/s')}\n{y / roof_at(geo, x):.0%} of the roof")
        parts.append(f'<path class="point measured" d="M{cx},{cy - 7}L{cx + 7},{cy}L{cx},'
                     f'{cy + 7}L{cx - 7},{cy}Z" fill="white" stroke="black" stroke-width="2" '
                     f'tabindex="0" data-index="{number}" data-name="{xml_attr(name)}" '
                     f'data-tip="{xml_attr(tip)}" aria-label="{xml_attr(tip)}"/>')
    for label, number in zip(labels, numbers, strict=True):
        if label is None:
            continue
        if label.leader:  # a label set apart from its point: a line joins them
            x0, y0, x1, y1 = (round(v, 2) for v in label.leader)
            parts.append(f'<line class="leader" data-index="{number}" x1="{x0}" y1="{y0}" '
                         f'x2="{x1}" y2="{y1}" stroke="#555" stroke-width="0.8"/>')
        anchor = "" if label.anchor == "start" else f' text-anchor="{label.anchor}"'
        parts.append(f'<text class="point-label" data-index="{number}" x="{label.x}" '
                     f'y="{label.y}"{anchor}>{xml_text(label.text)}</text>')
    parts += legend
    parts.append("</svg>")
    return "\n".join(parts)


def _frame_text_boxes(geo: RooflineGeometry, sx: _LogAxis, sy: _LogAxis) -> list[Box]:
    """The region and ridge captions inside the plot area: labels keep clear of them."""
    xb, y0, y1 = sx(geo.boundary), sy(geo.ylim[0]), sy(geo.ylim[1])
    return [(xb - 200, y1, xb + 110, y1 + 20), (xb - 110, y0 - 20, xb, y0)]


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
                   f'text-anchor="end">{xml_text(format_si(v, "FLOP/s"))}</text>')
    out += [f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="none" '
            f'stroke="#555"/>',
            f'<text class="axis-title" x="{(x0 + x1) / 2}" y="{H - 10}" text-anchor="middle">'
            f"arithmetic intensity (FLOP per byte of {xml_text(geo.level)} traffic)</text>",
            f'<text class="axis-title" transform="rotate(-90)" x="{-(y0 + y1) / 2}" y="14" '
            f'text-anchor="middle">attainable FLOP/s</text>',
            f'<text class="region-label" x="{xb - 6}" y="{y1 + 16}" text-anchor="end" '
            f'fill="{bound_color(geo.level)}">memory-bound ({xml_text(geo.level)})</text>',
            f'<text class="region-label" x="{xb + 6}" y="{y1 + 16}" '
            f'fill="{bound_color("compute")}">compute-bound</text>',
            f'<text class="ridge-label" x="{xb - 4}" y="{y0 - 6}" text-anchor="end" '
            f'fill="{bound_color(geo.level)}">I* = {format_number(geo.boundary)}</text>']
    return out


def _svg_roofs(geo: RooflineGeometry, sx: _LogAxis, sy: _LogAxis) -> list[str]:
    out = []
    for roof in geo.roofs:
        width = 2.5 if roof.kind in ("compute", geo.level) else 1.5
        out.append(f'<polyline class="roof" data-kind="{xml_attr(roof.kind)}" '
                   f'points="{sx(roof.x[0])},{sy(roof.y[0])} {sx(roof.x[1])},{sy(roof.y[1])}" '
                   f'fill="none" stroke="{bound_color(roof.kind)}" stroke-width="{width}"'
                   f"{_dash(geo, roof)}><title>{xml_text(roof.label)}</title></polyline>")
    for r in geo.ridges:
        out.append(f'<circle class="ridge" cx="{sx(r.intensity)}" cy="{sy(r.flops_per_s)}" '
                   f'r="3.5" fill="white" stroke="black"><title>'
                   f"{xml_text(f'ridge {r.dtype} / {r.level}: I* = ')}"
                   f"{format_number(r.intensity)} FLOP/byte"
                   f"</title></circle>")
    return out


def _svg_legend(geo: RooflineGeometry) -> tuple[list[str], Box]:
    x, y = W - RIGHT - 190, H - BOTTOM - 18 * len(geo.roofs) - 10
    box = (x - 8, y - 14, x + 182, y - 6 + 18 * len(geo.roofs))
    out = [f'<rect class="legend" x="{x - 8}" y="{y - 14}" width="190" '
           f'height="{18 * len(geo.roofs) + 8}" fill="white" fill-opacity="0.9" stroke="#ccc"/>']
    for i, roof in enumerate(geo.roofs):
        yy = y + 18 * i
        out.append(f'<line x1="{x}" y1="{yy - 4}" x2="{x + 24}" y2="{yy - 4}" '
                   f'stroke="{bound_color(roof.kind)}" stroke-width="2.5"{_dash(geo, roof)}/>'
                   f'<text x="{x + 30}" y="{yy}">{xml_text(roof.label)}</text>')
    return out, box


def _dash(geo: RooflineGeometry, roof: Roof) -> str:
    """A dash pattern per compute dtype (the first solid), as an SVG attribute."""
    if roof.kind != "compute":
        return ""
    compute = [r.dtype for r in geo.roofs if r.kind == "compute"]
    dash = ["", "8 4", "2 3", "8 3 2 3"][compute.index(roof.dtype) % 4]
    return f' stroke-dasharray="{dash}"' if dash else ""
