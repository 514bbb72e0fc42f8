"""The serve page: self-contained, names escaped, and live in headless Chromium (moving a
control changes the chart and the chosen configuration; clicking a point shows it; no
console errors, no request but the page)."""

import re

import numpy as np
import pytest

from conftest import requests_sent
from roofline.render.serve_page import serve_page
from roofline.serve import Space, Targets, Workload, plan

EVIL = "</script><script>window.__pwned = 1</script>"


@pytest.fixture(scope="module")
def page_text():
    p = plan("llama-3.1-8b", ["h100", "mi300x"], Workload.from_lengths(2048, 256),
             Targets(ttft_s=1.0, tpot_s=0.02),
             Space(tp=(1, 2), kv_dtypes=("bf16", "fp8"), chunks=(2048,),
                   modes=("aggregated", "disaggregated")))
    p.columns["bound"] = np.full(len(p), EVIL)  # a hostile name must stay text
    return serve_page(p)


def test_page_is_one_script_admitted_by_hash_and_escapes_names(page_text):
    assert page_text.count("<script>") == 1  # the code; the grid is a JSON data block
    assert "window.__pwned" in page_text and EVIL not in page_text
    assert not re.search(r"\ssrc=|url\(|@import", page_text)


def test_serve_page_in_headless_chromium(browser, tmp_path, page_text):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    path = tmp_path / "plan.html"
    path.write_text(page_text, encoding="utf-8")
    browser.get_log("browser")
    requests_sent(browser)
    browser.get(path.as_uri())
    WebDriverWait(browser, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    assert browser.get_log("browser") == []
    assert requests_sent(browser) == [path.as_uri()]
    chart = browser.find_element(By.ID, "chart")
    best = browser.find_element(By.ID, "best")
    first = (chart.get_attribute("data-best"), best.text)
    assert "tokens/s per chip" in best.text and int(chart.get_attribute("data-points")) > 3
    # a tighter TPOT target: a different best point, and the chart redrawn
    browser.execute_script("var s = document.getElementById('tpot'); s.value = 900;"
                           "s.dispatchEvent(new Event('input'));")
    second = (chart.get_attribute("data-best"), best.text)
    assert second != first and browser.find_element(By.ID, "tpot-value").text == "7.94 ms"
    Select(browser.find_element(By.ID, "chip")).select_by_value("mi300x")
    assert "mi300x" in best.text or best.text == "no point meets the targets"
    points = browser.find_elements(By.CSS_SELECTOR, "#frontier .point")
    # the frontier's points can sit under a neighbour (4.5 px circles a few px apart): click
    # the first one the browser itself would hit at its centre
    hit = browser.execute_script(
        "return arguments[0].find(p => { p.scrollIntoView({block: 'center'});"
        " const r = p.getBoundingClientRect();"
        " return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === p; })",
        points[len(points) // 2:] + points[:len(points) // 2])
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', "
                           "{bubbles: true}))", hit)
    detail = browser.find_element(By.ID, "detail").text
    assert detail.startswith("mi300x") and "by resource" in detail and EVIL in detail
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.get_log("browser") == []


def _svg_rects(browser, selector):
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0])).map(function (e) {"
        " var r = e.getBoundingClientRect(); return {text: e.textContent, l: r.left, t: r.top,"
        " r: r.right, b: r.bottom, hw: e.getAttribute('data-hardware'),"
        " i: e.getAttribute('data-index'), key: e.getAttribute('data-target')}; });", selector)


def _seconds(text):
    value, unit = text.split()
    return float(value) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]


