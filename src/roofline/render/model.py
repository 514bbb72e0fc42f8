"""A model step for people: the per-op and per-layer tables (one source of rows for text,
JSON, CSV, Markdown and HTML), the key figures, the summary lines, and the what-ifs.

The step's times are named for what they are (`models.analysis.STEP_TIMES`), in every
format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..units import format_params, format_si
from . import text
from .safe import terminal_safe
from .table import Column, Table, gains, general, nbytes, percent, seconds, si

if TYPE_CHECKING:
    from ..models.analysis import ModelAnalysis
    from ..models.memory import MemoryFootprint
    from ..models.mfu import MFUResult



def _count(v: Any) -> str:
    return f"{float(v):g}"


def op_table(a: ModelAnalysis) -> Table:
    """Every op of the step on one chip, all its occurrences (pipeline slots included): the
    t_lower column adds up to the step's t_lower."""
    cols = (Column("group", "group"), Column("name", "op"),
            Column("count", "count", _count, True), Column("flops", "FLOPs", si(), True),
            Column("hbm_bytes", "HBM bytes", nbytes, True),
            Column("link_bytes", "link bytes", nbytes, True),
            Column("intensity", "FLOP/B", general(3), True),
            Column("t_lower_s", "t_lower", seconds, True),
            Column("t_upper_s", "t_upper", seconds, True),
            Column("bound", "bound"), Column("share", "share", percent, True))
    rows = tuple((op.group, op.name, op.count, op.flops, op.hbm_bytes, op.link_bytes,
                  op.intensity, op.t_lower_s, op.t_upper_s, op.bound, op.share) for op in a.ops)
    return Table(cols, rows, "ops per chip, all occurrences in the step")


def layer_table(a: ModelAnalysis) -> Table:
    """One row per kind of layer (per-layer figures) and per model-level op; count x
    `t_each_s` adds up to the step's t_lower."""
    cols = (Column("group", "layer / op (per chip)"), Column("count", "count", _count, True),
            Column("flops", "FLOPs each", si(), True),
            Column("hbm_bytes", "HBM each", nbytes, True),
            Column("link_bytes", "link each", nbytes, True),
            Column("t_each_s", "t_lower each", seconds, True), Column("bound", "bound"),
            Column("share", "share", percent, True))
    rows = [(lay.group, lay.count, lay.flops, lay.hbm_bytes, lay.link_bytes, lay.t_lower_s,
             lay.bound, lay.share) for lay in a.layers]
    rows += [(f"model: {op.name}", op.count, op.flops / op.count, op.hbm_bytes / op.count,
              op.link_bytes / op.count, op.t_lower_s / op.count, op.bound, op.share)
             for op in a.ops if op.group == "model"]
    return Table(cols, tuple(rows), "layers per chip")


def header(a: ModelAnalysis) -> str:
    p, par = a.phase, a.parallel
    active = (f", {format_params(a.params_active)} active" if a.params_active < a.params_total
              else "")
    length = (f"{p.q_len} new token(s) per sequence after a context of {p.kv_len - p.q_len}"
              if p.kind == "decode" else f"{p.q_len} tokens per sequence")
    prec = a.precision  # where the weight dtype came from, and the tables' own dtype
    why = [prec.weights_from] if prec.weights_from else []
    why += [f"embedding and lm head {prec.tables}"] if prec.tables != prec.weights else []
    weights = prec.weights + (f" ({'; '.join(why)})" if why else "")
    return (f"{a.model} ({format_params(a.params_total)} params{active}) on {a.hardware}, "
            f"{p.kind}: batch {p.batch}, {length}; tp {par.tp} pp {par.pp} dp {par.dp} "
            f"ep {par.ep} cp {par.cp}; weights {weights}, activations "
            f"{a.precision.activations}" + ("" if p.kind == "train" else
                                            f", KV {a.precision.kv}"))


def key_figures(a: ModelAnalysis) -> list[tuple[str, str, str]]:
    """(label, value, what it is) for the top of a page: the answer first."""
    p, m = a.phase, a.memory
    out: list[tuple[str, str, str]] = []
    if p.kind == "prefill":
        out.append(("TTFT (lower bound)", seconds(a.t_lower_s), "time to first token: the prefill "
                    "step"))
    elif p.kind == "decode":
        out.append(("TPOT (lower bound)", seconds(a.tpot_s), "time per output token of one "
                    "sequence"))
    else:
        out.append(("step (lower bound)", seconds(a.t_lower_s), "one training step"))
    out.append(("tokens/s (upper bound)", si()(a.tokens_per_s) + common_schedule(a),
                f"across all {a.parallel.chips} chip(s)"))
    out.append(("bound", str(a.bound), "the resource holding most of the step's time"))
    out.append(("memory per chip", f"{nbytes(m.total_bytes)} of "
                f"{nbytes(m.capacity_bytes)}", "fits" if m.fits else "DOES NOT FIT"))
    out.append(("MFU at the bound", f"{100 * a.mfu:.1f}%", f"of the {a.mfu_dtype} dense peak "
                "(the weight GEMMs' dtype)"))
    out.append(("floor / lower / no-overlap", f"{seconds(a.t_floor_s)} / {seconds(a.t_lower_s)} / "
                f"{seconds(a.t_upper_s)}",
                "all overlapped / as the schedule overlaps / nothing overlapped"))
    return out


