"""One graph builder for every phase: a ModelSpec becomes per-chip op Costs.

Prefill, decode and training are the same layers with different parameters (DESIGN §2):

    phase     tokens per sequence (q_len)   keys per sequence (kv_len)   work factor
    prefill   prompt length L               L                            1 (forward)
    decode    k (1, or k speculative)       context + k                  1
    train     sequence length S             S                            3 = forward + backward
                                                                         (4 with recompute)

Training counts the backward pass as twice the forward for FLOPs and HBM bytes (dX and dW for
every matmul: the "6·N per token" convention; an elementwise kernel's backward as its fused
kernel's bytes, ops.elementwise KINDS) but once the forward for collectives (each
forward collective has one backward partner); full activation recomputation re-runs the
forward once more, communication included (HFU counts it, MFU does not).

Parallelism (all costs per chip): TP splits heads and MLP columns (two all-reduces per
layer forward); PP gives each chip layers / pp of the layers, with a bubble of
(m + pp − 1)/m for m micro-batches; DP splits the batch (training adds a gradient
all-reduce, or FSDP's all-gathers and reduce-scatter); EP spreads the routed experts, with an
all-to-all to dispatch tokens and one to combine them; CP splits the sequence, each chip
attending its queries against all keys after an all-gather of K/V. Ranks are laid out TP
innermost, then CP, DP (EP inside DP), PP outermost; a group whose members share a scale-up
domain uses that link, one spread over domains uses scale-out (hierarchically if part of it
shares a domain).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import replace
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Sym, Term, any_true, numeric, times_n, unwrap
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..hardware import Chip, System, make_system
from ..opid import OpKind, Plain
from ..ops.collectives import collective
from ..ops.elementwise import KINDS
from ..records import record
from .layers import (
    BACKWARD,
    LAYER_STREAMS,
    NORMS,
    SPLIT_BACKWARD,
    Ctx,
    edge_ops,
    layer_ops,
)
from .memory import local_param_split, local_params, weight_bytes
from .spec import ModelSpec
from .step import (
    PHASES,
    Parallel,
    Phase,
    Placement,
    Precision,
    place,
    prefill,
)


@record(frozen=True, init=False)
class OpCost:
    """One row of a step: an op's per-chip Cost and how often it runs."""

    group: str  # e.g. "dense layer" / "moe layer (window)"; "model" for whole-model ops
    name: str
    count: float  # occurrences per micro-batch (per step for per-step ops) on this chip
    cost: Cost  # per occurrence, per chip, work factor applied
    model_flops: Any = 0.0  # useful FLOPs per occurrence (no recompute): for MFU
    per_step: bool = False  # once per step (gradient sync, optimizer), not per micro-batch
    model_share: float | None = None  # occurrences for MFU (an average stage), if not count
    stream: str = ""  # "" for compute; else the parallel group of its collective (tp, dp, ...)

    def __init__(self, group: str, name: str, count: float, cost: Cost, model_flops: Any = 0.0,
                 per_step: bool = False, model_share: float | None = None,
                 stream: str = "") -> None:
        # written straight into the instance dict, once (as Cost: ~1 us less per row)
        fields = self.__dict__
        fields["group"], fields["name"], fields["count"], fields["cost"] = group, name, count, cost
        fields["model_flops"], fields["per_step"] = model_flops, per_step
        fields["model_share"], fields["stream"] = model_share, stream


def gemm_dtype(prec: Precision, chip: Chip) -> str:
    """The weight GEMMs' compute dtype: as given (--matmul-dtype); else, for narrow float
    weights (fp8, nvfp4, mxfp4) on a chip with that peak, the weights' own: serving engines
    quantize the activations on the fly and run W8A8 / W4A4 GEMMs (vLLM, TensorRT-LLM,
    DeepSeek-V3's block-scaled fp8), and a bound must not be slower than that; integer
    weight-only formats (AWQ, GPTQ) dequantize to the activation dtype."""
    if prec.matmul:
        return prec.matmul
    w, a = lookup_dtype(prec.weights), lookup_dtype(prec.activations)
    if w.peak.startswith("fp") and w.bits < a.bits and w.peak in chip.peaks:
        return w.peak
    return prec.activations


