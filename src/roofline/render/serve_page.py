"""`roofline serve --html`: one offline page. The physics stays in Python: the page embeds
the plan's operating points (a JSON data block, not a script) and its one script only
filters them by the controls (chip, quantization, mode, TPOT / TTFT targets), redraws the
frontier and picks the best point; clicking a point shows its configuration and step
breakdown. Every name reaches the page as text (xml_text here, textContent there)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from ..serialize import jsonable
from .html import figures, page
from .safe import xml_text

if TYPE_CHECKING:
    from ..serve.plan import ServePlan
    from ..serve.point import Column, Scalar

MAX_POINTS = 6000  # embedded points (the frontier needs the whole range, not every point)
FIELDS = ("hardware", "mode", "weight_dtype", "kv_dtype", "tp", "pp", "dp", "ep",
          "prefill_tp", "prefill_ratio", "prefill_workers", "decode_workers", "running",
          "chunk", "chips", "gpus", "tpot_s", "ttft_s",
          "e2e_s", "output_tokens_per_s_per_chip", "requests_per_s", "bound", "t_step_s",
          "queue_s", "kv_transfer_s", "utilization")

SLIDER_STEPS = 1000  # per decade: a target given on the command line lands within 0.12%
SCRIPT = """
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("grid").textContent);
  var cols = data.columns, n = cols.tpot_s.length;
  var W = 720, H = 380, L = 72, R = 20, T = 44, B = 44;
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  var $ = function (id) { return document.getElementById(id); };
  var NS = "http://www.w3.org/2000/svg", clicked = -1;
  var chips = Array.prototype.map.call($("chip").options, function (o) { return o.value; })
    .filter(function (v) { return v !== "all"; });
  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) { e.textContent = text; }
    parent.appendChild(e); return e;
  }
  function num(v) {  /* 3 significant digits, never e-notation */
    var s = Number(v.toPrecision(3)).toFixed(6);
    return s.indexOf(".") < 0 ? s : s.replace(/0+$/, "").replace(/\\.$/, "");
  }
  function si(v, unit) {
    var p = ["", " k", " M", " G", " T", " P"], k = 0;
    v = Number(v.toPrecision(3));
    while (Math.abs(v) >= 1000 && k < p.length - 1) { v /= 1000; k++; }
    return (num(v) + p[k] + (unit ? (k ? "" : " ") + unit : "")).trim();
  }
  function ms(v) {
    var u = [[1, "s"], [1e-3, "ms"], [1e-6, "us"], [1e-9, "ns"]];
    for (var j = 0; j < u.length; j++) {
      if (Math.abs(v) >= u[j][0] * 0.9995) { return num(v / u[j][0]) + " " + u[j][1]; }
    }
    return v === 0 ? "0 s" : num(v / 1e-9) + " ns";
  }
  function slider(id) { return Number($(id).value) >= Number($(id).max) ? null : target(id); }
  function target(id) { return Math.pow(10, Number($(id).value) / @STEPS@) * 1e-3; }
  function row(i) {
    var r = {}; Object.keys(cols).forEach(function (k) { r[k] = cols[k][i]; }); return r;
  }
  function describe(r) {
    var lines = [r.hardware + ", " + r.mode + ", " + r.gpus + " GPUs",
      "tp " + r.tp + " pp " + r.pp + " dp " + r.dp + " ep " + r.ep +
        (r.mode === "disaggregated" ? "; " + r.decode_workers + " decode and " +
         r.prefill_workers + " prefill (tp " + r.prefill_tp + ") workers" : ""),
      "weights " + r.weight_dtype + ", KV " + r.kv_dtype + ", batch " + r.running +
        ", chunk " + r.chunk,
      si(r.output_tokens_per_s_per_chip) + " output tokens/s per chip, " +
        si(r.requests_per_s) + " requests/s",
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
    $("tpot-value").textContent = slider("tpot") === null ? "none" : ms(tpot);
    $("ttft-value").textContent = slider("ttft") === null ? "none" : ms(ttft);
    var best = -1, fronts = [];
    chips.forEach(function (chip) {
      if (hw !== "all" && chip !== hw) { return; }
      var pts = [];
      for (var i = 0; i < n; i++) {
        if (cols.hardware[i] !== chip) { continue; }
        if (quant !== "any" && cols.weight_dtype[i] + "/" + cols.kv_dtype[i] !== quant) {
          continue;
        }
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
      fronts.push({chip: chip, color: COLORS[chips.indexOf(chip) % COLORS.length],
                   points: front});
    });
    var all = [].concat.apply([], fronts.map(function (f) { return f.points; }));
    if (all.indexOf(clicked) < 0) { clicked = -1; }
    draw($("frontier"), "tpot_s", "TPOT", slider("tpot"), fronts, best);
    draw($("ttft-chart"), "ttft_s", "TTFT", slider("ttft"), fronts, best);
    $("best").textContent = best < 0 ? "no point meets the targets" : describe(row(best));
    $("chart").setAttribute("data-best", String(best));
    $("chart").setAttribute("data-points", String(all.length));
  }
  function ticksLog(x0, x1) {  /* x0, x1: log10 seconds */
    var out = [], muls = x1 - x0 > 2.5 ? [1] : [1, 2, 5];
    for (var d = Math.floor(x0); d <= Math.ceil(x1); d++) {
      muls.forEach(function (m) {
        var v = Math.log10(m) + d; if (v >= x0 && v <= x1) { out.push(v); }
      });
    }
    return out;
  }
  function ticksLinear(y1) {
    var raw = y1 / 5, mag = Math.pow(10, Math.floor(Math.log10(raw))), step = mag;
    [1, 2, 5, 10].some(function (m) { step = m * mag; return raw <= step; });
    var out = [0];
    while (out[out.length - 1] < y1) { out.push(out.length * step); }
    return out;
  }
  function draw(svg, key, name, goal, fronts, best) {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var all = [].concat.apply([], fronts.map(function (f) { return f.points; }));
    var xs = all.map(function (i) { return Math.log10(Math.max(cols[key][i], 1e-9)); });
    var ys = all.map(function (i) { return cols.output_tokens_per_s_per_chip[i]; });
    if (goal !== null) { xs.push(Math.log10(goal)); }
    if (!xs.length) { xs = [-3, -1]; }
    var x0 = Math.min.apply(null, xs) - 0.1, x1 = Math.max.apply(null, xs) + 0.1;
    var yt = ticksLinear(Math.max.apply(null, ys.concat([1])) * 1.05);
    var y1 = yt[yt.length - 1];
    function X(v) { return L + (v - x0) / (x1 - x0) * (W - L - R); }
    function Y(v) { return H - B - v / y1 * (H - T - B); }
    ticksLog(x0, x1).forEach(function (v) {
      el("line", {x1: X(v), y1: T, x2: X(v), y2: H - B, stroke: "#e3e3e3"}, svg);
      el("text", {x: X(v), y: H - B + 16, "text-anchor": "middle", "class": "tick x"}, svg,
         ms(Math.pow(10, v)));
    });
    yt.forEach(function (v) {
      el("line", {x1: L, y1: Y(v), x2: W - R, y2: Y(v), stroke: "#e3e3e3"}, svg);
      el("text", {x: L - 6, y: Y(v) + 4, "text-anchor": "end", "class": "tick y"}, svg, si(v));
    });
    el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none",
                stroke: "#555"}, svg);
    el("text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle"}, svg,
       name + " (log scale)");
    el("text", {x: 4, y: 16}, svg, "output tokens/s per chip");
    if (goal !== null) {
      el("line", {x1: X(Math.log10(goal)), y1: T, x2: X(Math.log10(goal)), y2: H - B,
                  stroke: "#c00", "stroke-dasharray": "5 3", "stroke-width": 1.5,
                  "class": "target", "data-target": key}, svg);
      var right = X(Math.log10(goal)) > W - R - 140;
      el("text", {x: X(Math.log10(goal)) + (right ? -4 : 4), y: T - 6, fill: "#c00",
                  "text-anchor": right ? "end" : "start", "class": "target-label"},
         svg, name + " target " + ms(goal));
    }
    fronts.forEach(function (f, k) {
      if (f.points.length > 1 && key === "tpot_s") {  /* the frontier, in TPOT order */
        el("polyline", {points: f.points.map(function (i) {
          return X(Math.log10(Math.max(cols[key][i], 1e-9))) + "," +
            Y(cols.output_tokens_per_s_per_chip[i]);
        }).join(" "), fill: "none", stroke: f.color, "stroke-width": 1.5}, svg);
      }
      f.points.forEach(function (i) {
        var cx = X(Math.log10(Math.max(cols[key][i], 1e-9)));
        var cy = Y(cols.output_tokens_per_s_per_chip[i]);
        var c = el("circle", {cx: cx, cy: cy, r: i === best ? 7 : 4.5, fill: f.color,
          stroke: i === best ? "#000" : "none", "stroke-width": 2,
          "class": "point" + (i === best ? " best" : "") + (i === clicked ? " selected" : ""),
          tabindex: "0", "data-index": String(i), "data-hardware": f.chip}, svg);
        c.addEventListener("click", function () {
          clicked = i; $("detail").textContent = describe(row(i)); update();
        });
      });
      var lx = W - R - 110 * (fronts.length - k);  /* above the plot: covers no point */
      el("rect", {x: lx, y: 7, width: 10, height: 10, fill: f.color,
                  "class": "legend-swatch"}, svg);
      el("text", {x: lx + 14, y: 16, "class": "legend"}, svg, f.chip);
    });
    if (clicked >= 0) {
      el("circle", {cx: X(Math.log10(Math.max(cols[key][clicked], 1e-9))),
                    cy: Y(cols.output_tokens_per_s_per_chip[clicked]), r: 10, fill: "none",
                    stroke: "#000", "stroke-width": 2, "class": "clicked-marker",
                    "pointer-events": "none"}, svg);
    }
  }
  ["chip", "quant", "mode", "tpot", "ttft"].forEach(function (id) {
    $(id).addEventListener("input", update); $(id).addEventListener("change", update);
  });
  update();
})();
""".replace("@STEPS@", str(SLIDER_STEPS))


def _thin(p: ServePlan) -> npt.NDArray[np.intp]:
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


def _compact(values: Column) -> list[Scalar]:
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


def _svg(name: str, title: str) -> str:
    return (f'<svg id="{name}" xmlns="http://www.w3.org/2000/svg" width="720" height="380" '
            f'viewBox="0 0 720 380" role="img" aria-label="{xml_text(title)}"></svg>')


def serve_page(p: ServePlan) -> str:
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
        "<p>" + _select("chip", "chip", ["all", *hws]) + _select("quant", "weights/KV", quants)
        + _select("mode", "mode", modes) + "</p>",
        "<p>" + _slider("tpot", "target TPOT", t.tpot_s)
        + _slider("ttft", "target TTFT", t.ttft_s) + "</p>",
        '<div id="chart">' + _svg("frontier", "throughput against TPOT") + "<br>"
        + _svg("ttft-chart", "throughput against TTFT") + "</div>",
        "<h2>best point meeting the targets</h2>", '<pre id="best"></pre>',
        "<h2>clicked point</h2>", '<pre id="detail">click a point of the frontier (ringed '
        "in both charts)</pre>",
        '<p class="note">Frontier, one colour per chip: output tokens/s per chip against '
        "TPOT among the points within the TTFT target (above), and the same points against "
        "their TTFT (below); dashed red lines: the targets. "
        + ("Expected times (a forecast with sourced and fitted efficiencies), not bounds"
           if p.expected else "Bounds, not forecasts") + ": TTFT adds an M/D/1 wait for the "
        "prefill budget (a queueing estimate at the point's own request rate) to the "
        "request's own prefill.</p>",
        f'<script type="application/json" id="grid">{blob}</script>',
    ]
    return page(f"roofline serve {p.model}", body, SCRIPT)
