"""The tables of silicon.py: the bound check, the scores per engine / system / mode, the
diagnoses issue 38 names, and the prototyped corrections (fitted on the fit half only,
scored on the held-out half; prototypes only: src/roofline is unchanged)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable

from check import held_out
from silicon import Result, decoding, med


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
              f"{r.measured_tokens_per_s / max(r.bound_tokens_per_s, 1e-30):.3g})"
              for r in over[:20]]
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
        "### the burst's queue and the per-request time, per engine and model (aggregated)",
        burst_table(res),
    ])


def implied_share(r: Result) -> float:
    """The share of the in-step burst's queue (serve.burst) the row's measured TTFT implies:
    (measured - the expected TTFT without its wait) / the whole burst's queue (the expected
    wait over the engine's share); nan where the forecast has no burst wait."""
    from roofline.serve.burst import burst_share

    share = burst_share(r.case.engine)
    if not (r.exp_queue_ms > 0 and share > 0):
        return math.nan
    return (r.case.ttft_ms - (r.exp_ttft_ms - r.exp_queue_ms)) / (r.exp_queue_ms / share)


def burst_table(res: list[Result]) -> str:
    """Per engine and model, on the fit half's aggregated rows: the burst-queue share the
    rows imply (median `implied_share` over those of >= 16 clients per attention-DP rank
    that were not waiting for a running slot: Little's-law decoding >= 85% of the clients)
    beside the engine's fitted share, and measured - expected TTFT at <= 8 clients (the
    per-request time the fitted request_s / first_token_steps stand for). Fitted per
    engine, these figures are compromises where an engine's models disagree."""
    from roofline.serve.burst import burst_share

    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in res:
        if not (r.case.disagg or held_out(r.case.id)):
            groups[(r.case.engine, r.case.model)].append(r)
    lines = ["| engine, model | fit rows | implied share (rows) | engine's share | "
             "measured - expected TTFT, <= 8 clients (rows) |", "|---|---:|---:|---:|---:|"]
    for (eng, model), rs in sorted(groups.items()):
        steady = [implied_share(r) for r in rs if _rank_clients(r) >= 16
                  and decoding(r.case) >= 0.85 * r.case.clients]
        few = [r.case.ttft_ms - r.exp_ttft_ms for r in rs if r.case.clients <= 8]
        lines.append(f"| {eng} {model} | {len(rs)} | "
                     f"{med(steady):.2f} ({sum(map(math.isfinite, steady))}) | "
                     f"{burst_share(eng):.2f} | "
                     f"{f'{med(few):+.0f} ms' if few else '-'} ({len(few)}) |")
    return "\n".join(lines)


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


def _rank_clients(r: Result) -> float:
    return r.case.clients / r.case.layout.dp


def prototypes(res: list[Result]) -> str:
    """Corrections fitted on the fit half, scored on both: TTFT as an engine's per-request
    cost, or the burst queue (a client waits for the prompts ahead of it: on average half
    of the other clients of its attention-DP rank, each one prefill); TPOT as a fixed cost
    per iteration per (engine, tp, MoE or dense) or a factor per (engine, system, kind)."""
    def kind(r: Result) -> tuple[str, int, str]:
        return (r.case.engine, r.case.layout.tp, moe(r))

    def queue(r: Result) -> float:  # the burst-queue TTFT before the engine's factor
        return r.exp_ttft_ms * (1 + (_rank_clients(r) - 1) / 2)

    add_ttft = fit_median(res, lambda r: r.case.engine, lambda r: r.case.ttft_ms - r.exp_ttft_ms)
    q_ttft = fit_median(res, lambda r: r.case.engine, lambda r: r.case.ttft_ms / queue(r))
    add_tpot = fit_median(res, kind, lambda r: r.case.tpot_ms - r.exp_tpot_ms)
    def sys_key(r: Result) -> object:
        return (r.case.engine, r.case.system, moe(r))
    mul_tpot = fit_median(res, sys_key, lambda r: r.case.tpot_ms / r.exp_tpot_ms)

    def tpot_add(r: Result) -> float:
        return max(r.exp_tpot_ms + add_tpot.get(kind(r), 0.0), 1e-3) / r.case.tpot_ms

    def tpot_mul(r: Result) -> float:
        return r.exp_tpot_ms * mul_tpot.get(sys_key(r), 1.0) / r.case.tpot_ms

    def ttft_add(r: Result) -> float:
        return (r.exp_ttft_ms + add_ttft.get(r.case.engine, 0.0)) / r.case.ttft_ms

    def ttft_queue(r: Result) -> float:
        return queue(r) * q_ttft.get(r.case.engine, 1.0) / r.case.ttft_ms

    rows = [("as forecast", lambda r: r.r_tpot, lambda r: r.r_ttft),
            ("TTFT + per-request cost per engine; TPOT + fixed cost per (engine, tp, kind)",
             tpot_add, ttft_add),
            ("TTFT burst queue x engine factor; TPOT x factor per (engine, system, kind)",
             tpot_mul, ttft_queue),
            ("TTFT burst queue x engine factor; TPOT + fixed cost per (engine, tp, kind)",
             tpot_add, ttft_queue)]
    lines = ["| correction | TPOT held-out | TTFT held-out | TPOT fit | TTFT fit |",
             "|---|---:|---:|---:|---:|"]
    for name, tp, tt in rows:
        lines.append(f"| {name} | " + " | ".join(
            f"{100 * x:.0f}%" for x in scores(res, tp, tt)) + " |")
    fitted = ["", "fitted (fit half): TTFT per-request cost ms " + ", ".join(
        f"{k} {v:.0f}" for k, v in sorted(add_ttft.items())),
        "burst-queue factor " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(q_ttft.items())),
        "TPOT fixed cost per iteration ms (engine, tp, kind): " + ", ".join(
            f"{k[0]} tp{k[1]} {k[2]} {v:+.1f}" for k, v in sorted(add_tpot.items(), key=str))]
    return "\n".join(lines + fitted)
