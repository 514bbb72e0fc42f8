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
    points[len(points) // 2].click()
    detail = browser.find_element(By.ID, "detail").text
    assert detail.startswith("mi300x") and "by resource" in detail and EVIL in detail
    assert browser.execute_script("return window.__pwned === undefined")
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
