"""Whole-model analysis: every op of a step bounded on a chip, summed into a step.

Step times: each op is bound by its own roof (t_lower per op: its resources overlap
perfectly) and ops run one after another, so the step's t_lower is the sum of the ops'
t_lower and t_upper the sum of their t_upper; `t_floor_s` is the stricter physical floor
where everything in the step could overlap (the evaluator on the step's total Cost). With
m micro-batches over pp pipeline stages the step takes m + pp − 1 micro-batch slots of the
slowest stage (the one holding the LM head), each re-reading that stage's weights (a decode
step, one of a steady stream, max(m, pp): the pipeline stays full; a prefill, m: its
prompts' chunks fill the pipeline); gradient
sync and the optimizer run once per step. Op times include their share of the pipeline
bubble. These are bounds, not forecasts: no kernel launch overhead, no efficiency factors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, field, fields
from functools import partial
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, floats, in_shape, one_point, ratio, scaled_sum, unwrap
from ..errors import RooflineError
from ..hardware import Chip, System
from ..lazy import cached_property
from ..records import record
from ..serialize import jsonable
from ..solve import decode_critical_batch
from ..units import format_si, format_time
from .graph import OpCost, gemm_dtype
from .memory import MemoryFootprint, footprint
from .params import param_counts
from .schedule import COMMON, NOT_HIDDEN, Schedule, check_schedule, resolve_schedule, step_times
from .spec import ModelSpec
from .step import MemoryBudget, Parallel, Phase, Precision, context_warning
from .summary import (
    ALL_MEMORY,
    StepCore,
    dominant_index,
    load_step,
    occurrences,
    step_core,
    weight_gemm_critical_batch,
)

# ModelAnalysis's figures computed on first read (properties), written by to_dict too
SECONDARY = ("flops", "bytes", "link_bytes", "t_floor_s", "hfu", "hbm_utilization",
             "flops_by_dtype", "comm_streams")

# What each time of a step is: every output names them so.
STEP_TIMES = {
    "t_floor_s": "floor: every resource of the whole step overlapped",
    "t_lower_s": "lower bound: what the schedule overlaps overlapped, the rest in series (ops "
                 "one after another, each op's resources overlapped)",
    "t_upper_s": "no-overlap sum: nothing overlapped",
}


@record(frozen=True)
class StepOp:
    """One op of the step on one chip, all its occurrences (pipeline slots included).
    Numbers are arrays when the phase's sizes are."""

    group: str
    name: str
    count: float  # occurrences per step on this chip
    flops: Num  # all occurrences
    hbm_bytes: Num
    link_bytes: Num  # per direction, all links together
    intensity: Num  # FLOP per HBM byte (inf for pure communication)
    t_lower_s: Num  # all occurrences
    t_upper_s: Num
    bound: str | np.ndarray[Any, Any]
    share: Num  # of the step's t_lower
    time_s: Mapping[str, Num] = field(default_factory=dict, repr=False)  # per resource
    cost: Cost = field(default_factory=Cost, repr=False)  # ONE occurrence (its derivation)


@record(frozen=True)
class StepLayer:
    """One kind of layer: per-layer figures, and its share of the step."""

    group: str
    count: float
    t_lower_s: Num  # one layer
    t_upper_s: Num
    flops: Num
    hbm_bytes: Num
    link_bytes: Num  # per direction, all links together
    bound: str | np.ndarray[Any, Any]  # the resource that bounds most of the layer's time
    share: Num  # all layers of this kind, of the step's t_lower


