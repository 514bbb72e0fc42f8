"""Tables as aligned plain text for a terminal."""

from __future__ import annotations

from collections.abc import Sequence

from .safe import terminal_safe
from .table import Table, text_table


def render(t: Table, caption: bool = True) -> str:
    """Numeric columns right-aligned (declared, or every cell looks like a number)."""
    cells = [[terminal_safe(c) for c in row] for row in t.cells()]
    headers = [terminal_safe(h) for h in t.headers]
    widths = [max(len(r[i]) for r in [headers, *cells]) for i in range(len(headers))]
    numeric = [col.numeric or (i > 0 and bool(cells)
                               and all(r[i][:1] in "0123456789-[." for r in cells))
               for i, col in enumerate(t.columns)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(row, widths, numeric, strict=True)).rstrip()

    out = [terminal_safe(t.caption)] if t.caption and caption else []
    out += [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in cells)]
    return "\n".join([*out, *(terminal_safe(n) for n in t.notes)])


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Shorthand: strings in, aligned text out."""
    return render(text_table(headers, rows))
