"""A chip for people: its peaks, memory levels, links and ridge points, each figure with its
source; one set of tables for the terminal, Markdown and HTML; and chips side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from ..cost import LINKS
from ..hardware import Chip
from ..serialize import jsonable
from ..units import format_bytes, format_number, format_si, format_time
from . import text
from .safe import terminal_safe
from .table import Table, text_table

SourceRef = Callable[[str, bool], str]  # (source text, estimated?) -> what the cell shows


def inline_source(source: str, estimated: bool = False) -> str:
    return source + (" (estimate)" if estimated else "")


def chip_tables(chip: Chip, ref: SourceRef = inline_source) -> list[Table]:
    """Peaks, memory levels, links and ridge points; `ref` shows a source (inline text, or
    a numbered reference in the terminal)."""

    def capacity(cap: float | None, unit: float | None, units: int | None) -> str:
        if cap:
            return format_bytes(cap)
        return f"{format_bytes(unit)} × {units}" if unit and units else "-"

    tables = [
        text_table(["dtype", "peak FLOP/s (dense)", "source"],
                   [[p.dtype, format_si(p.flops_per_s, "FLOP/s"), ref(p.source, p.estimated)]
                    for p in chip.peaks.values()], "dense peaks"),
    ]
    if chip.vector or chip.special:
        rows = [[f"vector {p.dtype}", format_si(p.flops_per_s, "FLOP/s"),
                 ref(p.source, p.estimated)] for p in chip.vector.values()]
        if chip.special:
            rows.append(["special functions (exp, tanh, rsqrt)",
                         format_si(chip.special.flops_per_s, "op/s"),
                         ref(chip.special.source, chip.special.estimated)])
        tables.append(text_table(["unit", "peak", "source"], rows,
                                 "vector and special-function units"))
    tables += [
        text_table(["level", "technology", "capacity", "bandwidth", "source"],
                   [[m.name, m.technology, capacity(m.capacity_bytes, m.unit_capacity_bytes,
                                                    m.units),
                     format_si(m.bandwidth_Bps, "B/s"), ref(m.source, m.estimated)]
                    for m in chip.memory], "memory levels"),
    ]
    if chip.links:
        rows = []
        for lk in chip.links.values():
            domain = str(lk.domain_size or "-") + (
                f" (torus, {lk.torus_axis}/axis, {lk.ports} ports)" if lk.torus_axis else
                f" (mesh, {lk.ports} ports)" if lk.topology == "mesh" else "")
            sources = " ".join(ref(s, False) for s in (lk.source, lk.latency_source,
                                                      lk.base_latency_source) if s)
            rows.append([lk.name, lk.technology, format_si(lk.bandwidth_Bps, "B/s"),
                         format_time(lk.latency_s),
                         format_time(lk.base_latency_s) if lk.base_latency_s else "-", domain,
                         sources])
        tables.append(text_table(["link", "technology", "bandwidth", "alpha", "base latency",
                                  "domain", "source"], rows, "links (bandwidth per direction)"))
    resources = chip.resources()
    tables.append(text_table(["dtype", *resources],
                             [[dt, *(format_number(chip.ridge(dt, r)) for r in resources)]
                              for dt in chip.peaks],
                             "ridge points I* = peak / bandwidth (FLOP/byte)"))
    return tables


def chip_text(chip: Chip) -> str:
    """The terminal view: the tables with numbered sources listed below them."""
    sources: list[str] = []

    def ref(source: str, estimated: bool) -> str:
        sources.append(inline_source(source, estimated))
        return f"[{len(sources)}]" + ("*" if estimated else "")

    lines = [f"{chip.name} ({chip.id})", f"vendor {chip.vendor}; {chip.form_factor}"
             + (f"; {chip.tdp_w:g} W {ref(chip.tdp_source, chip.tdp_estimated)}"
                if chip.tdp_w else "")
             + (f"; peaks at {chip.peak_clock_mhz:g} MHz {ref(chip.clock_source, False)}"
                if chip.peak_clock_mhz else "")]
    for t in chip_tables(chip, ref):
        lines += ["", text.render(t)]
    lines += ["", "sources (* = estimate, not a vendor figure):"]
    lines += [f"  [{i}] {s}" for i, s in enumerate(sources, 1)]
    if chip.notes:
        lines += ["", f"notes: {chip.notes}"]
    lines.append(f"file: {chip.origin}")
    return terminal_safe("\n".join(lines))


def chip_dict(chip: Chip) -> dict[str, Any]:
    """JSON view of a chip with its ridge points."""
    resources = chip.resources()
    data = asdict(chip)
    data["ridge"] = {dt: {r: chip.ridge(dt, r) for r in resources} for dt in chip.peaks}
    return dict(jsonable(data))


def chip_comparison(chips: Sequence[Chip]) -> tuple[Table, dict[str, Any]]:
    """Chips side by side: one row per figure (dense peaks, memory levels, links, ridge points,
    TDP), one column per chip; figures after the first chip carry their ratio to it.
    Returns the table and the same figures as JSON-ready numbers."""
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
        shown = (format_bytes(value) if unit == "B"
                 else format_number(value) if unit in ("", "FLOP/B")
                 else format_si(value, unit))
        return shown if lead or not first or not unit else f"{shown} ({value / first:.2g}x)"

    kept = [(label, unit, values) for label, unit, values in figures
            if any(v is not None for v in values)]
    table = text_table(["figure", *(c.id for c in chips)],
                       [[label, *(cell(v, values[0], unit, i == 0)
                                  for i, v in enumerate(values))]
                        for label, unit, values in kept])
    data = {"chips": [c.id for c in chips],
            "figures": [{"figure": label, "unit": unit, "values": values}
                        for label, unit, values in kept]}
    return table, data
