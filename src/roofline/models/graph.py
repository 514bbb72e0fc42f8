"""One graph builder for every phase: a ModelSpec becomes per-chip op Costs.

Prefill, decode and training are the same layers with different parameters (DESIGN §2):

    phase     tokens per sequence (q_len)   keys per sequence (kv_len)   work factor
    prefill   prompt length L               L                            1 (forward)
    decode    k (1, or k speculative)       context + k                  1
    train     sequence length S             S                            3 = forward + backward
                                                                         (4 with recompute)

Training counts the backward pass as twice the forward for FLOPs and HBM bytes (dX and dW for
every matmul: the "6·N per token" convention) but once the forward for collectives (each
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

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..hardware import Chip, System, make_system
from ..ops.attention import attention, flash_tiling, mla_attention
from ..ops.attention_backward import attention_backward
from ..ops.collectives import collective
from ..ops.elementwise import elementwise
from ..ops.embedding import embedding_lookup
from ..ops.linear_attention import linear_attention
from ..ops.matmul import matmul
from ..ops.moe import batched_matmul, grouped_matmul
from ..ops.optimizer import adam_update
from .memory import local_param_split, local_params, weight_bytes
from .spec import ModelSpec
from .step import (
    PHASES,
    Parallel,
    Phase,
    Placement,
    Precision,
    kv_bytes_per_token_per_layer,
    place,
    prefill,
)


@dataclass(frozen=True)
class OpCost:
    group: str  # e.g. "dense layer" / "moe layer (window)"; "model" for whole-model ops
    name: str
    count: float  # occurrences per micro-batch (per step for per-step ops) on this chip
    cost: Cost  # per occurrence, per chip, work factor applied
    model_flops: Any = 0.0  # useful FLOPs per occurrence (no recompute): for MFU
    per_step: bool = False  # once per step (gradient sync, optimizer), not per micro-batch
    model_share: float | None = None  # occurrences for MFU (an average stage), if not count
    stream: str = ""  # "" for compute; else the parallel group of its collective (tp, dp, ...)


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


def _check(spec: ModelSpec, phase: Phase, par: Parallel) -> None:
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
    if np.any(np.mod(phase.batch, par.dp)):
        raise RooflineError(f"batch ({_offending(phase.batch, par.dp)}) must be divisible by dp "
                            f"({par.dp})")
    if np.any(np.mod(phase.batch, par.dp * par.microbatches)):
        raise RooflineError(f"batch ({_offending(phase.batch, par.dp * par.microbatches)}) "
                            f"must split into {par.microbatches} "
                            f"micro-batches on each of the {par.dp} data-parallel replicas")
    if par.ep > 1 and (spec.moe is None or spec.moe.experts % par.ep):
        raise RooflineError(f"ep ({par.ep}) needs an MoE model whose expert count it divides")
    if par.ep > par.dp * par.tp:
        raise RooflineError(f"ep ({par.ep}) cannot exceed dp·tp ({par.dp * par.tp}): experts "
                            "are spread over the data- and tensor-parallel ranks")
    if np.any(np.mod(phase.q_len, par.cp)):
        raise RooflineError(f"cp ({par.cp}) must divide the {phase.q_len} tokens per sequence")
    for name in ("batch", "q_len", "kv_len"):
        if np.any(np.asarray(getattr(phase, name)) < 1):
            raise RooflineError(f"{name} must be at least 1, got {getattr(phase, name)}")
    if phase.kind == "decode" and par.cp > 1:
        raise RooflineError("context parallelism splits a prompt; decode has one token")
    if np.any(phase.prefill_tokens) and phase.kind != "decode":
        raise RooflineError(f"prefill_tokens ride in a decode step, not in {phase.kind}")


@dataclass(frozen=True)
class _Ctx:
    """Everything a layer needs, computed once."""

    spec: ModelSpec
    phase: Phase
    par: Parallel
    prec: Precision
    place: Placement
    impl: str
    sram_bytes: float | None
    block_q: int | None
    vector_dtype: str  # dtype whose peak vector-unit work (the optimizer) is charged to
    l2_bytes: float | None = None  # flash: the L2 that catches K/V re-reads (flash_tiling)
    concurrent_blocks: int | None = None  # flash: query blocks in flight (one per SM)
    gemm_dtype: str | None = None  # the weight GEMMs' compute dtype (gemm_dtype())

    @property
    def seqs(self) -> float:  # sequences on this chip
        return self.phase.batch / self.par.dp

    @property
    def q_local(self) -> float:
        return self.phase.q_len / self.par.cp

    @property
    def chunk_tokens(self) -> float:  # chunked-prefill prompt tokens on this chip (decode)
        return self.phase.prefill_tokens / (self.par.dp * self.par.microbatches)

    @property
    def chunk_prompts(self) -> float:  # prompts' worth of prefill they are (fractional)
        return self.chunk_tokens / self.phase.prefill_q_len

    @property
    def tokens(self) -> float:  # tokens through this chip's layers per step
        return self.seqs * self.q_local + self.chunk_tokens

    @property
    def act_bytes(self) -> float:
        return lookup_dtype(self.prec.activations).bytes

    @property
    def heads_local(self) -> float:
        return self.spec.heads / self.par.tp

    @property
    def kv_heads_local(self) -> float:  # fewer KV heads than TP ranks: each keeps one
        return max(1.0, self.spec.kv_heads / self.par.tp)

    def mm(self, m: float, k: float, n: float, name: str) -> Cost:
        """A weight GEMM: activations in, the weights' dtype, the GEMM compute dtype's peak
        (fp8 training runs these in fp8; attention and elementwise stay in bf16)."""
        return matmul(m, k, n, self.prec.activations, self.prec.weights,
                      compute_dtype=self.gemm_dtype or self.prec.gemm, name=name)

    def tp_all_reduce(self, block: str, kind: str = "all-reduce") -> list[tuple[str, Cost]]:
        """The TP group's collective closing a block: an all-reduce of partial sums, or an
        all-gather where the ranks hold disjoint tokens (EP'd experts, sequence-split)."""
        if self.par.tp == 1:
            return []
        nbytes = self.tokens * self.spec.hidden * self.act_bytes
        return [(f"{block} tp {kind}", self.place.comm(kind, nbytes, "tp", self.par.tp))]


def _attention_ops(c: _Ctx, window: int | None, kind: str = "window"
                   ) -> list[tuple[str, Cost]]:
    """The token mixer's ops: attention (full, sliding `window`, or chunked local with chunk
    `window` when kind is "chunk"), or a linear-attention mixer (kind "linear")."""
    s, T, kv_len = c.spec, c.tokens, c.phase.kv_len
    if kind == "linear":
        return _linear_ops(c)
    common: dict[str, Any] = dict(dtype=c.prec.activations, kv_dtype=c.prec.kv,
                                  sram_bytes=c.sram_bytes, block_q=c.block_q,
                                  l2_bytes=c.l2_bytes, concurrent_blocks=c.concurrent_blocks)
    ops: list[tuple[str, Cost]] = []
    if c.par.cp > 1:  # ring / all-gather context parallelism: every chip needs all K/V
        kv_bytes = c.seqs * c.phase.kv_len * kv_bytes_per_token_per_layer(c.spec, c.par,
                                                                          c.prec)
        ops.append(("cp k/v all-gather", c.place.comm("all-gather", kv_bytes, "cp", c.par.cp)))
    if s.mla is None:
        d = s.head_dim
        gate = c.heads_local if s.attn_output_gate else 0  # Qwen3-Next: a gate per head
        ops.append(("qkv projection", c.mm(T, s.hidden, (c.heads_local + 2 * c.kv_heads_local
                                                         + gate) * d, "qkv projection")))
        chunked = kind == "chunk"
        ops.append(("attention", _cp_share(c, attention(
            c.seqs, c.phase.q_len, kv_len, c.heads_local, c.kv_heads_local, d, impl=_impl(c),
            window=None if chunked else window, chunk=window if chunked else None,
            **common))))
        ops += _attention_backward(c, c.heads_local, c.kv_heads_local, d, d,
                                   window=None if chunked else window,
                                   chunk=window if chunked else None)
        ops.append(("attention output", c.mm(T, c.heads_local * d, s.hidden, "attention output")))
        return ops
    m = s.mla
    qk = m.qk_nope_dim + m.qk_rope_dim
    if m.q_lora_rank:
        ops.append(("q down projection", c.mm(T, s.hidden, m.q_lora_rank, "q down projection")))
        ops.append(("q up projection", c.mm(T, m.q_lora_rank, c.heads_local * qk,
                                            "q up projection")))
    else:
        ops.append(("q projection", c.mm(T, s.hidden, c.heads_local * qk, "q projection")))
    ops.append(("kv down projection", c.mm(T, s.hidden, m.kv_lora_rank + m.qk_rope_dim,
                                           "kv down projection")))
    mla: dict[str, Any] = dict(heads=c.heads_local, kv_lora_rank=m.kv_lora_rank,
                               qk_rope_dim=m.qk_rope_dim, qk_nope_dim=m.qk_nope_dim,
                               v_head_dim=m.v_head_dim, **common)
    if c.phase.kind == "decode":  # absorbed: attention runs on the 576-wide latent cache
        act, w = c.prec.activations, c.prec.weights
        ops.append(("q absorb (W_UK)", batched_matmul(c.heads_local, T, m.qk_nope_dim,
                                                      m.kv_lora_rank, act, w)))
        ops.append(("mla attention", mla_attention(c.seqs, c.q_local, kv_len, form="absorbed",
                                                   **mla)))
        ops.append(("v absorb (W_UV)", batched_matmul(c.heads_local, T, m.kv_lora_rank,
                                                      m.v_head_dim, act, w)))
    else:  # expanded: decompress K and V per head, then ordinary attention
        ops.append(("kv up projection", c.mm(T, m.kv_lora_rank, c.heads_local *
                                             (m.qk_nope_dim + m.v_head_dim), "kv up projection")))
        ops.append(("mla attention", _cp_share(c, mla_attention(
            c.seqs, c.phase.q_len, kv_len, form="expanded", impl=_impl(c), **mla))))
        ops += _attention_backward(c, c.heads_local, c.heads_local, qk, m.v_head_dim,
                                   name="mla attention")
    ops.append(("attention output", c.mm(T, c.heads_local * m.v_head_dim, s.hidden,
                                         "attention output")))
    return ops


def _attention_backward(c: _Ctx, heads: float, kv_heads: float, d: float, dv: float,
                        window: int | None = None, chunk: int | None = None,
                        name: str = "attention") -> list[tuple[str, Cost]]:
    """Training: attention's backward as its own row (FlashAttention-2's, which recomputes S
    and P: 2.5x the forward's GEMMs with its own IO), not "2x the forward"."""
    if c.phase.kind != "train":
        return []
    return [(name + BACKWARD, _cp_share(c, attention_backward(
        c.seqs, c.phase.q_len, c.phase.kv_len, heads, kv_heads, d, dv, window=window,
        chunk=chunk, dtype=c.prec.activations, sram_bytes=c.sram_bytes, block_kv=c.block_q,
        l2_bytes=c.l2_bytes, concurrent_blocks=c.concurrent_blocks)))]


def _linear_ops(c: _Ctx) -> list[tuple[str, Cost]]:
    """A Gated DeltaNet mixer on this chip (TP splits its heads): the fused input projection
    (q, k, v, output gate z; beta and decay a per value head), the chunked recurrence over a
    fixed-size state (ops.linear_attention), the output projection."""
    s, T, m = c.spec, c.tokens, c.spec.linear
    assert m is not None
    hv, hk = m.heads / c.par.tp, m.key_heads / c.par.tp
    width = 2 * hk * m.key_dim + 2 * hv * m.value_dim + 2 * hv
    return [("linear qkvz projection", c.mm(T, s.hidden, width, "linear qkvz projection")),
            ("linear attention", linear_attention(
                c.seqs, c.phase.q_len, c.phase.kv_len, hv, hk, m.key_dim, m.value_dim, m.kind,
                conv_kernel=m.conv_kernel, dtype=c.prec.activations)),
            ("linear output", c.mm(T, hv * m.value_dim, s.hidden, "linear output"))]


def _chunk_attention(c: _Ctx, window: int | None, kind: str = "window"
                     ) -> list[tuple[str, Cost]]:
    """The prefill attention of a decode step's chunked-prefill tokens (Phase.prefill_tokens):
    the same attention op as a prefill's, for chunk_prompts prompts (MLA: the expanded form,
    as a prefill runs it; its projections are the step's token-wise GEMMs)."""
    if not np.any(c.phase.prefill_tokens):
        return []
    p, s = c.phase, c.spec
    if kind == "linear":  # the recurrence: a prefill of chunk_prompts sequences
        m = s.linear
        assert m is not None
        return [("chunked prefill linear attention", linear_attention(
            c.chunk_prompts, p.prefill_q_len, p.prefill_kv_len, m.heads / c.par.tp,
            m.key_heads / c.par.tp, m.key_dim, m.value_dim, m.kind, conv_kernel=m.conv_kernel,
            dtype=c.prec.activations))]
    common: dict[str, Any] = dict(dtype=c.prec.activations, kv_dtype=c.prec.kv,
                                  sram_bytes=c.sram_bytes, block_q=c.block_q)
    if s.mla is not None:
        m2 = s.mla
        return [("chunked prefill attention", mla_attention(
            c.chunk_prompts, p.prefill_q_len, p.prefill_kv_len, form="expanded", impl=c.impl,
            heads=c.heads_local, kv_lora_rank=m2.kv_lora_rank, qk_rope_dim=m2.qk_rope_dim,
            qk_nope_dim=m2.qk_nope_dim, v_head_dim=m2.v_head_dim, **common))]
    chunked = kind == "chunk"
    return [("chunked prefill attention", attention(
        c.chunk_prompts, p.prefill_q_len, p.prefill_kv_len, c.heads_local, c.kv_heads_local,
        s.head_dim, impl=c.impl, window=None if chunked else window,
        chunk=window if chunked else None, **common))]


def _cp_share(c: _Ctx, cost: Cost) -> Cost:
    """One CP rank's share of the sequence's attention: load-balanced (zigzag) chunks give
    every rank 1/cp of the causal score pairs, not the last chunk's."""
    return cost if c.par.cp == 1 else cost.scaled(1 / c.par.cp, "1/cp")


def _impl(c: _Ctx) -> str:
    return "decode" if c.phase.kind == "decode" and c.impl == "flash" else c.impl


def _mlp_ops(c: _Ctx, moe_layer: bool) -> list[tuple[str, Cost]]:
    s, T, act = c.spec, c.tokens, c.prec.activations
    gate = 2 if s.gated_mlp else 1
    kind = "swiglu" if s.gated_mlp else "gelu"
    if not moe_layer:
        f = s.ffn / c.par.tp
        return [("mlp up/gate", c.mm(T, s.hidden, gate * f, "mlp up/gate")),
                ("mlp activation", elementwise(T * f, kind, act)),
                ("mlp down", c.mm(T, f, s.hidden, "mlp down"))]
    m = s.moe
    assert m is not None
    ep, tp = c.par.ep, c.par.tp
    # Without EP every chip holds 1/tp of each expert (tensor-parallel experts) and all its
    # tokens. With EP a chip holds E/ep whole experts and serves what the EP group routes to
    # them; TP ranks hold the same tokens, so each dispatches 1/tp of them.
    f = m.expert_ffn / (tp if ep == 1 else 1)
    group_tokens = T if ep == 1 else T * ep / tp
    dispatch = T / tp * m.top_k * s.hidden * c.act_bytes
    ops: list[tuple[str, Cost]] = [("router", c.mm(T, s.hidden, m.experts, "router"))]
    if ep > 1:
        ops.append(("ep dispatch all-to-all", c.place.comm("all-to-all", dispatch, "ep", ep)))
    ops += [
        ("experts up/gate", grouped_matmul(group_tokens, s.hidden, gate * f, m.experts, m.top_k,
                                           dtype=act, weight_dtype=c.prec.experts).scaled(
            1 / ep, "1/ep")),
        ("experts activation", elementwise(group_tokens / ep * m.top_k * f, kind, act)),
        ("experts down", grouped_matmul(group_tokens, f, s.hidden, m.experts, m.top_k,
                                        dtype=act, weight_dtype=c.prec.experts).scaled(
            1 / ep, "1/ep")),
    ]
    if ep > 1:
        ops.append(("ep combine all-to-all", c.place.comm("all-to-all", dispatch, "ep", ep)))
    if m.shared_experts:
        fs = m.shared_experts * m.shared_ffn / c.par.tp
        ops += [("shared experts up/gate", c.mm(T, s.hidden, gate * fs, "shared up/gate")),
                ("shared experts activation", elementwise(T * fs, kind, act)),
                ("shared experts down", c.mm(T, fs, s.hidden, "shared down"))]
    return ops


def layer_ops(c: _Ctx, moe_layer: bool, window: int | None, kind: str = "window"
              ) -> list[tuple[str, Cost]]:
    """One decoder layer's forward ops on this chip (pre-norm residual blocks)."""
    s, T, act = c.spec, c.tokens, c.prec.activations
    norm = elementwise(T * s.hidden, s.norm, act)
    add = elementwise(T * s.hidden, "add", act)
    return [("attention norm", norm), *_attention_ops(c, window, kind),
            *_chunk_attention(c, window, kind),
            *c.tp_all_reduce("attention"),
            ("attention residual", add), ("mlp norm", norm), *_mlp_ops(c, moe_layer),
            *c.tp_all_reduce("mlp", "all-gather" if moe_layer and c.par.ep > 1 else "all-reduce"),
            ("mlp residual", add)]


def build(spec: ModelSpec, phase: Phase, par: Parallel, prec: Precision, hw: Chip | System,
          impl: str = "flash", sram_bytes: float | None = None,
          block_q: int | None = None) -> list[OpCost]:
    """Every op of one micro-batch (or, `per_step`, of the whole step) on the slowest pipeline
    stage's chip, grouped by layer kind, work factor applied. Each micro-batch streams the
    stage's weights again: the step is (m + pp - 1) micro-batch times (analysis.py)."""
    _check(spec, phase, par)
    system = hw if isinstance(hw, System) else make_system(hw)
    chip = system.chip
    # optimizer arithmetic runs on vector units: the fp32 peak where the chip publishes one
    vector = "fp32" if "fp32" in chip.peaks else prec.activations
    micro = replace(phase, batch=phase.batch / par.microbatches)
    l2 = flash_tiling(chip, sram_bytes, block_q) if impl == "flash" else {}
    c = _Ctx(spec, micro, par, prec, place(par, system), impl, sram_bytes, block_q, vector,
             l2.get("l2_bytes"), l2.get("concurrent_blocks"), gemm_dtype(prec, chip))
    useful = 3.0 if phase.kind == "train" else 1.0  # model FLOPs exclude recomputation
    kinds: dict[tuple[bool, str, int | None], int] = {}
    for i in range(spec.layers):
        mixer, span = spec.layer_attention(i)
        key = (spec.is_moe_layer(i), "window" if mixer == "full" else mixer, span)
        kinds[key] = kinds.get(key, 0) + 1
    rows: list[OpCost] = []
    for (moe_layer, kind, window), count in kinds.items():
        group = ("moe" if moe_layer else "dense") + " layer" + (
            " (linear)" if kind == "linear" else f" ({kind} {window})" if window else "")
        forward = np.asarray(0.0)
        for name, cost in layer_ops(c, moe_layer, window, kind):
            per_stage = count // par.pp if count % par.pp == 0 else count / par.pp
            if name.endswith(BACKWARD):  # training's own backward of the op before it:
                useful_flops = 2 * forward  # the convention's 2x forward (the rest recomputes)
            else:
                forward = np.asarray(cost.total_flops)
                useful_flops = forward * (1.0 if name in SPLIT_BACKWARD else useful)
            rows.append(OpCost(group, name, per_stage, _step(cost, phase, name), useful_flops,
                               stream=_stream(name)))
    for name, cost in _edge_ops(c):  # the last stage holds the LM head: the slowest stage
        rows.append(OpCost("model", name, 1, _step(cost, phase, name),
                           np.asarray(cost.total_flops) * useful, model_share=1 / par.pp))
    rows += _step_ops(c)
    return rows


# Layer collectives are named "<block> <group> <kind>" (tp_all_reduce, the CP gather, the EP
# all-to-alls): the group is the stream the schedule overlaps (or not).
LAYER_STREAMS = ("tp", "cp", "ep")
BACKWARD = " backward"  # a training row that is the backward pass of the row before it
SPLIT_BACKWARD = ("attention", "mla attention")  # their backward is a row of its own


def _stream(name: str) -> str:
    return next((t for t in name.split() if t in LAYER_STREAMS), "")


def _step(cost: Cost, phase: Phase, name: str = "") -> Cost:
    """A forward op's cost over the whole step (backward and recomputation included). In
    training, attention's backward is its own row (FlashAttention-2's recomputing backward),
    so the forward counts once, twice with full recomputation."""
    if phase.kind == "train" and name.endswith(BACKWARD):
        return cost
    if phase.kind == "train" and name in SPLIT_BACKWARD:
        factor = 2.0 if phase.recompute else 1.0
    else:
        factor = phase.comm_factor if cost.link_bytes else phase.work_factor
    return cost if factor == 1 else cost.scaled(factor, "f")


def _edge_ops(c: _Ctx) -> list[tuple[str, Cost]]:
    """Embedding lookup, final norm and LM head (one pipeline stage each, averaged)."""
    s, act = c.spec, c.prec.activations
    # serving needs logits only for the newest token(s), which one CP rank holds; training
    # needs them everywhere
    # (chunked-prefill prompts: one logit each)
    logits_tokens = c.tokens - c.chunk_tokens + c.chunk_prompts \
        if c.phase.kind != "prefill" else c.seqs / c.par.cp
    # the tables keep their own dtype (Precision.tables): quantization leaves them out
    return [("embedding", embedding_lookup(c.tokens, s.hidden, c.prec.tables, act)),
            ("final norm", elementwise(logits_tokens * s.hidden, s.norm, act)),
            ("lm head", matmul(logits_tokens, s.hidden, s.vocab / c.par.tp, act, c.prec.tables,
                               name="lm head"))]


def _step_ops(c: _Ctx) -> list[OpCost]:
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
    params = local_params(c.spec, c.par)
    zero = c.par.zero_stage
    if c.par.dp > 1:
        rows += _gradient_sync(c, zero)
    shard = params / (c.par.dp if zero >= 1 else 1)  # ZeRO >= 1: each rank updates its shard
    rows.append(OpCost("model", "optimizer (adam)", 1, adam_update(
        shard, grad_dtype=c.prec.grads, weight_dtype=c.prec.weights,
        compute_dtype=c.vector_dtype), per_step=True))
    return rows


def _gradient_sync(c: _Ctx, zero: int) -> list[OpCost]:
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
    copies = dp if c.par.ep == 1 else dp * c.par.tp // c.par.ep
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
    _check(spec, phase, par)
    placement = Placement(domain_size or tp, {"tp": (link, domain_size)}, algo,
                          shares={"tp": float(link_share)})
    c = _Ctx(spec, phase, par, prec, placement, impl, sram_bytes, block_q, dtype)
    total = sum((cost for _, cost in layer_ops(c, False, None)), Cost())
    return replace(total, name=f"tensor-parallel layer (tp={tp})")
