"""Bandwidth per memory level: streaming kernels over working sets from 16 KiB to far
beyond the last cache, so each cache level shows as a plateau and main memory as the last.

Each (kernel, working set) point is a median of repeated samples. A level's bandwidth is
read from a window of working sets that sit well inside it — between twice the level
below and half its own capacity, and from four times the last cache for main memory —
using the capacities the OS (or the CUDA runtime) reports; the best kernel's median over
that window is the level's roof (as in the Empirical Roofline Toolkit). Without known
capacities the plateaus themselves are used. Schema names: the last cache is `l2`, the
private cache below it (per core) is `sram`, main memory is `hbm`.
On a GPU, small working sets are launch-bound (a rising curve, not a cache), and shared
memory (`sram`) cannot be reached from torch, so only `l2` and `hbm` are measured there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .backend import STREAM_KERNELS, Backend
from .device import DeviceInfo
from .progress import Progress, quiet
from .timing import Settings, Timing, measure

KiB, MiB, GiB = 2.0**10, 2.0**20, 2.0**30
MIN_WORKING_SET = 16 * KiB


@dataclass(frozen=True)
class BandwidthPoint:
    kernel: str
    working_set_bytes: float
    bytes_moved: float  # per call
    timing: Timing
    threads: int = 1

    @property
    def bandwidth_Bps(self) -> float:
        return self.bytes_moved / self.timing.median_s

    def to_dict(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "working_set_bytes": self.working_set_bytes,
                "bytes_moved": self.bytes_moved, "bandwidth_Bps": self.bandwidth_Bps,
                "threads": self.threads, "timing": self.timing.to_dict()}


@dataclass(frozen=True)
class Plateau:
    """A run of working sets with about the same bandwidth (best kernel per size)."""

    lo_bytes: float
    hi_bytes: float
    bandwidth_Bps: float  # median over the run
    points: int


@dataclass(frozen=True)
class MeasuredLevel:
    """One memory level as measured: roofline name, bandwidth, capacity, how it was read."""

    name: str  # hbm | l2 | sram
    label: str  # what it is on this machine: DRAM, L3, L2 (per core), HBM, ...
    bandwidth_Bps: float
    capacity_bytes: float
    kernel: str  # the kernel whose median set the bandwidth
    window: tuple[float, float]  # working sets (bytes) the median is over
    spread: float  # worst (max − min) / median among those points
    capacity_source: str
    units: int | None = None  # for sram: cores sharing the level, each with its own cache
    unit_capacity_bytes: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "bandwidth_Bps": self.bandwidth_Bps,
                "capacity_bytes": self.capacity_bytes, "kernel": self.kernel,
                "window_bytes": list(self.window), "spread": self.spread,
                "capacity_source": self.capacity_source, "units": self.units,
                "unit_capacity_bytes": self.unit_capacity_bytes}


@dataclass(frozen=True)
class BandwidthSweep:
    device: DeviceInfo
    backend: str
    threads: tuple[int, ...]  # thread counts tried at each point (the faster one is kept)
    points: tuple[BandwidthPoint, ...]
    levels: tuple[MeasuredLevel, ...]  # outermost (hbm) first
    plateaus: tuple[Plateau, ...]

    def level(self, name: str) -> MeasuredLevel | None:
        return next((lv for lv in self.levels if lv.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "threads": list(self.threads),
                "points": [p.to_dict() for p in self.points],
                "levels": [lv.to_dict() for lv in self.levels],
                "plateaus": [vars(p) for p in self.plateaus]}


def sweep_sizes(lo: float, hi: float, per_octave: int = 1) -> list[float]:
    """Working sets from lo to hi (inclusive), `per_octave` per doubling, 4 KiB-aligned."""
    if lo <= 0 or hi < lo:
        raise ValueError("need 0 < lo <= hi")
    steps = math.floor(math.log2(hi / lo) * per_octave + 1e-9)
    sizes = [lo * 2 ** (i / per_octave) for i in range(steps + 1)]
    return sorted({max(4 * KiB, round(s / (4 * KiB)) * 4 * KiB) for s in sizes})


def default_max_bytes(info: DeviceInfo) -> float:
    """Far enough beyond the last cache for main memory to dominate (8x), capped by memory."""
    last = info.caches[-1].total_bytes if info.caches else 0.0
    floor = 64 * MiB if info.kind == "cpu" else GiB
    cap = info.memory_bytes / (8 if info.kind == "cpu" else 4) if info.memory_bytes else floor
    return float(min(max(8 * last, floor), max(cap, 64 * MiB)))


def measure_bandwidth(backend: Backend, kernels: Sequence[str] = STREAM_KERNELS,
                      sizes: Sequence[float] | None = None, quick: bool = False,
                      threads: int | None = None, settings: Settings | None = None,
                      progress: Progress | None = None) -> BandwidthSweep:
    """Sweep every kernel over every working set and read off the levels.

    On the CPU each point is timed on one thread and on one thread per core (unless
    `threads` fixes the count) and the faster is kept: all cores give the aggregate
    bandwidth of a quiet machine, while on a busy one, threads that wait for each other
    measure the contention, not the memory.
    """
    info = backend.info
    sizes = list(sizes or sweep_sizes(MIN_WORKING_SET, default_max_bytes(info),
                                      1 if quick else 2))
    settings = settings or Settings.for_mode(quick)
    progress = progress or quiet()
    options = (threads,) if threads else tuple(sorted({1, info.units}))
    if backend.name != "numpy":  # torch picks its own threads (or a GPU's)
        options = (threads or 1,)
    points = []
    for size in sizes:
        for kernel in kernels:
            best: BandwidthPoint | None = None
            for n in options:
                case = backend.stream(kernel, size, n)
                point = BandwidthPoint(kernel, case.working_set_bytes, case.bytes_moved,
                                       measure(case.run, backend.timer(), settings), n)
                del case
                if best is None or point.bandwidth_Bps > best.bandwidth_Bps:
                    best = point
            assert best is not None
            points.append(best)
            progress.step(f"{kernel} {size / MiB:.3g} MiB")
    plateaus = find_plateaus(points)
    levels = read_levels(points, info, plateaus)
    return BandwidthSweep(info, backend.name, options, tuple(points), levels, plateaus)


def best_per_size(points: Sequence[BandwidthPoint]) -> list[tuple[float, float, str]]:
    """(working set, bandwidth, kernel) of the fastest kernel at each working set."""
    best: dict[float, tuple[float, str]] = {}
    for p in points:
        key = round(p.working_set_bytes / 4096)  # kernels round a size slightly differently
        if key not in best or p.bandwidth_Bps > best[key][0]:
            best[key] = (p.bandwidth_Bps, p.kernel)
    return [(k * 4096.0, bw, kern) for k, (bw, kern) in sorted(best.items())]


def find_plateaus(points: Sequence[BandwidthPoint], tolerance: float = 0.25,
                  min_points: int = 2) -> tuple[Plateau, ...]:
    """Runs of consecutive working sets whose best bandwidth stays within `tolerance` of
    the run's median."""
    series = best_per_size(points)
    runs: list[list[tuple[float, float, str]]] = []
    for item in series:
        if runs:
            ref = statistics.median(bw for _, bw, _ in runs[-1])
            if abs(item[1] - ref) <= tolerance * ref:
                runs[-1].append(item)
                continue
        runs.append([item])
    return tuple(Plateau(run[0][0], run[-1][0], statistics.median(bw for _, bw, _ in run),
                         len(run)) for run in runs if len(run) >= min_points)


