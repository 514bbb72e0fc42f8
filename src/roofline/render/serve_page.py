"""`roofline serve --html`: one offline page. The physics stays in Python: the page embeds
the plan's operating points (a JSON data block, not a script) and its one script only
filters them by the controls (chip, quantization, mode, TPOT / TTFT targets), redraws the
frontier and picks the best point; clicking a point shows its configuration and step
breakdown. Every name reaches the page as text (xml_text here, textContent there)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..serialize import jsonable
from .html import figures, page
from .safe import xml_text

MAX_POINTS = 6000  # embedded points (the frontier needs the whole range, not every point)
FIELDS = ("hardware", "mode", "weight_dtype", "kv_dtype", "tp", "pp", "dp", "ep",
          "prefill_tp", "prefill_ratio", "running", "chunk", "chips", "tpot_s", "ttft_s",
          "e2e_s", "output_tokens_per_s_per_chip", "requests_per_s", "bound", "t_step_s",
          "queue_s", "kv_transfer_s", "utilization")

SLIDER_STEPS = 1000  # per decade: a target given on the command line lands within 0.12%
SCRIPT = """
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("grid").textContent);
  var cols = data.columns, n = cols.tpot_s.length, W = 720, H = 420, M = 56;
  var $ = function (id) { return document.getElementById(id); };
  var NS = "http://www.w3.org/2000/svg";
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    parent.appendChild(e); return e;
  }
  function ms(v) { return v >= 1 ? v.toPrecision(3) + " s" : (v * 1e3).toPrecision(3) + " ms"; }
  function target(id) { return Math.pow(10, Number($(id).value) / @STEPS@) * 1e-3; }
  function row(i) {
    var r = {}; Object.keys(cols).forEach(function (k) { r[k] = cols[k][i]; }); return r;
  }
  function describe(r) {
    var lines = [r.hardware + ", " + r.mode + ", " + r.chips.toPrecision(3) + " chips",
      "tp " + r.tp + " pp " + r.pp + " dp " + r.dp + " ep " + r.ep +
        (r.mode === "disaggregated" ? "; prefill tp " + r.prefill_tp + " x" +
         r.prefill_ratio.toPrecision(3) + " per decode instance" : ""),
      "weights " + r.weight_dtype + ", KV " + r.kv_dtype + ", batch " + r.running +
        ", chunk " + r.chunk,
      r.output_tokens_per_s_per_chip.toPrecision(4) + " output tokens/s per chip, " +
        r.requests_per_s.toPrecision(3) + " requests/s",
      "TTFT " + ms(r.ttft_s) + " (queue " + ms(r.queue_s) + ", KV transfer " +
        ms(r.kv_transfer_s) + "), TPOT " + ms(r.tpot_s) + ", E2E " + ms(r.e2e_s),
      "step " + ms(r.t_step_s) + ", " + r.bound + "-bound; by resource:"];
    Object.keys(cols).forEach(function (k) {
      if (k.indexOf("time_") === 0 && r[k] > 0) {
        lines.push("  " + k.slice(5, -2) + " " + ms(r[k]));
      }
    });
    return lines.join("\\n");
  }
  function update() {
    var hw = $("chip").value, quant = $("quant").value, mode = $("mode").value;
    var tpot = target("tpot"), ttft = target("ttft");
    $("tpot-value").textContent = ms(tpot); $("ttft-value").textContent = ms(ttft);
    var pts = [], best = -1;
    for (var i = 0; i < n; i++) {
      if (cols.hardware[i] !== hw) { continue; }
      if (quant !== "any" && cols.weight_dtype[i] + "/" + cols.kv_dtype[i] !== quant) { continue; }
      if (mode !== "any" && cols.mode[i] !== mode) { continue; }
      if (cols.ttft_s[i] > ttft) { continue; }
      pts.push(i);
      if (cols.tpot_s[i] <= tpot && (best < 0 || cols.output_tokens_per_s_per_chip[i] >
          cols.output_tokens_per_s_per_chip[best])) { best = i; }
    }
    pts.sort(function (a, b) { return cols.tpot_s[a] - cols.tpot_s[b]; });
    var front = [], top = -1;
    pts.forEach(function (i) {
      if (cols.output_tokens_per_s_per_chip[i] > top) {
        front.push(i); top = cols.output_tokens_per_s_per_chip[i];
      }
    });
    draw(front, best, tpot);
    $("best").textContent = best < 0 ? "no point meets the targets" : describe(row(best));
    $("chart").setAttribute("data-best", String(best));
    $("chart").setAttribute("data-points", String(front.length));
  }
  function draw(front, best, tpot) {
    var svg = $("frontier");
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var xs = front.map(function (i) { return Math.log10(cols.tpot_s[i]); });
    var ys = front.map(function (i) { return cols.output_tokens_per_s_per_chip[i]; });
    var x0 = Math.min.apply(null, xs.concat([Math.log10(tpot)])) - 0.1;
    var x1 = Math.max.apply(null, xs.concat([Math.log10(tpot)])) + 0.1;
    var y1 = Math.max.apply(null, ys.concat([1])) * 1.1;
    function X(v) { return M + (v - x0) / (x1 - x0) * (W - 2 * M); }
    function Y(v) { return H - M - v / y1 * (H - 2 * M); }
    el("line", {x1: M, y1: H - M, x2: W - M, y2: H - M, stroke: "#333"}, svg);
    el("line", {x1: M, y1: M, x2: M, y2: H - M, stroke: "#333"}, svg);
    var tx = el("text", {x: W / 2, y: H - 16, "text-anchor": "middle"}, svg);
    tx.textContent = "TPOT (log scale)";
    var ty = el("text", {x: 14, y: M - 12}, svg);
    ty.textContent = "output tokens/s per chip (max " + (y1 / 1.1).toPrecision(3) + ")";
    el("line", {x1: X(Math.log10(tpot)), y1: M, x2: X(Math.log10(tpot)), y2: H - M,
                stroke: "#c00", "stroke-dasharray": "4 3", "class": "target"}, svg);
    front.forEach(function (i, k) {
      var c = el("circle", {cx: X(xs[k]), cy: Y(ys[k]), r: i === best ? 7 : 4,
        fill: i === best ? "#c00" : "#1f77b4", "class": "point" + (i === best ? " best" : ""),
        tabindex: "0", "data-index": String(i)}, svg);
      c.addEventListener("click", function () { $("detail").textContent = describe(row(i)); });
    });
  }
  ["chip", "quant", "mode", "tpot", "ttft"].forEach(function (id) {
    $(id).addEventListener("input", update); $(id).addEventListener("change", update);
  });
  update();
})();
""".replace("@STEPS@", str(SLIDER_STEPS))


def _thin(p: Any) -> np.ndarray[Any, Any]:
    """Indices to embed: points that fit and can carry their load, at most MAX_POINTS (the
    frontier points first, then an even spread of the rest)."""
    c = p.columns
    ok = np.flatnonzero(c["fits"] & c["feasible"])
    if ok.size <= MAX_POINTS:
        return ok
    keep = set()
    for hw in dict.fromkeys(c["hardware"].tolist()):
        keep.update(p.frontier("tpot_s", hw))
    rest = np.setdiff1d(ok, np.fromiter(keep, int))
    step = max(1, rest.size // max(1, MAX_POINTS - len(keep)))
    return np.union1d(np.fromiter(keep, int), rest[::step])


def _compact(values: np.ndarray[Any, Any]) -> list[Any]:
    """4 significant digits are plenty for a chart and a readout (and keep the page small)."""
    if values.dtype.kind == "f":
        return [float(f"{v:.4g}") for v in values.tolist()]
    return list(values.tolist())


def _select(name: str, label: str, options: list[str]) -> str:
    opts = "".join(f'<option value="{xml_text(o)}">{xml_text(o)}</option>' for o in options)
    return f'<label>{xml_text(label)} <select id="{name}">{opts}</select></label> '


def _slider(name: str, label: str, seconds: float | None) -> str:
    """A log-scale target from 1 ms to 100 s; no target: the slider's end (100 s)."""
    value = 5 * SLIDER_STEPS if seconds is None else \
        round(SLIDER_STEPS * float(np.log10(seconds * 1e3)))
    return (f'<label>{xml_text(label)} <input type="range" id="{name}" min="0" '
            f'max="{5 * SLIDER_STEPS}" step="1" value="{value}"> '
            f'<span id="{name}-value"></span></label> ')


