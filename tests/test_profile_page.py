"""`roofline profile --html` in headless Chromium (issue 32): the page loads offline (file://,
nothing fetched), shows the timeline and the kernels on the roofline chart, logs no console
error, and a hostile kernel name is shown as text, never run. The `browser` fixture
(conftest.py) skips without Chromium unless ROOFLINE_REQUIRE_BROWSER is set."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from conftest import requests_sent
from roofline.cli import main
from test_profile_nsys import export

EVIL = '<img src=x onerror="window.__pwned=1">kernel</img><script>window.__pwned=2</script>'


def test_profile_page_in_headless_chromium(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    trace = export(tmp_path / "run.sqlite")
    with sqlite3.connect(trace) as conn:  # the unmapped kernel gets a hostile name
        conn.execute("UPDATE StringIds SET value = ? WHERE id = 3", (EVIL,))
    conn.close()
    page = tmp_path / "profile.html"
    assert main(["profile", str(trace), "--html", str(page)]) == 0
    url = page.as_uri()
    browser.get_log("browser")  # drop what an earlier page left
    requests_sent(browser)
    browser.get(url)
    WebDriverWait(browser, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    assert browser.get_log("browser") == []  # no console errors, warnings or CSP reports
    assert requests_sent(browser) == [url]  # offline: the page, nothing else
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0

    # the timeline: one stream, a bar per row coloured by measured/bound: the add 0.89x
    # green, the mm 2.3x amber, the 1 us memset of 4 kB red, the unmapped kernel grey
    bars = browser.find_elements(By.CSS_SELECTOR, 'svg[aria-label="timeline"] rect')
    assert sorted(b.get_attribute("fill") for b in bars) == \
        ["#4CAF50", "#BBBBBB", "#E53935", "#FFB300"]
    assert all(b.size["width"] > 0 and b.is_displayed() for b in bars)
    # the roofline chart with its roofs and the two mapped kernels that do FLOPs
    assert browser.execute_script("return document.querySelectorAll('svg .roof').length") > 0
    points = browser.find_elements(By.CSS_SELECTOR, "svg .point.measured")
    assert sorted(p.get_attribute("data-name") for p in points) == \
        ["add 16777216 fp32", "mm 1024x1024x1024 bf16"]
    tip = browser.find_element(By.ID, "tooltip")
    browser.execute_script(
        "arguments[0].dispatchEvent(new MouseEvent('mouseover', {bubbles: true}))", points[0])
    WebDriverWait(browser, 5).until(lambda d: tip.is_displayed())
    assert "(measured)" in tip.text.splitlines()[0]

    # the hostile kernel name: in the kernel table as text, never markup, never run
    assert EVIL in browser.find_element(By.TAG_NAME, "body").text
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.find_elements(By.CSS_SELECTOR, "img") == []
    assert browser.get_log("browser") == []