def common_schedule(a: ModelAnalysis) -> str:
    """", any schedule; 1F1B: Y" where no schedule was named and the common one (1F1B, TP
    and EP collectives in series) is slower than the headline; else nothing."""
    common = a.common_tokens_per_s
    if common is None or not np.any(np.asarray(common) < np.asarray(a.tokens_per_s)
                                    * (1 - 1e-9)):
        return ""
    return f", any schedule; 1F1B: {si()(common)}"


def summary_lines(a: ModelAnalysis) -> list[str]:
    """The step's times named for what they are, its latency and throughput, MFU / HFU, and
    the memory footprint."""
    p, m = a.phase, a.memory
    lines = [f"step: lower bound t_lower = {seconds(a.t_lower_s)} (what the schedule overlaps "
             f"overlapped, the rest in series); no-overlap sum t_upper = {seconds(a.t_upper_s)}"
             f"; floor t_floor = {seconds(a.t_floor_s)} (every resource of the step "
             f"overlapped); bound: {a.bound}"]
    if a.link_bytes:
        lines.append(f"communication: {seconds(a.exposed_comm_s)} exposed (in series with "
                     f"compute or not hidden), {seconds(a.hidden_comm_s)} hidden; "
                     f"{a.schedule.describe(a.comm_streams)}")
    if a.parallel.pp > 1:
        lines.append(f"pipeline: {a.schedule.pipeline}"
                     + (f" with {a.schedule.vpp} virtual stages" if a.schedule.vpp > 1 else "")
                     + f", {a.parallel.microbatches} micro-batches, bubble "
                     f"{100 * a.bubble_fraction:.1f}% of them")
    if p.kind == "prefill":
        lines.append(f"TTFT >= {seconds(a.t_lower_s)}")
    elif p.kind == "decode":
        experts = (f" (routed experts at {a.decode_expert_compute_bound_batch:.4g}: each sees "
                   "top_k/E of the tokens)" if a.decode_expert_compute_bound_batch else "")
        step = (f"step >= {seconds(a.t_lower_s)} for {p.q_len} tokens per sequence; "
                "TPOT (all drafts accepted) " if np.ndim(p.q_len) == 0 and p.q_len > 1
                else "TPOT ")
        lines.append(f"{step}>= {seconds(a.tpot_s)}; <= {si()(a.tokens_per_s)} tokens/s "
                     f"across the batch; dense weight GEMMs turn compute-bound at batch "
                     f"{a.decode_compute_bound_batch:.4g} at their per-chip shapes ("
                     f"{a.decode_compute_bound_batch_limit:.4g} for large matrices){experts}"
                     .replace("at batch inf", "at no batch").replace("at inf:", "at no batch:"))
    else:
        lines.append(f"step >= {seconds(a.t_lower_s)}; <= {si()(a.tokens_per_s)} tokens/s"
                     + common_schedule(a))
    lines.append(f"at the bound: MFU {100 * a.mfu:.1f}%, HFU {100 * a.hfu:.1f}% of the "
                 f"{a.mfu_dtype} peak, HBM bandwidth {100 * a.hbm_utilization:.1f}% "
                 "(causal attention counted as half the scores)")
    training = p.kind == "train"
    state = (f"KV cache {nbytes(m.kv_cache_bytes)} "  # no cache in training, no optimizer
             f"({nbytes(m.kv_bytes_per_token)} per token on this chip)"  # in inference
             if not training else
             f"gradients + optimizer state {nbytes(m.optimizer_bytes)}")
    if np.any(np.asarray(m.state_bytes)):  # linear-attention layers: a fixed-size state
        state += f", recurrent state {nbytes(m.state_bytes)}"
    fit = "fits" if m.fits else "DOES NOT FIT"
    lines += [f"memory per chip: weights {nbytes(m.weights_bytes)}, {state}, "
              f"activations ~{nbytes(m.activations_bytes)}: total "
              f"{nbytes(m.total_bytes)} of {nbytes(m.capacity_bytes)} usable "
              f"({a.memory_budget}): {fit}",
              largest_fit(m, training)]
    return lines


def notes(a: ModelAnalysis) -> list[str]:
    out = [f"config: {a.model_source}"] if a.model_source else []
    return out + [f"note: {w}" for w in a.warnings]


