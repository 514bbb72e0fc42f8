"""Load and validate chip files: the built-in catalog (one TOML file per SKU) or a user's own.

Validation is strict so a typo in a file fails loudly, naming the file and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..cost import LINKS, MEMORY_LEVELS
from ..dtypes import dtype_names
from ..errors import RooflineError, brief, unknown
from ..files import check_text, read_toml
from .model import (
    EFFICIENCY_KINDS,
    MIN_EFFICIENCY,
    Chip,
    Efficiency,
    Link,
    MemoryLevel,
    Peak,
)

CATALOG_DIR = Path(__file__).with_name("catalog")
SCHEMA_VERSION = 1

_TOP_KEYS = {"schema_version", "id", "name", "vendor", "aliases", "form_factor", "tdp_w",
             "tdp_source", "tdp_estimated", "notes", "peak", "vector", "special",
             "peak_clock_mhz", "clock_source", "memory", "link", "efficiency"}
_EFFICIENCY_KEYS = {"value", "source", "fitted"}
_SPECIAL_KEYS = {"ops_per_s", "source", "estimated"}
TOPOLOGIES = ("switch", "mesh", "torus")
_PEAK_KEYS = {"flops_per_s", "source", "estimated"}
_MEMORY_KEYS = {"name", "technology", "capacity_bytes", "bandwidth_Bps", "source", "estimated",
                "units", "unit_capacity_bytes", "warm_capacity_bytes"}
_LINK_KEYS = {"name", "bandwidth_Bps", "latency_s", "domain_size", "in_switch_reduction",
              "source", "latency_source", "ports", "torus_axis", "topology", "base_latency_s",
              "base_latency_source"}


# prose may span lines; every other string is a name
_PROSE = {"notes", "source", "latency_source", "base_latency_source", "clock_source", "fitted",
          "tdp_source"}
# The sane range of each figure: outside it a figure is a typo (a unit slip of 1e3 and more:
# 989.4 for 989.4e12 FLOP/s, 0.6 s for a 0.6 us latency), and arithmetic on it underflows to
# 0 or overflows to inf. The floors sit far below any real part (a phone SoC: 1e12 FLOP/s,
# 5e10 B/s); the ceilings leave room for a thousand times today's largest chips (a
# wafer-scale die: 2e16 B/s of SRAM bandwidth).
_LIMITS: dict[str, tuple[float, float, str]] = {
    "flops_per_s": (1e9, 1e19, "FLOP/s"),
    "ops_per_s": (1e6, 1e19, "op/s"),
    "peak_clock_mhz": (1.0, 1e5, "MHz"),
    "base_latency_s": (1e-12, 1e-2, "s"),
    "bandwidth_Bps": (1e6, 1e18, "B/s"),
    "capacity_bytes": (1e3, 1e16, "B"),
    "unit_capacity_bytes": (1e3, 1e16, "B"),
    "warm_capacity_bytes": (1e3, 1e16, "B"),
    "latency_s": (1e-12, 1e-2, "s"),
    "units": (1.0, 1e7, ""),
    "domain_size": (1.0, 1e7, "chips"),
    "ports": (1.0, 1e4, ""),
    "torus_axis": (2.0, 1e7, "chips"),
    "tdp_w": (1.0, 1e6, "W"),
}


SAFE_ID = re.compile(r"[a-z0-9][a-z0-9._+-]*")
ID_RULE = "lower-case letters, digits, '.', '_', '-' or '+', starting with a letter or digit"


class _Reader:
    """Typed access to one table of a chip file; errors name the file and the field."""

    def __init__(self, path: str, prefix: str, table: Any, allowed: set[str]) -> None:
        self.path, self.prefix = path, prefix
        if not isinstance(table, dict):
            raise self.error("", f"must be a table, got {type(table).__name__}")
        extra = sorted(set(table) - allowed)
        if extra:
            raise self.error(extra[0], f"unknown field (allowed: {', '.join(sorted(allowed))})")
        self.table = table

    def where(self, key: str) -> str:
        field = ".".join(p for p in (self.prefix, key) if p) or "(top level)"
        return f"{self.path}: field '{field}'"

    def error(self, key: str, message: str) -> RooflineError:
        return RooflineError(f"{self.where(key)}: {message}")

    def string(self, key: str, required: bool = True) -> str:
        value = self.table.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, "required non-empty string")
        return check_text(value, self.where(key), name=key not in _PROSE)

    def number(self, key: str, required: bool = True, integer: bool = False) -> float | None:
        value = self.table.get(key)
        if value is None and not required:
            return None
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (integer and not isinstance(value, int))):
            kind = "a positive integer" if integer else "a positive number"
            raise self.error(key, f"must be {kind}, got {value!r}")
        if integer and value > 2**53:  # counts: beyond exact floats (and C longs)
            raise self.error(key, f"must be at most 2**53, got {brief(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise self.error(key, f"must be finite, got {brief(value)}") from None
        if not math.isfinite(number) or number <= 0:
            raise self.error(key, f"must be positive and finite, got {value!r}")
        floor, ceiling, unit = _LIMITS[key]
        if not floor <= number <= ceiling:
            unit = f" {unit}" if unit else ""
            bound = f"at least {floor:g}" if number < floor else f"at most {ceiling:g}"
            raise self.error(key, f"must be {bound}{unit} (the sane range is {floor:g} to "
                             f"{ceiling:g}{unit}), got {brief(value)}")
        return number

    def flag(self, key: str) -> bool:
        value = self.table.get(key, False)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}")
        return value


def _req(x: float | None) -> float:
    assert x is not None  # guaranteed by required=True
    return x


def parse_chip(data: dict[str, Any], path: str) -> Chip:
    """Validate the parsed TOML of a chip file and build a Chip."""
    top = _Reader(path, "", data, _TOP_KEYS)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise top.error("schema_version", f"must be {SCHEMA_VERSION}")
    chip_id = top.string("id")
    if not SAFE_ID.fullmatch(chip_id):  # an id lands raw in CSV cells, labels, file names
        raise top.error("id", f"must be {ID_RULE}, got {chip_id!r}")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise top.error("aliases", "must be a list of non-empty strings")
    for alias in aliases:
        check_text(alias, top.where("aliases"), name=True)

    peaks_table = data.get("peak")
    if not isinstance(peaks_table, dict) or not peaks_table:
        raise top.error("peak", "at least one [peak.<dtype>] table is required")
    allowed_dtypes = dtype_names()
    peaks: dict[str, Peak] = {}
    for key, table in peaks_table.items():
        if key not in allowed_dtypes:
            raise top.error(f"peak.{key}", f"unknown dtype (allowed: {', '.join(allowed_dtypes)})")
        r = _Reader(path, f"peak.{key}", table, _PEAK_KEYS)
        peaks[key] = Peak(key, _req(r.number("flops_per_s")), r.string("source"),
                          r.flag("estimated"))

    vector: dict[str, Peak] = {}
    vector_table = data.get("vector", {})
    if not isinstance(vector_table, dict):
        raise top.error("vector", "must be a table of [vector.<dtype>] tables")
    for key, table in vector_table.items():
        if key not in allowed_dtypes:
            raise top.error(f"vector.{key}",
                            f"unknown dtype (allowed: {', '.join(allowed_dtypes)})")
        r = _Reader(path, f"vector.{key}", table, _PEAK_KEYS)
        vector[key] = Peak(key, _req(r.number("flops_per_s")), r.string("source"),
                           r.flag("estimated"))
    special = None
    if "special" in data:
        r = _Reader(path, "special", data["special"], _SPECIAL_KEYS)
        special = Peak("sfu", _req(r.number("ops_per_s")), r.string("source"),
                       r.flag("estimated"))
    clock = top.number("peak_clock_mhz", required=False)
    if clock is not None and not top.string("clock_source", required=False):
        raise top.error("clock_source", "required with peak_clock_mhz (where the clock comes "
                        "from)")

    levels_list = data.get("memory")
    if not isinstance(levels_list, list) or not levels_list:
        raise top.error("memory", "at least one [[memory]] entry (first: 'hbm') is required")
    memory: list[MemoryLevel] = []
    for i, table in enumerate(levels_list):
        r = _Reader(path, f"memory[{i}]", table, _MEMORY_KEYS)
        name = r.string("name")
        if name not in MEMORY_LEVELS:
            raise r.error("name", f"unknown level {name!r} (allowed: {', '.join(MEMORY_LEVELS)})")
        if any(m.name == name for m in memory):
            raise r.error("name", f"level {name!r} appears twice")
        if i == 0 and name != "hbm":
            raise r.error("name", "the first memory level must be 'hbm' (main memory)")
        units = r.number("units", required=False, integer=True)
        unit_cap = r.number("unit_capacity_bytes", required=False)
        capacity = r.number("capacity_bytes", required=False)
        if (units is None) != (unit_cap is None):
            raise r.error("units", "give both 'units' and 'unit_capacity_bytes', or neither")
        if units is not None and unit_cap is not None:
            capacity = capacity or units * unit_cap
        if capacity is None:
            raise r.error("capacity_bytes", "required (or 'units' with 'unit_capacity_bytes')")
        warm = r.number("warm_capacity_bytes", required=False)
        if warm is not None and (name != "l2" or warm < capacity):
            raise r.error("warm_capacity_bytes", "an l2 level's, at least its capacity_bytes "
                          "(that cache and any behind it)")
        memory.append(MemoryLevel(
            name=name, technology=r.string("technology", required=False) or name,
            bandwidth_Bps=_req(r.number("bandwidth_Bps")), capacity_bytes=capacity,
            source=r.string("source"), estimated=r.flag("estimated"),
            units=None if units is None else int(units), unit_capacity_bytes=unit_cap,
            warm_capacity_bytes=warm,
        ))
    order = [m.name for m in memory]
    if order != sorted(order, key=MEMORY_LEVELS.index):
        outer_first = ", ".join(MEMORY_LEVELS)
        raise top.error("memory", f"levels must be ordered outermost first: {outer_first}")
    for inner in memory[1:]:  # a cache larger than main memory is a unit slip
        if (inner.capacity_bytes or 0) > (memory[0].capacity_bytes or math.inf):
            raise top.error("memory", f"level {inner.name!r} holds {inner.capacity_bytes:g} B, "
                            f"more than main memory ({memory[0].capacity_bytes:g} B)")

    links_table = data.get("link", {})
    if not isinstance(links_table, dict):
        raise top.error("link", "must be a table of [link.scale-up] / [link.scale-out]")
    links: dict[str, Link] = {}
    for key, table in links_table.items():
        if key not in LINKS:
            raise top.error(f"link.{key}", f"unknown link (allowed: {', '.join(LINKS)})")
        r = _Reader(path, f"link.{key}", table, _LINK_KEYS)
        domain = r.number("domain_size", required=False, integer=True)
        ports = r.number("ports", required=False, integer=True)
        axis = r.number("torus_axis", required=False, integer=True)
        if axis is not None and ports is None:
            raise r.error("torus_axis", "a torus link also needs 'ports' (links per chip)")
        topology = r.string("topology", required=False) or ("torus" if axis else "switch")
        if topology not in TOPOLOGIES:
            raise r.error("topology", f"unknown topology {topology!r} (allowed: "
                          f"{', '.join(TOPOLOGIES)})")
        if topology == "mesh" and ports is None:
            raise r.error("topology", "a mesh link needs 'ports' (one per peer)")
        if topology == "torus" and axis is None:
            raise r.error("topology", "a torus link needs 'torus_axis' and 'ports'")
        base = r.number("base_latency_s", required=False)
        if base is not None and not r.string("base_latency_source", required=False):
            raise r.error("base_latency_source", "required with base_latency_s")
        links[key] = Link(
            name=key, technology=r.string("name"), bandwidth_Bps=_req(r.number("bandwidth_Bps")),
            latency_s=_req(r.number("latency_s")), source=r.string("source"),
            latency_source=r.string("latency_source", required=False),
            domain_size=None if domain is None else int(domain),
            in_switch_reduction=r.flag("in_switch_reduction"),
            ports=None if ports is None else int(ports),
            torus_axis=None if axis is None else int(axis), topology=topology,
            base_latency_s=base or 0.0,
            base_latency_source=r.string("base_latency_source", required=False),
        )

    tdp = top.number("tdp_w", required=False)
    tdp_source = top.string("tdp_source", required=False)
    tdp_estimated = top.flag("tdp_estimated")
    if tdp is not None and not tdp_source:
        raise top.error("tdp_source", "required with tdp_w (where the power figure comes from: "
                        "a datasheet, product page or whitepaper)")
    if tdp is None and (tdp_source or "tdp_estimated" in data):
        extra = "tdp_source" if tdp_source else "tdp_estimated"
        raise top.error(extra, "only with tdp_w (the figure it describes)")
    efficiency = _efficiencies(path, data.get("efficiency", {}))
    return Chip(
        id=chip_id, name=top.string("name"), vendor=top.string("vendor"), peaks=peaks,
        memory=tuple(memory), links=links, aliases=tuple(a.lower() for a in aliases),
        form_factor=top.string("form_factor", required=False), tdp_w=tdp,
        tdp_source=tdp_source, tdp_estimated=tdp_estimated,
        notes=top.string("notes", required=False), origin=path, vector=vector,
        special=special, peak_clock_mhz=clock,
        clock_source=top.string("clock_source", required=False), efficiency=efficiency,
    )


def _efficiencies(path: str, table: Any) -> dict[str, Efficiency]:
    """[efficiency.<kind>] and [efficiency.<kind>.<variant>] tables: a value with its source
    (or `fitted`: the rows it was fitted to); kinds in EFFICIENCY_KINDS."""
    top = _Reader(path, "efficiency", table, set(EFFICIENCY_KINDS))
    leaves: list[tuple[str, Any]] = []
    for kind, entry in top.table.items():
        if not isinstance(entry, dict):
            leaves.append((kind, entry))
            continue
        # the kind's own figure (its fields) beside its variants (tables: matmul.bf16, ...)
        own = {k: v for k, v in entry.items() if not isinstance(v, dict)}
        if own:
            leaves.append((kind, own))
        leaves += [(f"{kind}.{sub}", leaf) for sub, leaf in entry.items() if isinstance(leaf, dict)]
    out: dict[str, Efficiency] = {}
    for key, entry in leaves:
        r = _Reader(path, f"efficiency.{key}", entry, _EFFICIENCY_KEYS)
        kind, _, variant = key.partition(".")
        if kind == "matmul" and variant not in dtype_names():
            raise r.error("", f"matmul needs a dtype (allowed: {', '.join(dtype_names())})")
        if variant and kind == "hbm":
            raise r.error("", f"{kind} takes one value, no variants")
        value = r.table.get("value")
        seconds = kind.endswith("_s")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                0 <= value <= 1 if seconds else MIN_EFFICIENCY <= value <= 1):
            allowed = "seconds in [0, 1]" if seconds else f"a fraction in [{MIN_EFFICIENCY:g}, 1]"
            raise r.error("value", f"must be {allowed}, got {value!r}")
        source = r.string("source", required=False)
        fitted = r.string("fitted", required=False)
        if not source and not fitted:
            raise r.error("source", "required: where the figure comes from (or `fitted`: the "
                          "rows it was fitted to)")
        out[key] = Efficiency(float(value), source or "fitted", fitted)
    return out


def load_chip_file(path: str | Path) -> Chip:
    """Read and validate one chip TOML file."""
    return parse_chip(read_toml(path, "chip file"), str(Path(path)))


@cache
def _catalog_files() -> dict[str, Path]:
    # listed once per process: load_chip runs per analysis, a directory scan per call cost
    # more than the analysis itself (callers only read the returned dict)
    return {p.stem: p for p in sorted(CATALOG_DIR.glob("*.toml"))}


@cache
def _catalog() -> dict[str, Chip]:
    chips = {}
    for stem, path in _catalog_files().items():
        chip = _load_by_id(stem)
        if chip.id != stem:
            raise RooflineError(f"{path}: field 'id': must equal the file name {stem!r}")
        chips[chip.id] = chip
    return chips


@cache
def _aliases() -> dict[str, str]:
    table: dict[str, str] = {}
    for chip in _catalog().values():
        for alias in chip.aliases:
            if alias in table or alias in _catalog():
                raise RooflineError(f"{chip.origin}: alias {alias!r} is already taken")
            table[alias] = chip.id
    return table


def list_chips() -> list[str]:
    """Ids of the built-in catalog."""
    return list(_catalog_files())


def _looks_like_path(name: str) -> bool:
    return name.endswith(".toml") or "/" in name or "\\" in name


@cache
def _load_by_id(chip_id: str) -> Chip:
    return load_chip_file(_catalog_files()[chip_id])


@cache
def _by_alias(key: str) -> Chip | None:
    """The catalog chip whose alias is `key`, parsing only the files whose text names it
    (the full catalog is ~35 files to parse and validate: more than a whole CLI start);
    None unless exactly one file claims it (the full catalog then decides, and names the
    error). The files are searched as bytes with ASCII letters lowered (the catalog's aliases
    are ASCII): `str.lower` of every file's text, notes and sources included, cost more than
    parsing the one file found."""
    if not key.isascii():
        return None
    quoted = (f'"{key}"'.encode(), f"'{key}'".encode())
    found = []
    for stem, path in _catalog_files().items():
        try:
            text = path.read_bytes().lower()  # aliases are case-insensitive
        except OSError:
            return None
        if any(q in text for q in quoted):
            chip = _load_by_id(stem)
            if chip.id == stem and key in chip.aliases:
                found.append(chip)
    return found[0] if len(found) == 1 else None


def load_chip(name: str | Chip | Any) -> Chip:
    """A Chip from a catalog id, an alias (case-insensitive), a path to a TOML file, or the
    chip of a System."""
    if isinstance(name, Chip):
        return name
    inner = getattr(name, "chip", None)  # a System carries its chip
    if isinstance(inner, Chip):
        return inner
    text = str(name).strip()
    if _looks_like_path(text):
        return load_chip_file(text)
    key = text.lower()
    if key in _catalog_files():  # fast path: one file, no full catalog scan
        return _load_by_id(key)
    chip = _by_alias(key)
    if chip is not None:
        return chip
    aliases = _aliases()
    if key in aliases:
        return _catalog()[aliases[key]]
    clocked = _CLOCKED.fullmatch(key)  # Chip.at_clock's id: a result's chip, read back
    if clocked:
        return load_chip(clocked[1]).at_clock(float(clocked[2]))
    raise unknown("chip", text, [*_catalog_files(), *aliases])


def load_chips(names: Sequence[str | Chip], what: str = "--hw") -> list[Chip]:
    """The chips of a list (a sweep's, a plan's); two with one id would share one label in
    every row and column, so they are refused."""
    chips: dict[str, tuple[str, Chip]] = {}
    for name in names:
        chip = load_chip(name)
        if chip.id in chips:
            first = chips[chip.id][0]
            if first == str(name):
                raise RooflineError(f"{what}: {first!r} is given twice; give each chip once")
            raise RooflineError(f"{what}: {first!r} and {str(name)!r} are both chip "
                                f"{chip.id!r}; give each chip once (a chip file of its own "
                                "needs an id of its own)")
        chips[chip.id] = (str(name), chip)
    return [chip for _, chip in chips.values()]


_CLOCKED = re.compile(r"(.+)@([0-9]+(?:\.[0-9]*)?)mhz")  # "h100-sxm@1200MHz" (lower-cased)