@record(frozen=True)
class ModelAnalysis:
    """One step of a model on one chip (per-chip figures; arrays when the phase's sizes are).

    The step's times: `t_floor_s` every resource of the whole step overlapped;
    `t_lower_s` the schedule-aware lower bound: ops one after another, each op's resources
    overlapped, collectives overlapped as the schedule allows (models/schedule.py)
    (pipeline slots included); `t_upper_s` nothing overlapped.
    """

    model: str
    hardware: str
    model_source: str  # where the config came from (the catalog entry's source, or a path)
    phase: Phase
    parallel: Parallel
    precision: Precision
    params_total: float
    params_active: float
    # the op rows and their times: `ops` and `layers` are built from them on first read
    # (the step's own figures do not need those tables)
    parts: StepParts = field(repr=False, compare=False)
    model_flops: Num  # per chip per step, useful work only
    t_lower_s: Num
    t_upper_s: Num
    bound: str | np.ndarray[Any, Any]
    mfu: Num  # at t_lower: model FLOPs / (t_lower · the peak of `mfu_dtype`)
    memory: MemoryFootprint
    decode_compute_bound_batch: Num  # batch at which every dense weight GEMM of decode
    # turns compute-bound at its per-chip shard shape (summary.weight_gemm_critical_batch);
    # MoE experts see batch·top_k/E tokens each, so they need E/top_k times more
    decode_expert_compute_bound_batch: Num | None = None
    decode_compute_bound_batch_limit: Num | None = None  # the large-matrix limit s_w·P/(2·BW)
    memory_budget: str = "all the device exposes"  # what `memory.capacity_bytes` is
    schedule: Schedule = field(default_factory=Schedule)  # what overlapped with what
    exposed_comm_s: Num = 0.0  # communication on the critical path (in series or exposed)
    hidden_comm_s: Num = 0.0  # communication that overlapped with compute
    bubble_fraction: float = 0.0  # the pipeline's idle slots per micro-batch
    # whose dense peak MFU and HFU divide by: the weight GEMMs' compute dtype (fp8 weights
    # run fp8 GEMMs, and against the bf16 peak their MFU passed 100%)
    mfu_dtype: str = "bf16"
    schedule_named: bool = True  # False: none named, `schedule` is the best published one

    # The step's secondary figures, summed from its op rows on first read (the headline
    # ones above do not need them): what `to_dict` writes besides the fields.
    @cached_property
    def _counted(self) -> dict[str, dict[str, Any]]:
        return _per_step(self.parts.rows, self.parts.core.m, ("flops", "bytes", "link_bytes"))

    @cached_property
    def flops(self) -> Num:
        """Per chip per step, as executed (recomputation included)."""
        m = self.parts.core.m
        return unwrap(floats(scaled_sum([(r.count * (1 if r.per_step else m),  # occurrences
                                          r.cost.total_flops) for r in self.parts.rows])))

    @cached_property
    def bytes(self) -> dict[str, Num]:
        """Memory level -> bytes per chip per step."""
        return {k: unwrap(v) for k, v in self._counted["bytes"].items()}

    @cached_property
    def link_bytes(self) -> dict[str, Num]:
        """Link -> bytes per chip per step, per direction."""
        return {k: unwrap(v) for k, v in self._counted["link_bytes"].items()}

    @cached_property
    def flops_by_dtype(self) -> dict[str, Num]:
        """Tensor-core FLOPs per compute dtype."""
        return {k: unwrap(v) for k, v in self._counted["flops"].items()}

    @cached_property
    def hfu(self) -> Num:
        """At t_lower: executed FLOPs / (t_lower · the peak of `mfu_dtype`)."""
        return unwrap(self.flops / (self.parts.core.times.t_lower_s * self.parts.peak))

    @cached_property
    def hbm_utilization(self) -> Num:
        """At t_lower: the step's HBM bytes / (t_lower · HBM bandwidth)."""
        return unwrap(floats(self._counted["bytes"].get("hbm", 0.0)) / (
            self.parts.core.times.t_lower_s * self.parts.hbm_Bps))

    @cached_property
    def t_floor_s(self) -> Num:
        """Every resource of the whole step overlapped (STEP_TIMES)."""
        return unwrap(self.parts.core.t_floor_s)

    @cached_property
    def comm_streams(self) -> tuple[str, ...]:
        """The parallel groups whose collectives the step has."""
        return tuple(dict.fromkeys(r.stream for r in self.parts.rows if r.stream))

    @cached_property
    def _tables(self) -> tuple[tuple[StepOp, ...], tuple[StepLayer, ...]]:
        return _tables(self.parts.rows, self.parts.core)

    @property
    def ops(self) -> tuple[StepOp, ...]:
        """Every op of the step on one chip, all its occurrences (pipeline slots included)."""
        return self._tables[0]

    @property
    def layers(self) -> tuple[StepLayer, ...]:
        """Per kind of layer: per-layer figures and the kind's share of the step."""
        return self._tables[1]

    @property
    def time_by_resource(self) -> dict[str, Num]:
        """The step's t_lower split by the resource that bounds each op (per point): what
        `bound` names the largest of."""
        return {k: unwrap(v) for k, v in self.parts.core.by_resource.items()}

    @cached_property
    def common_t_lower_s(self) -> Num | None:
        """A training step bounded under no named schedule: its lower bound under the
        common schedule (schedule.COMMON: 1F1B, TP and EP collectives in series), shown
        beside the headline; None otherwise (a schedule named, or inference)."""
        if self.schedule_named or self.phase.kind != "train" or self.schedule == COMMON:
            return None
        core, par = self.parts.core, self.parallel
        return unwrap(step_times(self.parts.rows, core.ests, COMMON, core.m, par.pp,
                                 self.parts.layers_per_stage, par.cp, core.comm_floor_s,
                                 self.phase.kind).t_lower_s)

    def under(self, schedule: Schedule) -> ModelAnalysis:
        """The same step bounded under `schedule` (a named one), its ops unchanged.

        >>> from roofline.models import train
        >>> from roofline.models.schedule import COMMON
        >>> a = analyze("llama-3-8b", "h100", train(batch=8, seq_len=2048), Parallel(tp=2))
        >>> bool(a.under(COMMON).t_lower_s >= a.t_lower_s)
        True
        """
        if schedule == self.schedule and self.schedule_named:
            return self
        assert self.parts.resummarise is not None
        return self.parts.resummarise(check_schedule(schedule, self.parallel))

    @property
    def common_tokens_per_s(self) -> Num | None:
        """Tokens/s at `common_t_lower_s` (None where that is)."""
        t = self.common_t_lower_s
        return None if t is None else unwrap(self.phase.batch * self.phase.q_len / t)

    @property
    def pipeline(self) -> dict[str, Any]:
        return {"schedule": self.schedule.pipeline, "vpp": self.schedule.vpp,
                "microbatches": self.parallel.microbatches,
                "bubble_fraction": self.bubble_fraction}

    @property
    def ttft_s(self) -> Num | None:
        return self.t_lower_s if self.phase.kind == "prefill" else None

    @property
    def tpot_s(self) -> Num | None:
        """Time per output token of one sequence: the step over the tokens it adds to each
        sequence (k > 1 with speculative decoding, all drafts accepted)."""
        return self.t_lower_s / self.phase.q_len if self.phase.kind == "decode" else None

    @property
    def tokens_per_s(self) -> Num:
        """New tokens per second across all replicas (training: tokens trained per second)."""
        return self.phase.batch * self.phase.q_len / self.t_lower_s

    @property
    def warnings(self) -> list[str]:
        """What the bound extrapolates past: a context beyond the model's maximum."""
        note = context_warning(self.phase, self.memory.context_limit)
        return [note] if note else []

    def __repr__(self) -> str:
        if np.ndim(self.t_lower_s):
            return (f"ModelAnalysis({self.model} on {self.hardware}, {self.phase.kind}: "
                    f"{np.size(self.t_lower_s)} points)")
        return (f"ModelAnalysis({self.model} on {self.hardware}, {self.phase.kind}: "
                f"{self.bound}-bound, t_lower {format_time(float(self.t_lower_s))}, "
                f"{format_si(float(self.tokens_per_s))} tokens/s)")

    def to_dict(self) -> dict[str, Any]:
        skip = {"memory", "parts"}
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                                if f.name not in skip}
        data.update({name: getattr(self, name) for name in SECONDARY})
        data["phase"], data["parallel"] = asdict(self.phase), asdict(self.parallel)
        data["precision"] = asdict(self.precision)
        data["schedule"] = {**asdict(self.schedule),
                            "overlaps": self.schedule.describe(self.comm_streams)}
        data["pipeline"] = self.pipeline
        data["common_schedule"] = None if self.common_t_lower_s is None else {
            "schedule": "1f1b; " + COMMON.describe(self.comm_streams),
            "t_lower_s": self.common_t_lower_s, "tokens_per_s": self.common_tokens_per_s}
        data["ops"] = [{f.name: getattr(op, f.name) for f in fields(op) if f.name != "cost"}
                       for op in self.ops]
        data["layers"] = [asdict(layer) for layer in self.layers]
        # per-chip figures, except tokens_per_s: all replicas together, as `chips` chips
        data.update(ttft_s=self.ttft_s, tpot_s=self.tpot_s, tokens_per_s=self.tokens_per_s,
                    chips=self.parallel.chips, times=STEP_TIMES, warnings=self.warnings)
        data["memory"] = self.memory.to_dict()
        return dict(jsonable(data))

    def to_frame(self) -> Any:
        """The per-op table as a pandas DataFrame (pandas is an optional extra)."""
        try:
            import pandas as pd
        except ImportError:
            raise RooflineError("to_frame needs pandas: pip install pandas") from None
        return pd.DataFrame([{f.name: getattr(op, f.name) for f in fields(op)
                              if f.name not in ("cost", "time_s")} for op in self.ops])



