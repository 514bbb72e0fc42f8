"""Every command output shown in the README and the docs, produced by running the command.

A page marks an output with an HTML comment naming the command, and the block up to the
closing comment is the command's output:

    <!-- run: roofline op matmul --m 128 --k 8192 --n 8192 -->
    ```text
    $ roofline op matmul --m 128 --k 8192 --n 8192
    ...
    ```
    <!-- /run -->

`run head=N:` keeps the first N lines (then `...`); `run-markdown:` pastes the output's table
lines as Markdown (the validation tables of `benchmarks/validation/check.py`) and the rest
as text. `python docs/examples.py --write` re-runs every command and rewrites the blocks;
`python docs/examples.py` (and tests/test_docs.py) says which are stale.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "python docs/examples.py --write"
MARKER = re.compile(
    r"^<!-- (?P<kind>run|run-markdown)(?: head=(?P<head>\d+))?: (?P<cmd>.+?) -->\n"
    r"(?P<body>.*?)"
    r"^<!-- /(?P=kind) -->$",
    flags=re.M | re.S)


@dataclass(frozen=True)
class Example:
    page: Path
    kind: str
    command: str
    head: int | None
    body: str  # what the page shows now, between the markers


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def examples(paths: list[Path] | None = None) -> Iterator[Example]:
    for page in paths or pages():
        for m in MARKER.finditer(page.read_text()):
            head = int(m["head"]) if m["head"] else None
            yield Example(page, m["kind"], m["cmd"], head, m["body"])


def run(command: str) -> str:
    """The command's stdout, run from the repository root as a user would type it."""
    words = shlex.split(command)
    if words[0] == "roofline":
        words = [sys.executable, "-m", "roofline", *words[1:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "PYTHONHASHSEED": "0"}
    done = subprocess.run(words, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode not in (0, 1) or not done.stdout.strip():  # check.py exits 1 on a finding
        raise RuntimeError(f"`{command}` exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.rstrip()


def render(example: Example, output: str) -> str:
    """The block between the markers for this output."""
    lines = output.splitlines()
    if example.kind == "run-markdown":
        table = [line for line in lines if line.startswith("|")]
        rest = [line for line in lines if line.strip() and not line.startswith("|")]
        block = "\n".join(table) + "\n"
        if rest:
            block += "\n```text\n" + "\n".join(rest) + "\n```\n"
        return block
    if example.head is not None and len(lines) > example.head:
        lines = [*lines[:example.head], "..."]
    return "```text\n$ " + example.command + "\n" + "\n".join(lines) + "\n```\n"


def stale(paths: list[Path] | None = None) -> list[tuple[Example, str]]:
    """(example, what it should show) for every example whose page shows something else."""
    out = []
    for ex in examples(paths):
        want = render(ex, run(ex.command))
        if ex.body != want:
            out.append((ex, want))
    return out


def write(paths: list[Path] | None = None) -> int:
    changed = 0
    for page in paths or pages():
        text = page.read_text()

        def fill(m: re.Match[str], page: Path = page) -> str:
            head = int(m["head"]) if m["head"] else None
            ex = Example(page, m["kind"], m["cmd"], head, m["body"])
            start, end = m.start("body") - m.start(), m.end("body") - m.start()
            return m[0][:start] + render(ex, run(ex.command)) + m[0][end:]

        new = MARKER.sub(fill, text)
        if new != text:
            page.write_text(new)
            changed += 1
            print(f"wrote {page.relative_to(ROOT)}")
    return changed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="rewrite the stale blocks in place")
    p.add_argument("pages", nargs="*", type=Path, help="only these pages (default: all)")
    args = p.parse_args()
    paths = [path.resolve() for path in args.pages] or None
    if args.write:
        write(paths)
        return 0
    found = stale(paths)
    for ex, _ in found:
        print(f"stale: {ex.page.relative_to(ROOT)}: {ex.command}")
    if found:
        print(f"run `{REGENERATE}` to rewrite them")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
