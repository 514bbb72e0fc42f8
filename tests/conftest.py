"""Shared fixtures, hypothesis settings, and the `gpu` marker's skip (markers: pyproject)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from hypothesis import settings

# benchmarks/validation/cases.py turns the published rows into bounds, for the tests
# (`import cases`) and for check.py; benchmarks/ is not a package
sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks" / "validation"))

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


import pytest  # noqa: E402


@pytest.fixture
def run_cli(capsys):
    """Run `roofline ...` in-process: (exit code, stdout, stderr); argparse's own rejections
    (SystemExit) come back as their exit code."""
    from roofline.cli import main

    def call(*argv):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return call


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run where CUDA is available and are skipped, saying why, elsewhere
    (torch is imported only when such a test was collected)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if gpu and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (marker 'gpu')")
        for item in gpu:
            item.add_marker(skip)


# --- a real browser for the offline pages (headless Chromium through selenium) ---------------

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# As .ci's machines need them: no sandbox as root, no GPU, and no background connections
# (the network is closed; Chromium would otherwise try to reach Google at start-up).
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def browser_missing() -> str:
    for path, package in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")]:
        if not os.access(path, os.X_OK):
            return f"{path} not found (Debian package {package}; .ci/run installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (pip install selenium; .ci/run installs it)"
    return ""


@pytest.fixture(scope="module")
def browser():
    reason = browser_missing()
    if reason:
        if os.environ.get("ROOFLINE_REQUIRE_BROWSER"):  # set by .ci/run: never skip there
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument("--window-size=1200,1000")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        driver.get("about:blank")  # leave the start page before any log is read
        try:
            yield driver
        finally:
            driver.quit()


def requests_sent(driver) -> list[str]:
    """URLs of every request the browser made since the last call (DevTools Network log)."""
    events = [json.loads(entry["message"])["message"] for entry in driver.get_log("performance")]
    return [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]
