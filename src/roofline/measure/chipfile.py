"""Write what was measured as a chip file in the catalog schema: an empirical chip.

It is labelled as measured everywhere a reader looks: the name, `notes` (date, device,
software, method) and every `source` ("measured <date> on <device>: <method>"). The text is
validated with the catalog's own parser before it is written, so the file always loads
with `load_chip(path)` and works with `--hw path`. Levels that were not measured (a GPU's
shared memory) are absent rather than guessed.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RooflineError
from ..files import STDOUT, read_toml, write_text
from ..hardware import Chip, parse_chip
from ..hardware.catalog import SCHEMA_VERSION
from .bandwidth import BandwidthSweep, MeasuredLevel
from .device import DeviceInfo
from .peaks import PeakResult


@dataclass(frozen=True)
class MeasuredMachine:
    """The results of `measure peaks` on one device."""

    device: DeviceInfo
    date: str  # ISO 8601 date
    peaks: tuple[PeakResult, ...]
    bandwidth: BandwidthSweep | None
    quick: bool = False
    skipped: Mapping[str, str] = field(default_factory=dict)  # dtype -> why not measured
    unreliable: tuple[str, ...] = ()  # still noisy or inconsistent after a retry (checks.py)

    def measured_on(self) -> str:
        return f"measured {self.date} on {self.device.description}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _table(header: str, items: Mapping[str, Any]) -> list[str]:
    return [header, *(f"{k} = {_toml(v)}" for k, v in items.items() if v is not None), ""]


def default_chip_id(info: DeviceInfo) -> str:
    """`measured-<device name>`, lower case, dashes for anything else."""
    slug = re.sub(r"[^a-z0-9]+", "-", info.name.lower()).strip("-") or info.kind
    return f"measured-{slug}"


def _level_source(machine: MeasuredMachine, level: MeasuredLevel,
                  threads: tuple[int, ...]) -> str:
    lo, hi = level.window
    span = (f"working sets >= {lo / 2**20:.3g} MiB" if level.name == "hbm"
            else f"working sets {lo / 2**20:.3g}-{hi / 2**20:.3g} MiB")
    threads_text = (f", best of {' and '.join(map(str, threads))} threads"
                    if machine.device.kind == "cpu" else "")
    return (f"{machine.measured_on()}: {level.label}; streaming '{level.kernel}' kernel "
            f"(best of read/copy/triad), median over {span}{threads_text}; spread "
            f"{100 * level.spread:.0f}%; capacity from {level.capacity_source}")


def chip_toml(machine: MeasuredMachine, chip_id: str | None = None,
              links: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The chip file text (validated). `links` maps 'scale-up' / 'scale-out' to link tables
    (as written by `measure comm --out`)."""
    info = machine.device
    chip_id = chip_id or default_chip_id(info)
    if not machine.peaks:
        raise RooflineError("no peak was measured, so there is no chip file to write")
    sweep = machine.bandwidth
    if sweep is None or not any(lv.name == "hbm" for lv in sweep.levels):
        raise RooflineError("the bandwidth sweep did not reach main memory, so the chip file "
                            "would have no 'hbm' level (sweep larger working sets)")
    mode = " --quick" if machine.quick else ""
    notes = (f"Empirical chip, {machine.measured_on()} ({info.software}) by "
             f"`roofline measure peaks{mode}`. Peaks: best median FLOP/s of square matmuls per "
             f"dtype. Bandwidth: streaming kernels over working sets from 16 KiB to "
             f"{max(p.working_set_bytes for p in sweep.points) / 2**20:.0f} MiB; each level is "
             f"the best kernel's median inside it. A measured roof, not a datasheet figure; "
             f"levels and dtypes not measured are absent.")
    if machine.skipped:
        notes += " Not measured: " + "; ".join(f"{k} ({v})" for k, v in machine.skipped.items())
    name = f"{info.name} (measured {machine.date})"
    if machine.unreliable:  # said first, where every reader of the file or the name looks
        notes = (f"UNRELIABLE: still noisy or inconsistent after a retry ("
                 f"{'; '.join(machine.unreliable)}); measure again on a quiet machine. {notes}")
        name = f"{info.name} (measured {machine.date}, unreliable)"
    lines = [f"# Empirical chip written by roofline measure peaks, {machine.measured_on()}.",
             *(["# UNRELIABLE: see notes."] if machine.unreliable else []),
             "# Units are SI: FLOP/s, bytes, bytes/s.",
             *(f"{k} = {_toml(v)}" for k, v in {
                 "schema_version": SCHEMA_VERSION, "id": chip_id,
                 "name": name, "vendor": info.vendor,
                 "form_factor": f"measured {info.kind.upper()}", "notes": notes}.items()), ""]
    for peak in machine.peaks:
        lines += _table(f"[peak.{peak.dtype}]", {
            "flops_per_s": float(peak.flops_per_s),
            "source": f"{machine.measured_on()}: {peak.method}; best n = {peak.n}, spread "
                      f"{100 * peak.timing.spread:.0f}%"})
    for level in sweep.levels:
        lines += _table("[[memory]]", {
            "name": level.name, "technology": f"{level.label} (measured)",
            "capacity_bytes": None if level.units else float(level.capacity_bytes),
            "units": level.units,
            "unit_capacity_bytes": None if level.unit_capacity_bytes is None
            else float(level.unit_capacity_bytes),
            "bandwidth_Bps": float(level.bandwidth_Bps),
            "source": _level_source(machine, level, sweep.threads)})
    for name, table in (links or {}).items():
        lines += _table(f"[link.{name}]", table)
    text = "\n".join(lines)
    parse_chip(tomllib.loads(text), f"<measured chip {chip_id}>")  # fails loudly, never writes
    return text


def read_links(path: str | Path) -> dict[str, dict[str, Any]]:
    """The [link.*] tables of a file written by `measure comm --out`."""
    p = Path(path)
    try:
        data = read_toml(p, "file")
    except RooflineError as exc:  # already names the file
        raise RooflineError(f"cannot read a link profile: {exc}") from None
    links = data.get("link")
    if not isinstance(links, dict) or not links:
        raise RooflineError(f"{p}: no [link.scale-up] or [link.scale-out] table")
    return links


def write_chip(machine: MeasuredMachine, path: str | Path, chip_id: str | None = None,
               links: Mapping[str, Mapping[str, Any]] | None = None) -> Chip:
    """Write the chip file and return it as loaded back (so `--hw path` is known to work)."""
    from ..hardware import load_chip_file

    text = chip_toml(machine, chip_id, links)
    write_text(path, text + "\n")
    if str(path) == STDOUT:  # nothing to load back: the text was validated when built
        return parse_chip(tomllib.loads(text), "<stdout>")
    return load_chip_file(Path(path))
