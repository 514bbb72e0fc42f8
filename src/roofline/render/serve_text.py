"""`roofline serve` for people: the question, the best point per chip kind with what bounds
it and what would move it, and the frontier."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

from ..units import format_si, format_time
from .text import table

if TYPE_CHECKING:
    from ..serve.point import ServePoint


def tdp_source(tdp: dict[str, Any]) -> str:
    """Where one chip's TDP comes from (a `ServePlan.tdp` entry), marked when estimated."""
    said = tdp["source"].lower().startswith("estimate")  # the source says so itself
    return tdp["source"] + (" (estimate)" if tdp.get("estimated") and not said else "")


def tdp_text(tdp: dict[str, Any]) -> str:
    """One chip's TDP with its source (a `ServePlan.tdp` entry)."""
    if not tdp.get("tdp_w"):
        return "no TDP in its chip file, so no tokens/J"
    return f"{tdp['tdp_w']:g} W, source: {tdp_source(tdp)}"


def notes(expected: bool, tdp: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """What a plan's numbers are: bounds, or expected times (a forecast); `tdp` (chip id ->
    `ServePlan.tdp` entry) names the TDP each chip's tokens/J divides by, and its source."""
    if expected:
        times = ("Expected, not bounds: every step time is the expected time (a forecast with "
                 "sourced and fitted efficiencies, roofline.expect: `sources` names them per "
                 "chip; `roofline serve` without --expect gives the bounds).")
        energy = "tokens/J: the expected throughput over the chip's TDP."
    else:
        times = ("Bounds, not forecasts: every step time is the model's schedule-aware lower "
                 "bound (ops one after another, each op's resources overlapped, collectives as "
                 "the schedule overlaps them), so throughput is an upper bound and TPOT a lower "
                 "bound at each batch.")
        energy = ("tokens/J: the throughput bound over the chip's TDP (an upper bound only as "
                  "far as the throughput is one: a chip can draw less than TDP).")
    if tdp:
        energy += " TDP per chip: " + "; ".join(f"{hw}: {tdp_text(t)}" for hw, t in tdp.items())
        energy += "."
    return [times,
            "Continuous batching: each iteration runs the batch's decode tokens plus "
            "chunked-prefill tokens; TTFT = the request's own prefill + an M/G/1 wait for the "
            "prefill budget at the point's own request rate (a closed loop: the wait Little's "
            "law gives its clients, zero while all of them decode; a prefill budget that cannot "
            "admit the batch's prompts holds the batch where it can): a queueing estimate, not "
            "a bound (faster steps carry more requests at the same batch); "
            "E2E = TTFT + (n-1) x TPOT. ttft_s_p50 / _p90 / _p99, tpot_s_p50 / ...: "
            "percentiles over requests (the lengths' spread and the queue, roofline.serve."
            "tails), not an uncertainty (--expect's 80% interval: X_lo80 / X_hi80).",
            "time_<resource>_s: the lower bound's step time split by the resource bounding "
            "each op.", energy]


def tails_text(r: ServePoint) -> str:
    """A point's p50 / p90 / p99 TTFT and TPOT over requests (serve.tails)."""
    return "; ".join(f"{name} p50 / p90 / p99 " + " / ".join(map(format_time, tails))
                     for name, tails in (("TTFT", (r.ttft_s_p50, r.ttft_s_p90, r.ttft_s_p99)),
                                         ("TPOT", (r.tpot_s_p50, r.tpot_s_p90, r.tpot_s_p99))))


def interval_text(r: ServePoint) -> str | None:
    """A forecast's expected TTFT, TPOT and throughput, each with its 80% interval (None
    for bounds)."""
    bands = (r.ttft_s_lo80, r.ttft_s_hi80, r.tpot_s_lo80, r.tpot_s_hi80,
             r.output_tokens_per_s_lo80, r.output_tokens_per_s_hi80)
    if any(b is None for b in bands):
        return None
    ttft_lo, ttft_hi, tpot_lo, tpot_hi, rate_lo, rate_hi = cast(tuple[float, ...], bands)
    return "; ".join([
        f"TTFT {format_time(r.ttft_s)} (80%: {format_time(ttft_lo)} – {format_time(ttft_hi)})",
        f"TPOT {format_time(r.tpot_s)} (80%: {format_time(tpot_lo)} – {format_time(tpot_hi)})",
        f"{format_si(r.output_tokens_per_s)} output tokens/s (80%: {format_si(rate_lo)} – "
        f"{format_si(rate_hi)})"])


def describe(r: ServePoint) -> str:
    par = f"tp {r.tp} pp {r.pp} dp {r.dp} ep {r.ep}"
    if r.mode == "disaggregated":
        par = (f"{r.decode_workers} decode worker(s) {par}; {r.prefill_workers} "
               f"prefill worker(s) tp {r.prefill_tp} pp {r.prefill_pp} dp "
               f"{r.prefill_dp} ep {r.prefill_ep}")
        if not math.isclose(r.prefill_ratio * r.decode_workers, r.prefill_workers):
            par += f" (the load needs {r.prefill_ratio:.3g} prefill per decode worker)"
    elif r.instances != 1:
        par = f"{r.instances} instances of {par}"
    return par


def _cost(r: ServePoint) -> str:
    return "-" if not math.isfinite(r.usd_per_mtok) else f"${r.usd_per_mtok:.3g}"


def chips(n: float) -> str:
    """`1 chip`, `8 chips`, `2.5 chips` (a disaggregated plan's share of a prefill pool)."""
    return f"{format_si(n)} chip" + ("" if n == 1 else "s")


def row_cells(r: ServePoint) -> list[str]:
    return [r.hardware, r.mode, format_si(r.gpus), str(r.tp), f"{r.weight_dtype}/{r.kv_dtype}",
            f"{r.running:g}", f"{r.chunk:g}", format_si(r.output_tokens_per_s_per_chip),
            format_si(r.requests_per_s), format_time(r.ttft_s), format_time(r.tpot_s),
            format_time(r.e2e_s), _cost(r), format_si(r.tokens_per_joule), r.bound]


HEADERS = ["hardware", "mode", "gpus", "tp", "w/kv", "batch", "chunk", "out tok/s/chip",
           "req/s", "TTFT", "TPOT", "E2E", "$/Mtok", "tok/J", "bound"]


def serve_text(data: dict[str, Any], verbose: bool = False) -> str:
    """The plan for people (`data`: cli.serve.plan_data's, its points `ServePoint`s): by
    default the best plan per chip, its first lever and one frontier over every chip;
    `verbose` adds each chip's frontiers, every lever and the notes."""
    w, t, load = data["workload"], data["targets"], data["load"]
    targets = ", ".join(f"{k} <= {format_time(v)}" for k, v in
                        (("TTFT", t["ttft_s"]), ("TPOT", t["tpot_s"]),
                         ("p99 TTFT", t.get("ttft_p99_s")), ("p99 TPOT", t.get("tpot_p99_s")))
                        if v is not None)
    what = (f"at {load['rate']:g} requests/s (open loop)" if load["rate"] is not None else
            f"at concurrency {load['concurrency']} (closed loop)"
            if load["concurrency"] is not None else "capacity")
    times = "" if not data["expected"] else (
        f"; expected times on {data['engine']}" if data.get("engine")
        else "; expected times (no engine named: generic factors)")
    lines = [f"serve {data['model']}: {w['input_len']:g} prompt + {w['output_len']:g} output "
             f"tokens per request; {what}; {targets or 'no latency targets'}{times}",
             *(f"runtime on {hw}: {text}" for hw, text in data.get("runtime_text", {}).items()),
             f"{data['points']} operating points, {data['feasible_points']} meet the targets", ""]
    best: dict[str, ServePoint] = data["best"]
    if not best:
        lines.append(f"no configuration meets the targets: {data['infeasible']}")
    else:
        lines += ["best per chip kind (" + (
            f"most output tokens/s within {data['gpus']} GPUs):" if data.get("gpus") else
            "most output tokens/s per chip):"),
                  table(HEADERS, [row_cells(r) for r in best.values()]), ""]
        for hw, r in best.items():
            lines.append(f"{hw}: {describe(r)}; {format_si(r.output_tokens_per_s)} output "
                         f"tokens/s on {chips(r.gpus)}; batch limited by {r.limit}")
            interval = interval_text(r)
            if interval:
                lines.append("  expected: " + interval)
            lines.append("  over requests: " + tails_text(r))
            moves = r.what_would_move_it
            lines += [f"  - {m}" for m in (moves if verbose else moves[:1])]
    if verbose:
        for key, label in (("frontier_tpot", "TPOT"), ("frontier_ttft", "TTFT")):
            for hw, rows in data[key].items():
                lines += _frontier(rows, f"{hw}: output tokens/s per chip vs {label}")
    else:
        lines += _frontier(data.get("frontier", []), "output tokens/s per chip vs TPOT, "
                           "every chip")
    if data["skipped"]:
        lines += ["", f"skipped {len(data['skipped'])} configurations, e.g. "
                  f"{data['skipped'][0]}"]
    if verbose:
        lines += ["", *data["notes"]]
    else:
        lines += ["", data["notes"][0].split(":", 1)[0] + " (--verbose: every chip's "
                  "frontiers against TPOT and TTFT, every lever, and what each figure means)"]
    return "\n".join(lines)


def _frontier(rows: list[ServePoint], title: str) -> list[str]:
    """A Pareto frontier as a table of at most 12 points spread over it, both ends kept."""
    if not rows:
        return []
    spread = rows[::max(1, -(-len(rows) // 12))][:11]
    shown = spread + [r for r in rows[-1:] if r is not spread[-1]]
    return ["", f"{title} (Pareto frontier, {len(shown)} of {len(rows)} points):",
            table(HEADERS, [row_cells(r) for r in shown])]
