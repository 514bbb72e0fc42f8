"""Rich notebook display: IPython's HTML formatter learns our result types here, so the core
types need no display code (and no import of this layer)."""

from __future__ import annotations

from typing import Any


def register(shell: Any) -> None:
    """Teach an IPython shell to show Estimates, model steps and chips as HTML."""
    from ..evaluate import Estimate
    from ..hardware import Chip
    from ..models.analysis import ModelAnalysis
    from . import html
    from .chip import chip_tables
    from .pages import estimate_html, model_fragment

    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type(Estimate, estimate_html)
    formatter.for_type(ModelAnalysis, model_fragment)
    formatter.for_type(Chip, lambda c: "<div>" + "".join(html.render(t)
                                                         for t in chip_tables(c)) + "</div>")

