"""Whole reports: the op report (HTML, Markdown, CSV), the model step report (HTML,
Markdown, CSV), and the notebook fragment of one Estimate. Built from the shared tables;
each format module only renders them.

>>> import roofline as rl
>>> est = rl.evaluate(rl.matmul(128, 8192, 8192, name="<b>gemm</b>"), "h100")
>>> "&lt;b&gt;gemm&lt;/b&gt;" in html_report(rl.load_chip("h100"), [est])
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..hardware import Chip, load_chip
from ..models.analysis import STEP_TIMES
from ..units import format_number, format_si, format_time
from . import csv as csv_format
from . import html, markdown
from .chip import chip_tables
from .estimate import bound_kind, derivation_lines, ops_summary_table, ops_table
from .geometry import (
    Measured,
    OpPoint,
    default_dtypes,
    estimate_points,
    has_point,
    roof_at,
    roofline_geometry,
    to_points,
)
from .model import (
    header,
    key_figures,
    layer_table,
    notes,
    op_table,
    summary_lines,
    what_if_table,
)
from .safe import code_block, markdown_cell, xml_text
from .svg import roofline_svg
from .table import Column, Table, text_table

if TYPE_CHECKING:
    from ..evaluate import Estimate
    from ..models.analysis import ModelAnalysis

Items = Iterable["Estimate | OpPoint"]

OP_NOTE = ("Each op's t_lower is a lower bound (its resources perfectly overlapped) and "
           "t_upper the no-overlap sum; peaks are dense; link bandwidth is per direction.")


def _measured_table(chip: Chip, results: Sequence[OpPoint], measured: Sequence[Measured],
                    level: str) -> Table:
    geo = roofline_geometry(chip, default_dtypes(chip, results), None, level)
    return text_table(["measured", "intensity (FLOP/byte)", "achieved", "of roof"],
                      [[name, format_number(x), format_si(y, "FLOP/s"),
                        f"{y / roof_at(geo, x):.0%}"]
                       for name, x, y in measured])


def _chart_section(chip: Chip, results: Sequence[OpPoint], measured: Sequence[Measured],
                   level: str) -> list[str]:
    svg = roofline_svg(chip, results, measured, level)
    left_out = [r.name for r in results if not has_point(r, level)]
    note = ("Not on the chart (no FLOPs per " + xml_text(level) + " byte): "
            + xml_text(", ".join(left_out)) + ". ") if left_out else ""
    return ['<section id="roofline"><h2>Roofline</h2>',
            f'<div id="chart">{svg}<div id="tooltip" role="tooltip" hidden></div></div>',
            f'<p class="note">{note}Points are numbered as in the tables; a label that has no '
            "room is left off (hover over or tab to a point for its numbers). The x axis is "
            f"the intensity on {xml_text(level)}; the other slanted roofs show the chip's other "
            "memory levels and links.</p></section>"]


def _hardware_section(chip: Chip) -> list[str]:
    out = [f'<section id="hardware"><h2>Hardware: {xml_text(chip.name)} '
           f"({xml_text(chip.id)})</h2>"]
    out += [html.render(t) for t in chip_tables(chip)]
    if chip.notes:
        out.append(f'<p class="note">{xml_text(chip.notes)}</p>')
    return [*out, "</section>"]


def _derivations_section(results: Sequence[OpPoint]) -> list[str]:
    out = ['<section id="derivations"><h2>Derivations</h2>']
    for i, r in enumerate(results, 1):
        out.append(f"<details><summary>{i}. {xml_text(r.name)}</summary>"
                   f"<pre>{xml_text(chr(10).join(derivation_lines(r)))}</pre></details>")
    return [*out, "</section>"]


def html_report(hw: Chip | str, estimates: Items, title: str = "roofline report",
                measured: Iterable[Measured] = (), level: str = "hbm") -> str:
    """One self-contained page: the interactive roofline, the ops table, the hardware with
    its sources, and each op's derivation."""
    from .. import __version__

    chip = load_chip(hw)
    results = to_points(estimates)
    shown = [(str(n), float(x), float(y)) for n, x, y in measured]
    body = [f"<header><h1>{xml_text(title)}</h1>",
            f'<p class="note">{xml_text(chip.name)} ({xml_text(chip.id)}) · {len(results)} '
            f"op(s) · roofline {xml_text(__version__)}. {xml_text(OP_NOTE)}</p></header>",
            *_chart_section(chip, results, shown, level),
            '<section id="ops"><h2>Ops</h2>', html.render(ops_summary_table(results, True))]
    if shown:
        body.append(html.render(_measured_table(chip, results, shown, level)))
    body.append("</section>")
    body += _hardware_section(chip) + _derivations_section(results)
    return html.page(title, body)


