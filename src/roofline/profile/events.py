"""What a profile reads from a trace, whatever the format: GPU activities (kernels, copies,
fills) with the CPU op that launched them, NCCL arguments and steps. Times in seconds."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Comm:
    """A collective's arguments as PyTorch records them (kernel or record_param_comms)."""

    collective: str  # 'allreduce', 'allgather', 'reduce_scatter', 'all_to_all', ...
    in_elements: int
    out_elements: int
    dtype: str  # PyTorch's name: 'Float', 'BFloat16', ...
    group_size: int


@dataclass(frozen=True)
class CpuOp:
    index: int  # which CPU op instance (kernels it launched share it)
    name: str  # 'aten::addmm'
    dims: tuple[tuple[int, ...] | None, ...]  # input shapes; None: not a tensor (or unknown)
    types: tuple[str, ...]  # 'float', 'c10::BFloat16', 'Scalar', ...
    comm: Comm | None = None


@dataclass(frozen=True)
class Kernel:
    """One GPU activity: a kernel, a memcpy or a memset."""

    name: str
    category: str  # kernel | memcpy | memset
    start_s: float
    dur_s: float
    stream: int
    device: int
    launch_s: float  # when the CPU launched it (its own start where no launch is recorded)
    op: CpuOp | None
    comm: Comm | None
    nbytes: float | None  # a copy's or fill's bytes

    @property
    def end_s(self) -> float:
        return self.start_s + self.dur_s

    @property
    def is_comm(self) -> bool:
        low = self.name.lower()
        return self.category == "kernel" and ("nccl" in low or "rccl" in low)


@dataclass(frozen=True)
class Step:
    name: str  # 'ProfilerStep#4'
    start_s: float  # the CPU span of the step
    end_s: float

    @property
    def number(self) -> int | None:
        tail = self.name.rpartition("#")[2]
        return int(tail) if tail.isdigit() else None


def _count(value: Any) -> int | None:
    if type(value) is int and 0 <= value < 2**53:
        return value
    if type(value) is float and math.isfinite(value) and value.is_integer() \
            and 0 <= value < 2**53:
        return int(value)
    return None


def comm_args(args: dict[str, Any]) -> Comm | None:
    """The collective a kernel (or record_param_comms op) ran, from its args, if recorded."""
    name = args.get("Collective name")
    if not isinstance(name, str) or not name:
        return None
    counts = [_count(args.get(k)) for k in ("In msg nelems", "Out msg nelems", "Group size")]
    dtype = args.get("dtype")
    if any(c is None for c in counts) or not isinstance(dtype, str):
        return None
    n_in, n_out, group = (int(c or 0) for c in counts)
    return Comm(name, n_in, n_out, dtype, group)


@dataclass
class Trace:
    """What a reader (Kineto JSON, Nsight Systems SQLite) hands the analysis: one shape."""

    path: str
    device_name: str | None  # the name of the device the kernels ran on
    rank: int | None
    world_size: int | None
    kernels: list[Kernel]
    steps: list[Step]
    cpu_ops: int  # CPU ops (or NVTX op ranges) read


def launchers(cpu: list[tuple[Any, ...]], runtime: dict[int, tuple[Any, ...]]
              ) -> dict[int, int]:
    """correlation -> index (in `cpu`) of the innermost CPU op containing its runtime call.

    `cpu`: (kind, name, start, dur, process, thread, ...); `runtime`: correlation ->
    (kind, correlation, start, process, thread): both readers build these tuples."""
    marks: list[tuple[float, int, float, int, Any]] = []  # (time, order, -dur, index, thread)
    for i, c in enumerate(cpu):
        marks.append((c[2], 0, -c[3], i, (c[4], c[5])))
    for corr, r in runtime.items():
        marks.append((r[2], 1, 0.0, corr, (r[3], r[4])))
    marks.sort(key=lambda m: (m[0], m[1], m[2]))
    stacks: dict[Any, list[tuple[float, int]]] = {}  # thread -> open ops (end, index)
    found: dict[int, int] = {}
    for t, kind, neg_dur, index, thread in marks:
        stack = stacks.setdefault(thread, [])
        while stack and stack[-1][0] < t:
            stack.pop()
        if kind == 0:
            stack.append((t - neg_dur, index))
        elif stack:
            found[index] = stack[-1][1]
    return found
