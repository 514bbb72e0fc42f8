"""The step's times and bound without the per-op tables: what a sweep reads per point.

`step_core` is the one computation of a step's times from its op rows (models/analysis.py
builds its full ModelAnalysis on it); `step_summary` stops there, so a million-point sweep
skips the per-op arrays (flops, bytes, shares, per-resource times, layer tables) that it
never reads. Same numbers as `analyze` to the last bit: the same code computes them.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, add_all, all_one_point, any_true, maximum, one_point, scaled_sum
from ..evaluate import Estimate, evaluate, max_argmax
from ..hardware import Chip, System, load_chip
from ..lazy import cached_property
from ..opid import Gemm
from ..ops.attention import flash_tiling
from ..records import record
from ..solve import decode_critical_batch
from .catalog import load_model
from .graph import OpCost, build, gemm_dtype
from .memory import footprint
from .schedule import COMMUNICATION, Schedule, StepTimes, resolve_schedule, step_times
from .spec import ModelSpec
from .step import MemoryBudget, Parallel, Phase, Precision, model_precision


def load_step(model: str | ModelSpec, hw: Chip | System | str, phase: Phase,
              parallel: Parallel | None, precision: Precision | None, impl: str,
              sram_bytes: float | None, block_q: int | None
              ) -> tuple[ModelSpec, Chip, Parallel, Precision, list[OpCost]]:
    """The model, chip, parallelism and precision resolved, and the step's op rows."""
    spec = load_model(model)
    chip = load_chip(hw)  # a System keeps its own domain size for placement below
    par = parallel or Parallel()
    prec = precision or model_precision(spec)  # the checkpoint's own weight dtype
    l2_bytes = None
    if impl == "flash":  # the tiling given, else the chip's (ops.attention.flash_tiling)
        tiling = flash_tiling(chip, sram_bytes, block_q)
        sram_bytes, block_q, l2_bytes = tiling["sram_bytes"], tiling["block_q"], \
            tiling["l2_bytes"]
    rows = build(spec, phase, par, prec, hw if isinstance(hw, System) else chip, impl,
                 sram_bytes, block_q, l2_bytes)
    return spec, chip, par, prec, rows


ALL_MEMORY = MemoryBudget()  # frozen: shared by every step


def credit(est: Estimate, time: Any) -> dict[str, Any]:
    """`time` credited to the resource that bounds the op, point by point."""
    if isinstance(est.bound_index, int):  # one point
        return {list(est.time_s)[est.bound_index]: time}
    index = np.asarray(est.bound_index)
    first = int(index.min())
    if first == int(index.max()):  # one resource bounds every point: no masks
        return {list(est.time_s)[first]: time}
    return {resource: np.where(index == i, time, 0.0) for i, resource in enumerate(est.time_s)
            if (index == i).any()}


def occurrences(row: OpCost, slots: float) -> float:
    """How often an op row runs per step: in each of `slots` (the micro-batches, or with the
    pipeline's idle slots too) unless it runs once per step."""
    return row.count * (1 if row.per_step else slots)


@record(eq=False)  # a step record: not frozen (roofline.models)
class StepCore:
    """A step's times from its op rows; the floor on demand (`t_floor_s`)."""

    m: int  # micro-batches
    slots: float  # micro-batch slots of the slowest stage, the bubble's included
    ests: list[Estimate]  # per op row, one occurrence
    floors: list[tuple[float, Estimate]]  # per op row: (occurrences, what its floor takes)
    times: StepTimes
    t_upper_s: Any  # nothing overlapped
    by_resource: dict[str, Any]  # the step's time credited to each bounding resource
    model_flops: Any  # useful FLOPs per chip per step
    comm_floor_s: Any  # the busiest of the links and the latency, each overlapped

    @cached_property
    def op_times(self) -> list[dict[str, Any]]:
        """Per op (the not-hidden row last, if any): its time credited by bound (the
        per-op tables' figures; `by_resource` sums them)."""
        out = [credit(e, lower) for e, lower in zip(self.ests, self.times.critical_s,
                                                       strict=True)]
        if any_true(self.times.not_hidden_s > 0):
            out.append({self.times.not_hidden_link: self.times.not_hidden_s})
        return out

    @property
    def t_floor_s(self) -> Any:
        """Every resource of the whole step overlapped (the links' and latency's part of it
        already summed: `comm_floor_s`)."""
        parts: dict[str, list[tuple[float, Any]]] = {}  # per compute unit and memory level
        for n, e in self.floors:
            for resource, t in e.time_s.items():
                if resource not in COMMUNICATION:
                    parts.setdefault(resource, []).append((n, t))
        return functools.reduce(maximum, [scaled_sum(p) for p in parts.values()],
                                self.comm_floor_s)