def _offending(batch: Any, divisor: int) -> str:
    """The first batch size that does not split, for an error message."""
    values = np.atleast_1d(np.asarray(batch))
    return f"{float(values[np.mod(values, divisor) != 0][0]):g}"


def check_layout(spec: ModelSpec, phase: Phase, par: Parallel) -> None:
    """One-line errors for a parallel layout or phase the model cannot run."""
    if phase.kind not in PHASES:
        raise RooflineError(f"unknown phase {phase.kind!r} (allowed: {', '.join(PHASES)})")
    for name in ("tp", "pp", "dp", "ep", "cp", "microbatches"):
        if getattr(par, name) < 1:
            raise RooflineError(f"{name} must be at least 1, got {getattr(par, name)}")
    if spec.heads % par.tp:
        raise RooflineError(f"tp ({par.tp}) must divide the {spec.heads} attention heads")
    if spec.kv_heads % par.tp and par.tp % spec.kv_heads:
        raise RooflineError(f"tp ({par.tp}) and the {spec.kv_heads} KV heads must divide one "
                            "another")
    if par.zero_stage and phase.kind != "train":
        raise RooflineError(f"ZeRO / FSDP shards training state over dp: it applies to train, "
                            f"not {phase.kind}")
    if par.zero not in (0, 1, 2, 3) or (par.fsdp and par.zero not in (0, 3)):
        raise RooflineError(f"zero must be 0, 1, 2 or 3 (fsdp is zero 3), got {par.zero}"
                            + (" with fsdp" if par.fsdp else ""))
    if par.microbatches > 1 and par.pp == 1 and phase.kind != "train":
        raise RooflineError(f"microbatches ({par.microbatches}) fill a pipeline: {phase.kind} "
                            "needs pp > 1 for them (only training accumulates micro-batches "
                            "without one)")
    if spec.linear is not None and any(spec.linear_layers):
        m = spec.linear
        if m.heads % par.tp or m.key_heads % par.tp:
            raise RooflineError(f"tp ({par.tp}) must divide the {m.key_heads} key and "
                                f"{m.heads} value heads of the linear-attention layers")
        if par.cp > 1:
            raise RooflineError("context parallelism of linear-attention layers (a recurrence "
                                "over the sequence) is not modelled; use cp = 1")
    if spec.layers < par.pp:
        raise RooflineError(f"pp ({par.pp}) exceeds the {spec.layers} layers")
    if any_true(phase.batch % par.dp != 0):
        raise RooflineError(f"batch ({_offending(phase.batch, par.dp)}) must be divisible by dp "
                            f"({par.dp})")
    if any_true(phase.batch % (par.dp * par.microbatches) != 0):
        raise RooflineError(f"batch ({_offending(phase.batch, par.dp * par.microbatches)}) "
                            f"must split into {par.microbatches} "
                            f"micro-batches on each of the {par.dp} data-parallel replicas")
    if par.ep > 1 and spec.moe is None:
        raise RooflineError(f"ep ({par.ep}) needs an MoE model")
    # an ep that does not divide the experts is how engines balance them (DeepSeek-V3's 256
    # over EP 72 with 32 redundant copies, EPLB): E/ep per rank on average, the redundant
    # copies not counted (a bound)
    if par.ep > par.dp * par.tp:
        raise RooflineError(f"ep ({par.ep}) cannot exceed dp·tp ({par.dp * par.tp}): experts "
                            "are spread over the data- and tensor-parallel ranks")
    if par.moe_tp and spec.moe is None:
        raise RooflineError(f"moe_tp ({par.moe_tp}) needs an MoE model")
    if par.moe_tp and par.moe_tp * par.ep != par.tp * par.dp:
        raise RooflineError(f"moe_tp ({par.moe_tp}) x ep ({par.ep}) must equal tp·dp "
                            f"({par.tp * par.dp}): the experts' ranks are the attention ranks")
    if par.moe_tp and spec.moe is not None and spec.moe.expert_ffn % par.moe_tp:
        raise RooflineError(f"moe_tp ({par.moe_tp}) must divide the experts' "
                            f"{spec.moe.expert_ffn} intermediate size")
    if par.moe_tp and par.ep == 1 and par.dp > 1:
        raise RooflineError(f"moe_tp ({par.moe_tp}) over dp {par.dp} without EP is not "
                            "modelled: give ep > 1 (experts spread over the DP ranks)")
    # (cp 1 splits nothing: a serving workload's mean prompt need not be a whole number)
    if par.cp > 1 and any_true(phase.q_len % par.cp != 0):
        raise RooflineError(f"cp ({par.cp}) must divide the {phase.q_len} tokens per sequence")
    for name in ("batch", "q_len", "kv_len"):
        if any_true(getattr(phase, name) < 1):
            raise RooflineError(f"{name} must be at least 1, got {getattr(phase, name)}")
    if phase.kind == "decode" and par.cp > 1:
        raise RooflineError("context parallelism splits a prompt; decode has one token")
    if phase.kind != "decode" and np.any(phase.prefill_tokens):
        raise RooflineError(f"prefill_tokens ride in a decode step, not in {phase.kind}")


