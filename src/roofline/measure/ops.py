"""Predicted against achieved: real kernels timed next to their roofline bound.

For each case: the plain bound `evaluate(cost, chip)` (the same Cost the `op` commands
use), the measured median time, the achieved FLOP/s and main-memory bandwidth (the Cost's
bytes over the measured time), and the efficiency t_lower / t_measured = achieved / roof.
An efficiency above 1 means the run beat the roof; that happens when the working set fits
in a cache (`resident` names the level — the roof counts main-memory traffic) or when the
chip file's figures are below what the machine does.

The matmul sweep walks a weight GEMM across its ridge: X[B, D] · W[D, F] for B = 1 ... 4096
at D = F = 8192 on a GPU (D = F = 4096 on a CPU, where 8192 takes minutes), then further
shapes and dtypes, elementwise ops, and attention through torch's SDPA.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..evaluate import Estimate, evaluate
from ..hardware import Chip
from ..ops import attention, elementwise, matmul
from ..ops.attention import flash_tiling
from .backend import ROW, Backend, Unsupported
from .device import DeviceInfo
from .progress import Progress, quiet
from .timing import Settings, Timing, looped, measure

SEED_BATCHES = (1, 8, 32, 128, 256, 512, 1024, 4096)  # below, at and past H100's ridge

Builder = Callable[[Backend], Callable[[], Any]]


@dataclass(frozen=True)
class OpCase:
    """One kernel to time: its Cost (for the bound) and how to build it on a backend."""

    family: str  # matmul | elementwise | attention
    label: str
    dtype: str
    cost: Cost
    build: Builder = field(repr=False)
    kind: str = ""  # the elementwise kind


def matmul_case(m: int, k: int, n: int, dtype: str = "bf16", label: str = "") -> OpCase:
    """X[m, k] · W[k, n]. fp8 writes bf16 and int8 writes int32 (counted as 4 bytes), as the
    torch kernels do; tf32 stores fp32 and computes at the tf32 peak."""
    dtype = lookup_dtype(dtype).name
    if dtype == "fp8":
        cost = matmul(m, k, n, "fp8", out_dtype="bf16")
    elif dtype == "int8":
        cost = matmul(m, k, n, "int8", out_dtype="fp32")
    elif dtype == "tf32":
        cost = matmul(m, k, n, "fp32", compute_dtype="tf32")
    else:
        cost = matmul(m, k, n, dtype)
    return OpCase("matmul", label or f"matmul {m}x{k}x{n}", dtype, cost,
                  lambda b: b.matmul(m, k, n, dtype))


def elementwise_case(kind: str, n: int, dtype: str = "bf16") -> OpCase:
    """An elementwise op over n elements (row ops: rounded up to whole rows of 4096)."""
    if kind in ("softmax", "rmsnorm", "layernorm"):
        n = math.ceil(n / ROW) * ROW
    dtype = lookup_dtype(dtype).name
    return OpCase("elementwise", f"{kind} n={n}", dtype, elementwise(n, kind, dtype),
                  lambda b: b.elementwise(kind, n, dtype), kind)


def attention_case(batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int,
                   head_dim: int = 128, dtype: str = "bf16", chip: Chip | None = None
                   ) -> OpCase:
    """Causal attention through SDPA: prefill (q_len = kv_len, flash) or decode (q_len = 1).

    The flash bound uses the chip's per-SM SRAM for the query block (Br), or Br = 128 when
    the chip file has no sram level (a measured GPU chip)."""
    dtype = lookup_dtype(dtype).name
    impl = "decode" if q_len == 1 else "flash"
    tiling = flash_tiling(chip)
    cost = attention(batch, q_len, kv_len, heads, kv_heads, head_dim, impl=impl, dtype=dtype,
                     **tiling)
    label = (f"attention {impl} B={batch} Lq={q_len} Lkv={kv_len} H={heads}/{kv_heads} "
             f"d={head_dim}")
    return OpCase("attention", label, dtype, cost,
                  lambda b: b.attention(batch, q_len, kv_len, heads, kv_heads, head_dim,
                                        True, dtype))


def default_cases(backend: Backend, chip: Chip, quick: bool = False) -> list[OpCase]:
    """The standard sweep for a backend: seed §2.9's batch sweep, more shapes and dtypes,
    elementwise ops, and attention where torch runs."""
    gpu = backend.device == "cuda"
    dtypes = set(backend.matmul_dtypes)
    if gpu:
        d, mm_dtype = 8192, "bf16"
        batches = (1, 128, 512, 4096) if quick else SEED_BATCHES
        ew_n = 2**26 if quick else 2**28
    else:
        d, mm_dtype = 4096, "fp32"  # W = 64 MiB: beyond a CPU's last cache
        batches = (1, 32, 256, 1024) if quick else SEED_BATCHES
        ew_n = 2**23 if quick else 2**24
    cases = [matmul_case(b, d, d, mm_dtype, f"seed 2.9 B={b} D=F={d}") for b in batches]
    extra: list[tuple[int, int, int, str]] = []
    if gpu:
        extra = [(4096, 8192, 8192, "fp8"), (16, 8192, 8192, "fp8")] if quick else [
            (4096, 4096, 4096, "fp16"), (4096, 4096, 4096, "tf32"), (4096, 4096, 4096, "fp32"),
            (4096, 8192, 8192, "fp8"), (16, 8192, 8192, "fp8"), (4096, 8192, 8192, "int8"),
            (4096, 4096, 4096, "fp64"), (16384, 1024, 16384, "bf16"),
            (1024, 16384, 1024, "bf16")]
    elif not quick:
        extra = [(1024, 1024, 1024, "fp64"), (256, 8192, 256, "fp32")]
    cases += [matmul_case(m, k, n, dt, f"matmul {m}x{k}x{n}") for m, k, n, dt in extra
              if dt in dtypes]
    kinds = ["add", "silu", "softmax", "rmsnorm"] if quick else [
        "add", "mul", "relu", "silu", "gelu", "softmax", "rmsnorm", "layernorm"]
    if backend.name == "numpy":
        kinds = [k for k in kinds if k not in ("gelu", "layernorm")]
    cases += [elementwise_case(kind, ew_n, backend.elementwise_dtype) for kind in kinds]
    if backend.name == "torch":
        if gpu:
            shapes = [(1, 4096, 4096), (16, 1, 8192)] if quick else [
                (1, 4096, 4096), (1, 8192, 8192), (4, 4096, 4096),
                (1, 1, 32768), (16, 1, 8192), (64, 1, 8192)]
            cases += [attention_case(b, lq, lkv, 32, 8, 128, "bf16", chip)
                      for b, lq, lkv in shapes]
        else:
            cases += [attention_case(1, 1024, 1024, 8, 2, 64, "fp32", chip),
                      attention_case(4, 1, 4096, 8, 2, 64, "fp32", chip)]
    return cases


@dataclass(frozen=True)
class TimedOp:
    """One timed case next to its bound."""

    family: str
    label: str
    dtype: str
    estimate: Estimate
    timing: Timing
    resident: str | None  # the cache level the whole working set fits in, if any
    fused: bool = True  # False: the kernel makes several passes where the Cost counts one

    @property
    def time_s(self) -> float:
        return self.timing.median_s

    @property
    def achieved_flops_per_s(self) -> float:
        return float(self.estimate.flops) / self.time_s

    @property
    def achieved_Bps(self) -> float:
        """Main-memory bytes of the Cost over the measured time."""
        return float(self.estimate.bytes.get("hbm", 0.0)) / self.time_s

    @property
    def efficiency(self) -> float:
        """t_lower / t_measured = achieved / roof (1 = on the roof)."""
        return float(self.estimate.t_lower_s) / self.time_s

    @property
    def resource_efficiency(self) -> dict[str, float]:
        """Per resource: its bound time over the measured time (achieved / that roof)."""
        return {r: float(t) / self.time_s for r, t in self.estimate.time_s.items()}

    @property
    def bound(self) -> str:
        return str(self.estimate.bound)

    def clearly_bound(self, margin: float = 2.0) -> bool:
        """The bound resource's time is at least `margin` times every other one's: the
        measured time then speaks for that resource alone."""
        times = sorted((float(t) for t in self.estimate.time_s.values()), reverse=True)
        return len(times) < 2 or times[0] >= margin * times[1]

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "label": self.label, "dtype": self.dtype,
                "bound": self.bound, "predicted_t_lower_s": float(self.estimate.t_lower_s),
                "predicted_time_s": {k: float(v) for k, v in self.estimate.time_s.items()},
                "flops": float(self.estimate.flops),
                "hbm_bytes": float(self.estimate.bytes.get("hbm", 0.0)),
                "measured": self.timing.to_dict(), "time_s": self.time_s,
                "achieved_flops_per_s": self.achieved_flops_per_s,
                "achieved_Bps": self.achieved_Bps, "efficiency": self.efficiency,
                "resident": self.resident, "fused": self.fused}


@dataclass(frozen=True)
class OpSweep:
    hardware: str
    device: DeviceInfo
    backend: str
    date: str
    points: tuple[TimedOp, ...]
    skipped: dict[str, str]  # case label -> why it did not run
    quick: bool = False

    def summary(self) -> dict[str, float]:
        """Median efficiency per bound resource (compute per dtype: 'compute.bf16') over
        clearly bound, fused points; memory-bound ones only if not cache-resident."""
        groups: dict[str, list[float]] = {}
        for p in self.points:
            in_cache = p.resident is not None and p.bound != "compute"
            if p.fused and not in_cache and p.clearly_bound():
                key = _compute_key(p) if p.bound == "compute" else p.bound
                groups.setdefault(key, []).append(p.resource_efficiency[p.bound])
        return {k: statistics.median(v) for k, v in sorted(groups.items())}

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "device": self.device.to_dict(),
                "backend": self.backend, "date": self.date, "quick": self.quick,
                "points": [p.to_dict() for p in self.points], "skipped": self.skipped,
                "efficiency_by_resource": self.summary()}


def _compute_key(p: TimedOp) -> str:
    dts = list(p.estimate.flops_by_dtype)
    return f"compute.{dts[0] if len(dts) == 1 else p.dtype}"


def resident_level(chip: Chip, footprint_bytes: float) -> str | None:
    """'l2' when the whole working set fits in the chip's last cache (a GPU's shared memory
    is a scratchpad, not a cache, so it does not count)."""
    for level in chip.memory:
        if level.name == "l2" and footprint_bytes <= (level.capacity_bytes or 0.0):
            return "l2"
    return None


def run_ops(backend: Backend, chip: Chip, cases: Sequence[OpCase], date: str,
            settings: Settings | None = None, progress: Progress | None = None,
            quick: bool = False) -> OpSweep:
    """Time every case that the backend and the chip file support."""
    progress = progress or quiet()
    points, skipped = [], {}
    for case in cases:
        missing = [dt for dt in case.cost.flops if dt not in chip.peaks]
        if missing:
            skipped[case.label] = f"chip {chip.id!r} has no {missing[0]} peak"
            progress.step(f"{case.label} skipped")
            continue
        try:
            fn = case.build(backend)
        except Unsupported as exc:
            skipped[case.label] = str(exc)
            progress.step(f"{case.label} skipped")
            continue
        timing = measure(looped(fn), backend.timer(), settings)
        del fn
        est = evaluate(case.cost, chip)
        footprint = float(est.bytes.get("hbm", 0.0))
        fused = case.kind not in getattr(backend, "multi_pass", ())
        points.append(TimedOp(case.family, case.label, case.dtype, est, timing,
                              resident_level(chip, footprint), fused))
        progress.step(case.label)
    return OpSweep(chip.id, backend.info, backend.name, date, tuple(points), skipped, quick)
