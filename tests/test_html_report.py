"""The HTML report: self-contained, names escaped, tables and derivations present; Markdown
and CSV; the `report` CLI; and the page opened in a real headless Chromium (no console
errors, no network request, the chart's points and hover tooltip work)."""

import base64
import csv
import dataclasses
import functools
import hashlib
import io
import json
import re
import threading
import xml.etree.ElementTree as ET
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from conftest import requests_sent  # the browser fixture lives there too
from roofline import cli, collective, evaluate, gemv, load_chip, matmul
from roofline.errors import RooflineError
from roofline.render.geometry import point_from_dict, to_points
from roofline.render.pages import (
    estimate_html,
    estimates_csv,
    estimates_markdown,
    html_report,
    markdown_report,
)
from roofline.render.svg import roofline_svg

H100 = load_chip("h100")
EVIL = "<script>window.__pwned = 1</script>"
SVG_NS = "{http://www.w3.org/2000/svg}"


def estimates():
    return [evaluate(matmul(128, 8192, 8192), H100), evaluate(gemv(8192, 8192), H100),
            evaluate(matmul(4096, 8192, 8192, dtype="fp8", name=EVIL), H100),
            evaluate(collective("all-reduce", nbytes=64e6, ranks=8), H100)]


MEASURED = [("my gemm", 124.0, 3e14)]


def report() -> str:
    return html_report(H100, estimates(), title="test report", measured=MEASURED)


def svg_of(page: str) -> ET.Element:
    """The inline chart, parsed as XML (so it must be well-formed)."""
    (svg,) = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    return ET.fromstring(svg)


def points(svg: ET.Element, kind: str) -> list[ET.Element]:
    return [e for e in svg.iter() if f"point {kind}" in e.get("class", "")]


# --- the page itself -------------------------------------------------------------------------


def test_page_fetches_nothing_and_its_csp_admits_only_its_own_script_and_style():
    page = report()
    assert page.count("<script") == 1 and page.count("<style") == 1
    assert not re.search(r"\ssrc=|url\(|@import", page)  # nothing to load
    assert re.findall(r'href="([^"]*)"', page) == ["data:,"]  # the empty favicon only
    (csp,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert "default-src 'none'" in csp
    for tag in ("script", "style"):
        (body,) = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.S)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"{tag}-src 'sha256-{digest}'" in csp


def test_chart_points_roofs_and_ridges():
    svg = svg_of(report())
    ops = points(svg, "op")
    assert [p.get("data-name") for p in ops] == ["matmul", "gemv", EVIL]  # all-reduce: no FLOPs
    matmul_, gemv_ = ops[0], ops[1]
    assert float(matmul_.get("cx")) > float(gemv_.get("cx"))  # 124 FLOP/byte right of 1
    tip = matmul_.get("data-tip")
    assert tip.splitlines()[0] == "1. matmul" and "124.1 FLOP/byte (hbm)" in tip
    assert "41.3 us" in tip and "bound hbm (memory-bound)" in tip
    assert [p.get("data-name") for p in points(svg, "measured")] == ["my gemm"]
    roofs = [e.get("data-kind") for e in svg.iter(f"{SVG_NS}polyline")]
    assert roofs == ["compute", "compute", "hbm", "l2", "sram", "scale-up", "scale-out"]
    ridges = [e for e in svg.iter(f"{SVG_NS}circle") if e.get("class") == "ridge"]
    assert len(ridges) == 2 * 5  # bf16 and fp8 against every level and link
    regions = [e.get("data-region") for e in svg.iter(f"{SVG_NS}rect") if e.get("data-region")]
    assert regions == ["memory-bound", "compute-bound"]


def test_tables_hardware_sources_and_derivations():
    page = report()
    assert "<h1>test report</h1>" in page
    assert "<td>matmul</td><td>hbm (memory-bound)</td><td>41.3 us</td>" in page
    assert "all-reduce (ring)" in page and "Not on the chart" in page
    assert "<td>my gemm</td><td>124</td><td>300 TFLOP/s</td><td>72%</td>" in page
    assert "NVIDIA H100 datasheet: 80 GB HBM3, 3.35 TB/s" in page  # a source
    assert "(estimate)" in page  # the L2 / SRAM bandwidths are marked
    assert "NVLink" in page and "ridge points" in page
    assert "FLOPs = 2·M·N·K = 2·128·8192·8192 = 1.718e+10" in page
    assert "t_lower = max = 41.3 us (hbm: memory-bound)" in page


