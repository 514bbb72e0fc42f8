"""`roofline.profile(path)`: a real run's trace placed kernel by kernel on the roofline.

Kernels an op launched together are one row (a GEMM's split-K reduction belongs to its GEMM,
so the op's bound is compared with all the time it took); each collective, copy and fill is
its own row. Every mapped row is bounded by the one evaluator and forecast by
`roofline.expect`; `on` places the same work on another chip.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cost import Cost
from ..errors import ParameterError, RooflineError
from ..evaluate import evaluate
from ..expect import expected
from ..hardware import Chip, load_chip
from ..levers import ELEMENTWISE_LEVERS, levers_for, what_if
from ..ops.attention import attention
from ..ops.collectives import collective
from ..ops.matmul import matmul
from ..units import format_time
from .devices import chip_for_device
from .events import Kernel, Trace
from .kineto import read_kineto
from .mapping import OP_CLASSES, Unmapped, Work, compute_dtype, map_kernel
from .nsys import is_sqlite, read_nsys
from .result import ClassRow, Gap, KernelRow, Profile, Summary
from .sources import trace_file
from .timeline import length, merged, overlap

TOP_GAPS = 10
FUSED = ELEMENTWISE_LEVERS[0]  # the lever that needs only the Cost


def _select_step(trace: Trace, step: int | None) -> tuple[list[Kernel], str]:
    if step is None:
        return trace.kernels, "whole trace"
    for s in trace.steps:
        if s.number == step:
            return [k for k in trace.kernels if s.start_s <= k.launch_s <= s.end_s], s.name
    have = ", ".join(str(s.number) for s in trace.steps) or "none (no ProfilerStep marks)"
    raise ParameterError("step", f"{step}: no ProfilerStep#{step} in the trace (steps: {have})")


def _groups(kernels: list[Kernel]) -> list[list[Kernel]]:
    """Kernels an op launched together (not collectives or copies): one group per op."""
    by_op: dict[int, list[Kernel]] = {}
    groups: list[list[Kernel]] = []
    for k in kernels:
        if k.category == "kernel" and not k.is_comm and k.op is not None:
            if k.op.index not in by_op:
                by_op[k.op.index] = []
                groups.append(by_op[k.op.index])
            by_op[k.op.index].append(k)
        else:
            groups.append([k])
    return groups


Costed = tuple[Cost, float, float, str]


def _signature(k: Kernel) -> tuple[Any, ...]:
    """What a kernel's mapping depends on: kernels alike in it map and cost alike."""
    if k.category != "kernel":
        return (k.category, k.name, k.nbytes)
    if k.is_comm:
        return ("comm", k.comm)
    if k.op is None:
        return ("no op",)
    return ("op", k.op.name, k.op.dims, k.op.types)


class _Cache:
    """Mapping and costing each distinct signature once (a step repeats its layers)."""

    def __init__(self) -> None:
        self.mapped: dict[tuple[Any, ...], Work | Unmapped] = {}
        self.costed: dict[tuple[Any, ...], Costed | RooflineError] = {}

    def map(self, k: Kernel) -> tuple[tuple[Any, ...], Work | Unmapped]:
        key = _signature(k)
        if key not in self.mapped:
            self.mapped[key] = map_kernel(k)
        return key, self.mapped[key]

    def cost(self, key: tuple[Any, ...], work: Work, chip: Chip) -> Costed:
        """(Cost, bound, expected, bounding resource) of one piece of work on one chip."""
        full = (*key, chip.id)
        if full not in self.costed:
            try:
                cost = work.build(chip)
                est = evaluate(cost, chip)
                self.costed[full] = (cost, float(est.t_lower_s),
                                     float(expected(cost, chip).t_s), str(est.bound))
            except RooflineError as exc:  # e.g. a collective on a chip without that link
                self.costed[full] = exc
        found = self.costed[full]
        if isinstance(found, RooflineError):
            raise found
        return found


