"""Compatibility names: the reports live in `roofline.render.pages` (HTML, Markdown, CSV)."""

from .render.pages import (
    estimate_html,
    estimates_csv,
    estimates_markdown,
    html_report,
    markdown_report,
)
from .render.svg import roofline_svg

__all__ = ["estimate_html", "estimates_csv", "estimates_markdown", "html_report",
           "markdown_report", "roofline_svg"]