@numeric  # every op on numbers, one switch for the step (each keeps its derivation)
def build(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision, hw: Chip | System,
          impl: str = "flash", sram_bytes: float | None = None,
          block_q: int | None = None, l2_bytes: float | None = None) -> list[OpCost]:
    """Every op of one micro-batch (or, `per_step`, of the whole step) on the slowest pipeline
    stage's chip, grouped by layer kind, work factor applied. Each micro-batch streams the
    stage's weights again: the step is (m + pp - 1) micro-batch times (analysis.py)."""
    check_layout(spec, phase, par)
    system = hw if isinstance(hw, System) else make_system(hw)
    chip = system.chip
    # optimizer arithmetic runs on vector units: the fp32 peak where the chip publishes one
    vector = "fp32" if "fp32" in chip.peaks else prec.activations
    micro = phase if par.microbatches == 1 else replace(phase,
                                                        batch=phase.batch / par.microbatches)
    c = Ctx(spec, micro, par, prec, place(par, system), impl, sram_bytes, block_q, vector,
             l2_bytes if impl == "flash" else None, gemm_dtype(prec, chip))
    train = phase.kind == "train"
    useful = 3.0 if train else 1.0  # model FLOPs exclude recomputation
    kinds: dict[tuple[bool, str, int | None], int] = {}
    for (moe_layer, mixer, span), n in spec.layer_kinds.items():
        key = (moe_layer, "window" if mixer == "full" else mixer, span)
        kinds[key] = kinds.get(key, 0) + n
    rows: list[OpCost] = []
    # the first layer's attention norm has no residual add to fuse: an edge op of its own,
    # one attention norm less in the layers' rows (every layer kind's norm is the same
    # kernel: taken from the kind with the most layers on the stage, if it has one whole)
    widest = max(kinds, key=kinds.__getitem__)
    first_norm = kinds[widest] >= par.pp
    for key, count in kinds.items():
        moe_layer, kind, window = key
        group = ("moe" if moe_layer else "dense") + " layer" + (
            " (linear)" if kind == "linear" else f" ({kind} {window})" if window else "")
        forward: Any = 0.0
        per_stage = count // par.pp if count % par.pp == 0 else count / par.pp
        for name, cost in layer_ops(c, moe_layer, window, kind):
            if name == NORMS[0] and first_norm and key == widest:  # the first layer's apart
                if per_stage > 1:
                    rows.append(OpCost(group, name, per_stage - 1, _step(cost, phase, name),
                                       _useful(cost, name, c, useful), False,
                                       per_stage - 1 / par.pp))
                continue
            if name.endswith(BACKWARD):  # training's own backward of the op before it:
                useful_flops = 2 * forward  # the convention's 2x forward (the rest recomputes)
            else:  # work every TP rank repeats is the model's once: 1/tp of it on each
                share = c.model_shares.get(name, 1.0)
                forward = cost.total_flops if share == 1 else share * cost.total_flops
                back = None if useful == 1 else _elementwise_backward(cost)
                useful_flops = forward if useful == 1 or name in SPLIT_BACKWARD else \
                    useful * forward if back is None else (1.0 + back) * forward
            rows.append(OpCost(group, name, per_stage, _step(cost, phase, name) if train
                               else cost, useful_flops, False, None, _stream(name)))
    for name, cost in edge_ops(c, first_norm):  # the last stage holds the LM head: the
        rows.append(OpCost("model", name, 1, _step(cost, phase, name),  # slowest stage
                           _useful(cost, name, c, useful), model_share=1 / par.pp))
    rows += _step_ops(c)
    return rows




