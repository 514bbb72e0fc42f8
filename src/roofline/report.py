"""Turn results into text tables for people and JSON-ready dicts for programs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .cost import LINKS
from .units import format_bytes, format_si, format_time

if TYPE_CHECKING:
    from .evaluate import Estimate
    from .hardware import Chip


def jsonable(obj: Any) -> Any:
    """Recursively convert numpy values to lists / scalars and non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned text table: numeric columns right-aligned, text columns left-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    numeric = [i > 0 and all(str(r[i])[:1] in "0123456789-[." for r in rows)
               for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [str(c).rjust(w) if num else str(c).ljust(w)
               for c, w, num in zip(cells, widths, numeric, strict=True)]
        return "  ".join(out).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _num(x: Any, unit: str = "") -> str:
    arr = np.asarray(x, dtype=float)
    if arr.ndim:
        return f"[{arr.size} values]"
    v = float(arr)
    return "-" if not math.isfinite(v) else format_si(v, unit)


def estimate_text(est: Estimate, explain: bool = False, chip: Chip | None = None) -> str:
    """Human summary of one scalar Estimate: per-resource table, bound, derivation."""
    title = f"{est.cost.name or 'cost'} on {est.hardware}"
    rows = []
    for resource, t in est.time_s.items():
        traffic = est.bytes.get(resource, est.link_bytes.get(resource))
        rows.append([
            resource + (" <- bound" if resource == est.bound else ""),
            format_time(float(t)),
            f"{100 * float(t) / float(est.t_lower_s):.1f}%" if est.t_lower_s else "-",
            "-" if traffic is None else format_bytes(float(traffic)),
            _num(est.intensity.get(resource, math.nan)),
            _num(est.ridge.get(resource, math.nan)),
        ])
    lines = [
        title,
        f"FLOPs {format_si(float(est.flops))}"
        + "".join(f"  [{dt}]" for dt in est.flops_by_dtype)
        + ("" if est.flops_by_dtype else " (pure data movement)"),
        "",
        table(["resource", "time", "of bound", "bytes", "FLOP/byte", "ridge"], rows),
        "",
        f"bound: {est.bound} ({bound_kind(str(est.bound))})",
        f"time lower bound (perfect overlap) t_lower = {format_time(float(est.t_lower_s))}",
        f"time with no overlap               t_upper = {format_time(float(est.t_upper_s))}",
    ]
    if est.flops_by_dtype:
        peak = float(est.peak_flops_per_s)
        lines.append(f"attainable {format_si(float(est.attainable_flops_per_s), 'FLOP/s')}"
                     f" of peak {format_si(peak, 'FLOP/s')}"
                     f" ({100 * float(est.attainable_flops_per_s) / peak:.1f}%)")
    if explain:
        lines += ["", "derivation:", *(f"  {line}" for line in est.cost.explain())]
        lines += [f"  {line}" for line in _time_derivation(est, chip)]
        lines += [f"  {line}" for line in _intensity_derivation(est)]
        lines += ["", f"why: {_why(est)}"]
    return "\n".join(lines)


def _intensity_derivation(est: Estimate) -> list[str]:
    out = []
    for level, value in est.intensity.items():
        traffic = est.bytes.get(level, est.link_bytes.get(level))
        ridge = float(est.ridge[level])
        side = "above" if float(value) >= ridge else "below"
        out.append(f"I_{level} = FLOPs / bytes = {format_si(float(est.flops))} / "
                   f"{format_bytes(float(traffic or 0))} = {float(value):.4g} FLOP/byte, "
                   f"{side} the ridge I* = peak / bandwidth = {ridge:.4g}")
    return out


def _why(est: Estimate) -> str:
    ranked = sorted(est.time_s.items(), key=lambda kv: -float(kv[1]))
    (first, t1), rest = ranked[0], ranked[1:]
    if not float(t1) > 0:
        return "nothing to do: no arithmetic and no bytes to move (e.g. a group of one rank)"
    if not rest:
        return f"{first} is the only resource used"
    second, t2 = rest[0]
    ratio = float(t1) / float(t2) if float(t2) > 0 else math.inf
    return (f"t_{first} = {format_time(float(t1))} is the largest time, {ratio:.3g}x "
            f"t_{second} = {format_time(float(t2))}: the op is {bound_kind(first)}; with perfect "
            f"overlap it cannot finish faster than that")


def extra_text(extra: dict[str, Any]) -> str:
    """Extra per-op figures (collective bandwidths, crossovers) as aligned lines."""
    labels = {"algbw_Bps": ("algbw (at t_lower, an upper bound)", "B/s"),
              "busbw_Bps": ("busbw (nccl-tests definition)", "B/s"),
              "latency_crossover_bytes": ("latency-bound below message size", "B")}
    lines = []
    for key, value in extra.items():
        label, unit = labels.get(key, (key, ""))
        shown = "-" if value is None else format_si(float(value), unit)
        lines.append(f"{label}: {shown}")
    return "\n".join(lines)


def what_if_text(est: Estimate, rows: Sequence[Any]) -> str:
    """The levers table: what each change would do to attainable FLOP/s and the bound."""
    if not rows:
        return "what would move it: no lever applies"
    body = [[r.label, f"{r.speedup:.3g}x", format_si(r.attainable_flops_per_s, "FLOP/s"),
             format_time(r.t_lower_s), r.bound] for r in rows]
    now = (format_si(float(est.attainable_flops_per_s), "FLOP/s") if est.flops_by_dtype
           else format_time(float(est.t_lower_s)))
    head = f"what would move it (now {now}, {est.bound}-bound):"
    return head + "\n" + table(["change", "work/s", "attainable", "t_lower", "bound"], body)


def _time_derivation(est: Estimate, chip: Chip | None = None) -> list[str]:
    """How each resource time follows from the counts and the chip's figures."""
    from .hardware import load_chip

    chip = chip or load_chip(est.hardware)
    out = []
    for resource, t in est.time_s.items():
        if resource == "compute":
            parts = [f"{format_si(float(f))} / {format_si(chip.peak_flops(dt), 'FLOP/s')} [{dt}]"
                     for dt, f in est.flops_by_dtype.items()]
            formula = "FLOPs / peak"
        elif resource in est.bytes:
            parts = [f"{format_bytes(float(est.bytes[resource]))} / "
                     f"{format_si(chip.bandwidth_Bps(resource), 'B/s')}"]
            formula = "bytes / bandwidth"
        elif resource == "latency":
            parts = [f"{float(steps):g} steps · {format_time(chip.link(name).latency_s)} [{name}]"
                     for name, steps in est.cost.link_steps.items()]
            formula = "message steps · alpha"
        else:
            link = chip.link(resource)
            parts = [f"{format_bytes(float(est.link_bytes.get(resource, 0.0)))} / "
                     f"{format_si(link.bandwidth_Bps, 'B/s')} per direction"]
            formula = "bytes / bandwidth"
        out.append(f"t_{resource} = {formula} = {' + '.join(parts)} = {format_time(float(t))}")
    return out


def bound_kind(resource: str) -> str:
    """'compute-bound', 'memory-bound', 'communication-bound' or 'latency-bound'."""
    if resource == "compute":
        return "compute-bound"
    if resource in LINKS:
        return "communication-bound"
    if resource == "latency":
        return "latency-bound"
    return "memory-bound"


def chip_text(chip: Chip) -> str:
    """Human view of a chip: peaks, memory levels, links, ridge points, numbered sources."""
    from .cost import LINKS

    sources: list[str] = []

    def ref(text: str, estimated: bool = False) -> str:
        sources.append(text + (" (estimate)" if estimated else ""))
        return f"[{len(sources)}]" + ("*" if estimated else "")

    lines = [f"{chip.name} ({chip.id})", f"vendor {chip.vendor}; {chip.form_factor}"
             + (f"; {chip.tdp_w:g} W" if chip.tdp_w else ""), ""]
    lines.append(table(["peak (dense)", "FLOP/s", "source"], [
        [p.dtype, format_si(p.flops_per_s, "FLOP/s"), ref(p.source, p.estimated)]
        for p in chip.peaks.values()]))
    lines.append("")
    lines.append(table(["memory", "capacity", "bandwidth", "source"], [
        [f"{m.name} ({m.technology})", format_bytes(m.capacity_bytes or math.nan),
         format_si(m.bandwidth_Bps, "B/s"), ref(m.source, m.estimated)]
        for m in chip.memory]))
    if chip.links:
        lines.append("")
        lines.append(table(["link (per direction)", "bandwidth", "alpha", "domain", "source"], [
            [f"{lk.name} ({lk.technology})", format_si(lk.bandwidth_Bps, "B/s"),
             format_time(lk.latency_s), str(lk.domain_size or "-") + (
                 f" (torus, {lk.torus_axis}/axis, {lk.ports} ports)" if lk.torus_axis else ""),
             ref(lk.source) + (" " + ref(lk.latency_source) if lk.latency_source else "")]
            for lk in chip.links.values()]))
    resources = [m.name for m in chip.memory] + [k for k in LINKS if k in chip.links]
    lines += ["", "ridge points I* = peak / bandwidth (FLOP/byte):"]
    lines.append(table(["dtype", *resources], [
        [dt, *(f"{chip.ridge(dt, r):.4g}" for r in resources)] for dt in chip.peaks]))
    lines += ["", "sources (* = estimate, not a vendor figure):"]
    lines += [f"  [{i}] {text}" for i, text in enumerate(sources, 1)]
    if chip.notes:
        lines += ["", f"notes: {chip.notes}"]
    lines.append(f"file: {chip.origin}")
    return "\n".join(lines)


def chip_dict(chip: Chip) -> dict[str, Any]:
    """JSON view of a chip with its ridge points."""
    from dataclasses import asdict

    from .cost import LINKS

    resources = [m.name for m in chip.memory] + [k for k in LINKS if k in chip.links]
    data = asdict(chip)
    data["ridge"] = {dt: {r: chip.ridge(dt, r) for r in resources} for dt in chip.peaks}
    return jsonable(data)


def chip_comparison(chips: Sequence[Chip]) -> tuple[list[str], list[list[str]], dict[str, Any]]:
    """Chips side by side: one row per figure (dense peaks, memory levels, links, ridge points,
    TDP), one column per chip; figures after the first chip carry their ratio to it.
    Returns the table's headers and rows, and the same figures as JSON-ready numbers."""
    figures: list[tuple[str, str, list[float | None]]] = []  # label, unit, value per chip
    for dt in dict.fromkeys(d for c in chips for d in c.peaks):
        figures.append((f"{dt} peak (dense)", "FLOP/s",
                        [c.peaks[dt].flops_per_s if dt in c.peaks else None for c in chips]))
    for name in dict.fromkeys(m.name for c in chips for m in c.memory):
        levels = [next((m for m in c.memory if m.name == name), None) for c in chips]
        figures.append((f"{name} capacity", "B", [m.capacity_bytes if m else None
                                                 for m in levels]))
        figures.append((f"{name} bandwidth", "B/s", [m.bandwidth_Bps if m else None
                                                    for m in levels]))
    for link in (k for k in LINKS if any(k in c.links for c in chips)):
        figures.append((f"{link} per direction", "B/s", [
            c.links[link].bandwidth_Bps if link in c.links else None for c in chips]))
        domains = [c.links[link].domain_size if link in c.links else None for c in chips]
        figures.append((f"{link} domain (chips)", "",
                        [float(d) if d else None for d in domains]))
    for dt in ("bf16", "fp8"):
        figures.append((f"ridge {dt} / hbm", "FLOP/B", [
            c.ridge(dt, "hbm") if dt in c.peaks and any(m.name == "hbm" for m in c.memory)
            else None for c in chips]))
    figures.append(("TDP", "W", [c.tdp_w for c in chips]))

    def cell(value: float | None, first: float | None, unit: str, lead: bool) -> str:
        if value is None:
            return "-"
        text = (format_bytes(value) if unit == "B" else f"{value:.4g}" if unit in ("", "FLOP/B")
                else format_si(value, unit))
        return text if lead or not first or not unit else f"{text} ({value / first:.2g}x)"

    rows = [[label, *(cell(v, values[0], unit, i == 0) for i, v in enumerate(values))]
            for label, unit, values in figures if any(v is not None for v in values)]
    data = {"chips": [c.id for c in chips],
            "figures": [{"figure": label, "unit": unit, "values": values}
                        for label, unit, values in figures
                        if any(v is not None for v in values)]}
    return ["figure", *(c.id for c in chips)], rows, data


def model_text(a: Any, explain: bool = False) -> str:
    """Human view of a ModelAnalysis: per-layer (or, with explain, per-op) table, totals,
    memory footprint."""
    from .units import format_time as ft

    p = a.phase
    par = a.parallel
    head = (f"{a.model} ({a.params_total / 1e9:.3g}B params"
            + (f", {a.params_active / 1e9:.3g}B active" if a.params_active < a.params_total
               else "") + f") on {a.hardware}, {p.kind}: batch {p.batch}, "
            + (f"{p.q_len} new token(s) per sequence after a context of {p.kv_len - p.q_len}"
               if p.kind == "decode"
               else f"{p.q_len} tokens per sequence")
            + f"; tp {par.tp} pp {par.pp} dp {par.dp} ep {par.ep} cp {par.cp}"
            + f"; weights {a.precision.weights}, activations {a.precision.activations}"
            + ("" if p.kind == "train" else f", KV {a.precision.kv}"))
    if explain:
        rows = [[f"{op.group}: {op.name}", f"{op.count:g}", format_si(op.flops),
                 format_bytes(op.hbm_bytes), format_bytes(op.link_bytes),
                 "-" if not math.isfinite(op.intensity) else f"{op.intensity:.3g}",
                 ft(op.t_lower_s), op.bound, f"{100 * op.share:.1f}%"] for op in a.ops]
        body = table(["op (per chip, all layers)", "count", "FLOPs", "HBM bytes", "link bytes",
                      "FLOP/B", "t_lower", "bound", "share"], rows)
    else:
        rows = [[lay.group, f"{lay.count:g}", format_si(lay.flops), format_bytes(lay.hbm_bytes),
                 format_bytes(lay.link_bytes), ft(lay.t_lower_s), lay.bound,
                 f"{100 * lay.share:.1f}%"] for lay in a.layers]
        rows += [[f"model: {op.name}", f"{op.count:g}", format_si(op.flops / op.count),
                  format_bytes(op.hbm_bytes / op.count), format_bytes(op.link_bytes / op.count),
                  ft(op.t_lower_s / op.count), op.bound, f"{100 * op.share:.1f}%"]
                 for op in a.ops if op.group == "model"]
        body = table(["layer / op (per chip)", "count", "FLOPs each", "HBM each", "link each",
                      "t each", "bound", "share"], rows)
    m = a.memory
    if a.model_source:
        head += f"\nconfig: {a.model_source}"
    limit = a.memory.context_limit
    if limit and np.ndim(p.kv_len) == 0 and p.kv_len > limit:
        head += (f"\nnote: {p.kv_len} positions exceed the {limit:g} this model was built for; "
                 "the bound extrapolates")
    lines = [head, "", body, "",
             f"step t_lower = {ft(a.t_lower_s)} (ops in sequence, each at its own roof), "
             f"t_upper = {ft(a.t_upper_s)}, full-overlap floor = {ft(a.t_floor_s)}; "
             f"bound: {a.bound}"]
    if p.kind == "prefill":
        lines.append(f"TTFT >= {ft(a.t_lower_s)}")
    elif p.kind == "decode":
        experts = (f" (routed experts at {a.decode_expert_compute_bound_batch:.4g}: each sees "
                   "top_k/E of the tokens)" if a.decode_expert_compute_bound_batch else "")
        step = (f"step >= {ft(a.t_lower_s)} for {p.q_len} tokens per sequence; "
                "TPOT (all drafts accepted) " if np.ndim(p.q_len) == 0 and p.q_len > 1
                else "TPOT ")
        lines.append(f"{step}>= {ft(a.tpot_s)}; <= {format_si(a.tokens_per_s)} tokens/s "
                     f"across the batch; dense weight GEMMs turn compute-bound at batch "
                     f"{a.decode_compute_bound_batch:.4g}{experts}")
    else:
        lines.append(f"step >= {ft(a.t_lower_s)}; <= {format_si(a.tokens_per_s)} tokens/s")
    lines.append(f"at the bound: MFU {100 * a.mfu:.1f}%, HFU {100 * a.hfu:.1f}% of the "
                 f"{a.precision.activations} peak, HBM bandwidth {100 * a.hbm_utilization:.1f}% "
                 "(causal attention counted as half the scores)")
    fit = "fits" if m.fits else "DOES NOT FIT"
    training = a.phase.kind == "train"
    state = (f"KV cache {format_bytes(m.kv_cache_bytes)} "  # no cache in training, no optimizer
             f"({format_bytes(m.kv_bytes_per_token)} per token on this chip)"  # in inference
             if not training else
             f"gradients + optimizer state {format_bytes(m.optimizer_bytes)}")
    lines += ["", f"memory per chip: weights {format_bytes(m.weights_bytes)}, {state}, "
              f"activations ~{format_bytes(m.activations_bytes)}: "
              f"total {format_bytes(m.total_bytes)} of "
              f"{format_bytes(m.capacity_bytes)}: {fit}",
              _largest_fit(m, training)]
    return "\n".join(lines)


def _largest_fit(m: Any, training: bool) -> str:
    if np.ndim(m.max_batch) == 0 and m.max_batch < 1:  # say why, and what would help
        fixed = m.weights_bytes + m.optimizer_bytes  # whatever the batch
        if fixed >= m.capacity_bytes:
            what = "weights, gradients and optimizer state" if training else "weights"
            return (f"nothing fits: the {what} alone need {format_bytes(fixed)} of "
                    f"{format_bytes(m.capacity_bytes)} per chip; shard them over more chips "
                    + ("(--tp, --pp, --ep, --dp with --fsdp)" if training else
                       "(--tp, --pp, --ep) or quantize them (--weight-dtype)"))
        if training:
            return ("nothing fits: not even one sequence's activations; recompute them "
                    "(--recompute), shorten --seq-len, or shard them (--tp, --cp)")
        return ("nothing fits: not even one sequence's KV cache at this length; shorten it, "
                "shard it (--cp, --tp) or quantize it (--kv-dtype)")
    return (f"largest batch that fits: {m.max_batch:g}"
            + ("" if m.max_context is None else f"; longest context at this batch: "
               f"{m.max_context:g}" + (" (the model's maximum)" if m.context_limit and
                                       m.max_context >= m.context_limit else "")))


def mfu_text(r: Any) -> str:
    convention = "causal: half the scores" if r.causal else "full score matrix, as Megatron-LM"
    lines = [f"model FLOPs per step {format_si(r.model_flops)} (attention "
             f"{format_si(r.attention_flops)}, {convention}), achieved "
             f"{format_si(r.achieved_flops_per_s)}"
             f"FLOP/s of {format_si(r.peak_flops_per_s)}FLOP/s dense peak",
             f"MFU {100 * r.mfu:.1f}%  HFU {100 * r.hfu:.1f}%"]
    if r.warning:
        lines.append(f"warning: {r.warning}")
    return "\n".join(lines)


def sweep_text(result: Any, frontier: dict[str, Any], max_latency_s: float | None) -> str:
    """The sweep's answer for people: best points, fewest chips, Pareto set, bound changes."""
    from .units import format_time as ft

    def describe(r: dict[str, Any] | None) -> str:
        if r is None:
            return "none"
        return (f"{r['hardware']} x{r['chips']} (tp {r['tp']}, pp {r['pp']}, dp {r['dp']}, "
                f"ep {r['ep']}), weights {r['weight_dtype']}, KV {r['kv_dtype']}, batch "
                f"{r['batch']:g}, length {r['length']:g}: {format_si(r['tokens_per_s'])} "
                f"tokens/s, {ft(r['t_lower_s'])} per step, {r['bound']}-bound")

    target = f" within {ft(max_latency_s)} per step" if max_latency_s else ""
    lines = [f"{frontier['points']} points ({result.phase}); {frontier['feasible_points']} fit"
             f" in memory{target}", ""]
    lines += [f"best tokens/s on {hw}{target}: {describe(r)}"
              for hw, r in frontier["best_tokens_per_s"].items()]
    lines.append(f"best tokens/s per chip{target}: "
                 f"{describe(frontier['best_tokens_per_s_per_chip'])}")
    lines.append(f"fewest chips that fit: {describe(frontier['fewest_chips_that_fit'])}")
    pareto = frontier["pareto"][:25]
    if pareto:
        lines += ["", "Pareto frontier (no other point is both faster per step and higher in "
                  "tokens/s):",
                  table(["hardware", "chips", "tp", "weights", "kv", "batch", "length",
                         "t_lower", "tokens/s", "bound"],
                        [[r["hardware"], str(r["chips"]), str(r["tp"]), r["weight_dtype"],
                          r["kv_dtype"], f"{r['batch']:g}", f"{r['length']:g}",
                          ft(r["t_lower_s"]), format_si(r["tokens_per_s"]), r["bound"]]
                         for r in pareto])]
    changes = frontier["bound_changes"][:25]
    if changes:
        lines += ["", "where the bound changes along the batch axis:",
                  table(["hardware", "tp", "weights", "kv", "length", "batch", "from", "to"],
                        [[c["hardware"], str(c["tp"]), c["weight_dtype"], c["kv_dtype"],
                          f"{c['length']:g}", f"{c['batch']:g}", c["from"], c["to"]]
                         for c in changes])]
    return "\n".join(lines)


def model_what_if_text(rows: Sequence[Any]) -> str:
    """What would move a model step: each change's tokens/s against today's."""
    if not rows:
        return "what would move it: no change applies"
    from .units import format_time as ft

    body = [[r.label, f"{r.speedup:.3g}x", format_si(r.tokens_per_s), ft(r.t_lower_s), r.bound,
             "yes" if r.fits else "no"] for r in rows]
    return "what would move it (each change alone, re-analysed):\n" + table(
        ["change", "tokens/s", "now", "step", "bound", "fits"], body)