def markdown_report(hw: Chip | str, estimates: Items, title: str = "roofline report",
                    measured: Iterable[Measured] = (), level: str = "hbm") -> str:
    """The HTML report's tables and derivations as Markdown (no chart)."""
    chip = load_chip(hw)
    results = to_points(estimates)
    shown = [(str(n), float(x), float(y)) for n, x, y in measured]
    out = [f"# {markdown_cell(title)}", "", f"{markdown_cell(chip.name)} "
           f"({markdown_cell(chip.id)}). {OP_NOTE}", "", "## Ops", "",
           markdown.render(ops_summary_table(results)), ""]
    if shown:
        out += [markdown.render(_measured_table(chip, results, shown, level)), ""]
    out += [f"## Hardware: {markdown_cell(chip.name)}", ""]
    out += [part for t in chip_tables(chip) for part in (markdown.render(t), "")]
    out += ["## Derivations", ""]
    for r in results:
        out += [f"### {markdown_cell(r.name)}", "", *code_block(derivation_lines(r)), ""]
    return "\n".join(out)


def estimates_markdown(estimates: Items) -> str:
    return markdown.render(ops_summary_table(to_points(estimates)))


def estimates_csv(estimates: Items) -> str:
    """The ops table as CSV in SI units (seconds, FLOP, FLOP/s, FLOP/byte); empty = none."""
    return csv_format.render(ops_table(to_points(estimates)))


def estimate_html(est: Estimate) -> str:
    """An HTML fragment for notebooks: per-resource table, bound, derivation. An
    array-valued Estimate shows one row per element (the first 50)."""
    results = to_points([est])
    if len(results) > 1:
        more = len(results) - 50
        tail = f'<p class="note">… and {more} more</p>' if more > 0 else ""
        return f"<div>{html.render(ops_summary_table(results[:50]))}{tail}</div>"
    (r,) = results
    rows = [[res, format_time(t), f"{t / r.t_lower_s:.1%}" if r.t_lower_s > 0 else "-",
             format_si(r.bytes[res], "B") if res in r.bytes else "-",
             format_number(r.intensity[res]) if res in r.intensity else "-",
             format_number(r.ridge[res]) if res in r.ridge else "-"]
            for res, t in r.time_s.items()]
    caption = f"{r.name} on {r.hardware}: bound by {r.bound} ({bound_kind(r.bound)})"
    table = text_table(["resource", "time", "of bound", "bytes", "FLOP/byte", "ridge"], rows,
                       caption)
    summary = (f"t_lower (lower bound) {format_time(r.t_lower_s)} · t_upper (no-overlap sum) "
               f"{format_time(r.t_upper_s)} · attainable "
               f"{format_si(r.attainable_flops_per_s, 'FLOP/s')} of peak "
               f"{format_si(r.peak_flops_per_s, 'FLOP/s')}")
    derivation = "\n".join(derivation_lines(r))
    return (f"<div>{html.render(table)}<p>{xml_text(summary)}</p>"
            f"<details><summary>derivation</summary><pre>{xml_text(derivation)}</pre>"
            "</details></div>")


# --- a model step ----------------------------------------------------------------------------


