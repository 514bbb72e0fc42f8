"""The tables of silicon.py: the bound check, the scores per engine / system / mode, the
diagnoses issue 38 names, and the prototyped corrections (fitted on the fit half only,
scored on the held-out half; prototypes only: src/roofline is unchanged)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable

from check import held_out
from silicon import Result, med, score_table


def bound_section(res: list[Result], skipped: dict[str, int], limit: float = 1.0) -> str:
    over = sorted((r for r in res if not r.beats <= limit), key=lambda r: -r.beats)
    worst = max(res, key=lambda r: r.beats)
    lines = [f"rows modelled: {len(res)}; skipped: {sum(skipped.values())}", "",
             "| skipped because | rows |", "|---|---:|",
             *(f"| {why} | {n} |" for why, n in sorted(skipped.items(), key=lambda x: -x[1])),
             "", f"max measured/bound speed: {worst.beats:.3f} ({worst.case.id})",
             f"rows above {limit}: {len(over)}"]
    lines += [f"- {r.case.id}: {r.beats:.3f} (TPOT {r.bound_tpot_ms / r.case.tpot_ms:.3f}, "
              f"TTFT {r.bound_prefill_ms / r.case.ttft_ms:.3f}, tokens/s "
              f"{r.measured_tokens_per_s / r.bound_tokens_per_s:.3f})" for r in over[:20]]
    return "\n".join(lines)


def _signed(rs: list[Result], fn: Callable[[Result], float]) -> str:
    return f"{100 * med(fn(r) - 1 for r in rs):+.0f}%" if rs else "-"


def by(res: list[Result], key: Callable[[Result], object], title: str,
       rows: Callable[[Result], bool] = lambda r: True) -> str:
    """Signed median r - 1 of TPOT and TTFT (all rows) per value of `key`."""
    groups: dict[object, list[Result]] = defaultdict(list)
    for r in res:
        if rows(r):
            groups[key(r)].append(r)
    lines = [f"| {title} | rows | TPOT signed | TTFT signed | TTFT measured/expected |",
             "|---|---:|---:|---:|---:|"]
    for k in sorted(groups, key=str):
        rs = groups[k]
        lines.append(f"| {k} | {len(rs)} | {_signed(rs, lambda r: r.r_tpot)} | "
                     f"{_signed(rs, lambda r: r.r_ttft)} | "
                     f"{med(1 / r.r_ttft for r in rs):.1f}x |")
    return "\n".join(lines)


def _bucket(n: int) -> str:
    lo = 2 ** int(math.log2(max(n, 1)))
    return f"{lo:>5}-{2 * lo - 1}"


def moe(r: Result) -> str:
    from roofline.models import load_model

    return "MoE" if load_model(r.case.model).moe is not None else "dense"


def diagnoses(res: list[Result]) -> str:
    dense_b200 = [r for r in res if moe(r) == "dense" and not r.case.disagg]
    return "\n\n".join([
        "### TTFT vs concurrency (clients per worker)",
        by(res, lambda r: _bucket(r.case.concurrency // max(r.case.decode_workers, 1)),
           "concurrency"),
        "### TPOT vs TP, dense models, aggregated (per system)",
        by(dense_b200, lambda r: f"{r.case.system} tp{r.case.layout.tp}", "system, tp"),
        "### MoE vs dense, by mode",
        by(res, lambda r: f"{moe(r)} {'disagg' if r.case.disagg else 'agg'}", "kind"),
        "### engine x system",
        by(res, lambda r: f"{r.case.engine} {r.case.system}", "engine, system"),
    ])


# --- prototyped corrections (fit half only) ------------------------------------------------


def fit_median(res: list[Result], key: Callable[[Result], object],
               resid: Callable[[Result], float]) -> dict[object, float]:
    """Per key, the median residual over the fit half (the key's fit rows)."""
    groups: dict[object, list[float]] = defaultdict(list)
    for r in res:
        if not held_out(r.case.id):
            groups[key(r)].append(resid(r))
    return {k: statistics.median(v) for k, v in groups.items()}


def scores(res: list[Result], tpot: Callable[[Result], float],
           ttft: Callable[[Result], float]) -> tuple[float, float, float, float]:
    """Held-out TPOT, TTFT median |r - 1| and their fit-half medians."""
    h = [r for r in res if held_out(r.case.id)]
    f = [r for r in res if not held_out(r.case.id)]
    return (med(abs(tpot(r) - 1) for r in h), med(abs(ttft(r) - 1) for r in h),
            med(abs(tpot(r) - 1) for r in f), med(abs(ttft(r) - 1) for r in f))
