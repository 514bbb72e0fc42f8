"""NVIDIA's measured serving runs (AIConfigurator's silicon_sample.csv: silicon_rows.py) as
fixed deployments: our bound never beaten, our expected TTFT / TPOT scored.

    python benchmarks/validation/silicon.py               # the tables (markdown)
    python benchmarks/validation/silicon.py --rows F.csv  # also every row's figures
    python benchmarks/validation/silicon.py --trim SRC    # rewrite silicon.csv from the source

Each row is `roofline.serve.plan` with a pinned Space (its tp, attention DP, ep, weight dtype,
one KV dtype) and a closed loop of its concurrency (`Load(concurrency=...)`, per instance):
- aggregated: one worker; the bound over chunks 512 / 2048 / 8192 / 32768 (the loosest of
  each figure), the expected time at 8192 (the engines' default prefill token budget);
- disaggregated: the published deployment pinned (Space's prefill_tp / dp / ep,
  prefill_workers, decode_workers; the decode layout in tp / dp / ep), its clients spread over
  its decode workers, its throughput the whole deployment's (at most what its prefill workers
  pass); one prompt per prefill pass (chunk = isl: every row has prefill batch 1).
The bound reads an unstated KV cache at fp8 (the loosest); the expected time at the engine's
default (TensorRT-LLM's quantized checkpoints: fp8; otherwise the model's dtype).

Checks (the bound's running batch: TPOT at the clients decoding on average by Little's law on
the measurements, `decoding`; the rest at the row's clients): measured TPOT >= bound TPOT,
measured TTFT >= the bound's prefill alone, measured output tokens/s
(clients x osl / (TTFT + (osl - 1) TPOT)) <= bound tokens/s. Scores:
r = expected time / measured time (measured speed over expected speed, check.py's sense):
|r - 1| its error, r - 1 < 0 a forecast too fast. Halves: check.held_out(row id).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import silicon_rows
from check import held_out
from silicon_rows import Case

BOUND_CHUNKS = (512.0, 2048.0, 8192.0, 32768.0)
ENGINE_CHUNK = 8192.0  # vLLM / SGLang / TensorRT-LLM default prefill token budget (H100+)


@dataclass(frozen=True)
class Result:
    case: Case
    bound_tpot_ms: float
    bound_prefill_ms: float
    bound_tokens_per_s: float
    exp_tpot_ms: float
    exp_ttft_ms: float
    measured_tokens_per_s: float
    exp_queue_ms: float = 0.0  # the expected TTFT's wait (a slot, the burst's queue share)

    @property
    def beats(self) -> float:
        """The largest measured / bound speed of TPOT, TTFT (vs the prefill) and tokens/s."""
        c = self.case
        if not self.bound_tokens_per_s > 0:  # the bound said it cannot run (does not fit)
            return math.inf
        return max(self.bound_tpot_ms / c.tpot_ms, self.bound_prefill_ms / c.ttft_ms,
                   self.measured_tokens_per_s / self.bound_tokens_per_s)

    @property
    def r_tpot(self) -> float:
        return self.exp_tpot_ms / self.case.tpot_ms

    @property
    def r_ttft(self) -> float:
        return self.exp_ttft_ms / self.case.ttft_ms


def _kv(c: Case, expect: bool) -> str:
    from roofline.models import load_model, model_precision

    if not expect:
        return "fp8"
    if c.engine == "tensorrt-llm" and c.weights in ("fp8", "nvfp4", "int4"):
        return "fp8"
    return model_precision(load_model(c.model)).activations


def _weights(c: Case) -> str:
    from roofline.models import load_model, model_precision

    return model_precision(load_model(c.model)).weights if c.weights == "bf16" else c.weights


def decoding(c: Case) -> int:
    """Clients per worker decoding on average (Little's law on the measurements: the share
    of a client's cycle after its first token); the bound runs these, since an engine that
    queues clients (TTFT of minutes: gpt-oss-120b on H100 at 512 clients) runs fewer than
    the concurrency and its TPOT is that of the smaller batch."""
    d = (c.osl - 1) * c.tpot_ms
    return max(1, math.floor(c.clients * d / (d + c.ttft_ms)))


def _plan(c: Case, expect: bool, clients: int | None = None) -> dict[str, object]:
    """The plan's columns at the row's layout (numpy arrays; one point per chunk). The
    expected time runs the row's clients, the bound those decoding (`decoding`)."""

    import numpy as np

    from roofline.models.step import MemoryBudget
    from roofline.serve import Load, Space, Workload, plan

    # the runs' own memory fraction and running-batch cap are not in the rows: all the memory
    # and no engine cap (a bound must hold for any setting)
    ALL_MEMORY = MemoryBudget(1.0)

    w = Workload.from_lengths(c.isl, c.osl)
    kv, weights = _kv(c, expect), _weights(c)
    framework = c.engine if expect else None
    clients = clients or c.clients
    d = c.layout
    if not c.disagg:
        chunks = (ENGINE_CHUNK,) if expect else BOUND_CHUNKS
        space = Space(tp=(d.tp,), dp=(d.dp,), ep=(d.ep,), weight_dtypes=(weights,),
                      kv_dtypes=(kv,), chunks=chunks, max_chips=4096,
                      moe_tp=(d.moe_tp,) if d.moe_tp else None)
        p = plan(c.model, [c.chip], w, space=space, load=Load(concurrency=clients),
                 budget=ALL_MEMORY, expect=expect, framework=framework, engine_limits=False)
        return dict(p.columns)
    pf = c.prefill
    assert pf is not None
    # the published deployment, pinned: each pool's layout and worker count, the row's
    # clients over its decode workers
    space = Space(tp=(d.tp,), dp=(d.dp,), ep=(d.ep,), prefill_tp=(pf.tp,), prefill_dp=(pf.dp,),
                  prefill_ep=(pf.ep,), prefill_workers=c.prefill_workers,
                  decode_workers=c.decode_workers, weight_dtypes=(weights,), kv_dtypes=(kv,),
                  chunks=(float(c.isl),), modes=("disaggregated",), max_chips=4096,
                  moe_tp=tuple({d.moe_tp, pf.moe_tp}) if d.moe_tp or pf.moe_tp else None)
    p = plan(c.model, [c.chip], w, space=space,
             load=Load(concurrency=clients * c.decode_workers), budget=ALL_MEMORY,
             expect=expect, framework=framework, engine_limits=False)
    col = p.columns
    if not (d.moe_tp or pf.moe_tp):
        return dict(col)
    # each pool's expert split as stated (moe_tp 0: the one ep implies)
    pick = (col["moe_tp"] == _expert_tp(d)) & (col["prefill_moe_tp"] == _expert_tp(pf))
    return {k: np.asarray(v)[pick] for k, v in col.items()}


def _expert_tp(lay: silicon_rows.Layout) -> int:
    return lay.moe_tp or (lay.tp if lay.ep == 1 else 1)


class NoFit(Exception):
    pass


def evaluate(c: Case) -> Result:
    import numpy as np

    # TPOT at the clients decoding (Little's law); TTFT's prefill and tokens/s at the row's
    b, full, e = _plan(c, False, decoding(c)), _plan(c, False), _plan(c, True)
    ok = np.asarray(b["fits"]) & np.asarray(b["feasible"])
    fo = np.asarray(full["fits"]) & np.asarray(full["feasible"])
    if not (ok.any() and fo.any()):  # it ran: the stated layout or our memory model is wrong
        raise NoFit(f"the stated layout does not hold the weights in our memory model "
                    f"({c.model} {c.weights} on {c.layout.gpus} {c.chip})")
    tpot = float(np.min(np.asarray(b["tpot_s"])[ok]))
    prefill = float(np.min(np.asarray(full["prefill_s"])[fo]))
    tokens = float(np.max(np.asarray(full["output_tokens_per_s"])[fo]))
    eo = np.asarray(e["fits"]) & np.asarray(e["feasible"])
    i = int(np.argmax(eo)) if eo.any() else 0
    return Result(c, 1e3 * tpot, 1e3 * prefill, tokens,
                  1e3 * float(np.asarray(e["tpot_s"])[i]),
                  1e3 * float(np.asarray(e["ttft_s"])[i]), _measured_tps(c),
                  1e3 * float(np.asarray(e["queue_s"])[i]))


def _measured_tps(c: Case) -> float:
    """Output tokens/s per worker (aggregated) or of the deployment (disaggregated), by
    Little's law: each client's cycle is its TTFT and (osl - 1) TPOTs."""
    n = c.concurrency if c.disagg else c.clients
    return n * c.osl / (1e-3 * (c.ttft_ms + (c.osl - 1) * c.tpot_ms))


# Rows measured faster than their bound: bugs, kept in view until fixed (the test holds each
# to still beat its bound, so a fix shows up and the entry goes), with what is known of each.
# (Llama-3.1-8B FP8 vLLM on one H200, 2000x100 at 64 clients, beat the bound 1.09x while its
# steps were timed with their ops one after another; the bound's step is now the floor, every
# resource of the step overlapped: roofline.serve.iteration.step_time.)
BEATEN: dict[str, str] = {}


def cases() -> tuple[list[Case], list[tuple[str, str]]]:
    """The modelled rows and (id, reason) for each row of silicon.csv skipped."""
    done: list[Case] = []
    skipped: list[tuple[str, str]] = []
    for r in silicon_rows.rows():
        c, why = silicon_rows.case(r)
        if c is None:
            skipped.append((r["id"], why))
        else:
            done.append(c)
    return done, skipped


def run(sample: Iterable[Case]) -> tuple[list[Result], list[tuple[str, str]]]:
    """Results, and (id, reason) for rows the library refused (e.g. tp not dividing heads)."""
    from roofline import RooflineError

    out: list[Result] = []
    refused: list[tuple[str, str]] = []
    for c in sample:
        try:
            out.append(evaluate(c))
        except RooflineError as exc:
            refused.append((c.id, f"refused by plan: {str(exc)[:90]}"))
        except NoFit:  # counted by model and chip count (the reason names the layout)
            refused.append((c.id, f"does not fit: {c.model} {c.weights} on "
                            f"{c.layout.gpus} {c.chip} (the stated layout cannot hold the "
                            "weights)"))
    return out, refused


# --- tables ---------------------------------------------------------------------------------


def med(v: Iterable[float]) -> float:
    x = [a for a in v if math.isfinite(a)]
    return statistics.median(x) if x else math.nan


def _cells(rs: list[Result], fn: Callable[[Result], float]) -> str:
    h = [fn(r) - 1 for r in rs if held_out(r.case.id)]
    f = [fn(r) - 1 for r in rs if not held_out(r.case.id)]
    return (f"{100 * med(map(abs, h)):.0f}% | {100 * med(map(abs, f)):.0f}% | "
            f"{100 * med(h):+.0f}%")


def score_table(res: list[Result], key: Callable[[Result], str], title: str,
                tpot: Callable[[Result], float] = lambda r: r.r_tpot,
                ttft: Callable[[Result], float] = lambda r: r.r_ttft) -> str:
    """Per group: rows, then TPOT and TTFT: median |r - 1| on the held-out and fit halves and
    the held-out signed median r - 1 (negative: the forecast is too fast)."""
    lines = [f"| {title} | rows | TPOT held-out | TPOT fit | TPOT signed (held-out) "
             "| TTFT held-out | TTFT fit | TTFT signed (held-out) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for g in [*sorted({key(r) for r in res}), "all"]:
        rs = [r for r in res if g in ("all", key(r))]
        lines.append(f"| {g} | {len(rs)} | {_cells(rs, tpot)} | {_cells(rs, ttft)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import collections

    import silicon_report as rep

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trim", type=Path, help="rewrite silicon.csv from this source CSV")
    ap.add_argument("--rows", type=Path, help="also write every row's figures here (CSV)")
    ap.add_argument("--match", metavar="REGEX", help="only rows whose 'id engine system model' "
                    "this regular expression matches (a quicker look at a slice)")
    a = ap.parse_args(argv)
    if a.trim:
        print(f"{silicon_rows.trim(a.trim)} rows written to {silicon_rows.CSV}")
        return
    done, skipped = cases()
    if a.match:
        import re

        pattern = re.compile(a.match)
        done = [c for c in done if pattern.search(f"{c.id} {c.engine} {c.system} {c.model}")]
        if not done:
            sys.exit(f"--match {a.match!r}: no row's 'id engine system model' matches")
    res, refused = run(done)
    why = collections.Counter(w for _, w in skipped + refused) + silicon_rows.trimmed()
    print(f"# NVIDIA silicon_sample ({silicon_rows.SOURCE}) as fixed deployments\n")
    print(rep.bound_section(res, dict(why)), "\n")
    approx = sum(bool(r.case.layout.approx or (r.case.prefill and r.case.prefill.approx))
                 for r in res)
    print(f"rows whose moe_tp x moe_ep is read as ep = tp x attention DP: {approx}\n")
    for title, key in (("engine", lambda r: r.case.engine), ("system", lambda r: r.case.system),
                       ("mode", lambda r: "disagg" if r.case.disagg else "agg")):
        print(score_table(res, key, title), "\n")
    print(rep.diagnoses(res), "\n")
    print("### prototyped corrections (fit half only; src/roofline unchanged)\n")
    print(rep.prototypes(res))
    if a.rows:
        with a.rows.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "engine", "system", "model", "held_out", "beats", "r_tpot",
                        "r_ttft", *(k for k in asdict(res[0]) if k != "case")])
            for r in res:
                w.writerow([r.case.id, r.case.engine, r.case.system, r.case.model,
                            held_out(r.case.id), r.beats, r.r_tpot, r.r_ttft,
                            *(v for k, v in asdict(r).items() if k != "case")])


if __name__ == "__main__":
    main()
