"""One op's bound for people: the per-resource table, the bound, the derivation, the levers;
and the ops table (one row per op) shared by the text, Markdown, CSV and HTML reports."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..cost import LINKS
from ..units import format_bytes, format_number, format_si, format_time
from . import text
from .geometry import OpPoint
from .safe import terminal_safe
from .table import Column, Table, gains, general, seconds, si

if TYPE_CHECKING:
    from ..evaluate import Estimate
    from ..hardware import Chip



def bound_kind(resource: str) -> str:
    """'compute-bound', 'memory-bound', 'communication-bound' or 'latency-bound'."""
    if resource in ("compute", "vector", "sfu"):
        return "compute-bound" if resource == "compute" else f"compute-bound ({resource} units)"
    if resource in LINKS:
        return "communication-bound"
    if resource == "latency":
        return "latency-bound"
    return "memory-bound"


def _num(x: Any, unit: str = "") -> str:
    return si(unit)(x)


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
        text.table(["resource", "time", "of bound", "bytes", "FLOP/byte", "ridge"], rows),
        "",
        f"bound: {est.bound} ({bound_kind(str(est.bound))})",
        *_times_lines(est),
    ]
    if est.flops_by_dtype:
        peak = float(est.peak_flops_per_s)
        lines.append(f"attainable {format_si(float(est.attainable_flops_per_s), 'FLOP/s')}"
                     f" of peak {format_si(peak, 'FLOP/s')}"
                     f" ({100 * float(est.attainable_flops_per_s) / peak:.1f}%)")
    if explain:
        lines += ["", "derivation:", *(f"  {line}" for line in est.cost.explain())]
        lines += [f"  {line}" for line in time_derivation(est, chip)]
        lines += [f"  {line}" for line in _intensity_derivation(est)]
        lines += ["", f"why: {_why(est)}"]
    return terminal_safe("\n".join(lines))


def _intensity_derivation(est: Estimate) -> list[str]:
    out = []
    for level, value in est.intensity.items():
        traffic = est.bytes.get(level, est.link_bytes.get(level))
        ridge = float(est.ridge[level])
        side = "above" if float(value) >= ridge else "below"
        out.append(f"I_{level} = FLOPs / bytes = {format_si(float(est.flops))} / "
                   f"{format_bytes(float(traffic or 0))} = {format_number(float(value))} "
                   "FLOP/byte, "
                   f"{side} the ridge I* = peak / bandwidth = {format_number(ridge)}")
    return out


def _times_lines(est: Estimate) -> list[str]:
    lower = "lower bound (resources perfectly overlapped" + (
        "; a link's latency and bytes in series)" if est.chain_s else ")")
    width = max(len(lower), len("no-overlap sum"))
    return [f"{lower:<{width}} t_lower = {format_time(float(est.t_lower_s))}",
            f"{'no-overlap sum':<{width}} t_upper = {format_time(float(est.t_upper_s))}"]


def _why(est: Estimate) -> str:
    link = next((k for k, chain in est.chain_s.items()
                 if float(chain) >= float(est.t_lower_s) > 0), None)
    if link is not None:  # a link's alpha-beta chain sets the bound
        transfer = float(est.time_s[link])
        latency = float(est.chain_s[link]) - transfer
        return (f"the {link} chain: latency {format_time(latency)} + bytes / bandwidth "
                f"{format_time(transfer)} = {format_time(float(est.chain_s[link]))} (a message "
                "step cannot finish before its bytes arrive): the op is "
                f"{bound_kind(str(est.bound))}; it cannot finish faster than that")
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
        if key not in labels and not isinstance(value, (int, float, type(None))):
            continue  # structured extras (inputs echoed, ...) are for JSON only
        label, unit = labels.get(key, (key, ""))
        shown = "-" if value is None else format_si(float(value), unit)
        lines.append(f"{label}: {shown}")
    return "\n".join(lines)


def what_if_text(est: Estimate, rows: Sequence[Any]) -> str:
    """The levers table: what each change would do to attainable FLOP/s and the bound."""
    if not rows:
        return "what would move it: no lever applies"
    helps, rest = gains(rows)
    now = (format_si(float(est.attainable_flops_per_s), "FLOP/s") if est.flops_by_dtype
           else format_time(float(est.t_lower_s)))
    head = f"what would move it (now {now}, {est.bound}-bound):"
    if not helps:
        return f"{head} no lever speeds it up; {rest}"
    body = [[r.label, f"{r.speedup:.3g}x", format_si(r.attainable_flops_per_s, "FLOP/s"),
             format_time(r.t_lower_s), r.bound] for r in helps]
    return head + "\n" + text.table(
        ["change", "work/s per chip", "attainable", "t_lower", "bound"], body) + (
        "\n" + rest if rest else "")


def time_derivation(est: Estimate, chip: Chip | None = None) -> list[str]:
    """How each resource time follows from the counts and the chip's figures."""
    from ..evaluate import EMULATED_SPECIAL_FLOPS
    from ..hardware import load_chip

    chip = chip or load_chip(est.hardware)
    out = []
    for resource, t in est.time_s.items():
        if resource == "compute":
            parts = [f"{format_si(float(f))} / {format_si(chip.peak_flops(dt), 'FLOP/s')} [{dt}]"
                     for dt, f in est.flops_by_dtype.items()]
            formula = "FLOPs / peak"
        elif resource == "vector":
            parts = [f"{format_si(float(f))} / {format_si(chip.vector_flops(dt), 'FLOP/s')} "
                     f"[vector {dt}]" for dt, f in est.cost.vector_flops.items()]
            formula = "vector FLOPs / vector peak"
        elif resource == "sfu":
            total = sum(float(n) for n in est.cost.special_ops.values())
            rate = chip.special_ops() or 0.0
            parts = [f"{format_si(total)} / {format_si(rate, 'op/s')}"]
            formula = "transcendentals / special-function rate"
            if rate and float(t) < total / rate * (1 - 1e-9):  # the vector units take a share
                fp32 = chip.vector_flops("fp32")
                parts = [f"({format_time(float(est.time_s.get('vector', 0.0)))} + "
                         f"{EMULATED_SPECIAL_FLOPS:g}·{format_si(total)} / "
                         f"{format_si(fp32, 'FLOP/s')}) / (1 + {EMULATED_SPECIAL_FLOPS:g}·"
                         f"{format_si(rate, 'op/s')} / {format_si(fp32, 'FLOP/s')})"]
                formula = ("(t_vector + c·transcendentals / fp32 vector peak) / (1 + c·special-"
                           "function rate / fp32 vector peak), the vector units emulating a "
                           f"share at c = {EMULATED_SPECIAL_FLOPS:g} FLOPs each")
        elif resource in est.bytes:
            parts = [f"{format_bytes(float(est.bytes[resource]))} / "
                     f"{format_si(chip.bandwidth_Bps(resource), 'B/s')}"]
            formula = "bytes / bandwidth"
        elif resource == "latency":
            parts = [f"{float(steps):g} steps · {format_time(chip.link(name).latency_s)} [{name}]"
                     for name, steps in est.cost.link_steps.items()]
            parts += [f"{float(calls):g} calls · {format_time(chip.link(name).base_latency_s)} "
                      f"[{name} base]" for name, calls in est.cost.link_calls.items()
                      if chip.link(name).base_latency_s]
            formula = "message steps · alpha + calls · base latency"
        else:
            link = chip.link(resource)
            parts = [f"{format_bytes(float(est.link_bytes.get(resource, 0.0)))} / "
                     f"{format_si(link.bandwidth_Bps, 'B/s')} per direction"]
            formula = "bytes / bandwidth"
        out.append(f"t_{resource} = {formula} = {' + '.join(parts)} = {format_time(float(t))}")
    return out


