"""What would move an op: re-evaluate it with one thing changed and compare.

A lever is a named change to an op's arguments (more tokens per weight read, a narrower
dtype, FlashAttention, fewer KV heads, ...) or to its Cost (fusion drops the HBM round trip).
Each is evaluated with the same op function and the same evaluator, so the advice is a
number, not a rule of thumb: attainable FLOP/s (work per second) before and after.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .cost import Cost
from .dtypes import dtype as lookup_dtype
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .hardware import Chip
from .ops.attention import flash_tiling
from .ops.collectives import COLLECTIVES, IMPLEMENTS
from .ops.tiled_matmul import tiles_fit

OpFunction = Callable[..., Cost]
Change = Callable[[dict[str, Any], Cost, Chip], "dict[str, Any] | Cost | None"]


@dataclass(frozen=True)
class Lever:
    label: str
    change: Change  # new kwargs, a new Cost, or None where it does not apply


@dataclass(frozen=True)
class WhatIf:
    label: str
    t_lower_s: float
    bound: str
    attainable_flops_per_s: float
    speedup: float  # attainable FLOP/s after / before (> 1: the lever helps)


def what_if(op: OpFunction, kwargs: Mapping[str, Any], chip: Chip, levers: list[Lever],
            base: Estimate) -> list[WhatIf]:
    """Evaluate each applicable lever; levers that do not apply or fail on this chip are skipped."""
    rows: list[WhatIf] = []
    if not float(base.t_lower_s) > 0:  # nothing to do (a group of one): nothing to speed up
        return rows
    for lever in levers:
        try:
            changed = lever.change(dict(kwargs), base.cost, chip)
            if changed is None:
                continue
            cost = changed if isinstance(changed, Cost) else op(**changed)
            est = evaluate(cost, chip)
        except RooflineError:  # e.g. the chip has no fp8 peak
            continue
        before = float(base.attainable_flops_per_s)
        after = float(est.attainable_flops_per_s)
        # work per second: FLOP/s where there is arithmetic, else the same work in less time
        t_after = float(est.t_lower_s)
        speedup = after / before if before > 0 else (float(base.t_lower_s) / t_after
                                                      if t_after > 0 else math.inf)
        rows.append(WhatIf(lever.label, float(est.t_lower_s), str(est.bound), after, speedup))
    return rows


def _narrower(current: Any, target: str) -> bool:
    return lookup_dtype(current or "bf16").bits > lookup_dtype(target).bits


def _set(key: str, value: Any, when: Callable[[dict[str, Any]], bool] = lambda kw: True) -> Change:
    def change(kw: dict[str, Any], cost: Cost, chip: Chip) -> dict[str, Any] | None:
        return {**kw, key: value} if when(kw) else None

    return change


def _scale(key: str, factor: float, when: Callable[[dict[str, Any]], bool] = lambda kw: True
           ) -> Change:
    def change(kw: dict[str, Any], cost: Cost, chip: Chip) -> dict[str, Any] | None:
        return {**kw, key: kw[key] * factor} if when(kw) else None

    return change


def _fused(kw: dict[str, Any], cost: Cost, chip: Chip) -> Cost:
    return replace(cost, bytes={}, steps=())  # no HBM round trip at all


def _flash(kw: dict[str, Any], cost: Cost, chip: Chip) -> dict[str, Any] | None:
    if kw.get("impl") != "naive":
        return None
    return {**kw, "impl": "flash", **flash_tiling(chip, kw.get("sram_bytes"), kw.get("block_q"))}


MATMUL_LEVERS = [
    Lever("4x more tokens per weight read (batching)", _scale("m", 4)),
    Lever("int8 weights (weight-only)",
          _set("weight_dtype", "int8", lambda kw: _narrower(kw.get("weight_dtype")
                                                            or kw.get("dtype"), "int8"))),
    Lever("int4 weights, group-128 scales",
          _set("weight_dtype", "int4-g128", lambda kw: _narrower(kw.get("weight_dtype")
                                                                 or kw.get("dtype"), "int4"))),
    Lever("fp8 activations and weights (fp8 peak)",
          lambda kw, c, chip: {**kw, "dtype": "fp8", "weight_dtype": "fp8", "out_dtype": "bf16",
                         "compute_dtype": None} if _narrower(kw.get("dtype"), "fp8") else None),
]

GEMV_LEVERS = MATMUL_LEVERS[1:]  # one token: batching is a different op (matmul)

TILED_MATMUL_LEVERS = [
    Lever("2x larger block tiles (bm, bn)",  # only while one stage still fits in SRAM
          lambda kw, c, chip: tiles_fit({**kw, "bm": kw["bm"] * 2, "bn": kw["bn"] * 2}, chip)),
    Lever("tiles re-read from L2 instead of HBM",
          _set("level", "l2", lambda kw: kw.get("level", "hbm") == "hbm")),
    *MATMUL_LEVERS,
]

DOT_LEVERS = [Lever("fp8 inputs", _set("dtype", "fp8", lambda kw: _narrower(kw["dtype"], "fp8")))]

ELEMENTWISE_LEVERS = [
    Lever("fused into its neighbour (no HBM round trip)", _fused),
    Lever("fp8 input and output", lambda kw, c, chip: {
        **kw, "dtype": "fp8", "out_dtype": "fp8", "compute_dtype": None}
        if _narrower(kw["dtype"], "fp8") else None),
]

ATTENTION_LEVERS = [
    Lever("FlashAttention (S, P stay on chip)", _flash),
    Lever("fp8 KV cache",
          _set("kv_dtype", "fp8", lambda kw: _narrower(kw.get("kv_dtype") or kw.get("dtype"),
                                                       "fp8"))),
    Lever("half the KV heads (more GQA sharing)",
          _scale("kv_heads", 0.5, lambda kw: kw.get("kv_heads") is not None
                 and kw["kv_heads"] % 2 == 0 and kw["heads"] % (kw["kv_heads"] // 2) == 0)),
    Lever("4 query tokens per step (speculative decoding)",
          _scale("q_len", 4, lambda kw: kw["q_len"] * 4 <= kw["kv_len"] and kw["q_len"] < 16)),
    Lever("4x batch (sequences)", _scale("batch", 4)),
]

LINEAR_ATTENTION_LEVERS = [
    Lever("bf16 recurrent state (half the state bytes)",
          _set("state_dtype", "bf16", lambda kw: _narrower(kw.get("state_dtype"), "bf16"))),
    Lever("4 query tokens per state read (speculative decoding)",
          _scale("q_len", 4, lambda kw: kw["q_len"] * 4 <= kw["kv_len"] and kw["q_len"] < 16)),
]

def _algorithm(name: str, applies: Callable[[dict[str, Any], Chip], bool]) -> Change:
    """Switch the collective to algorithm `name` where its kind has one (a send-recv has no
    tree and no reduction) and `applies`."""
    def change(kw: dict[str, Any], cost: Cost, chip: Chip) -> dict[str, Any] | None:
        kind = cost.name.split(" (")[0]
        if kw.get("algo") == name or name not in IMPLEMENTS.get(kind, ()) \
                or not applies(kw, chip):
            return None
        return {**kw, "algo": name}
    return change


COLLECTIVE_LEVERS = [
    Lever("tree algorithm (log-depth latency)",
          _algorithm("tree", lambda kw, chip: kw.get("algo") == "ring")),
    Lever("in-switch reduction (NVLS)", _algorithm("nvls", lambda kw, chip: chip.links.get(
        kw.get("link", "scale-up")) is not None and chip.link(
        kw.get("link", "scale-up")).in_switch_reduction)),
    Lever("fp8 payload (half the bytes)", lambda kw, c, chip: {**kw, "nbytes": kw["nbytes"] / 2}),
]

TP_LAYER_LEVERS = [
    Lever("keep TP inside the scale-up domain",
          _set("link", "scale-up", lambda kw: kw.get("link") == "scale-out")),
    Lever("half the TP degree (each chip does twice the work)",
          lambda kw, c, chip: {**kw, "tp": kw["tp"] // 2}
          if kw.get("tp", 1) >= 2 and kw["heads"] % (kw["tp"] // 2) == 0 else None),
    COLLECTIVE_LEVERS[1],
]

# what would move each op of `roofline op` (keys: roofline.ops.OPS)
OP_LEVERS: dict[str, list[Lever]] = {
    "matmul": MATMUL_LEVERS, "gemv": GEMV_LEVERS, "dot": DOT_LEVERS,
    "elementwise": ELEMENTWISE_LEVERS, "tiled-matmul": TILED_MATMUL_LEVERS,
    "batched-matmul": GEMV_LEVERS, "grouped-matmul": MATMUL_LEVERS[1:],
    "sharded-matmul": MATMUL_LEVERS[1:], "tp-layer": TP_LAYER_LEVERS,
    "attention": ATTENTION_LEVERS, "mla": ATTENTION_LEVERS,
    "linear-attention": LINEAR_ATTENTION_LEVERS,
    **{kind.replace("-", ""): COLLECTIVE_LEVERS for kind in COLLECTIVES},
}


def levers_for(op: str) -> list[Lever]:
    """The levers of a registered op (by its name in roofline.ops.OPS)."""
    return OP_LEVERS.get(op, [])


# --- whole models -------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelWhatIf:
    label: str
    t_lower_s: float
    tokens_per_s: float
    speedup: float  # tokens/s after / before
    bound: str
    fits: bool


def model_what_if(model: Any, chip: Chip, phase: Any, parallel: Any, precision: Any,
                  impl: str = "flash", budget: Any = None, schedule: Any = None
                  ) -> list[ModelWhatIf]:
    """The step re-analysed with one change each: more batch, narrower weights or KV cache
    (inference only), fp8 compute, more tensor parallelism, speculative decoding (decode only),
    half the TP group and twice the pipeline on the same chips, and the step's TP / EP
    collectives overlapped with compute where its schedule keeps them in series.
    Everything else is the step's own (the chip at its clock, the memory budget, the
    schedule). Changes that do not apply (or that the chip cannot run) are left out."""

    from .models import analyze
    from .models.schedule import Schedule

    def run(ph: Any, par: Any, prec: Any) -> Any:
        return analyze(model, chip, ph, par, prec, impl, budget=budget, schedule=schedule)

    base = run(phase, parallel, precision)
    changes: list[tuple[str, Any, Any, Any]] = [
        ("2x batch", replace(phase, batch=phase.batch * 2), parallel, precision)]
    if phase.kind != "train":  # inference-only: training keeps full-precision master
        changes += [                # weights and has no KV cache
            ("int4 weights, group-128 scales", phase, parallel,
             replace(precision, weights="int4-g128", weights_from="")),
            ("fp8 KV cache", phase, parallel, replace(precision, kv_cache="fp8"))]
    if phase.kind == "train":  # fp8 training: fp8 GEMMs, bf16 master weights and activations
        fp8, label = replace(precision, matmul="fp8"), "fp8 GEMMs (--matmul-dtype fp8)"
    else:
        fp8 = replace(precision, weights="fp8", activations="fp8", weights_from="")
        # a KV cache that follows the activation dtype moves with it: the label says which
        label = "fp8 weights and activations" + (
            ", KV cache too" if fp8.kv != precision.kv else f"; KV cache stays {precision.kv}")
    changes += [
        (label, phase, parallel, fp8),
        ("2x tensor parallelism (twice the chips)", phase,
         replace(parallel, tp=parallel.tp * 2), precision),
    ]
    if phase.kind == "decode" and np.all(np.asarray(phase.q_len) < 4):
        changes.append(("4 tokens per step (speculative decoding, all drafts accepted)",
                        replace(phase, q_len=4, kv_len=phase.kv_len - phase.q_len + 4),
                        parallel, precision))
    if parallel.tp > 1 and parallel.tp % 2 == 0:  # the same chips, fewer of them per TP group
        pp, m = parallel.pp * 2, max(parallel.microbatches, parallel.pp * 2)
        changes.append((f"tp {parallel.tp // 2} x pp {pp} (the same chips; {m} micro-batches)",
                        phase, replace(parallel, tp=parallel.tp // 2, pp=pp, microbatches=m),
                        precision))
    # the step's own collectives overlapped with compute, where its schedule keeps them apart
    # (after --no-overlap, on top of the default overlaps: the TP / EP ones need them)
    sched = base.schedule  # the one the step was bounded under (named or the default)
    streams = set(base.comm_streams)
    scheduled: list[tuple[str, Schedule]] = []
    overlapping = sched
    if not sched.overlap and streams:
        overlapping = replace(sched, overlap=True)
        scheduled.append(("collectives overlapped as the default schedule has them",
                          overlapping))
    after = "" if sched.overlap else ", without --no-overlap"
    for stream, field, label in [
            ("tp", "tp_overlap", "TP collectives overlapped with their GEMMs (--tp-overlap"),
            ("ep", "ep_overlap", "EP all-to-alls overlapped with compute (--ep-overlap")]:
        if stream in streams and not getattr(sched, field):
            scheduled.append((f"{label}{after})", replace(overlapping, **{field: True})))
    rows = [_model_row(label, base, analyze(model, chip, phase, parallel, precision, impl,
                                            budget=budget, schedule=s))
            for label, s in scheduled]
    for label, ph, par, prec in changes:
        if (ph, par, prec) == (phase, parallel, precision):  # already so: nothing changes
            continue
        try:
            a = run(ph, par, prec)
        except RooflineError:  # e.g. no fp8 on the chip, tp beyond the heads
            continue
        rows.append(_model_row(label, base, a))
    return rows


def _model_row(label: str, base: Any, a: Any) -> ModelWhatIf:
    return ModelWhatIf(label, float(a.t_lower_s), float(a.tokens_per_s),
                       float(a.tokens_per_s) / float(base.tokens_per_s), str(a.bound),
                       bool(a.memory.fits))
