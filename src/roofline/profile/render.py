"""A profile as the project's one table model (text / Markdown / CSV / HTML), its terminal
text, and its offline HTML page: the step's timeline per stream, kernels coloured by how far
from their bound they ran, and the kernels on the roofline chart."""

from __future__ import annotations

from ..hardware import load_chip
from ..render import html
from ..render.safe import xml_attr, xml_text
from ..render.svg import roofline_svg
from ..render.table import Column, Table, general, nbytes, percent, seconds, si
from ..render.text import render as text_render
from ..units import format_time
from .ncu import NcuRow
from .result import Profile

KERNEL_COLUMNS = (
    Column("op", "op"), Column("op_class", "class"), Column("kernels", "kernels", numeric=True),
    Column("measured_s", "measured", seconds, True), Column("bound_s", "bound", seconds, True),
    Column("expected_s", "expected", seconds, True),
    Column("of_bound", "measured/bound", general(3), True), Column("bound", "bound by"),
    Column("flops", "FLOPs", si(), True), Column("bytes", "bytes", nbytes, True),
    Column("on_bound_s", "bound on --on", seconds, True),
    Column("on_expected_s", "expected on --on", seconds, True),
    Column("stream", "stream", numeric=True), Column("start_s", "start", general(16), True),
    Column("name", "kernel"), Column("reason", "unmapped because"), Column("note", "assumed"))
WIDE = ("on_bound_s", "on_expected_s", "stream", "start_s", "name", "reason", "note")


def kernel_table(p: Profile, wide: bool = True) -> Table:
    cols = tuple(c for c in KERNEL_COLUMNS if wide or c.key not in WIDE)
    rows = tuple(tuple(r[c.key] for c in cols) for r in p.records())
    return Table(cols, rows, "Kernels (one row per op's kernels, collective, copy or fill)")


def class_table(p: Profile) -> Table:
    cols = (Column("op_class", "class"), Column("kernels", "kernels", numeric=True),
            Column("measured_s", "measured", seconds, True),
            Column("share", "share", percent, True), Column("bound_s", "bound", seconds, True),
            Column("expected_s", "expected", seconds, True),
            Column("of_bound", "measured/bound", general(3), True))
    return Table(cols, tuple((c.op_class, c.kernels, c.measured_s, c.share, c.bound_s,
                              c.expected_s, c.of_bound) for c in p.by_class),
                 "Per op class (bound and expected: sums of the kernels', one after another)")


def gap_table(p: Profile) -> Table:
    cols = (Column("op", "op"), Column("measured_s", "measured", seconds, True),
            Column("bound_s", "bound", seconds, True), Column("gap_s", "gap", seconds, True),
            Column("bound", "bound by"), Column("levers", "levers"))
    return Table(cols, tuple((g.op, g.measured_s, g.bound_s, g.gap_s, g.bound,
                              "; ".join(g.levers)) for g in p.gaps),
                 "Largest gaps to the bound first")


def ncu_table(rows: list[NcuRow]) -> Table:
    cols = (Column("id", "ID"), Column("name", "kernel"),
            Column("measured_s", "measured", seconds, True),
            Column("dram_bytes", "DRAM bytes", nbytes, True),
            Column("flops", "FLOPs (CUDA cores)", si(), True),
            Column("intensity", "FLOP/byte", general(3), True),
            Column("achieved_flops_per_s", "FLOP/s", si("FLOP/s"), True),
            Column("work_bound_s", "bound of its measured work", seconds, True),
            Column("our_bound_s", "our bound (trace)", seconds, True),
            Column("our_bytes", "our bytes", nbytes, True),
            Column("our_flops", "our FLOPs", si(), True))
    return Table(cols, tuple(tuple(getattr(r, c.key) for c in cols) for r in rows),
                 "Nsight Compute kernels: measured work on the roofline, our bound where the "
                 "kernel name maps")


def summary_lines(p: Profile) -> list[str]:
    s = p.summary
    on = f" | on {p.on}: bound {format_time(s.on_bound_s or 0)}, expected " \
         f"{format_time(s.on_expected_s or 0)}" if p.on else ""
    return [
        f"{p.path}: {p.step} on {p.hardware}"
        + (f" (trace: {p.device})" if p.device else "")
        + (f", rank {p.rank}" if p.rank is not None else ""),
        f"GPU busy (measured) {format_time(s.measured_s)} of a {format_time(s.window_s)} window;"
        f" idle {format_time(s.idle_s)}; exposed communication {format_time(s.exposed_comm_s)}",
        f"mapped {s.mapped} of {s.kernels} kernels, {s.mapped_time_fraction:.1%} of kernel time"
        f" ({format_time(s.measured_mapped_s)} measured): bound {format_time(s.bound_s)} "
        f"(every resource overlapped; one after another {format_time(s.sum_of_bounds_s)}), "
        f"expected {format_time(s.expected_s)}{on}",
    ]


