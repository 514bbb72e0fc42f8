"""Tables and whole pages as HTML.

A page is one file that fetches nothing when opened: inline SVG, a few lines of inline
vanilla JS for the chart's tooltips, and a Content-Security-Policy that admits only that
script and that style (by hash), so "no network" is a rule the browser enforces. Every name
goes through `xml_text`; the tooltip text is set with `textContent`, never as markup.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from .safe import xml_text
from .table import Table


def render(t: Table) -> str:
    """A table in a scrolling box: a wide table never widens the page."""
    head = "".join(f"<th>{xml_text(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td>{xml_text(c)}</td>" for c in row) + "</tr>"
                   for row in t.cells())
    cap = f"<caption>{xml_text(t.caption)}</caption>" if t.caption else ""
    notes = "".join(f'<p class="note">{xml_text(n)}</p>' for n in t.notes)
    return (f'<div class="table-box"><table>{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>{notes}")


def figures(items: Sequence[tuple[str, str, str]]) -> str:
    """Key figures as cards: (label, value, explanation)."""
    cards = "".join(f'<div class="figure"><div class="label">{xml_text(label)}</div>'
                    f'<div class="value">{xml_text(value)}</div>'
                    f'<div class="explain">{xml_text(why)}</div></div>'
                    for label, value, why in items)
    return f'<div class="figures">{cards}</div>'


CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { margin-bottom: 0.25rem; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
.table-box { max-width: 100%; overflow-x: auto; margin-bottom: 1rem; }
caption { text-align: left; font-weight: 600; padding: 0.25rem 0; }
th, td { /* break-word: wrap at spaces, never "attainabl e" */
         border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; padding: 0.75rem; white-space: pre-wrap;
      overflow-wrap: anywhere; font-size: 0.85rem; }
.note { color: #555; font-size: 0.9rem; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr));
           gap: 0.75rem; margin: 1rem 0; }
.figure { border: 1px solid #ddd; border-radius: 6px; padding: 0.6rem 0.8rem; }
.figure .label { color: #555; font-size: 0.85rem; }
.figure .value { font-size: 1.35rem; font-weight: 600; overflow-wrap: anywhere; }
.figure .explain { color: #555; font-size: 0.8rem; }
#chart { position: relative; display: inline-block; max-width: 100%; }
#chart svg { max-width: 100%; height: auto; }
#chart svg text { font-size: 11px; }
#chart svg text:not([fill]) { fill: #333; }
#chart .point { cursor: pointer; }
#chart .point:hover, #chart .point:focus { stroke-width: 3; outline: none; }
#tooltip { position: absolute; background: #222; color: #fff; padding: 0.4rem 0.6rem;
           border-radius: 4px; font-size: 0.8rem; white-space: pre; pointer-events: none; }
#tooltip[hidden] { display: none; }
"""

# Hover (or keyboard focus) on a point shows its data-tip; textContent keeps it plain text.
JS = """
"use strict";
(function () {
  var chart = document.getElementById("chart");
  if (!chart) { return; }
  var tip = document.getElementById("tooltip");
  function show(point) {
    tip.textContent = point.getAttribute("data-tip");
    tip.hidden = false;
    var p = point.getBoundingClientRect(), c = chart.getBoundingClientRect();
    var left = p.right - c.left + 8;
    if (left + tip.offsetWidth > chart.clientWidth) {
      left = p.left - c.left - tip.offsetWidth - 8;
    }
    tip.style.left = Math.max(0, left) + "px";
    tip.style.top = (p.top - c.top) + "px";
  }
  function hide() { tip.hidden = true; }
  chart.querySelectorAll(".point").forEach(function (point) {
    point.addEventListener("mouseover", function () { show(point); });
    point.addEventListener("focus", function () { show(point); });
    point.addEventListener("mouseout", hide);
    point.addEventListener("blur", hide);
  });
})();
"""


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def csp(script: str = JS) -> str:
    """Nothing may load: no default source, only this script and this style (by hash)."""
    return (f"default-src 'none'; script-src '{_sha256(script)}'; style-src '{_sha256(CSS)}'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


CSP = csp()


def page(title: str, body: Sequence[str], script: str = JS) -> str:
    """A whole self-contained document around `body` (already-escaped HTML parts); `script`
    is its one script (the CSP admits it by hash; a JSON data block is not a script)."""
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{csp(script)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{xml_text(title)}</title>",
        '<link rel="icon" href="data:,">',  # or the browser asks the server for /favicon.ico
        f"<style>{CSS}</style>", "</head>", "<body>", *body,
        f"<script>{script}</script>", "</body>", "</html>", ""])
