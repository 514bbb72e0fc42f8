"""What bounds a chosen operating point and what would move it, read off the plan's own
points (no second model): the step's bounding resource, the constraint that stops a larger
batch, and the next point of the frontier past a target."""

from __future__ import annotations

import numpy as np

from ..dtypes import dtype
from ..units import format_bytes, format_si, format_time
from .plan import ServePlan
from .point import ServePoint

GROUP = ("hardware", "mode", "tp", "pp", "dp", "ep", "prefill_tp", "prefill_pp", "prefill_dp",
         "prefill_ep", "weight_dtype", "kv_dtype", "chunk")


def limit(plan: ServePlan, row: ServePoint) -> str:
    """Why the batch is not larger: KV capacity, the load given, a target, the prefill
    budget or queue; the next larger batch of the same configuration says which."""
    if plan.load.concurrency is not None or plan.load.rate is not None:
        return "load (given)"
    if row.running >= row.max_running:
        return "kv capacity"
    c = plan.columns
    same = np.ones(len(plan), dtype=bool)
    for key in GROUP:
        same &= c[key] == row.columns[key]
    if row.mode == "disaggregated":
        same &= np.isclose(c["utilization"], row.utilization)
    larger = np.flatnonzero(same & (c["running"] > row.running))
    if larger.size == 0:
        return "batch searched"
    nxt = plan.point(int(larger[np.argmin(c["running"][larger])]))
    t = plan.targets
    if t.tpot_s is not None and nxt.tpot_s > t.tpot_s:
        return "tpot target"
    if t.ttft_s is not None and nxt.ttft_s > t.ttft_s:
        return "ttft target"
    if not nxt.feasible:
        return "prefill budget" if nxt.utilization < 1 else "prefill queue"
    return "kv capacity" if not nxt.fits else "batch searched"


def moves(plan: ServePlan, row: ServePoint, why: str) -> list[str]:
    """Short, specific levers for this point."""
    out = []
    bound = row.bound
    if why == "kv capacity":
        fp8 = "an fp8 KV cache, " if dtype(row.kv_dtype).bits > 8 else ""
        out.append(f"KV capacity holds {row.max_running:g} sequences: {fp8}more chips "
                   "per instance (tp), a higher --mem-util or shorter contexts hold more")
    for target, key in (("tpot target", "tpot_s"), ("ttft target", "ttft_s")):
        if why == target:
            nxt = _next_on_frontier(plan, row, key)
            if nxt is not None:
                out.append(f"a {key[:4].upper()} target of {format_time(_time(nxt, key))} "
                           f"allows {format_si(nxt.output_tokens_per_s_per_chip)} output "
                           f"tokens/s per chip ({nxt.mode}, tp {nxt.tp})")
    if bound == "hbm":
        out.append("each step is HBM-bound: fewer bytes per token (narrower weights or KV) "
                   "or a larger batch per weight read raise it")
    elif bound in ("compute", "vector", "sfu"):
        out.append(f"each step is {bound}-bound: a narrower compute dtype (higher peak), "
                   "prefix-cache hits or shorter prompts (less prefill work) raise it")
    elif bound.startswith("scale") or bound == "latency":
        out.append(f"each step is bound by {bound}: less tensor parallelism or a faster link "
                   "raise it")
    if row.mode == "disaggregated" and row.kv_transfer_s > 0.1 * row.ttft_s:
        out.append(f"the KV transfer takes {format_time(row.kv_transfer_s)} of the TTFT: a "
                   "faster link between the pools or an fp8 KV cache shortens it")
    return out


def _time(point: ServePoint, key: str) -> float:
    """A point's TPOT (key "tpot_s") or TTFT ("ttft_s")."""
    return point.tpot_s if key == "tpot_s" else point.ttft_s


def _next_on_frontier(plan: ServePlan, row: ServePoint, key: str) -> ServePoint | None:
    """The first frontier point past this one (a looser `key`, more tokens/s per chip)."""
    for i in plan.frontier(key, row.hardware):
        r = plan.point(i)
        if _time(r, key) > _time(row, key) and r.output_tokens_per_s_per_chip > \
                row.output_tokens_per_s_per_chip:
            return r
    return None


def annotate(plan: ServePlan, row: ServePoint) -> ServePoint:
    """The point with what stops a larger batch and what would move it."""
    why = limit(plan, row)
    return row.explained(why, moves(plan, row, why))


def infeasible(plan: ServePlan) -> str:
    """Why no operating point meets the targets, and what would fix it: the weights (or the
    weights and one sequence) overflow the usable memory at every layout tried, or the
    targets are beyond the best times found."""
    c = plan.columns
    reasons = []
    for hw in dict.fromkeys(c["hardware"].tolist()):
        rows = c["hardware"] == hw
        if not np.any(c["fits"] & rows):
            # one instance's chips (a --gpus budget's replicas each hold the weights whole)
            instance = c["tp"] * c["pp"] * c["dp"]
            j = int(np.flatnonzero(rows)[np.argmax(instance[rows])])
            weights, usable = c["weights_bytes_per_chip"][j], c["usable_bytes_per_chip"][j]
            chips = float(instance[j])
            if weights > usable:
                need = int(np.ceil(weights * chips / usable))
                reasons.append(f"{hw}: weights {format_bytes(weights)} per chip > "
                               f"{format_bytes(usable)} usable x {chips:g} chip(s), the most "
                               f"tried: allow >= {need} chips per instance (--tp, --pp, "
                               "--max-chips, and a --gpus budget that large), or "
                               "quantize (--weight-dtype fp8)")
            else:
                reasons.append(f"{hw}: weights {format_bytes(weights)} of "
                               f"{format_bytes(usable)} usable per chip leave no room for "
                               "one sequence's KV cache: allow more chips, shorter requests, "
                               "or an fp8 KV cache (--kv-dtype fp8)")
            continue
        ok = c["fits"] & c["feasible"] & rows
        if not np.any(ok):
            reasons.append(f"{hw}: no point that fits sustains the load given: allow more "
                           "chips or a lower --rate / --concurrency")
            continue
        t = plan.targets
        best = [f"{name} {format_time(float(c[key][ok].min()))} > {format_time(target)}"
                for name, key, target in (("TTFT", "ttft_s", t.ttft_s),
                                          ("TPOT", "tpot_s", t.tpot_s),
                                          ("p99 TTFT", "ttft_s_p99", t.ttft_p99_s),
                                          ("p99 TPOT", "tpot_s_p99", t.tpot_p99_s))
                if target is not None and c[key][ok].min() > target]
        reasons.append(f"{hw}: the best found is " + (", ".join(best) or
                       "each target met at different points, never all") +
                       ": relax the targets or allow more chips")
    return "; ".join(reasons)
