"""Whole-model analysis: every op of a step bounded on a chip, summed into a step.

Step times: each op is bound by its own roof (t_lower per op: its resources overlap
perfectly) and ops run one after another, so the step's t_lower is the sum of the ops'
t_lower and t_upper the sum of their t_upper; `t_floor_s` is the stricter physical floor
where everything in the step could overlap (the evaluator on the step's total Cost). With a
pipeline, the step is the slowest stage's time times (m + pp − 1)/m. These are bounds, not
forecasts: no kernel launch overhead, no efficiency factors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..cost import Cost
from ..errors import RooflineError
from ..evaluate import evaluate
from ..hardware import Chip, System, load_chip
from ..ops.attention import chip_sram_bytes
from ..report import jsonable
from ..solve import decode_critical_batch
from .catalog import load_model
from .graph import OpCost, Parallel, Phase, Precision, build
from .memory import MemoryFootprint, footprint
from .params import param_counts
from .spec import ModelSpec


@dataclass(frozen=True)
class OpResult:
    group: str
    name: str
    count: float  # occurrences per step on this chip
    flops: float  # all occurrences
    hbm_bytes: float
    link_bytes: float
    intensity: float  # FLOP per HBM byte (inf for pure communication)
    t_lower_s: float  # all occurrences
    t_upper_s: float
    bound: str
    share: float  # of the step's t_lower


@dataclass(frozen=True)
class LayerResult:
    group: str
    count: float
    t_lower_s: float  # one layer
    t_upper_s: float
    flops: float
    hbm_bytes: float
    bound: str  # the resource that bounds most of the layer's time
    share: float  # all layers of this kind, of the step's t_lower


@dataclass(frozen=True)
class ModelAnalysis:
    model: str
    hardware: str
    phase: Phase
    parallel: Parallel
    precision: Precision
    params_total: float
    params_active: float
    ops: tuple[OpResult, ...]
    layers: tuple[LayerResult, ...]
    flops: float  # per chip per step, as executed (recomputation included)
    model_flops: float  # per chip per step, useful work only
    bytes: dict[str, float]  # memory level -> bytes per chip per step
    link_bytes: dict[str, float]
    t_lower_s: float
    t_upper_s: float
    t_floor_s: float
    bound: str
    mfu: float  # at t_lower: model FLOPs / (t_lower · peak)
    hfu: float
    hbm_utilization: float
    memory: MemoryFootprint
    decode_compute_bound_batch: float  # batch at which decode's weight GEMMs turn compute-bound

    @property
    def ttft_s(self) -> float | None:
        return self.t_lower_s if self.phase.kind == "prefill" else None

    @property
    def tpot_s(self) -> float | None:
        return self.t_lower_s if self.phase.kind == "decode" else None

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second across all replicas (training: tokens trained per second)."""
        return self.phase.batch * self.phase.q_len / self.t_lower_s

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "memory"}
        data.update(ttft_s=self.ttft_s, tpot_s=self.tpot_s, tokens_per_s=self.tokens_per_s)
        data["memory"] = {**asdict(self.memory), "total_bytes": self.memory.total_bytes,
                          "fits": self.memory.fits}
        return dict(jsonable(data))

    def to_frame(self) -> Any:
        """The per-op table as a pandas DataFrame (pandas is an optional extra)."""
        try:
            import pandas as pd
        except ImportError:
            raise RooflineError("to_frame needs pandas: pip install pandas") from None
        return pd.DataFrame([asdict(op) for op in self.ops])


def _bound_by_time(times: dict[str, float]) -> str:
    return max(times, key=lambda k: times[k]) if times else "-"