def test_names_are_data_never_markup():
    chip = dataclasses.replace(H100, name='<img src=x onerror="alert(1)">')
    page = html_report(chip, estimates(), title="<b>title</b>")
    assert "<img" not in page and "<b>" not in page and "window.__pwned" not in page.replace(
        "&lt;script&gt;window.__pwned = 1&lt;/script&gt;", "")
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<script" not in estimate_html(estimates()[2]).replace("&lt;script", "")
    assert EVIL not in estimates_markdown(estimates())


def test_results_read_from_json_report_like_estimates(capsys):
    cli.main(["op", "matmul", "--m", "128", "--k", "8192", "--n", "8192", "--json"])
    result = point_from_dict(json.loads(capsys.readouterr().out), "r.json")
    page = html_report(H100, [result])
    assert "FLOPs = 2·M·N·K = 2·128·8192·8192" in page
    assert len(points(svg_of(page), "op")) == 1
    with pytest.raises(RooflineError, match="evaluated on 'h100-sxm'"):
        roofline_svg(load_chip("a100"), [result])


def test_estimate_html_fragment():
    fragment = estimate_html(estimates()[0])
    assert fragment.startswith("<div>") and "<html" not in fragment
    assert "matmul on h100-sxm: bound by hbm (memory-bound)" in fragment
    assert "<td>hbm</td><td>41.3 us</td><td>100.0%</td><td>138 MB</td><td>124.1</td>" in fragment
    assert "<details><summary>derivation</summary>" in fragment
    sweep = estimate_html(evaluate(matmul(np.arange(1, 61), 8192, 8192), H100))
    assert sweep.count("<tr>") == 1 + 50 and "10 more" in sweep


def test_markdown_tables():
    md = estimates_markdown([*estimates(), evaluate(matmul(1, 2, 3, name="a|b"), H100)])
    lines = md.splitlines()
    assert lines[0].startswith("| op | bound | t_lower (lower bound) |")
    assert lines[1].startswith("|---|")
    assert "| matmul | hbm (memory-bound) | 41.3 us |" in md
    assert "| a\\|b |" in md  # a pipe in a name does not split the cell
    assert all(line.count("|") - line.count("\\|") == 9 for line in lines)
    full = markdown_report(H100, estimates(), measured=MEASURED)
    assert "## Hardware: NVIDIA H100 SXM5 80GB" in full and "```text" in full
    assert "| my gemm | 124 | 300 TFLOP/s | 72% |" in full


def test_csv_has_si_numbers():
    ests = estimates()
    rows = list(csv.DictReader(io.StringIO(estimates_csv(ests))))
    assert [r["name"] for r in rows] == ["matmul", "gemv", EVIL, "all-reduce (ring)"]
    assert float(rows[0]["t_lower_s"]) == ests[0].t_lower_s  # exact round trip
    assert float(rows[0]["intensity_hbm"]) == ests[0].intensity["hbm"]
    assert rows[3]["intensity_hbm"] == "" and rows[3]["peak_flops_per_s"] == ""
    assert float(rows[3]["time_latency_s"]) == ests[3].time_s["latency"]


def test_array_estimates_expand_to_rows():
    rows = to_points([evaluate(matmul(np.array([1, 4096]), 8192, 8192), H100)])
    page = html_report(H100, rows)
    assert [p.get("data-name") for p in points(svg_of(page), "op")] == ["matmul[0]", "matmul[1]"]


# --- the report CLI --------------------------------------------------------------------------


@pytest.fixture
def run(run_cli):
    return run_cli