def step_points(a: ModelAnalysis) -> list[OpPoint]:
    """The step's ops as chart points, named 'group: op' and numbered as in the tables: each
    from the step's own Estimate of ONE occurrence (the evaluator's peak for the op's
    compute dtype, its ridge, intensity and attainable FLOP/s; its derivation), so a point's
    FLOPs sit beside that occurrence's time, as its derivation shows them."""
    out = []
    for op, est in zip(a.ops, a.parts.core.ests, strict=False):  # (past the rows: a link's
        for point in estimate_points(est):  # unhidden time, no arithmetic to place)
            index = point.name[len(est.cost.name or "op"):]  # "[i, j]" of a sweep's point
            out.append(replace(point, name=f"{op.group}: {op.name}{index}"))
    return out


def _numbered(t: Table) -> Table:
    return Table((Column("index", "#", str, True), *t.columns),
                 tuple((i, *row) for i, row in enumerate(t.rows, 1)), t.caption, t.notes)


def _times_table() -> Table:
    return text_table(["time", "what it is"], [[k, v] for k, v in STEP_TIMES.items()],
                      "the step's times")


EXPECTED_HEADING = "Expected time (a forecast beside the bound, never in place of it)"


def model_html(a: ModelAnalysis, hw: Chip | str, what_if: Sequence[Any] = (),
               title: str | None = None, expected: str = "") -> str:
    """The step report: key figures first, the expected time if asked (`expected`: its
    text), what would move it, the chart, the tables (numbered like the chart's
    points), memory, hardware and each op's derivation."""
    from .. import __version__

    chip = load_chip(hw)
    title = title or f"{a.model} on {a.hardware}: {a.phase.kind}"
    points = step_points(a)
    summary = summary_lines(a)
    body = [f"<header><h1>{xml_text(title)}</h1>",
            f'<p class="note">{xml_text(header(a))} · roofline {xml_text(__version__)}</p>',
            *(f'<p class="note">{xml_text(n)}</p>' for n in notes(a)), "</header>",
            '<section id="summary"><h2>Summary</h2>', html.figures(key_figures(a)),
            *(f"<p>{xml_text(line)}</p>" for line in summary), html.render(_times_table()),
            "</section>"]
    if expected:
        body += [f'<section id="expected"><h2>{xml_text(EXPECTED_HEADING)}</h2>',
                 f"<pre>{xml_text(expected)}</pre>", "</section>"]
    if what_if:
        body += ['<section id="what-if"><h2>What would move it</h2>',
                 html.render(what_if_table(what_if)), "</section>"]
    body += _chart_section(chip, points, [], "hbm")
    body += ['<section id="layers"><h2>Layers</h2>', html.render(layer_table(a)),
             "</section>", '<section id="ops"><h2>Ops</h2>',
             html.render(_numbered(op_table(a))), "</section>"]
    body += _hardware_section(chip) + _derivations_section(points)
    return html.page(title, body)


def model_fragment(a: ModelAnalysis) -> str:
    """A model step for a notebook cell: key figures, summary lines, the layer table."""
    return ("<div>" + html.figures(key_figures(a))
            + "".join(f"<p>{xml_text(line)}</p>" for line in summary_lines(a))
            + html.render(layer_table(a)) + "</div>")


def model_markdown(a: ModelAnalysis, what_if: Sequence[Any] = (),
                   expected: str = "") -> str:
    out = [f"# {markdown_cell(a.model)} on {markdown_cell(a.hardware)}: {a.phase.kind}", "",
           markdown_cell(header(a)), "", *(f"- {markdown_cell(line)}" for line in
                                            summary_lines(a)), "",
           markdown.render(_times_table()), ""]
    if expected:
        out += [f"## {EXPECTED_HEADING}", "", *code_block(expected.splitlines()), ""]
    if what_if:
        out += [markdown.render(what_if_table(what_if)), ""]
    out += [markdown.render(layer_table(a)), "", markdown.render(op_table(a)), ""]
    return "\n".join(out)


def model_csv(a: ModelAnalysis) -> str:
    """The per-op table in raw SI units; its t_lower_s column adds up to the step's."""
    return csv_format.render(op_table(a))


__all__ = ["estimate_html", "estimates_csv", "estimates_markdown", "html_report",
           "markdown_report", "model_csv", "model_fragment", "model_html", "model_markdown"]