def unmapped_lines(p: Profile, top: int = 5) -> list[str]:
    why: dict[str, float] = {}
    for r in p.unmapped:
        why[r.reason] = why.get(r.reason, 0.0) + r.measured_s
    largest = sorted(why.items(), key=lambda kv: -kv[1])[:top]
    return [f"  {format_time(t)}: {reason}" for reason, t in largest]


def profile_text(p: Profile, top: int = 10) -> str:
    gaps = gap_table(p)
    gaps = Table(gaps.columns, gaps.rows[:top], gaps.caption)
    lines = [*summary_lines(p), "", text_render(class_table(p)), "", text_render(gaps)]
    if p.unmapped:
        lines += ["", "unmapped kernel time by reason:", *unmapped_lines(p)]
    if p.faster_than_bound:
        lines += ["", f"{len(p.faster_than_bound)} kernels ran faster than their bound: a wrong "
                  "mapping or a wrong roof (please report it)"]
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)


# --- HTML ---------------------------------------------------------------------------------

MAX_BARS = 4000  # kernels drawn on the timeline (the longest); a page stays small
W, ROW, LEFT = 1000, 18, 90


def _colour(of_bound: float | None) -> str:
    """Grey: unmapped; green within 2x of the bound, amber within 8x, red beyond."""
    if of_bound is None:
        return "#BBBBBB"
    return "#4CAF50" if of_bound <= 2 else "#FFB300" if of_bound <= 8 else "#E53935"


def timeline_svg(p: Profile) -> str:
    rows = sorted(p.rows, key=lambda r: -r.measured_s)[:MAX_BARS]
    if not rows:
        return ""
    t0 = min(r.start_s for r in p.rows)
    span = max(r.start_s + r.measured_s for r in p.rows) - t0 or 1.0
    streams = sorted({r.stream for r in p.rows})
    y = {s: i for i, s in enumerate(streams)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W + LEFT}" '
             f'height="{ROW * len(streams) + 20}" role="img" aria-label="timeline">']
    parts += [f'<text x="2" y="{ROW * i + 13}" font-size="11">stream {s}</text>'
              for s, i in y.items()]
    for r in rows:
        x = LEFT + (r.start_s - t0) / span * W
        width = max(r.measured_s / span * W, 0.5)
        ratio = "unmapped: " + r.reason if r.of_bound is None else \
            f"{r.of_bound:.3g}x its bound {format_time(r.bound_s or 0)}"
        tip = f"{r.op}: measured {format_time(r.measured_s)}, {ratio}"
        parts.append(f'<rect x="{x:.2f}" y="{ROW * y[r.stream] + 2}" width="{width:.2f}" '
                     f'height="{ROW - 4}" fill="{_colour(r.of_bound)}"><title>'
                     f'{xml_text(tip)}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def _measured_points(p: Profile) -> list[tuple[str, float, float]]:
    """(name, FLOPs per byte moved, achieved FLOP/s) of the longest mapped kernels."""
    mapped = sorted((r for r in p.rows if r.flops and r.bytes and r.op_class != "collective"),
                    key=lambda r: -r.measured_s)[:40]
    return [(r.op, (r.flops or 0) / (r.bytes or 1), (r.flops or 0) / r.measured_s)
            for r in mapped]


def profile_fragment(p: Profile) -> str:
    return "<div>" + "".join(html.render(t) for t in (class_table(p), gap_table(p))) + "</div>"


def profile_page(p: Profile) -> str:
    chip = load_chip(p.hardware)
    body = [f"<h1>{xml_text('profile: ' + p.step + ' on ' + p.hardware)}</h1>",
            *(f"<p>{xml_text(line)}</p>" for line in summary_lines(p)),
            "<h2>Timeline</h2>", f'<div class="{xml_attr("table-box")}">{timeline_svg(p)}</div>',
            '<p class="note">Each bar is one op\'s kernels: green within 2x of its bound, amber '
            "within 8x, red beyond, grey unmapped (hover for the numbers).</p>",
            "<h2>Kernels on the roofline</h2>",
            # the page script shows a point's data-tip in #tooltip inside #chart
            f'<div id="chart">{roofline_svg(chip, [], _measured_points(p))}'
            '<div id="tooltip" role="tooltip" hidden></div></div>',
            '<p class="note">The longest mapped kernels at their achieved FLOP/s over the '
            "FLOPs per byte they move.</p>",
            html.render(class_table(p)), html.render(gap_table(p)),
            html.render(kernel_table(p))]
    return html.page(f"profile {p.step}", body)
