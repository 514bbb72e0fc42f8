"""What a machine offers: peaks per dtype, memory levels, links. Every figure has a source."""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError


@dataclass(frozen=True)
class Peak:
    """Dense (no 2:4 sparsity) peak throughput for one compute dtype."""

    dtype: str
    flops_per_s: float
    source: str
    estimated: bool = False


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy (hbm = main memory, l2, sram = on-chip scratchpad)."""

    name: str
    technology: str
    bandwidth_Bps: float
    capacity_bytes: float | None
    source: str
    estimated: bool = False
    units: int | None = None  # SMs / CUs / TensorCores sharing the level
    unit_capacity_bytes: float | None = None  # per SM: the tile budget of one kernel block


@dataclass(frozen=True)
class Link:
    """A chip-to-chip link; bandwidth is per direction, latency is alpha per message step."""

    name: str  # "scale-up" or "scale-out"
    technology: str
    bandwidth_Bps: float
    latency_s: float
    source: str
    latency_source: str = ""
    domain_size: int | None = None  # chips reachable over this link (scale-up domain)
    in_switch_reduction: bool = False  # NVLink SHARP / NVLS
    ports: int | None = None  # physical links aggregated in bandwidth_Bps
    torus_axis: int | None = None  # chips along one torus axis; None: a switch reaches all


@dataclass(frozen=True)
class Chip:
    """One accelerator SKU (or an empirical, measured machine)."""

    id: str
    name: str
    vendor: str
    peaks: dict[str, Peak]
    memory: tuple[MemoryLevel, ...]
    links: dict[str, Link]
    aliases: tuple[str, ...] = ()
    form_factor: str = ""
    tdp_w: float | None = None
    notes: str = ""
    origin: str = ""  # the file it was read from

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype (a dtype name or alias)."""
        key = lookup_dtype(compute_dtype).peak
        if key == "none":
            raise RooflineError(f"dtype {compute_dtype!r} is storage-only (a scale format); "
                                "it cannot be a compute dtype")
        if key not in self.peaks:
            raise RooflineError(
                f"chip {self.id!r} has no {key} peak (it has: {', '.join(self.peaks)})"
            )
        return self.peaks[key].flops_per_s

    def level(self, name: str) -> MemoryLevel:
        for lvl in self.memory:
            if lvl.name == name:
                return lvl
        have = ", ".join(lvl.name for lvl in self.memory)
        raise RooflineError(f"chip {self.id!r} has no memory level {name!r} (it has: {have})")

    def link(self, name: str) -> Link:
        if name not in self.links:
            have = ", ".join(self.links) or "none"
            reach = "inside a node" if name == "scale-up" else "beyond one scale-up domain"
            raise RooflineError(f"chip {self.id!r} has no {name!r} link (it has: {have}), which "
                                f"traffic {reach} needs; give a chip file (--hw chip.toml) "
                                f"with a [link.{name}] table")
        return self.links[name]

    def bandwidth_Bps(self, resource: str) -> float:
        """Bandwidth of a memory level or a link (per direction), by name."""
        if resource in self.links:
            return self.links[resource].bandwidth_Bps
        return self.level(resource).bandwidth_Bps

    def ridge(self, compute_dtype: str, resource: str = "hbm") -> float:
        """Ridge point I* = peak / bandwidth in FLOP/byte for a dtype against a level or link."""
        return self.peak_flops(compute_dtype) / self.bandwidth_Bps(resource)