def model_text(a: ModelAnalysis, explain: bool = False) -> str:
    """The terminal view: header, the per-layer (explain: per-op) table, the summary."""
    body = text.render(op_table(a) if explain else layer_table(a), caption=False)
    summary = summary_lines(a)
    cut = next(i for i, line in enumerate(summary) if line.startswith("memory per chip"))
    lines = [header(a), *notes(a), "", body, "", *summary[:cut], "", *summary[cut:]]
    return terminal_safe("\n".join(lines))


def largest_fit(m: MemoryFootprint, training: bool) -> str:
    if np.ndim(m.max_batch) == 0 and m.max_batch < 1:  # say why, and what would help
        fixed = m.weights_bytes + m.optimizer_bytes  # whatever the batch
        if fixed >= m.capacity_bytes:
            what = "weights, gradients and optimizer state" if training else "weights"
            return (f"nothing fits: the {what} alone need {nbytes(fixed)} of "
                    f"{nbytes(m.capacity_bytes)} per chip; shard them over more chips "
                    + ("(--tp, --pp, --ep, --dp with --fsdp)" if training else
                       "(--tp, --pp, --ep) or quantize them (--weight-dtype)"))
        if training:
            return ("nothing fits: not even one sequence's activations; recompute them "
                    "(--recompute), shorten --seq-len, or shard them (--tp, --cp)")
        return ("nothing fits: not even one sequence's KV cache at this length; shorten it, "
                "shard it (--cp, --tp) or quantize it (--kv-dtype)")
    return (f"largest batch that fits: {m.max_batch:g}"
            + ("" if m.max_context is None else f"; longest context at this batch: "
               f"{m.max_context:g}" + (" (the model's maximum)" if m.context_at_model_limit
                                       else "")))


def what_if_table(rows: Sequence[Any]) -> Table:
    """The changes that speed the step up; those that do not, in a note."""
    cols = (Column("label", "change"), Column("speedup", "tokens/s", lambda v: f"{v:.3g}x"),
            Column("tokens_per_s", "tokens/s bound", si()),
            Column("t_lower_s", "step lower bound", seconds),
            Column("bound", "bound"), Column("fits", "fits", lambda v: "yes" if v else "no"))
    helps, rest = gains(rows)
    return Table(cols, tuple((r.label, r.speedup, r.tokens_per_s, r.t_lower_s, r.bound, r.fits)
                             for r in helps), "what would move it (each change alone, "
                 "re-analysed; bounds)", (rest,) if rest else ())


def model_what_if_text(rows: Sequence[Any]) -> str:
    """What would move a model step: each change's tokens/s against today's."""
    if not rows:
        return "what would move it: no change applies"
    if not gains(rows)[0]:
        return "what would move it: no change speeds it up; " + gains(rows)[1]
    return text.render(what_if_table(rows)).replace("\n", ":\n", 1)


def mfu_text(r: MFUResult) -> str:
    convention = "causal: half the scores" if r.causal else "full score matrix, as Megatron-LM"
    attention = (f"attention {format_si(r.attention_flops, 'FLOP')}, {convention}"
                 if r.attention_counted else "attention not counted")
    lines = [f"model FLOPs per step {format_si(r.model_flops, 'FLOP')} ({attention}), achieved "
             f"{format_si(r.achieved_flops_per_s, 'FLOP/s')} of "
             f"{format_si(r.peak_flops_per_s, 'FLOP/s')} dense peak",
             f"MFU {100 * r.mfu:.1f}%  HFU {100 * r.hfu:.1f}%", *r.notes]
    return "\n".join(lines)  # the plausibility warning goes to stderr, once (cli)



def expected_lines(e: Any, data: dict[str, Any]) -> list[str]:
    """The step's bound and expected time side by side (roofline.expect.ExpectedStep), with
    the expected figures' 80% interval (`data`: its JSON block)."""
    from ..expect import WHAT, describe
    from .estimate import interval_note

    a = e.analysis
    percent = lambda v: f"{100 * float(v):.1f}%"  # noqa: E731

    def row(label: str, bound: Any, key: str, show: Any) -> list[str]:
        return [label, show(bound), show(data[key]),
                f"{show(data[key + '_p10'])} – {show(data[key + '_p90'])}"]

    rows = [row("step time", a.t_lower_s, "t_s", seconds),
            row("tokens/s", a.tokens_per_s, "tokens_per_s", si()),
            row("MFU", a.mfu, "mfu", percent)]
    if e.ttft_s is not None:
        rows.append(row("TTFT", a.ttft_s, "ttft_s", seconds))
    if e.tpot_s is not None:
        rows.append(row("TPOT", a.tpot_s, "tpot_s", seconds))
    effs = ", ".join(f"{k} {100 * float(np.mean(v)):.1f}%" for k, v in e.efficiency.items())
    on = f" on {e.engine}" if e.engine else " (no engine named: generic factors)"
    return [f"bound and expected{on} ({WHAT} {describe(e.sources)})",
            text.table(["", "bound", "expected", "80% interval"], rows),
            interval_note(data["interval"]),
            f"efficiency (time-weighted over the step): {effs}"]