def test_serve_chart_axes_chips_targets_and_clicked_point(browser, tmp_path, page_text):
    """Both charts: numbered axes (times and tokens/s, no e-notation), every chip at once in
    its own colour with a legend, each target a line at its value, the clicked point ringed."""
    from selenium.webdriver.support.ui import WebDriverWait

    path = tmp_path / "plan.html"
    path.write_text(page_text, encoding="utf-8")
    browser.get(path.as_uri())
    WebDriverWait(browser, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    for svg, key, goal in (("frontier", "tpot_s", 0.02), ("ttft-chart", "ttft_s", 1.0)):
        xs = _svg_rects(browser, f"#{svg} .tick.x")
        ys = _svg_rects(browser, f"#{svg} .tick.y")
        assert len(xs) >= 3 and len(ys) >= 3
        # x: times increasing left to right, log spaced; y: 0 at the bottom, SI prefixes
        at = [((x["l"] + x["r"]) / 2, _seconds(x["text"])) for x in xs]
        assert [v for _, v in at] == sorted(v for _, v in at)
        assert ys[0]["text"] == "0" and all(re.fullmatch(r"[\d.]+( k)?", y["text"]) for y in ys)
        assert ys[-1]["t"] < ys[0]["t"]
        (line,) = _svg_rects(browser, f"#{svg} .target")
        assert line["key"] == key
        # the target line sits where the log axis puts its value
        (p0, v0), (p1, v1) = at[0], at[-1]
        want = p0 + (np.log10(goal) - np.log10(v0)) / (np.log10(v1) - np.log10(v0)) * (p1 - p0)
        assert abs((line["l"] + line["r"]) / 2 - want) < 2
        legend = [t["text"] for t in _svg_rects(browser, f"#{svg} .legend")]
        assert legend == ["h100-sxm", "mi300x"]
        chips = {p["hw"] for p in _svg_rects(browser, f"#{svg} .point")}
        assert chips == {"h100-sxm", "mi300x"}
        colours = browser.execute_script(
            "var out = {}; document.querySelectorAll(arguments[0]).forEach(function (p) {"
            " out[p.getAttribute('data-hardware')] = p.getAttribute('fill'); }); return out;",
            f"#{svg} .point")
        assert len(set(colours.values())) == 2
    assert _svg_rects(browser, ".clicked-marker") == []
    points = _svg_rects(browser, "#frontier .point")
    pick = points[len(points) // 3]
    browser.execute_script(
        "document.querySelector('#frontier .point[data-index=\"' + arguments[0] + '\"]')"
        ".dispatchEvent(new MouseEvent('click'))", pick["i"])
    markers = _svg_rects(browser, ".clicked-marker")
    assert len(markers) == 2  # in both charts, around the clicked point
    for svg, marker in zip(("frontier", "ttft-chart"), markers, strict=True):
        (p,) = [q for q in _svg_rects(browser, f"#{svg} .point") if q["i"] == pick["i"]]
        assert abs((marker["l"] + marker["r"]) / 2 - (p["l"] + p["r"]) / 2) < 1
        assert abs((marker["t"] + marker["b"]) / 2 - (p["t"] + p["b"]) / 2) < 1
    text = browser.execute_script("return document.body.innerText")
    assert not re.search(r"\de[+-]?\d", text), re.findall(r"\S*\de[+-]?\d\S*", text)
    assert browser.get_log("browser") == []


def test_the_page_starts_at_the_plans_own_targets():
    """No target given: the sliders start at their end (no constraint), so the page's best
    is the CLI's; a given target lands within the slider's step (30 ms was 30.2 ms)."""
    import re

    from roofline.render.serve_page import SLIDER_STEPS, serve_page
    from roofline.serve import Space, Targets, Workload, plan

    w = Workload.from_lengths(2048, 256)
    free = serve_page(plan("llama-3.1-8b", ["h100"], w, space=Space(tp=(1,))))
    assert re.search(r'id="tpot" min="0" max="(\d+)" step="1" value="\1"', free)
    given = serve_page(plan("llama-3.1-8b", ["h100"], w, Targets(tpot_s=0.03),
                            Space(tp=(1,))))
    value = int(re.search(r'id="tpot" [^>]*value="(\d+)"', given).group(1))
    assert 10 ** (value / SLIDER_STEPS) * 1e-3 == pytest.approx(0.03, rel=2e-3)