def _useful(cost: Cost, name: str, c: Ctx, useful: float) -> Any:
    """The model's own FLOPs of one forward row over the step: the work every TP rank repeats
    counts 1/tp; training adds the backward (an elementwise kernel's own, else 2x)."""
    back = None if useful == 1 else _elementwise_backward(cost)
    factor = useful if back is None else 1.0 + back
    return times_n(factor * c.model_shares.get(name, 1.0), cost.total_flops)


@functools.cache  # a handful of op names, one lookup per row
def _stream(name: str) -> str:
    return next((t for t in name.split() if t in LAYER_STREAMS), "")


def _step(cost: Cost, phase: Phase, name: str = "") -> Cost:
    """A forward op's cost over the whole step (backward and recomputation included). In
    training, attention's backward is its own row (FlashAttention-2's recomputing backward),
    so the forward counts once, twice with full recomputation."""
    if phase.kind != "train":  # inference: one forward pass, as the op made it
        return cost
    if name.endswith(BACKWARD):
        return cost
    if name in SPLIT_BACKWARD:
        factor = 2.0 if phase.recompute else 1.0
    elif (back := _elementwise_backward(cost)) is not None:
        # the forward, its fused backward kernel's bytes (ops.elementwise KINDS: 2x the
        # forward for a fused add + norm, 8/3 for SwiGLU, not 3x), and any recomputation
        factor = 1.0 + back + (1.0 if phase.recompute else 0.0)
    else:
        factor = phase.comm_factor if cost.link_bytes else phase.work_factor
    return cost if factor == 1 else cost.scaled(factor, "f")


def _elementwise_backward(cost: Cost) -> float | None:
    """An elementwise kernel's backward over its forward (KINDS[...].backward); None for
    other ops."""
    op = cost.op
    if type(op) is Plain and op.kind == OpKind.ELEMENTWISE and op.what in KINDS:
        return KINDS[op.what].backward
    return None


def _step_ops(c: Ctx) -> list[OpCost]:
    """Once-per-step communication and updates: PP hand-offs, gradient sync (per ZeRO stage),
    optimizer."""
    rows: list[OpCost] = []
    passes = 2 if c.phase.kind == "train" else 1  # activations forward, gradients back
    if c.par.pp > 1:  # one hand-off per micro-batch (forward, and backward in training)
        nbytes = c.tokens * c.spec.hidden * c.act_bytes
        link, _ = c.place.links["pp"]
        hop = collective("send-recv", nbytes, 2, link=link)
        rows.append(OpCost("model", "pp send/recv", passes, hop, stream="pp"))
    if c.phase.kind != "train":
        return rows
    from ..ops.optimizer import adam_update  # only a training step loads it

    params = local_params(c.spec, c.par)
    zero = c.par.zero_stage
    if c.par.dp > 1:
        rows += _gradient_sync(c, zero)
    shard = params / (c.par.dp if zero >= 1 else 1)  # ZeRO >= 1: each rank updates its shard
    rows.append(OpCost("model", "optimizer (adam)", 1, adam_update(
        shard, grad_dtype=c.prec.grads, weight_dtype=c.prec.weights,
        compute_dtype=c.vector_dtype), per_step=True))
    return rows


