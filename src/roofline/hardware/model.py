"""What a machine offers: peaks per dtype, memory levels, links. Every figure has a source."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..cost import LINKS, MEMORY_LEVELS
from ..dtypes import dtype as lookup_dtype
from ..dtypes import dtype_names
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

    def resources(self) -> list[str]:
        """Every bandwidth roof: memory levels (outermost first), then links."""
        return [m.name for m in self.memory] + [k for k in LINKS if k in self.links]

    def bandwidth_Bps(self, resource: str) -> float:
        """Bandwidth of a memory level or a link (per direction), by name."""
        if resource in self.links:
            return self.links[resource].bandwidth_Bps
        return self.level(resource).bandwidth_Bps

    def ridge(self, compute_dtype: str, resource: str = "hbm") -> float:
        """Ridge point I* = peak / bandwidth in FLOP/byte for a dtype against a level or link."""
        return self.peak_flops(compute_dtype) / self.bandwidth_Bps(resource)

    def derated(self, efficiency: Mapping[str, float], label: str = "calibrated") -> Chip:
        """This chip with each roof times its measured efficiency (achieved / roof, in (0, 1]):
        'compute.<dtype>' scales that peak, 'hbm' / 'l2' / 'sram' a level's bandwidth,
        'scale-up' / 'scale-out' a link's bandwidth, and 'latency' divides every link's alpha.
        Roofs without an efficiency (or that the chip lacks) stay as they are. `evaluate` on
        the result is the calibrated estimate; id, name and sources say `label`."""
        others = [*MEMORY_LEVELS, *LINKS, "latency"]
        for key, eff in efficiency.items():
            if key not in others and key not in [f"compute.{d}" for d in dtype_names()]:
                raise RooflineError(f"efficiency {key!r}: unknown resource (allowed: "
                                    f"compute.<dtype>, {', '.join(others)})")
            if isinstance(eff, bool) or not isinstance(eff, (int, float)) \
                    or not math.isfinite(eff) or not 0 < eff <= 1:  # derating never speeds up
                raise RooflineError(f"efficiency {key!r}: must be in (0, 1], got {eff!r}")

        def why(source: str, eff: float) -> str:
            return f"{source}; x {eff:.4g} ({label})"

        peaks = {k: p if (e := efficiency.get(f"compute.{k}")) is None else
                 replace(p, flops_per_s=p.flops_per_s * e, source=why(p.source, e))
                 for k, p in self.peaks.items()}
        memory = tuple(m if (e := efficiency.get(m.name)) is None else
                       replace(m, bandwidth_Bps=m.bandwidth_Bps * e, source=why(m.source, e))
                       for m in self.memory)
        links = dict(self.links)
        for k, lk in links.items():
            if (e := efficiency.get(k)) is not None:
                lk = replace(lk, bandwidth_Bps=lk.bandwidth_Bps * e, source=why(lk.source, e))
            if (e := efficiency.get("latency")) is not None:  # alpha / efficiency
                lk = replace(lk, latency_s=lk.latency_s / e,
                             latency_source=why(lk.latency_source, 1 / e))
            links[k] = lk
        summary = ", ".join(f"{k} {100 * e:.3g}%" for k, e in efficiency.items())
        return replace(self, id=f"{self.id}-{label}", name=f"{self.name} ({label})",
                       peaks=peaks, memory=memory, links=links, aliases=(),
                       notes=f"{self.id} derated to measured efficiencies ({label}: "
                             f"{summary}). {self.notes}".strip())