def serve_page(p: Any) -> str:
    idx = _thin(p)
    c = p.columns
    keys = [k for k in c if k in FIELDS or k.startswith("time_")]
    data = {"columns": {k: _compact(c[k][idx]) for k in keys}}
    # a JSON block in a script element: '<' escaped so no text can close the element
    blob = json.dumps(jsonable(data)).replace("<", "\\u003c")
    hws = list(dict.fromkeys(c["hardware"][idx].tolist()))
    quants = ["any", *dict.fromkeys(f"{w}/{k}" for w, k in zip(
        c["weight_dtype"][idx].tolist(), c["kv_dtype"][idx].tolist(), strict=True))]
    modes = ["any", *dict.fromkeys(c["mode"][idx].tolist())]
    w, t = p.workload, p.targets
    body = [
        f"<h1>{xml_text('roofline serve: ' + p.model)}</h1>",
        figures([("requests", f"{w.input_len:g} prompt + {w.output_len:g} output tokens",
                  "means over the requests"),
                 ("points", f"{len(idx)} of {len(p)}", "that fit and carry their load"),
                 ("expected", "a forecast", "step times are expected times (sourced "
                  "and fitted efficiencies)") if p.expected else
                 ("bounds", "throughput upper, TPOT lower",
                  "step times are the model's lower bounds; TTFT adds an M/D/1 wait")]),
        "<p>" + _select("chip", "chip", hws) + _select("quant", "weights/KV", quants)
        + _select("mode", "mode", modes) + "</p>",
        "<p>" + _slider("tpot", "target TPOT", t.tpot_s)
        + _slider("ttft", "target TTFT", t.ttft_s) + "</p>",
        '<div id="chart"><svg id="frontier" xmlns="http://www.w3.org/2000/svg" width="720" '
        'height="420" viewBox="0 0 720 420"></svg></div>',
        "<h2>best point meeting the targets</h2>", '<pre id="best"></pre>',
        "<h2>clicked point</h2>", '<pre id="detail">click a point of the frontier</pre>',
        '<p class="note">Frontier: output tokens/s per chip against TPOT among the points '
        "within the TTFT target. "
        + ("Expected times (a forecast with sourced and fitted efficiencies), not bounds"
           if p.expected else "Bounds, not forecasts") + ": TTFT adds an M/D/1 wait for the "
        "prefill budget (a queueing estimate at the point's own request rate) to the "
        "request's own prefill.</p>",
        f'<script type="application/json" id="grid">{blob}</script>',
    ]
    return page(f"roofline serve {p.model}", body, SCRIPT)