def _row(group: list[Kernel], chip: Chip, on: Chip | None, cache: _Cache
         ) -> tuple[KernelRow, Work | None, Cost | None, tuple[Any, ...]]:
    first = group[0]
    measured = sum(k.dur_s for k in group)
    key, mapped = cache.map(first)
    common: dict[str, Any] = dict(name=first.name, kernels=len(group), stream=first.stream,
                                  start_s=first.start_s, measured_s=measured)
    if isinstance(mapped, Unmapped):
        op = first.op.name if first.op is not None else first.category
        return KernelRow(op=op, op_class="unmapped", bound_s=None, expected_s=None, bound="",
                         flops=None, bytes=None, reason=mapped.reason, **common), None, None, key
    try:
        cost, bound, forecast, resource = cache.cost(key, mapped, chip)
        on_figures = cache.cost(key, mapped, on)[1:3] if on is not None else (None, None)
    except RooflineError as exc:  # e.g. a collective on a chip without that link
        return KernelRow(op=mapped.label, op_class="unmapped", bound_s=None, expected_s=None,
                         bound="", flops=None, bytes=None, reason=str(exc), **common), None, None, \
            key
    # what the op moves: a collective's buffer; else its operands' and outputs' bytes (all
    # pass L2 in `through_l2`, only part cross HBM)
    moved = mapped.link_bytes if mapped.link_bytes is not None else \
        max((float(b) for b in cost.bytes.values()), default=0.0)
    return KernelRow(op=mapped.label, op_class=mapped.op_class, bound_s=bound,
                     expected_s=forecast, bound=resource, flops=_flops(cost), bytes=moved,
                     on_bound_s=on_figures[0], on_expected_s=on_figures[1], note=mapped.note,
                     **common), mapped, cost, key


def _flops(cost: Cost) -> float:
    return float(sum(float(v) for v in cost.flops.values())
                 + sum(float(v) for v in cost.vector_flops.values()))


def _levers(work: Work, cost: Cost, chip: Chip) -> tuple[str, ...]:
    """The op's levers (roofline.levers) that lower its bound, as text."""
    fn: Callable[..., Cost] = _no_rebuild
    kwargs: dict[str, Any] = dict(work.kwargs)
    levers = levers_for(work.levers_op)
    if not kwargs and work.op_class != "collective":  # built from tensors: Cost levers only
        levers = [FUSED] if work.levers_op == "elementwise" else []
    if work.op_class == "gemm" and kwargs:
        fn, kwargs["compute_dtype"] = matmul, compute_dtype(kwargs["dtype"], chip)[0]
    elif work.op_class == "attention" and kwargs:
        fn = attention
        kwargs.update(impl="flash", block_q=128)
    elif work.op_class == "collective":
        fn = functools.partial(collective, chip=chip)
    try:
        rows = what_if(fn, kwargs, chip, levers, evaluate(cost, chip))
    except RooflineError:
        return ()
    return tuple(f"{r.label}: bound {format_time(r.t_lower_s)}"
                 + (f" ({r.speedup:.3g}x)" if math.isfinite(r.speedup) else "")
                 for r in rows if r.speedup > 1.001)


def _no_rebuild(**kwargs: Any) -> Cost:
    raise RooflineError("this op's Cost was built from its tensors, not from arguments")


def _gap_levers(row: KernelRow) -> str:
    """What closing the gap to the bound itself would take, by the bounding resource."""
    if row.op_class == "collective":
        return "waiting on peers or a slow algorithm: overlap it with compute, check skew " \
               "between ranks"
    if row.bound in ("compute", "vector", "sfu"):
        return "compute-bound: a larger tile-friendly shape, or a better kernel (cuBLAS / " \
               "FlashAttention version)"
    if row.bound == "latency":
        return "latency-bound: batch it with its neighbours (CUDA graphs, fusion)"
    # a memory level (hbm, or l2 for work that fits there)
    return "memory-bound: fuse it with its neighbours (torch.compile) or batch it"


def _floor(counts: dict[tuple[Any, ...], tuple[int, Work]], cache: _Cache, chip: Chip
           ) -> float:
    """The mapped work's Costs added (each distinct one times how often it ran; adding
    thousands one by one would also concatenate their derivations), every resource
    overlapped: the step's floor on `chip`."""
    total: Cost | None = None
    for key, (n, work) in counts.items():
        part = n * cache.cost(key, work, chip)[0]
        total = part if total is None else total + part
    return float(evaluate(total, chip).t_lower_s) if total is not None else 0.0