def _dominant(times: dict[str, Any]) -> Any:
    """Per point, the resource with the most time."""
    names, index = dominant_index(times)
    return names[index] if isinstance(index, int) else unwrap(np.asarray(names)[index])


def analyze(model: str | ModelSpec, hw: Chip | System | str, phase: Phase,
            parallel: Parallel | None = None, precision: Precision | None = None,
            impl: str = "flash", sram_bytes: float | None = None,
            block_q: int | None = None, budget: MemoryBudget | None = None,
            schedule: Schedule | None = None) -> ModelAnalysis:
    """Bound one step of `model` on `hw` (per chip).

    >>> from roofline.models import decode
    >>> a = analyze("llama-3-70b", "h100", decode(batch=1, context=1))
    >>> round(a.tpot_s * 1e3, 1), a.bound
    (41.5, 'hbm')
    """
    spec, chip, par, prec, rows = load_step(model, hw, phase, parallel, precision, impl,
                                            sram_bytes, block_q)
    sched, named = resolve_schedule(schedule, par, phase.kind)
    return _summarise(spec, chip, phase, par, prec, rows, budget or ALL_MEMORY, sched, named)


def _summarise(spec: ModelSpec, chip: Chip, phase: Phase, par: Parallel, prec: Precision,
               rows: list[OpCost], budget: MemoryBudget, schedule: Schedule,
               named: bool = True) -> ModelAnalysis:
    core = step_core(spec, chip, par, rows, schedule, phase.kind)  # models/summary.py
    m, times = core.m, core.times
    t_lower: Any = times.t_lower_s
    shape = () if one_point(t_lower) else np.shape(t_lower)
    model_flops = core.model_flops
    mfu_dtype = gemm_dtype(prec, chip)
    peak = chip.peak_flops(mfu_dtype)
    counts = param_counts(spec)
    device = chip.memory[0].capacity_bytes or 0.0
    q_len = phase.q_len if phase.kind == "decode" else 1
    critical = floats(weight_gemm_critical_batch(chip, rows, prec, q_len))  # per shard
    return ModelAnalysis(
        model=spec.name, hardware=chip.id, model_source=spec.source, phase=phase, parallel=par,
        precision=prec, params_total=counts.total, params_active=counts.active,
        parts=StepParts(rows, core, peak, chip.level("hbm").bandwidth_Bps, spec.layers / par.pp,
                        partial(_summarise, spec, chip, phase, par, prec, rows, budget)),
        model_flops=unwrap(model_flops),
        t_lower_s=unwrap(t_lower),
        t_upper_s=unwrap(core.t_upper_s),
        bound=_dominant(core.by_resource),
        mfu=unwrap(model_flops / (t_lower * peak)),
        memory=footprint(spec, phase, par, prec, budget.usable(device),
                         schedule.in_flight(par.pp, m)),
        memory_budget=budget.describe(device),
        decode_compute_bound_batch=unwrap(critical * par.dp),
        decode_expert_compute_bound_batch=unwrap(weight_gemm_critical_batch(
            chip, rows, prec, q_len, True) * par.dp * spec.moe.experts / spec.moe.top_k)
        if spec.moe else None,
        decode_compute_bound_batch_limit=unwrap(floats(decode_critical_batch(
            chip, dtype=prec.activations, weight_dtype=prec.weights, q_len=q_len)) * par.dp),
        schedule=schedule, schedule_named=named,
        exposed_comm_s=in_shape(times.exposed_comm_s, shape),
        hidden_comm_s=in_shape(times.hidden_comm_s, shape),
        bubble_fraction=times.bubble_fraction,
        mfu_dtype=mfu_dtype,
    )


