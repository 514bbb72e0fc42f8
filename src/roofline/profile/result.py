"""The result of `roofline.profile`: kernels placed on their bounds, per op class, per step.

Times are named for what they are: `measured_s` was timed by the profiler; `bound_s` is the
roofline lower bound of the same work (the one evaluator); `expected_s` is the forecast
(`roofline.expect`), never in place of the bound.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..errors import RooflineError
from ..serialize import jsonable


@dataclass(frozen=True)
class KernelRow:
    """One op's kernels (usually one kernel), a collective, or one copy / fill."""

    name: str  # the (first) kernel's name
    op: str  # the mapped work ('mm 1024x1705x512 fp32'), else the launching aten op
    op_class: str  # gemm | attention | elementwise | reduction/norm | collective | copy |
    # fill | unmapped
    kernels: int
    stream: int
    start_s: float
    measured_s: float  # the kernels' summed durations (profiler)
    bound_s: float | None  # roofline lower bound of the work (None: unmapped)
    expected_s: float | None  # forecast
    bound: str  # the bounding resource ('' when unmapped)
    flops: float | None
    bytes: float | None  # HBM bytes; a collective's buffer bytes
    on_bound_s: float | None = None  # the same work on the --on chip
    on_expected_s: float | None = None
    reason: str = ""  # why it is unmapped
    note: str = ""  # what the mapping assumed

    @property
    def mapped(self) -> bool:
        return self.bound_s is not None

    @property
    def of_bound(self) -> float | None:
        """measured / bound (>= 1 for a right mapping and a right roof)."""
        if self.bound_s is None or self.bound_s <= 0:
            return None
        return self.measured_s / self.bound_s


@dataclass(frozen=True)
class ClassRow:
    op_class: str
    kernels: int
    measured_s: float
    share: float  # of the profiled kernel time
    bound_s: float | None
    expected_s: float | None

    @property
    def of_bound(self) -> float | None:
        return self.measured_s / self.bound_s if self.bound_s else None


@dataclass(frozen=True)
class Gap:
    """A kernel far from its bound, and what would close or move it."""

    op: str
    name: str
    measured_s: float
    bound_s: float
    gap_s: float  # measured - bound: what running at the roof would save
    bound: str
    levers: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    window_s: float  # first GPU activity start to last end (of the chosen step)
    measured_s: float  # GPU busy: the union of every activity over all streams
    idle_s: float  # window - busy: no kernel, copy or fill ran
    exposed_comm_s: float  # collectives running while no other activity ran
    kernel_time_s: float  # summed durations (streams overlapping count twice)
    mapped_time_fraction: float  # of kernel_time_s, the share of mapped kernels
    measured_mapped_s: float  # summed durations of the mapped kernels
    bound_s: float  # the mapped kernels' Costs added, every resource overlapped (a floor)
    sum_of_bounds_s: float  # the mapped kernels one after another, each at its roof
    expected_s: float  # forecast: compute kernels one after another; collectives beside them
    kernels: int
    mapped: int
    on_bound_s: float | None = None
    on_expected_s: float | None = None


@dataclass
class Profile:
    path: str
    hardware: str
    device: str | None  # the device name the trace gives
    step: str  # 'ProfilerStep#4', or 'whole trace'
    steps: list[str]
    rank: int | None
    rows: list[KernelRow]
    by_class: list[ClassRow]
    summary: Summary
    gaps: list[Gap]
    on: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def unmapped(self) -> list[KernelRow]:
        return [r for r in self.rows if not r.mapped]

    @property
    def faster_than_bound(self) -> list[KernelRow]:
        """Rows measured faster than their bound: a wrong mapping or a wrong roof."""
        return [r for r in self.rows if r.of_bound is not None and r.of_bound < 1.0]

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("rows", "by_class", "summary", "gaps")}
        data["summary"] = asdict(self.summary)
        data["by_class"] = [asdict(c) | {"of_bound": c.of_bound} for c in self.by_class]
        data["gaps"] = [asdict(g) for g in self.gaps]
        data["kernels"] = [asdict(r) | {"of_bound": r.of_bound} for r in self.rows]
        data["times"] = {"measured_s": "timed by the profiler",
                         "bound_s": "roofline lower bound of the same work",
                         "expected_s": "forecast (roofline.expect), beside the bound"}
        return dict(jsonable(data))

    def records(self) -> list[dict[str, Any]]:
        """One dict per kernel row (what `to_frame` tabulates)."""
        return [asdict(r) | {"of_bound": r.of_bound} for r in self.rows]

    def to_frame(self) -> Any:
        """The per-kernel table as a pandas DataFrame (pandas is an optional extra)."""
        try:
            import pandas as pd
        except ImportError:
            raise RooflineError("to_frame needs pandas: pip install pandas") from None
        return pd.DataFrame(self.records())

    def _repr_html_(self) -> str:
        from .render import profile_fragment

        return profile_fragment(self)