def _summary(kernels: list[Kernel], rows: list[KernelRow], floor: float,
             on_floor: float | None, on: Chip | None) -> Summary:
    busy = merged([k.start_s for k in kernels], [k.end_s for k in kernels])
    comm = merged([k.start_s for k in kernels if k.is_comm],
                  [k.end_s for k in kernels if k.is_comm])
    other = merged([k.start_s for k in kernels if not k.is_comm],
                   [k.end_s for k in kernels if not k.is_comm])
    window = (max(k.end_s for k in kernels) - min(k.start_s for k in kernels)) if kernels \
        else 0.0
    total = sum(k.dur_s for k in kernels)
    mapped = [r for r in rows if r.mapped]

    def side(attr: str, comm_side: bool) -> float:
        return sum(getattr(r, attr) or 0.0 for r in mapped
                   if (r.op_class == "collective") == comm_side)

    def forecast(attr: str) -> float:
        return max(side(attr, False), side(attr, True))

    return Summary(
        window_s=window, measured_s=length(busy), idle_s=max(window - length(busy), 0.0),
        exposed_comm_s=length(comm) - overlap(comm, other), kernel_time_s=total,
        mapped_time_fraction=sum(r.measured_s for r in mapped) / total if total else 0.0,
        measured_mapped_s=sum(r.measured_s for r in mapped), bound_s=floor,
        sum_of_bounds_s=sum(r.bound_s or 0.0 for r in mapped),
        expected_s=forecast("expected_s"), kernels=len(kernels),
        mapped=sum(r.kernels for r in mapped), on_bound_s=on_floor,
        on_expected_s=forecast("on_expected_s") if on is not None else None)


def _by_class(rows: list[KernelRow]) -> list[ClassRow]:
    total = sum(r.measured_s for r in rows) or 1.0
    out = []
    for name in (*OP_CLASSES, "unmapped"):
        members = [r for r in rows if r.op_class == name]
        if members:
            mapped = name != "unmapped"
            out.append(ClassRow(name, sum(r.kernels for r in members),
                                sum(r.measured_s for r in members),
                                sum(r.measured_s for r in members) / total,
                                sum(r.bound_s or 0.0 for r in members) if mapped else None,
                                sum(r.expected_s or 0.0 for r in members) if mapped else None))
    return sorted(out, key=lambda c: -c.measured_s)


def profile(path: str | Path, hw: Chip | str | None = None, on: Chip | str | None = None,
            step: int | None = None, rank: int | None = None) -> Profile:
    """Place a PyTorch profiler (Kineto) trace's or an Nsight Systems SQLite export's GPU
    kernels on their roofline bounds.

    `hw` overrides the chip the trace names; `on` gives the same work's bound and forecast on
    another chip; `step` keeps one ProfilerStep#N; `rank` picks a rank's file in a directory.
    """
    file = trace_file(Path(path), rank)
    trace = read_nsys(file) if is_sqlite(file) else read_kineto(file)
    if rank is not None and trace.rank is not None and trace.rank != rank:
        raise ParameterError("rank", f"{rank}: {file} is rank {trace.rank}'s trace")
    if not trace.kernels:
        raise RooflineError(
            f"{file}: no GPU kernels, copies or fills in the trace ({trace.cpu_ops} CPU ops: "
            "a CPU-only profile); profile places GPU work on its bounds; CPU code is traced "
            "instead (roofline.trace, with a chip file for the CPU)")
    chip = load_chip(hw if hw is not None else chip_for_device(trace.device_name))
    other = load_chip(on) if on is not None else None
    kernels, step_name = _select_step(trace, step)
    if not kernels:
        raise RooflineError(f"{step_name}: no GPU activity was launched in it")
    notes = []
    devices = {k.device for k in kernels}
    if len(devices) > 1:
        keep = min(devices)
        kernels = [k for k in kernels if k.device == keep]
        notes.append(f"the trace has kernels on devices {sorted(devices)}; device {keep}'s "
                     "are profiled")
    rows: list[KernelRow] = []
    counts: dict[tuple[Any, ...], tuple[int, Work]] = {}
    works: list[tuple[KernelRow, Work, Cost]] = []
    cache = _Cache()
    for group in _groups(kernels):
        row, work, cost, key = _row(group, chip, other, cache)
        rows.append(row)
        if work is not None and cost is not None:
            counts[key] = (counts.get(key, (0, work))[0] + 1, work)
            works.append((row, work, cost))
    ranked = sorted(works, key=lambda w: -(w[0].measured_s - (w[0].bound_s or 0.0)))
    gaps = [Gap(r.op, r.name, r.measured_s, r.bound_s or 0.0,
                r.measured_s - (r.bound_s or 0.0), r.bound,
                (_gap_levers(r), *_levers(w, c, chip))) for r, w, c in ranked[:TOP_GAPS]]
    return Profile(str(file), chip.id, trace.device_name, step_name,
                   [s.name for s in trace.steps], trace.rank, rows, _by_class(rows),
                   _summary(kernels, rows, _floor(counts, cache, chip),
                            _floor(counts, cache, other) if other is not None else None,
                            other), gaps,
                   other.id if other is not None else None, notes)