# --- the ops table -----------------------------------------------------------------------


def _intensities(r: OpPoint) -> str:
    parts = [f"{lv} {format_number(x)} (ridge {format_number(r.ridge.get(lv, math.nan))})"
             for lv, x in r.intensity.items() if math.isfinite(x)]
    return "; ".join(parts) or "-"


def ops_table(results: Sequence[OpPoint], numbered: bool = False) -> Table:
    """One row per op: the shared ops table of every report format (raw SI values; the
    intensity column is text)."""
    levels = list(dict.fromkeys(k for r in results for k in r.intensity))
    resources = list(dict.fromkeys(k for r in results for k in r.time_s))
    cols = [Column("name", "op"), Column("hardware", "hardware"),
            Column("bound", "bound", lambda b: f"{b} ({bound_kind(b)})"),
            Column("t_lower_s", "t_lower (lower bound)", seconds, True),
            Column("t_upper_s", "t_upper (no-overlap sum)", seconds, True),
            Column("flops", "FLOPs", si(), True),
            Column("attainable_flops_per_s", "attainable", si("FLOP/s"), True),
            Column("peak_flops_per_s", "peak", si("FLOP/s"), True),
            *(Column(f"intensity_{lv}", f"I {lv} (FLOP/B)", general(), True) for lv in levels),
            *(Column(f"ridge_{lv}", f"ridge {lv}", general(), True) for lv in levels),
            *(Column(f"time_{res}_s", f"t {res}", seconds, True) for res in resources)]
    if numbered:
        cols.insert(0, Column("index", "#", str, True))
    rows = []
    for i, r in enumerate(results, 1):
        row: list[Any] = [r.name, r.hardware, r.bound, r.t_lower_s, r.t_upper_s, r.flops,
                          r.attainable_flops_per_s, r.peak_flops_per_s,
                          *(r.intensity.get(lv) for lv in levels),
                          *(r.ridge.get(lv) for lv in levels),
                          *(r.time_s.get(res) for res in resources)]
        rows.append(tuple([i, *row] if numbered else row))
    return Table(tuple(cols), tuple(rows))