def _window_level(points: Sequence[BandwidthPoint], lo: float, hi: float
                  ) -> tuple[float, str, float] | None:
    """(bandwidth, kernel, spread): the best kernel's median over working sets in [lo, hi]."""
    best: tuple[float, str, float] | None = None
    for kernel in dict.fromkeys(p.kernel for p in points):
        inside = [p for p in points if p.kernel == kernel and lo <= p.working_set_bytes <= hi]
        if not inside:
            continue
        bw = statistics.median(p.bandwidth_Bps for p in inside)
        spread = max(p.timing.spread for p in inside)
        if best is None or bw > best[0]:
            best = (bw, kernel, spread)
    return best


def read_levels(points: Sequence[BandwidthPoint], info: DeviceInfo,
                plateaus: Sequence[Plateau] = ()) -> tuple[MeasuredLevel, ...]:
    """The measured levels, outermost first: from cache capacities where known, else from
    the plateaus."""
    if not points:
        return ()
    largest = max(p.working_set_bytes for p in points)
    main_label = "DRAM" if info.kind == "cpu" else "HBM / device memory"
    memory_source = "operating system" if info.kind == "cpu" else "CUDA runtime"
    levels: list[MeasuredLevel] = []
    caches = info.caches
    if caches:
        llc = caches[-1]
        main_lo = 4 * llc.total_bytes
        found = _window_level(points, main_lo, math.inf)
        if found:
            levels.append(MeasuredLevel("hbm", main_label, found[0], info.memory_bytes,
                                        found[1], (main_lo, largest), found[2], memory_source))
        names = {len(caches) - 1: "l2", len(caches) - 2: "sram"}
        for i, cache in enumerate(caches):
            if i not in names:
                continue
            below = caches[i - 1].total_bytes if i else 0.0
            lo, hi = max(2 * below, cache.total_bytes / 8), cache.total_bytes / 2
            found = _window_level(points, lo, hi)
            if not found:
                continue
            per_unit = names[i] == "sram"
            levels.append(MeasuredLevel(
                names[i], cache.label, found[0], cache.total_bytes, found[1], (lo, hi),
                found[2], memory_source if info.kind == "cuda" else "operating system (sysfs)",
                units=cache.instances if per_unit else None,
                unit_capacity_bytes=cache.size_bytes if per_unit else None))
    elif plateaus and plateaus[-1].hi_bytes >= largest:
        last = plateaus[-1]
        levels.append(MeasuredLevel("hbm", main_label, last.bandwidth_Bps, info.memory_bytes,
                                    "best", (last.lo_bytes, last.hi_bytes), math.nan,
                                    memory_source))
        inner = [p for p in plateaus[:-1] if p.bandwidth_Bps > last.bandwidth_Bps]
        if inner:
            top = max(inner, key=lambda p: p.bandwidth_Bps)
            levels.append(MeasuredLevel("l2", "cache", top.bandwidth_Bps, 2 * top.hi_bytes,
                                        "best", (top.lo_bytes, top.hi_bytes), math.nan,
                                        "twice the plateau's last working set (estimate)"))
    order = {"hbm": 0, "l2": 1, "sram": 2}
    return tuple(sorted(levels, key=lambda lv: order[lv.name]))
