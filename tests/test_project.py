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


def python_blocks(page: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)\n```", (ROOT / page).read_text(), flags=re.M | re.S)


def test_readme_python_example_runs():
    scope: dict = {}
    exec(compile(python_blocks("README.md")[0], "README.md", "exec"), scope)  # our own README
    assert scope["a"].bound == "hbm" and scope["a"].memory.fits
    assert f"{scope['a'].tpot_s:.4f}" in python_blocks("README.md")[0]


def test_api_page_model_example_runs():
    code = python_blocks("docs/api.md")[0]
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)  # our own docs, not user input
    assert scope["a"].bound == "hbm" and scope["a"].memory.fits


def test_api_page_python_example_runs_and_its_comments_hold():
    code = python_blocks("docs/api.md")[-1]
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)  # our own docs, not user input
    assert scope["est"].bound == "hbm"
    assert round(scope["est"].intensity["hbm"], 1) == 124.1
    assert scope["first_compute_bound"] == 160
    assert "# 160 (bf16 weights: 319)" in code


def device_script_commands() -> list[list[str]]:
    """Every `python3 -m roofline ...` command of scripts/device_check.sh, its shell
    variables filled in as a run fills them (continuation lines joined)."""
    import shlex

    text = (ROOT / "scripts" / "device_check.sh").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if "python3 -m roofline " not in line:
            continue
        words = shlex.split(line.split("python3 -m roofline ", 1)[1].split(">")[0])
        filled = [w.replace("$OUT", "out").replace("$DEVICE", "cuda") for w in words]
        commands.append([w for w in filled if w != "$QUICK"])
    return commands


def test_the_device_script_matches_the_cli():
    """The device check runs when a session has the GPU (15 minutes, no time to find out
    then that an option was renamed): every command in it parses against the CLI."""
    from roofline.cli import build_parser

    commands = device_script_commands()
    assert len(commands) >= 4  # peaks, ops, trace, the GEMM's bound
    parser = build_parser()
    for words in commands:
        parser.parse_args(words)  # argparse exits (fails the test) on an unknown option
