"""What machine we are on: its name, compute units, main memory and caches.

Cache sizes come from the operating system (Linux sysfs) or the CUDA runtime; they place
the bandwidth sweep's windows so each measured level is read from inside one cache.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheInfo:
    """One cache level: the size of one instance and how many instances the machine has."""

    level: int
    size_bytes: float
    instances: int  # 1 for a cache shared by all cores (an L3, a GPU's L2)

    @property
    def total_bytes(self) -> float:
        return self.size_bytes * self.instances

    @property
    def label(self) -> str:
        return f"L{self.level}" + (" (per core)" if self.instances > 1 else "")


@dataclass(frozen=True)
class DeviceInfo:
    """A machine to measure: CPU (all its cores) or one CUDA GPU."""

    kind: str  # "cpu" | "cuda"
    name: str
    vendor: str
    units: int  # cores or SMs
    memory_bytes: float
    caches: tuple[CacheInfo, ...]  # innermost first
    software: str  # the libraries doing the work

    @property
    def description(self) -> str:
        unit = "cores" if self.kind == "cpu" else "SMs"
        return f"{self.name} ({self.units} {unit})"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "vendor": self.vendor,
                "units": self.units, "memory_bytes": self.memory_bytes,
                "caches": [{"level": c.level, "size_bytes": c.size_bytes,
                            "instances": c.instances} for c in self.caches],
                "software": self.software}


def _parse_size(text: str) -> float | None:
    text = text.strip().upper()
    scale = {"K": 1024.0, "M": 1024.0**2, "G": 1024.0**3}.get(text[-1:], 1.0)
    digits = text.rstrip("KMG")
    return float(digits) * scale if digits.isdigit() else None


def _cpu_count(cpu_list: str) -> int:
    count = 0
    for part in cpu_list.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            count += int(hi) - int(lo) + 1
        elif part:
            count += 1
    return count


def cpu_caches(units: int, root: Path = _SYSFS_CACHE) -> tuple[CacheInfo, ...]:
    """Data and unified caches of cpu0 from Linux sysfs (empty elsewhere)."""
    found: dict[int, CacheInfo] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
            sharing = _cpu_count((index / "shared_cpu_list").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None or sharing < 1:
            continue
        found[level] = CacheInfo(level, size, max(1, math.ceil(units / sharing)))
    return tuple(found[k] for k in sorted(found))


def _cpu_name() -> tuple[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "CPU"
    vendors = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}
    vendor = vendors.get(fields.get("vendor_id", ""), fields.get("vendor_id", ""))
    return name, vendor or name.split(" ")[0] or "unknown"


def _physical_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0.0


def _blas() -> str:
    import numpy as np

    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"numpy {np.__version__} / {blas['name']} {blas.get('version', '')}".strip()
    except Exception:  # numpy < 1.26 or an unusual build: the version is enough
        return f"numpy {np.__version__}"


def cpu_info() -> DeviceInfo:
    """This CPU: every core the process may run on."""
    units = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    name, vendor = _cpu_name()
    return DeviceInfo("cpu", name, vendor, units, _physical_memory(), cpu_caches(units),
                      _blas())


def cuda_info(torch: Any, index: int = 0) -> DeviceInfo:
    """One CUDA device as torch sees it (L2 size where torch reports it)."""
    props = torch.cuda.get_device_properties(index)
    l2 = float(getattr(props, "L2_cache_size", 0) or 0)
    caches = (CacheInfo(2, l2, 1),) if l2 > 0 else ()
    name = str(props.name)
    hip = getattr(torch.version, "hip", None)
    vendor = "AMD" if hip else "NVIDIA"
    runtime = f"HIP {hip}" if hip else f"CUDA {torch.version.cuda}"
    software = f"torch {torch.__version__}, {runtime}, compute capability " \
               f"{props.major}.{props.minor}"
    return DeviceInfo("cuda", name, vendor, int(props.multi_processor_count),
                      float(props.total_memory), caches, software)