def step_core(spec: ModelSpec, chip: Chip, par: Parallel, rows: list[OpCost],
              schedule: Schedule, phase: str = "train") -> StepCore:
    # A pipeline of m micro-batches over pp stages takes m micro-batch slots of the slowest
    # stage plus the schedule's bubble (steady decode: none past pp; a prefill's chunks:
    # none); every micro-batch re-reads the stage's weights.
    # Per-step ops (gradient sync, optimizer) run once, outside the pipeline. What overlaps
    # with what is the schedule's (models/schedule.py).
    m = par.microbatches
    slots = m + schedule.idle_slots(par.pp, m, phase)
    # One pass over the rows. The floor: the step's total work with every resource
    # overlapped; each resource's time is linear in the work, so the total's time on a
    # resource is the sum of the ops' times on it (the evaluator on the summed Cost, without
    # building that Cost). A layer's two norms, adds and TP all-reduces are one Cost each.
    # The floor of a collective is the least of any algorithm, resource by resource.
    by_cost: dict[Cost, Estimate] = {}  # a Cost hashes as itself (eq=False)
    ests: list[Estimate] = []
    floors: list[tuple[float, Estimate]] = []
    # The critical path already covers each compute unit's and memory level's total (every
    # op adds at least its own time on each), so only the links and the latency can lift
    # the bound to the floor: their parts are gathered here, the rest of the floor is summed
    # only when it is read (StepCore.t_floor_s).
    comm: dict[str, list[tuple[float, Any]]] = {}
    upper: list[Any] = []  # the idle slots too
    useful: list[Any] = []
    for r in rows:
        cost = r.cost
        e = by_cost.get(cost)
        if e is None:
            e = by_cost[cost] = evaluate(cost, chip)
        ests.append(e)
        per = 1 if r.per_step else m  # occurrences per row.count (occurrences())
        n = r.count * per
        floor_e = e
        least = cost.least  # a collective whose algorithm was picked for its time: the
        if least is not None:  # floor takes the least any of its algorithms demands
            floor_e = by_cost.get(least) or by_cost.setdefault(least, evaluate(least, chip))
        floors.append((n, floor_e))
        if not COMMUNICATION.isdisjoint(floor_e.time_s):
            for resource, t in floor_e.time_s.items():
                if resource in COMMUNICATION:
                    comm.setdefault(resource, []).append((n, t))
        k = r.count * (1 if r.per_step else slots)  # n·t made here, add_all sums them
        upper.append(e.t_upper_s if k == 1 else k * e.t_upper_s)
        k = (r.model_share if r.model_share is not None else r.count) * per
        useful.append(r.model_flops if k == 1 else k * r.model_flops)
    comm_floor = functools.reduce(maximum, [scaled_sum(parts) for parts in comm.values()],
                                  0.0)
    times = step_times(rows, ests, schedule, m, par.pp, spec.layers / par.pp, par.cp,
                       comm_floor, phase)
    credited: dict[str, list[Any]] = {}
    for e, lower in zip(ests, times.critical_s, strict=True):
        if one_point(e.bound_index):  # all to the op's bound
            resource = list(e.time_s)[e.bound_index]
            shares = credited.get(resource)
            if shares is None:
                credited[resource] = [lower]
            else:
                shares.append(lower)
            continue
        for resource, t in credit(e, lower).items():
            credited.setdefault(resource, []).append(t)
    if any_true(times.not_hidden_s > 0):  # a link busier than the critical path
        credited.setdefault(times.not_hidden_link, []).append(times.not_hidden_s)
    by_resource = {resource: add_all(parts) for resource, parts in credited.items()}
    return StepCore(m, slots, ests, floors, times, add_all(upper), by_resource,
                    add_all(useful), comm_floor)