@record(eq=False)  # a step record: not frozen (roofline.models)
class StepParts:
    """A step's op rows and their times (models/summary.py), kept for its tables."""

    rows: list[OpCost]
    core: StepCore
    peak: float  # FLOP/s of the MFU dtype
    hbm_Bps: float  # the chip's HBM bandwidth
    layers_per_stage: float = 1.0
    # the same rows summarised under another (named) schedule: ModelAnalysis.under
    resummarise: Callable[[Schedule], ModelAnalysis] | None = None


def _tables(rows: list[OpCost], core: StepCore
            ) -> tuple[tuple[StepOp, ...], tuple[StepLayer, ...]]:
    """The per-op and per-layer tables of a step."""
    times, t_lower = core.times, core.times.t_lower_s
    ops = []
    for r, e, lower in zip(rows, core.ests, times.critical_s, strict=True):
        n = occurrences(r, core.m)
        work, hbm = r.cost.total_flops, r.cost.bytes.get("hbm", 0.0)
        scale = occurrences(r, core.slots)  # occurrences and idle slots
        ops.append(StepOp(
            r.group, r.name, n, unwrap(n * work), unwrap(n * hbm),
            unwrap(n * sum(r.cost.link_bytes.values(), 0.0)), ratio(work, hbm, math.inf),
            unwrap(lower), unwrap(scale * e.t_upper_s), e.bound,
            ratio(lower, t_lower, math.nan),
            {k: unwrap(scale * v) for k, v in e.time_s.items()}, r.cost))
    if len(core.op_times) > len(rows):  # a link busier than the critical path
        ops.append(StepOp("model", NOT_HIDDEN, 1, 0.0, 0.0, 0.0, math.inf,
                          unwrap(times.not_hidden_s), 0.0, times.not_hidden_link,
                          ratio(times.not_hidden_s, t_lower, math.nan)))
    return tuple(ops), _layers(ops, core.op_times, t_lower)