def test_cli_report_writes_html_markdown_csv(run, tmp_path):
    code, out, _ = run("op", "gemv", "--k", "4096", "--n", "4096", "--json")
    results = tmp_path / "gemv.json"
    results.write_text(out)
    html, md, table = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.csv"
    code, out, err = run("report", "--hw", "h100", "--op", "matmul --m 128 --k 8192 --n 8192",
                         "--from", str(results), "--measured", "mine,100,2e14",
                         "--html", str(html), "--markdown", str(md), "--csv", str(table))
    assert code == 0, err
    assert out.splitlines() == [f"wrote {html}", f"wrote {md}", f"wrote {table}"]
    page = html.read_text()
    assert [p.get("data-name") for p in points(svg_of(page), "op")] == ["gemv", "matmul"]
    assert "roofline report: NVIDIA H100 SXM5 80GB" in page
    assert "| matmul |" in md.read_text()
    assert [r["name"] for r in csv.DictReader(table.open())] == ["gemv", "matmul"]


def test_cli_report_prints_markdown_without_outputs(run):
    code, out, _ = run("report", "--op", "matmul --m 128 --k 8192 --n 8192")
    assert code == 0 and out.startswith("# roofline report: NVIDIA H100") and "| matmul |" in out


@pytest.mark.parametrize(("argv", "needle"), [
    ([], "give at least one --op or --from"),
    (["--from", "/nonexistent/r.json"], "/nonexistent/r.json: cannot read"),
    (["--op", "matmul --m 1 --k 1 --n 1", "--html", "/nonexistent/dir/r.html"], "cannot write"),
])
def test_cli_report_errors_are_one_line(run, argv, needle):
    code, _, err = run("report", *argv)
    assert code == 2 and err.count("\n") == 1 and needle in err


# --- in a real browser -----------------------------------------------------------------------

@pytest.fixture
def server(tmp_path):
    """A localhost HTTP server for tmp_path that records every path asked of it."""
    asked: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                functools.partial(Handler, directory=str(tmp_path)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_report_in_headless_chromium(browser, server, tmp_path, scheme):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    (tmp_path / "report.html").write_text(report(), encoding="utf-8")
    base, asked = server
    url = f"{base}/report.html" if scheme == "http" else (tmp_path / "report.html").as_uri()
    browser.get_log("browser")  # drop what an earlier page left
    requests_sent(browser)
    browser.get(url)
    WebDriverWait(browser, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete")

    assert browser.title == "test report"
    assert browser.get_log("browser") == []  # no console errors (nor warnings, CSP reports)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert requests_sent(browser) == [url]  # the page, nothing else
    if scheme == "http":
        assert asked == ["/report.html"]  # not even a favicon

    count = "return document.querySelectorAll('#chart svg .point.%s').length"
    assert browser.execute_script(count % "op") == 3
    assert browser.execute_script(count % "measured") == 1
    assert_labels_attached(browser)

    tip = browser.find_element(By.ID, "tooltip")
    assert not tip.is_displayed()
    ops = browser.find_elements(By.CSS_SELECTOR, "#chart .point.op")
    ActionChains(browser).move_to_element(ops[0]).perform()  # a real pointer move
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    lines = tip.text.splitlines()
    assert lines[0] == "1. matmul" and "intensity 124.1 FLOP/byte (hbm)" in lines
    assert "time 41.3 us (lower bound)" in lines and "bound hbm (memory-bound)" in lines
    ActionChains(browser).move_to_element(browser.find_element(By.TAG_NAME, "h1")).perform()
    WebDriverWait(browser, 5).until(lambda d: not tip.is_displayed())

    evil = next(p for p in ops if p.get_attribute("data-name") == EVIL)
    browser.execute_script(
        "arguments[0].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))", evil)
    assert tip.text.splitlines()[0] == "3. " + EVIL  # shown as text ...
    assert browser.execute_script("return window.__pwned === undefined")  # ... never run
    assert browser.get_log("browser") == []


def test_model_step_page_in_headless_chromium(browser, tmp_path):
    """The step report at 1280 px: no horizontal scrolling, no two chart labels overlapping,
    no console errors, every point numbered."""
    from roofline.models import Parallel, analyze, decode
    from roofline.render.pages import model_html

    a = analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4))
    path = tmp_path / "step.html"
    path.write_text(model_html(a, "h100"), encoding="utf-8")
    browser.set_window_size(1280, 1000)
    browser.get_log("browser")
    browser.get(path.as_uri())
    assert browser.get_log("browser") == []
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth")
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart .point-label')).map(function (t)"
        " { var r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; });")
    assert len(boxes) >= 8
    for i, p in enumerate(boxes):
        for q in boxes[i + 1:]:
            assert not (p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]), (p, q)
    numbers = browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart .point')).map("
        "function (p) { return p.getAttribute('data-index'); });")
    assert all(n and n.isdigit() for n in numbers)
    assert_labels_attached(browser)