def _gradient_sync(c: Ctx, zero: int) -> list[OpCost]:
    """Data-parallel gradient sync by ZeRO stage. 0: gradients all-reduced. 1 and 2 (Megatron's
    distributed optimizer is 1): gradients reduce-scattered, each rank updates its shard, the
    updated weights all-gathered. 3 (FSDP): weights all-gathered for the forward and again for
    the backward (and the recomputation), gradients reduce-scattered. Routed experts sync only
    over their own copies: dp·tp/ep ranks with EP (none when each expert is unique)."""
    dense, experts = local_param_split(c.spec, c.par)
    s_g = lookup_dtype(c.prec.grads).bytes
    dp = c.par.dp
    if zero == 3:
        w = weight_bytes(c.spec, c.par, c.prec)
        return [OpCost("model", "fsdp weight all-gather", 2 + (1 if c.phase.recompute else 0),
                       c.place.comm("all-gather", w, "dp", dp), per_step=True, stream="fsdp"),
                OpCost("model", "fsdp gradient reduce-scatter", 1,
                       c.place.comm("reduce-scatter", (dense + experts) * s_g, "dp", dp),
                       per_step=True, stream="dp")]
    if zero in (1, 2):
        rows = [OpCost("model", f"zero-{zero} gradient reduce-scatter", 1,
                       c.place.comm("reduce-scatter", dense * s_g, "dp", dp), per_step=True,
                       stream="dp"),
                OpCost("model", f"zero-{zero} weight all-gather", 1,
                       c.place.comm("all-gather", dense * lookup_dtype(c.prec.weights).bytes,
                                    "dp", dp), per_step=True, stream="fsdp")]
    else:
        rows = [OpCost("model", "dp gradient all-reduce", 1,
                       c.place.comm("all-reduce", dense * s_g, "dp", dp), per_step=True,
                       stream="dp")]
    copies = dp * c.par.tp // (c.par.ep * c.par.expert_tp)
    if experts and copies > 1:
        rows.append(OpCost("model", "expert gradient all-reduce", 1,
                           c.place.comm("all-reduce", experts * s_g, "dp", copies),
                           per_step=True, stream="dp"))
    return rows


def tp_layer(batch: Any, seq_len: Any, hidden: int, ffn: int, heads: int,
             kv_heads: int | None = None, head_dim: int | None = None, tp: int = 1,
             gated: bool = True, dtype: str = "bf16", impl: str = "flash",
             sram_bytes: float | None = None, block_q: int | None = None, algo: str = "ring",
             link: str = "scale-up", domain_size: int | None = None,
             link_share: float = 1.0) -> Cost:
    """Forward cost per chip of one decoder layer (prefill / training shapes) with Megatron
    tensor parallelism: the same layer ops a whole model is built from, with the TP group
    placed on `link` (ask "is TP = 8 across nodes communication-bound?" with "scale-out").

    >>> from roofline import evaluate
    >>> layer = tp_layer(8, 4096, 8192, 28672, 64, 8, tp=8, block_q=128)
    >>> evaluate(layer, "h100").bound, evaluate(tp_layer(8, 4096, 8192, 28672, 64, 8, tp=8,
    ...     block_q=128, link="scale-out"), "h100").bound
    ('compute', 'scale-out')
    """
    for name, value in [("hidden", hidden), ("ffn", ffn), ("heads", heads), ("tp", tp)]:
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise RooflineError(f"{name}: expected a positive whole number, got {value!r}")
    if head_dim is None and hidden % heads:
        raise RooflineError(f"hidden ({hidden}) is not a multiple of heads ({heads}); give "
                            "head_dim")
    spec = ModelSpec(name="tp layer", model_type="llama", hidden=hidden, layers=1, heads=heads,
                     kv_heads=kv_heads or heads, head_dim=head_dim or hidden // heads, ffn=ffn,
                     vocab=1, gated_mlp=gated, norm="rmsnorm")
    phase, par, prec = prefill(batch, seq_len), Parallel(tp=tp), Precision(dtype, dtype)
    check_layout(spec, phase, par)
    # a sweep (`sweep op tp-layer`) may give the link share and domain size as arrays
    placement = Placement(tp if domain_size is None else domain_size,
                          {"tp": (link, domain_size)}, algo, shares={"tp": unwrap(link_share)})
    c = Ctx(spec, phase, par, prec, placement, impl, sram_bytes, block_q, dtype)
    ops = layer_ops(c, False, None)
    total = sum((cost for _, cost in ops), Cost())
    return replace(total, name=f"tensor-parallel layer (tp={tp})",
                   steps=functools.partial(_layer_steps, ops))


def _layer_steps(ops: list[tuple[str, Cost]]) -> tuple[Term, ...]:
    """A layer's derivation: each op's steps under its name, then the layer's totals."""
    named = [Term(f"{name}: {t.name}", t.expr, t.repeat) for name, cost in ops
             for t in cost.terms]
    totals = []
    for what, of in (("FLOPs", lambda c: c.total_flops),
                     ("HBM bytes", lambda c: c.bytes.get("hbm", 0.0))):
        parts = [Sym(name, of(cost)) for name, cost in ops if np.any(of(cost))]
        if parts:
            totals.append(Term(f"layer {what}", functools.reduce(operator.add, parts)))
    return (*named, *totals)