def _per_step(rows: list[OpCost], m: int, kinds: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Counted fields of the step's total Cost (all occurrences of every op), per kind."""
    out: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}
    totals = list(out.items())
    for r in rows:
        n = occurrences(r, m)
        fields = r.cost.__dict__  # the counts it has, read directly (a Cost is a record)
        for kind, total in totals:
            counts = fields.get(kind)
            if counts:  # most ops count two or three of the kinds
                for key, value in counts.items():
                    total[key] = total[key] + n * value if key in total else n * value
    return out


def _layers(ops: list[StepOp], op_times: list[dict[str, Any]],
            stage_lower: Any) -> tuple[StepLayer, ...]:
    out = []
    for group in dict.fromkeys(op.group for op in ops if op.group != "model"):
        members = [op for op in ops if op.group == group]
        count = members[-1].count  # the first op may count one less (graph: first norm)
        times: dict[str, Any] = {}
        for op, per_op in zip(ops, op_times, strict=True):
            if op.group == group:
                for resource, t in per_op.items():
                    times[resource] = times.get(resource, 0.0) + t
        lower = sum(np.asarray(op.t_lower_s) for op in members)
        out.append(StepLayer(
            group, count, unwrap(lower / count),
            unwrap(sum(np.asarray(op.t_upper_s) for op in members) / count),
            unwrap(sum(np.asarray(op.flops) for op in members) / count),
            unwrap(sum(np.asarray(op.hbm_bytes) for op in members) / count),
            unwrap(sum(np.asarray(op.link_bytes) for op in members) / count),
            _dominant(times), unwrap(lower / stage_lower)))
    return tuple(out)