def _rects(browser, selector):
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (e) {"
        " var r = e.getBoundingClientRect(); return [e.getAttribute('data-index'), r.left,"
        " r.top, r.right, r.bottom]; });", selector)


def _gap(a, b):
    """Distance between two boxes (0 when they touch or overlap)."""
    dx = max(a[0] - b[2], b[0] - a[2], 0)
    dy = max(a[1] - b[3], b[1] - a[3], 0)
    return (dx * dx + dy * dy) ** 0.5


def assert_labels_attached(browser):
    """Every label, as Chromium lays it out, beside its own point (within 12 px of its
    marker) or joined to it by a leader line from the marker to the label's box; no label
    over another label or over any point."""
    labels = {i: box for i, *box in _rects(browser, "#chart .point-label")}
    marks = {i: box for i, *box in _rects(browser, "#chart .point")}
    leaders = {i: box for i, *box in _rects(browser, "#chart .leader")}
    ends = dict(browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart .leader')).map(function (e) {"
        " var m = e.getScreenCTM(), p = e.ownerSVGElement.createSVGPoint(), out = [];"
        " ['1', '2'].forEach(function (k) { p.x = e.x1.baseVal.value; p.y = e.y1.baseVal.value;"
        " if (k === '2') { p.x = e.x2.baseVal.value; p.y = e.y2.baseVal.value; }"
        " var q = p.matrixTransform(m); out.push([q.x, q.y]); });"
        " return [e.getAttribute('data-index'), out]; });"))
    assert labels and set(labels) <= set(marks) and set(leaders) <= set(labels)
    for i, box in labels.items():
        if i not in leaders:
            assert _gap(box, marks[i]) <= 12, (i, box, marks[i])
            continue
        (x0, y0), (x1, y1) = ends[i]
        assert _gap((x0, y0, x0, y0), marks[i]) <= 1.5, (i, ends[i], marks[i])
        assert _gap((x1, y1, x1, y1), box) <= 2, (i, ends[i], box)
    for i, a in labels.items():
        for j, b in labels.items():
            if i < j:
                assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), \
                    (i, a, j, b)
        for j, m in marks.items():
            shrunk = (m[0] + 1, m[1] + 1, m[2] - 1, m[3] - 1)  # a marker's anti-aliased rim
            assert not (a[0] < shrunk[2] and shrunk[0] < a[2] and a[1] < shrunk[3]
                        and shrunk[1] < a[3]), (i, a, j, m)


def test_pages_write_numbers_for_people_never_e_notation():
    """No '1.978e+04' (a scale-out ridge), '1e5' (a tick) or '1.5e-05' on a page: SI
    prefixes."""
    from roofline.models import Parallel, analyze, decode
    from roofline.render.pages import model_html
    from roofline.units import format_number, format_si

    assert format_number(19780) == "19.78 k" and format_number(124.1) == "124.1"
    assert format_si(1.5e-5, "s") == "15 us" and format_si(0.25) == "0.25"
    a = analyze("llama-3-70b", "h100", decode(16, 4096), Parallel(tp=4))
    for page in (report(), model_html(a, "h100")):
        # what the page computes and shows: table cells, chart text and tooltips, figures
        # (not the ops' derivation formulas, nor a chip file's quoted source notes)
        shown = re.findall(r"<(td|th|text|title)\b[^>]*>(.*?)</\1>", page, flags=re.S)
        shown += [(tag, tip) for tag, tip in re.findall(r'(data-tip)="([^"]*)"', page)]
        shown += re.findall(r'class="(value)">([^<]*)<', page)
        assert len(shown) > 100
        # (a signed exponent: a chip file's quoted note "(= 85.52e9 B)" is its source's own)
        assert not [t for _, t in shown if re.search(r"\de[+-]\d|^\d+e\d+$", t.strip())]