def analyze(model: str | ModelSpec, hw: Chip | System | str, phase: Phase,
            parallel: Parallel | None = None, precision: Precision | None = None,
            impl: str = "flash", sram_bytes: float | None = None,
            block_q: int | None = None) -> ModelAnalysis:
    """Bound one step of `model` on `hw` (per chip).

    >>> from roofline.models import decode
    >>> a = analyze("llama-3-70b", "h100", decode(batch=1, context=1))
    >>> round(a.tpot_s * 1e3, 1), a.bound
    (41.5, 'hbm')
    """
    spec = load_model(model)
    chip = load_chip(hw)
    par = parallel or Parallel()
    prec = precision or Precision()
    if impl == "flash" and sram_bytes is None and block_q is None:
        sram_bytes = chip_sram_bytes(chip) if any(m.name == "sram" for m in chip.memory) \
            else None
        block_q = None if sram_bytes else 128  # no SRAM figure: a common FA2/FA3 tile
    rows = build(spec, phase, par, prec, chip, impl, sram_bytes, block_q)
    return _summarise(spec, chip, phase, par, prec, rows)


def _summarise(spec: ModelSpec, chip: Chip, phase: Phase, par: Parallel, prec: Precision,
               rows: list[OpCost]) -> ModelAnalysis:
    ests = [evaluate(r.cost, chip) for r in rows]
    stage_lower = sum(r.count * float(e.t_lower_s) for r, e in zip(rows, ests, strict=True))
    bubble = (par.microbatches + par.pp - 1) / par.microbatches
    t_lower = stage_lower * bubble
    ops = []
    by_resource: dict[str, float] = {}
    for r, e in zip(rows, ests, strict=True):
        lower = r.count * float(e.t_lower_s)
        hbm = float(e.bytes.get("hbm", 0.0))
        ops.append(OpResult(
            r.group, r.name, r.count, r.count * float(e.flops), r.count * hbm,
            r.count * sum(float(v) for v in e.link_bytes.values()),
            float(e.flops) / hbm if hbm else float("inf"), lower,
            r.count * float(e.t_upper_s), str(e.bound), lower / stage_lower))
        by_resource[str(e.bound)] = by_resource.get(str(e.bound), 0.0) + lower
    total = sum((r.cost * r.count for r in rows), Cost())
    floor = evaluate(total, chip)
    model_flops = sum(r.count * r.model_flops for r in rows)
    peak = chip.peak_flops(prec.activations)
    counts = param_counts(spec)
    return ModelAnalysis(
        model=spec.name, hardware=chip.id, phase=phase, parallel=par, precision=prec,
        params_total=counts.total, params_active=counts.active, ops=tuple(ops),
        layers=_layers(ops, stage_lower), flops=float(total.total_flops),
        model_flops=model_flops, bytes={k: float(v) for k, v in total.bytes.items()},
        link_bytes={k: float(v) for k, v in total.link_bytes.items()},
        t_lower_s=t_lower,
        t_upper_s=bubble * sum(op.t_upper_s for op in ops),
        t_floor_s=float(floor.t_lower_s) * bubble,
        bound=_bound_by_time(by_resource),
        mfu=model_flops / (t_lower * peak),
        hfu=float(total.total_flops) / (t_lower * peak),
        hbm_utilization=float(total.bytes.get("hbm", 0.0)) / (
            t_lower * chip.level("hbm").bandwidth_Bps),
        memory=footprint(spec, phase, par, prec, chip.memory[0].capacity_bytes or 0.0),
        decode_compute_bound_batch=float(decode_critical_batch(
            chip, dtype=prec.activations, weight_dtype=prec.weights, q_len=phase.q_len
            if phase.kind == "decode" else 1)) * par.dp,
    )


def _layers(ops: list[OpResult], stage_lower: float) -> tuple[LayerResult, ...]:
    out = []
    for group in dict.fromkeys(op.group for op in ops if op.group != "model"):
        members = [op for op in ops if op.group == group]
        count = members[0].count
        times: dict[str, float] = {}
        for op in members:
            times[op.bound] = times.get(op.bound, 0.0) + op.t_lower_s
        lower = sum(op.t_lower_s for op in members)
        out.append(LayerResult(
            group, count, lower / count, sum(op.t_upper_s for op in members) / count,
            sum(op.flops for op in members) / count, sum(op.hbm_bytes for op in members) / count,
            _bound_by_time(times), lower / stage_lower))
    return tuple(out)