def ops_summary_table(results: Sequence[OpPoint], numbered: bool = False) -> Table:
    """The ops table for reading (HTML, Markdown): fewer, wider columns."""
    cols = [Column("name", "op"), Column("bound", "bound", lambda b: f"{b} ({bound_kind(b)})"),
            Column("t_lower_s", "t_lower (lower bound)", seconds),
            Column("t_upper_s", "t_upper (no-overlap sum)", seconds),
            Column("flops", "FLOPs", si()),
            Column("intensity", "intensity vs ridge (FLOP/byte)"),
            Column("attainable_flops_per_s", "attainable", si("FLOP/s")),
            Column("of_peak", "of peak", lambda v: "-" if v is None else f"{v:.1%}")]
    if numbered:
        cols.insert(0, Column("index", "#", str))
    rows = []
    for i, r in enumerate(results, 1):
        share = (r.attainable_flops_per_s / r.peak_flops_per_s
                 if r.peak_flops_per_s > 0 else math.nan)
        row = [r.name, r.bound, r.t_lower_s, r.t_upper_s, r.flops, _intensities(r),
               r.attainable_flops_per_s, share if math.isfinite(share) else None]
        rows.append(tuple([i, *row] if numbered else row))
    return Table(tuple(cols), tuple(rows))


def derivation_lines(r: OpPoint) -> list[str]:
    times = [f"t_{res} = {format_time(t)}" for res, t in r.time_s.items()]
    chained = any(res in (*LINKS, "latency") for res in r.time_s)  # alpha-beta on a link
    lower = "max (a link's latency + bytes in series)" if chained else "max"
    return [*r.derivation, *times,
            f"t_lower = {lower} = {format_time(r.t_lower_s)} ({r.bound}: "
            f"{bound_kind(r.bound)}); t_upper = sum = {format_time(r.t_upper_s)}"]


def expected_text(e: Any, data: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
    """The bound and the expected time side by side (roofline.expect.Expected), with the
    expected figures' 80% interval (`data`: its JSON block); `extra` the op's own rates
    (algbw / busbw) at the bound, shown at both."""
    from ..expect import WHAT, describe

    def expected(key: str, show: Any) -> list[str]:
        return [show(data[key]), f"{show(data[key + '_p10'])} – {show(data[key + '_p90'])}"]

    rows = [["time", seconds(e.bound.t_lower_s), *expected("t_s", seconds)]]
    if e.bound.cost.has_arithmetic:
        rows.append(["FLOP/s", _num(e.bound.attainable_flops_per_s, "FLOP/s"),
                     *expected("flops_per_s", lambda v: _num(v, "FLOP/s"))])
    for key, value in (extra or {}).items():
        rows.append([key, _num(value, "B/s"), *expected(key, lambda v: _num(v, "B/s"))])
    effs = ", ".join(f"{k} {100 * float(v):.1f}%" for k, v in e.efficiency.items())
    return "\n".join([f"bound and expected ({WHAT} {describe(e.sources)})",
                      text.table(["", "bound", "expected", "80% interval"], rows),
                      interval_note(data["interval"]),
                      f"efficiency applied: {effs or 'none'}; overhead "
                      f"{seconds(e.overhead_s)} (launch, collective calls)"])


def interval_note(band: dict[str, Any]) -> str:
    """Where the 80% interval came from, in one line."""
    kind = band["kind"]
    rows = f"{band['rows']} published {kind} rows" if kind != "all" else \
        f"{band['rows']} published rows of every kind (too few of this one)"
    return (f"80% interval: measured/expected time of {rows} spans "
            f"{band['p10_ratio']:.2f}-{band['p90_ratio']:.2f}x (held on "
            f"{100 * band['held_out_coverage']:.0f}% of the held-out half); never below the "
            "bound")
