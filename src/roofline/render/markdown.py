"""Tables as GitHub-flavoured Markdown; every cell escaped (names are data)."""

from __future__ import annotations

from .safe import markdown_cell
from .table import Table


def render(t: Table) -> str:
    lines = [f"**{markdown_cell(t.caption)}**", ""] if t.caption else []
    lines += ["| " + " | ".join(markdown_cell(h) for h in t.headers) + " |",
              "|" + "|".join("---" for _ in t.columns) + "|"]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in t.cells()]
    lines += [f"\n{markdown_cell(n)}" for n in t.notes]
    return "\n".join(lines)
