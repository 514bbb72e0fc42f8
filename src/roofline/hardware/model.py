"""What a machine offers: peaks per dtype, memory levels, links. Every figure has a source."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import field, fields, replace
from typing import Any

from ..cost import LINKS, MEMORY_LEVELS
from ..dtypes import dtype as lookup_dtype
from ..dtypes import dtype_names
from ..errors import ParameterError, RooflineError
from ..lazy import cached_property
from ..records import record


@record(frozen=True)
class Peak:
    """Dense (no 2:4 sparsity) peak throughput for one compute dtype."""

    dtype: str
    flops_per_s: float
    source: str
    estimated: bool = False


@record(frozen=True)
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
    # what a loop over the same data keeps on chip between calls: this cache and any behind
    # it that the file does not model as a level (AMD's 256 MiB Infinity Cache behind L2)
    warm_capacity_bytes: float | None = None


@record(frozen=True)
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
    topology: str = "switch"  # switch: any group gets the whole figure; mesh: one port per
    # peer (a group of g ranks uses g - 1 ports); torus: the ports along the axes it spans
    base_latency_s: float = 0.0  # fixed cost of one collective call (launch, sync)
    base_latency_source: str = ""


# What an [efficiency] entry may name (the expected time, `roofline.expect`):
# fractions of a roof in (0, 1], except the `_s` kinds, which are overheads in seconds.
# the floor of an achievable fraction of a roof: a CPU measured against an H100 is ~1e-4;
# below a millionth it is a broken file (its reciprocal scales times: 5e-324 made them inf)
MIN_EFFICIENCY = 1e-6
EFFICIENCY_KINDS = {
    "matmul": "achievable tensor-core fraction of a large GEMM, per dtype (matmul.<dtype>)",
    "attention": "a forward attention kernel's fraction of the tensor peak at long sequences "
                 "(attention: the chip's default kernel; attention.<kernel>: another)",
    "attention_bwd": "the same for the attention backward (attention_bwd[.<kernel>])",
    "linear_attention": "a chunked linear-attention kernel's fraction of its roofs, tensor "
                        "peak and HBM (linear_attention[.<kernel>])",
    "linear_attention_decode": "the same for its one-token decode step "
                               "(linear_attention_decode[.<kernel>])",
    "linear_attention_chain_s": "seconds one chunk step of a linear-attention kernel's "
                                "recurrence takes on one SM (linear_attention_chain_s"
                                "[.<kernel>])",
    "ssd": "a Mamba-2 chunked-scan (SSD) kernel's fraction of its roofs (ssd[.<kernel>])",
    "hbm": "achievable streaming fraction of the HBM bandwidth",
    "decode_hbm": "a named decode attention kernel's share of that streaming fraction "
                  "(decode_hbm.<kernel>)",
    "l2": "achievable fraction of the L2 bandwidth (an L2-resident working set)",
    "scale-up": "achievable bus bandwidth of large collectives over the scale-up link "
                "(scale-up.<algorithm>: for one algorithm, e.g. nvls)",
    "scale-out": "the same over the scale-out link",
    "launch_s": "seconds a kernel costs beyond its roof (launch, prologue, epilogue, tail)",
    "graph_launch_s": "the same when one op is replayed as a CUDA graph",
    "step_kernel_s": "seconds each kernel of a graph-replayed decode or serving step costs "
                     "beside its work (launch, and the next kernel's ramp waiting on it)",
    "framework": "share of a whole step the framework keeps the chip on its kernels "
                 "(framework.<phase>: train, prefill, decode; framework.\"<phase>.<engine>\": "
                 "a serving engine's, e.g. vllm; optimizer, data loading, scheduler, "
                 "sampling, host gaps)",
    "collective_call_s": "seconds of software latency per collective call (NCCL / RCCL)",
}


@record(frozen=True)
class Efficiency:
    """One figure of the expected-time model: a fraction of a roof (or, for `_s` kinds, an
    overhead in seconds), with its source; `fitted` names the rows it was fitted to."""

    value: float
    source: str
    fitted: str = ""


@record(frozen=True)
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
    tdp_w: float | None = None  # board / module power, W: what energy figures divide by
    tdp_source: str = ""  # where tdp_w comes from (required with it in a chip file)
    tdp_estimated: bool = False  # tdp_w is a derivation, not a published figure
    notes: str = ""
    origin: str = ""  # the file it was read from
    vector: dict[str, Peak] = field(default_factory=dict)  # non-tensor (CUDA core / VPU) peaks
    special: Peak | None = None  # special-function units: transcendentals (exp) per second
    peak_clock_mhz: float | None = None  # the clock the peaks are quoted at
    clock_source: str = ""
    efficiency: dict[str, Efficiency] = field(default_factory=dict)  # expected-time figures

    @cached_property
    def memo(self) -> dict[Any, Any]:
        """Figures derived from this chip's own, kept once computed (each user keys its
        entries by what they depend on: a rate per (units, dtype), a collective's per-byte
        chains per group shape, the decode critical batch per dtypes)."""
        return {}

    @cached_property
    def bandwidths(self) -> dict[str, float]:
        """Memory level -> bandwidth (B/s), for the evaluator's lookups (`level` says what a
        missing level is)."""
        return {level.name: level.bandwidth_Bps for level in self.memory}

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak FLOP/s for a compute dtype (a dtype name or alias)."""
        rate = self.memo.get(("tensor", compute_dtype))
        if rate is None:
            rate = self.memo[("tensor", compute_dtype)] = self._peak_flops(compute_dtype)
        return rate

    def _peak_flops(self, compute_dtype: str) -> float:
        key = lookup_dtype(compute_dtype).peak
        if key == "none":
            raise RooflineError(f"dtype {compute_dtype!r} is storage-only (a scale format); "
                                "it cannot be a compute dtype")
        if key not in self.peaks:
            raise RooflineError(
                f"chip {self.id!r} has no {key} peak (it has: {', '.join(self.peaks)})"
            )
        return self.peaks[key].flops_per_s

    def vector_flops(self, compute_dtype: str) -> float:
        """Peak FLOP/s of the vector (non-tensor) units for a dtype. Narrow and storage-only
        dtypes (fp8, int8, fp4, scale formats) are widened to the 16-bit rate, tf32 to fp32.
        A 16-bit dtype without its own vector figure runs at the fp32 vector rate: 16-bit
        elementwise math is widened to fp32 in registers, and where a chip packs two 16-bit
        lanes (half2 / bfloat162, at most 2x) its file says so with a `vector.bf16` figure
        of its own. Without any vector figure (a user's file), the tensor peak of that dtype
        (else the chip's highest peak) stands in: a valid but loose bound."""
        rate = self.memo.get(("vector", compute_dtype))
        if rate is None:
            rate = self.memo[("vector", compute_dtype)] = self._vector_flops(compute_dtype)
        return rate

    def _vector_flops(self, compute_dtype: str) -> float:
        d = lookup_dtype(compute_dtype)
        key = {"tf32": "fp32"}.get(d.peak, d.peak)
        if key == "none" or d.bits < 16:
            key = "bf16" if "bf16" in self.vector else "fp16"
        if key in self.vector:
            return self.vector[key].flops_per_s
        # not the tensor peak (MI300X bf16: 163.4 vector, not 1307.4 matrix TFLOP/s)
        if d.bits <= 16 and "fp32" in self.vector:
            return self.vector["fp32"].flops_per_s
        if key in self.peaks:
            return self.peaks[key].flops_per_s
        return max(p.flops_per_s for p in self.peaks.values())

    def special_ops(self) -> float | None:
        """Transcendental evaluations (exp, tanh, rsqrt) per second, if the file gives it."""
        return self.special.flops_per_s if self.special else None

    def at_clock(self, clock_mhz: float) -> Chip:
        """This chip with every compute peak scaled to a lower (sustained or capped) clock."""
        if self.peak_clock_mhz is None:
            raise RooflineError(f"chip {self.id!r} gives no peak_clock_mhz, so its peaks cannot "
                                "be scaled to another clock (add peak_clock_mhz to the chip file)")
        if not 0 < clock_mhz <= self.peak_clock_mhz:
            raise RooflineError(f"clock {clock_mhz:g} MHz: must be above 0 and at most "
                                f"{self.peak_clock_mhz:g} MHz, the clock the peaks of "
                                f"{self.id!r} are quoted at")
        f = clock_mhz / self.peak_clock_mhz
        note = f"x {f:.4g} (clock {clock_mhz:g} of {self.peak_clock_mhz:g} MHz)"

        def scaled(p: Peak) -> Peak:
            return replace(p, flops_per_s=p.flops_per_s * f, source=f"{p.source}; {note}")

        return replace(self, id=f"{self.id}@{clock_mhz:g}MHz",
                       name=f"{self.name} at {clock_mhz:g} MHz",
                       peaks={k: scaled(p) for k, p in self.peaks.items()},
                       vector={k: scaled(p) for k, p in self.vector.items()},
                       special=scaled(self.special) if self.special else None,
                       peak_clock_mhz=clock_mhz)

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
            raise ParameterError("hw", f"with a [link.{name}] table", where=(
                f"chip {self.id!r} has no {name!r} link (it has: {have}), which traffic "
                f"{reach} needs; give a chip file as "))
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
        others = [*MEMORY_LEVELS, *LINKS, "latency", "sfu"]
        for key, eff in efficiency.items():
            unit, _, name = key.partition(".")
            if key not in others and not (unit in ("compute", "vector")
                                          and name in _compute_dtypes()):
                raise RooflineError(f"efficiency {key!r}: unknown resource (allowed: "
                                    f"compute.<dtype>, vector.<dtype>, {', '.join(others)})")
            if isinstance(eff, bool) or not isinstance(eff, (int, float)) \
                    or not math.isfinite(eff) or not 0 < eff <= 1:  # derating never speeds up
                raise RooflineError(f"efficiency {key!r}: must be in (0, 1], got {eff!r}")

        def why(source: str, eff: float) -> str:
            return f"{source}; x {eff:.4g} ({label})"

        peaks, vector = dict(self.peaks), dict(self.vector)  # (in their order)
        for key, eff in efficiency.items():
            unit, _, name = key.partition(".")
            table = peaks if unit == "compute" else vector if unit == "vector" else {}
            if name in table:
                p = table[name]
                table[name] = _replaced(p, flops_per_s=p.flops_per_s * eff,
                                        source=why(p.source, eff))
        special = self.special
        if special is not None and (e := efficiency.get("sfu")) is not None:
            special = _replaced(special, flops_per_s=special.flops_per_s * e,
                                source=why(special.source, e))
        memory = tuple(m if (e := efficiency.get(m.name)) is None else
                       _replaced(m, bandwidth_Bps=m.bandwidth_Bps * e, source=why(m.source, e))
                       for m in self.memory)
        links = dict(self.links)
        for k, lk in links.items():
            if (e := efficiency.get(k)) is not None:
                lk = _replaced(lk, bandwidth_Bps=lk.bandwidth_Bps * e,
                               source=why(lk.source, e))
            if (e := efficiency.get("latency")) is not None:  # alpha / efficiency
                lk = _replaced(lk, latency_s=lk.latency_s / e,
                               base_latency_s=lk.base_latency_s / e,
                               latency_source=why(lk.latency_source, 1 / e))
            links[k] = lk
        summary = ", ".join(f"{k} {100 * e:.3g}%" for k, e in efficiency.items())
        fields_only = {name: self.__dict__[name] for name in _CHIP_FIELDS}  # (not its memo)
        return _replaced(self, fields_only, id=f"{self.id}-{label}",
                         name=f"{self.name} ({label})", peaks=peaks, vector=vector,
                         special=special, memory=memory, links=links, aliases=(),
                         notes=f"{self.id} derated to measured efficiencies ({label}: "
                               f"{summary}). {self.notes}".strip())


_CHIP_FIELDS = tuple(f.name for f in fields(Chip))


def _replaced(record: Any, fields_of: Mapping[str, Any] | None = None, **changes: Any) -> Any:
    """dataclasses.replace of a frozen record (its fields: `fields_of`, else its dict),
    written straight into a new instance's dict as its generated __init__ would set them (a
    fifth of replace's cost: a forecast derates its chip once per op shape)."""
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__ if fields_of is None else fields_of, **changes)
    return new


@functools.cache
def _compute_dtypes() -> frozenset[str]:
    return frozenset(dtype_names())


def half_dtype(chip: Chip) -> str:
    """The chip's 16-bit float for activations: bf16, else fp16 (V100 has no bf16)."""
    return "fp16" if "bf16" not in chip.peaks and "fp16" in chip.peaks else "bf16"