def dominant_index(times: dict[str, Any]) -> tuple[tuple[str, ...], Any]:
    """Per point, the index of the resource with the most time, and the resources."""
    _, index = max_argmax(list(times.values()))
    return tuple(times), index


@record(frozen=True)
class StepSummary:
    """What a sweep keeps per point: `analyze`'s numbers of the same names."""

    t_lower_s: Num
    t_upper_s: Num
    tokens_per_s: Num
    mfu: Num
    bound_names: tuple[str, ...]  # the bound of each point is bound_names[bound_index]
    bound_index: Any
    memory_bytes: Num
    fits: Any


def step_summary(model: str | ModelSpec, hw: Chip | System | str, phase: Phase,
                 parallel: Parallel | None = None, precision: Precision | None = None,
                 impl: str = "flash", budget: MemoryBudget | None = None,
                 schedule: Schedule | None = None) -> StepSummary:
    """`analyze` without its per-op and per-layer tables."""
    spec, chip, par, prec, rows = load_step(model, hw, phase, parallel, precision, impl,
                                            None, None)
    sched, _ = resolve_schedule(schedule, par, phase.kind)
    core = step_core(spec, chip, par, rows, sched, phase.kind)
    t_lower: Any = core.times.t_lower_s
    device = chip.memory[0].capacity_bytes or 0.0
    memory = footprint(spec, phase, par, prec, (budget or ALL_MEMORY).usable(device),
                       sched.in_flight(par.pp, core.m))
    names, index = dominant_index(core.by_resource)
    with np.errstate(divide="ignore", invalid="ignore"):
        mfu = core.model_flops / (t_lower * chip.peak_flops(gemm_dtype(prec, chip)))
    return StepSummary(t_lower, core.t_upper_s, phase.batch * phase.q_len / t_lower, mfu,
                       names, index, memory.total_bytes, memory.fits)


def weight_gemm_critical_batch(chip: Chip, rows: list[OpCost], prec: Precision, q_len: Any,
                               grouped: bool = False) -> Num:
    """Sequences per DP replica at which every weight GEMM of the step (the routed experts'
    grouped GEMMs with `grouped`) is compute-bound: the largest of their critical batches
    (solve.critical_batch) at each chip's own shard K x N, not the large-matrix limit
    s_w·P/(2·BW). H100 bf16: the limit is 295.3; Llama-3-70B at TP 4 has QKV 8192 x 2560 and
    attention output 2048 x 8192 per chip, M* = 2 / (2·BW/P - 2/N - 2/K) = 348.0 and 360.3.
    The router (N = experts) and batched per-head products (MLA's absorbs) are left out."""
    shapes = {(op.k, op.n, op.weight_dtype) for r in rows if type(op := r.cost.op) is Gemm
              and op.grouped == grouped and (grouped or op.groups == 1)
              and r.group != "model" and r.name != "router"
              and type(op.k) is not np.ndarray and type(op.n) is not np.ndarray}
    compute = gemm_dtype(prec, chip)
    found = [decode_critical_batch(chip, k, n, prec.activations, w, None, compute, q_len)
             for k, n, w in shapes]  # each kept on the chip (solve.decode_critical_batch)
    if not found:  # no such GEMM (no experts): the large-matrix limit
        return decode_critical_batch(chip, dtype=prec.activations,
                                     weight_dtype=prec.weights, q_len=q_len)
    if all_one_point(found):
        return max(found)
    return functools.reduce(np.maximum, found)
