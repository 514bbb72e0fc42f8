"""The render layer: one table model in four formats; a model step's rows add up to its
t_lower in every format, for every phase and parallel mix; names stay inert everywhere."""

import csv
import io
import re

import pytest

from roofline.models import Parallel, analyze, decode, prefill, train
from roofline.render import csv as csv_format
from roofline.render import html, markdown, pages, text
from roofline.render.labels import distinct, place_labels
from roofline.render.model import layer_table, op_table
from roofline.render.safe import code_block, csv_cell
from roofline.render.table import Column, Table, seconds
from roofline.units import parse_duration

CASES = [
    ("llama-3-8b", decode(8, 2048), Parallel()),
    ("llama-3-70b", decode(64, 4096), Parallel(tp=4, pp=2, microbatches=4)),
    ("llama-3-70b", prefill(4, 2048), Parallel(tp=8, pp=2, microbatches=2)),
    ("llama-3-70b", train(64, 4096), Parallel(tp=8, pp=2, dp=4, microbatches=8)),
    ("mixtral-8x7b", train(32, 2048), Parallel(tp=2, ep=4, dp=4, fsdp=True)),
    ("deepseek-v3", decode(32, 4096), Parallel(tp=8, ep=8, dp=8)),
    ("qwen3-30b-a3b", prefill(2, 8192), Parallel(tp=2, cp=2, ep=2)),
]


def _seconds(cell: str) -> float:
    return 0.0 if cell in ("-", "0 s") else parse_duration(cell.replace(" ", ""), "cell")


@pytest.mark.parametrize(("model", "phase", "par"), CASES)
def test_every_format_adds_up_to_the_steps_t_lower(model, phase, par):
    a = analyze(model, "h100", phase, par)
    total = float(a.t_lower_s)
    # CSV: raw seconds, exact
    rows = list(csv.DictReader(io.StringIO(pages.model_csv(a))))
    assert sum(float(r["t_lower_s"]) for r in rows) == pytest.approx(total, rel=1e-12)
    # the layer view: count x per-layer time
    lay = layer_table(a)
    i, n = [c.key for c in lay.columns].index("t_each_s"), [c.key for c in lay.columns].index(
        "count")
    assert sum(r[i] * r[n] for r in lay.rows) == pytest.approx(total, rel=1e-9)
    # Markdown and HTML show the same rows, rounded to 3 digits
    md = pages.model_markdown(a)
    op_md = md.split("**ops per chip")[1]
    cells = [line.split("|")[8].strip() for line in op_md.splitlines() if line.startswith("| ")
             and not line.startswith("| group")]
    assert sum(_seconds(c) for c in cells) == pytest.approx(total, rel=5e-3)
    page = pages.model_html(a, "h100")
    ops_section = page.split('<section id="ops">')[1].split("</section>")[0]
    body_rows = re.findall(r"<tr>(.*?)</tr>", ops_section)[1:]
    t_cells = [re.findall(r"<td>(.*?)</td>", r)[8] for r in body_rows]
    assert len(t_cells) == len(a.ops)
    assert sum(_seconds(c) for c in t_cells) == pytest.approx(total, rel=5e-3)
    # text (--explain) shows every op too
    assert len(text.render(op_table(a)).splitlines()) == len(a.ops) + 3


def test_the_page_names_each_time_for_what_it_is():
    a = analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4))
    page = pages.model_html(a, "h100")
    assert "perfect overlap" not in page  # a step's t_lower is not the all-overlapped floor
    for phrase in ("floor: every resource of the whole step overlapped",
                   "lower bound: what the schedule overlaps overlapped", "no-overlap sum"):
        assert phrase in page
    summary = page.index('id="summary"')
    assert summary < page.index('id="roofline"') < page.index('id="ops"')
    assert "TPOT (lower bound)" in page[summary:page.index('id="roofline"')]
    assert "<pre>" not in page.split('id="derivations"')[0]  # no terminal dump up top


def test_one_table_four_formats_and_inert_names():
    evil = '=cmd|"/c calc"!A1 <b>x</b> ```'
    t = Table((Column("name", "op"), Column("t_s", "time", seconds, True)),
              ((evil, 1.5e-3), ("plain", None)), "caption")
    assert text.render(t).splitlines()[0] == "caption"
    assert "1.5 ms" in text.render(t) and "<b>" not in html.render(t)
    assert "&lt;b&gt;" in markdown.render(t) and "\\`\\`\\`" in markdown.render(t)
    rows = list(csv.reader(io.StringIO(csv_format.render(t))))
    assert rows[0] == ["name", "t_s"] and rows[1] == ["'" + evil, "0.0015"]
    assert rows[2] == ["plain", ""]
    for lead in "=+-@":
        assert csv_cell(lead + "x").startswith("'")
    assert text.render(Table((Column("a"),), (("\x1b[31mred",),))).count("\x1b") == 0


def test_a_code_block_cannot_be_closed_from_inside():
    block = code_block(["```", "<script>x</script>", "````"])
    fence = block[0][:-len("text")]
    assert set(fence) == {"`"} and len(fence) == 5 and block[-1] == fence


def test_labels_never_overlap_and_fall_back_to_numbers():
    pts = [(100.0 + (i % 3), 100.0) for i in range(12)]  # a pile-up in one spot
    labels = place_labels(pts, [f"dense layer: op {i}" for i in range(12)], (0, 0, 400, 300))
    boxes = [lb.box for lb in labels if lb]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
    assert any(lb and lb.text.isdigit() for lb in labels)  # some became numbers
    assert distinct(["a", "b", "a", "a"]) == ["a", "b", "a (2)", "a (3)"]


def test_the_report_chart_takes_points_across_the_whole_chart_range():
    from roofline import evaluate, load_chip, matmul
    from roofline.errors import RooflineError
    from roofline.render.geometry import CHART_RANGE, to_points

    h100 = load_chip("h100")
    results = to_points([evaluate(matmul(128, 8192, 8192), h100)])
    lo, hi = CHART_RANGE
    page = pages.html_report(h100, results, "t", [("a", lo, lo), ("b", hi, 1.0)], "hbm")
    assert page.count('class="point measured"') == 2  # the SVG axes' span overflowed past these
    for x, y in [(1e308, 1.0), (1.0, 1e-300), (hi * 10, 1.0), (1.0, lo / 10)]:
        with pytest.raises(RooflineError, match="outside the range a chart can show"):
            pages.html_report(h100, results, "t", [("a", x, y)], "hbm")
