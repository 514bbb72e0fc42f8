"""The project's front door: README commands, CI script and package metadata agree."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^```(?:bash|sh)\n(.*?)\n```", text, flags=re.M | re.S)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in [block.strip() for block in readme_commands()]


def test_readme_main_command_present():
    blocks = [b.strip() for b in readme_commands()]
    assert any(b.startswith("pip install -e . && roofline ") for b in blocks)


def test_py_typed_shipped():
    assert (ROOT / "src" / "roofline" / "py.typed").exists()


def test_readme_model_example_runs():
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"^```python\n(.*?)\n```", text, flags=re.M | re.S)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # our own README, not user input
    assert scope["a"].bound == "hbm" and scope["a"].memory.fits


def test_readme_python_example_runs_and_its_comments_hold():
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"^```python\n(.*?)\n```", text, flags=re.M | re.S)[-1]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # our own README, not user input
    assert scope["est"].bound == "hbm"
    assert round(scope["est"].intensity["hbm"], 1) == 124.1
    assert scope["first_compute_bound"] == 160
    assert "# 160 (bf16 weights: 319)" in code
