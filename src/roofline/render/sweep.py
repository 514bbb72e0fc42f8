"""A sweep's answer for people: the best points, the fewest chips, the Pareto set and where
the bound changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..units import format_si
from ..units import format_time as ft
from .text import table


def expected_note(sources: Mapping[str, str]) -> str:
    """What the expected columns are: a forecast, and where its efficiencies come from."""
    from ..expect import WHAT, describe

    return f"expected ({WHAT} {describe(sources)}; never faster than the bound beside it)"


def sweep_text(result: Any, frontier: dict[str, Any], max_latency_s: float | None) -> str:
    """The sweep's answer for people: best points, fewest chips, Pareto set, bound changes;
    ranked by the bound, or by the expected time when the frontier was (`--expect`)."""
    expected = frontier.get("ranked_by") == "expected"

    def describe(r: dict[str, Any] | None) -> str:
        if r is None:
            return "none"
        head = (f"{r['hardware']} x{r['chips']} (tp {r['tp']}, pp {r['pp']}, dp {r['dp']}, "
                f"ep {r['ep']}), weights {r['weight_dtype']}, KV {r['kv_dtype']}, batch "
                f"{r['batch']:g}, length {r['length']:g}: ")
        bound = (f"{format_si(r['tokens_per_s'])} tokens/s (upper bound), "
                 f"{ft(r['t_lower_s'])} per step (lower bound), {r['bound']}-bound")
        if not expected:
            return head + bound
        return (head + f"{format_si(r['expected_tokens_per_s'])} tokens/s expected, "
                f"{ft(r['expected_t_s'])} per step expected; bound: " + bound)

    step = "expected step" if expected else "step"
    target = f" within {ft(max_latency_s)} per {step}" if max_latency_s else ""
    # every answer says which constraints it meets: memory, and the latency target if given
    met = f" [fits in memory{f', {step} <= ' + ft(max_latency_s) if max_latency_s else ''}]"
    lines = [f"{frontier['points']} points ({result.phase}); {frontier['feasible_points']} fit"
             f" in memory{target}"]
    if expected:
        lines.append("ranked by the expected time, not the bound: " + expected_note(
            frontier.get("expected_sources", {})))
    lines.append("")
    lines += [f"best tokens/s on {hw}{met}: {describe(r)}"
              for hw, r in frontier["best_tokens_per_s"].items()]
    lines.append(f"best tokens/s per chip{met}: "
                 f"{describe(frontier['best_tokens_per_s_per_chip'])}")
    lines.append(f"fewest chips{met}: {describe(frontier['fewest_chips_that_fit'])}")
    pareto = frontier["pareto"][:25]
    if pareto:
        head = ["hardware", "chips", "tp", "weights", "kv", "batch", "length"]
        times = (["step (expected)", "tokens/s (expected)"] if expected else []) + [
            "step (lower bound)", "tokens/s", "bound"]
        lines += ["", f"Pareto frontier (no other point is both faster per {step} and higher "
                  f"in {'expected ' if expected else ''}tokens/s):",
                  table(head + times,
                        [[r["hardware"], str(r["chips"]), str(r["tp"]), r["weight_dtype"],
                          r["kv_dtype"], f"{r['batch']:g}", f"{r['length']:g}",
                          *([ft(r["expected_t_s"]), format_si(r["expected_tokens_per_s"])]
                            if expected else []),
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
