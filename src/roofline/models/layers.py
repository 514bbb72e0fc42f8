"""The ops of one decoder layer (and the model's edges) on one chip: the token mixer
(attention, MLA, chunked or sliding-window attention, linear attention), the MLP or MoE block,
the TP / CP / EP collectives between them, and the embedding, final norm and LM head.
`graph.build` counts them per layer kind and per step."""

from __future__ import annotations

import functools
from dataclasses import field
from typing import Any

from ..cost import Cost
from ..derivation import Sym, Term, any_true
from ..dtypes import dtype as lookup_dtype
from ..lazy import cached_property
from ..ops.attention import attention
from ..ops.elementwise import elementwise
from ..ops.embedding import embedding_lookup
from ..ops.linear_attention import linear_attention
from ..ops.matmul import matmul
from ..records import record
from .spec import ModelSpec
from .step import Parallel, Phase, Placement, Precision, kv_bytes_per_token_per_layer

# The ops only some models run (MLA, MoE, a training step's backward, the EP copies) are
# imported where those models reach them: a dense model's start loads none of them.

# Layer collectives are named "<block> <group> <kind>" (tp_all_reduce, the CP gather, the EP
# all-to-alls): the group is the stream the schedule overlaps (or not).
LAYER_STREAMS = ("tp", "cp", "ep")
BACKWARD = " backward"  # a training row that is the backward pass of the row before it
SPLIT_BACKWARD = ("attention", "mla attention")  # their backward is a row of its own
# each block opens with the residual add of the block before fused with its norm (one kernel:
# ops.elementwise "add_rmsnorm"); training splits them over the TP ranks' tokens (Megatron
# sequence parallelism, Korthikanti et al. 2022, as models/memory.py keeps activations), and
# so does serving an RMSNorm model (Ctx.norm_split). The first layer's norm has no add to
# fuse (FIRST_NORM, one of the model's edge ops); the last layer's add fuses with the final
# norm (FINAL_NORM).
NORMS = ("residual + attention norm", "residual + mlp norm")
FIRST_NORM = "first norm (no add)"
FINAL_NORM = "residual + final norm"
SPLIT_NORMS = (*NORMS, FIRST_NORM)
# ops every TP rank runs whole on the same tokens (no sequence parallelism): the model's
# FLOPs count them once, 1/tp on each rank (Ctx.model_share)
TP_REPLICATED = frozenset({*SPLIT_NORMS, "router", "q down projection", "kv down projection",
                           FINAL_NORM})


@record(eq=False)  # a step record: not frozen (roofline.models)
class Ctx:
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
    gemm_dtype: str | None = None  # the weight GEMMs' compute dtype (gemm_dtype())

    # the layer's local sizes, worked out once here (an array over a sweep)
    seqs: Any = field(init=False)  # sequences on this chip
    q_local: Any = field(init=False)  # query tokens per sequence on this chip (CP splits)
    chunk_tokens: Any = field(init=False)  # chunked-prefill prompt tokens on this chip
    chunk_prompts: Any = field(init=False)  # prompts' worth of prefill they are (fractional)
    tokens: Any = field(init=False)  # tokens through this chip's layers per step
    act_bytes: float = field(init=False)
    heads_local: float = field(init=False)
    kv_heads_local: float = field(init=False)  # fewer KV heads than TP ranks: each keeps one

    def __post_init__(self) -> None:
        phase, par = self.phase, self.par
        self.seqs = phase.batch / par.dp
        self.q_local = phase.q_len / par.cp
        self.chunk_tokens = phase.prefill_tokens / (par.dp * par.microbatches)
        self.chunk_prompts = self.chunk_tokens / phase.prefill_q_len
        self.tokens = self.seqs * self.q_local + self.chunk_tokens
        self.act_bytes = lookup_dtype(self.prec.activations).bytes
        self.heads_local = self.spec.heads / par.tp
        self.kv_heads_local = max(1.0, self.spec.kv_heads / par.tp)

    @cached_property
    def model_shares(self) -> dict[str, float]:
        """Per op name, the share of its FLOPs on this rank that is the model's own work, not
        a repeat of another TP rank's (1 for the ops not named): 1/tp for ops every rank runs
        whole; for the QKV projection and the q / k norm, past tp = kv_heads each rank's K/V
        heads are shared with others."""
        tp = self.par.tp
        shares = dict.fromkeys(TP_REPLICATED, 1 / tp)
        if self.norm_split > 1:  # sequence parallelism: each rank its own tokens (serving's
            for name in SPLIT_NORMS:  # padding to a multiple of tp, < tp tokens, counts too)
                del shares[name]
        if self.kv_heads_local * tp > self.spec.kv_heads:
            gate = self.heads_local if self.spec.attn_output_gate else 0
            shares["qkv projection"] = (self.heads_local + 2 * self.spec.kv_heads / tp + gate) / (
                self.heads_local + 2 * self.kv_heads_local + gate)
            shares["q / k norm"] = (self.heads_local + self.spec.kv_heads / tp) / (
                self.heads_local + self.kv_heads_local)
        return shares

    @cached_property
    def norm_split(self) -> int:
        """The TP ranks a block's norm is split over (sequence parallelism), 1 where every
        rank runs it whole. Training: Megatron's (Korthikanti et al. 2022). Serving: vLLM's
        SequenceParallelismPass (vllm-project/vllm vllm/compilation/passes/fusion/
        sequence_parallelism.py: all-reduce + fused_add_rms_norm becomes reduce-scatter,
        the norm on 1/tp of the tokens, all-gather, at every batch size in full-graph mode,
        which pads the tokens to a multiple of tp; its patterns match RMSNorm only). The
        ring all-reduce's bytes are the reduce-scatter's and all-gather's, so the TP
        collective stays as it is."""
        if self.par.tp > 1 and (self.phase.kind == "train" or self.spec.norm == "rmsnorm"):
            return self.par.tp
        return 1

    @cached_property
    def norm_tokens(self) -> Any:
        """Tokens through each rank's block norm: all of them, 1/tp in training, and in
        serving 1/tp rounded up (vLLM pads the tokens to a multiple of tp)."""
        split, T = self.norm_split, self.tokens
        if split == 1:
            return T
        return T / split if self.phase.kind == "train" else -(-T // split)

    def mm(self, m: float, k: float, n: float, name: str) -> Cost:
        """A weight GEMM: activations in, the weights' dtype, the GEMM compute dtype's peak
        (fp8 training runs these in fp8; attention and elementwise stay in bf16)."""
        # by position: keywords through the op's wrapper cost ~1% of a whole-model estimate
        return matmul(m, k, n, self.prec.activations, self.prec.weights, None,
                      self.gemm_dtype or self.prec.gemm, name)

    def tp_all_reduce(self, block: str, kind: str = "all-reduce") -> list[tuple[str, Cost]]:
        """The TP group's collective closing a block: an all-reduce of partial sums, or an
        all-gather where the ranks hold disjoint tokens (EP'd experts, sequence-split)."""
        if self.par.tp == 1:
            return []
        nbytes = self.tokens * self.spec.hidden * self.act_bytes
        return [(f"{block} tp {kind}", self.place.comm(kind, nbytes, "tp", self.par.tp))]


def _attention_ops(c: Ctx, window: int | None, kind: str = "window"
                   ) -> list[tuple[str, Cost]]:
    """The token mixer's ops: attention (full, sliding `window`, or chunked local with chunk
    `window` when kind is "chunk"), or a linear-attention mixer (kind "linear")."""
    s, T, kv_len = c.spec, c.tokens, c.phase.kv_len
    if kind == "linear":
        return _linear_ops(c)
    common: dict[str, Any] = dict(dtype=c.prec.activations, kv_dtype=c.prec.kv,
                                  sram_bytes=c.sram_bytes, block_q=c.block_q,
                                  l2_bytes=c.l2_bytes)
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
        if s.qk_norm:  # Qwen3: an RMSNorm over each head of q and k before the rotary (one
            # kernel: TensorRT-LLM's fused qk-norm + rope; vLLM's Qwen3Attention runs q_norm
            # and k_norm on the projection's output, vllm/model_executor/models/qwen3.py)
            ops.append(("q / k norm", elementwise(T * (c.heads_local + c.kv_heads_local) * d,
                                                  "rmsnorm", c.prec.activations)))
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
    from ..ops.mla import mla_attention
    from ..ops.moe import batched_matmul

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


def _attention_backward(c: Ctx, heads: float, kv_heads: float, d: float, dv: float,
                        window: int | None = None, chunk: int | None = None,
                        name: str = "attention") -> list[tuple[str, Cost]]:
    """Training: attention's backward as its own row (FlashAttention-2's, which recomputes S
    and P: 2.5x the forward's GEMMs with its own IO), not "2x the forward"."""
    if c.phase.kind != "train":
        return []
    from ..ops.attention_backward import attention_backward

    return [(name + BACKWARD, _cp_share(c, attention_backward(
        c.seqs, c.phase.q_len, c.phase.kv_len, heads, kv_heads, d, dv, window=window,
        chunk=chunk, dtype=c.prec.activations, sram_bytes=c.sram_bytes, block_kv=c.block_q,
        l2_bytes=c.l2_bytes)))]


def _linear_ops(c: Ctx) -> list[tuple[str, Cost]]:
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


def _chunk_attention(c: Ctx, window: int | None, kind: str = "window"
                     ) -> list[tuple[str, Cost]]:
    """The prefill attention of a decode step's chunked-prefill tokens (Phase.prefill_tokens):
    the same attention op as a prefill's, for chunk_prompts prompts (MLA: the expanded form,
    as a prefill runs it; its projections are the step's token-wise GEMMs)."""
    if not any_true(c.phase.prefill_tokens != 0):
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
        from ..ops.mla import mla_attention

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


def _cp_share(c: Ctx, cost: Cost) -> Cost:
    """One CP rank's share of the sequence's attention: load-balanced (zigzag) chunks give
    every rank 1/cp of the causal score pairs, not the last chunk's."""
    return cost if c.par.cp == 1 else cost.scaled(1 / c.par.cp, "1/cp")


def _impl(c: Ctx) -> str:
    return "decode" if c.phase.kind == "decode" and c.impl == "flash" else c.impl


def _mlp_ops(c: Ctx, moe_layer: bool) -> list[tuple[str, Cost]]:
    s, T, act = c.spec, c.tokens, c.prec.activations
    gate = 2 if s.gated_mlp else 1
    kind = "swiglu" if s.gated_mlp else "gelu"
    if not moe_layer:
        f = s.ffn / c.par.tp
        return [*_up_gate(c, "mlp", c.mm(T, s.hidden, gate * f, "mlp up/gate"), T * f, kind),
                ("mlp down", c.mm(T, f, s.hidden, "mlp down"))]
    from ..ops.moe import grouped_matmul

    m = s.moe
    assert m is not None
    ep, tp, etp = c.par.ep, c.par.tp, c.par.expert_tp
    # A chip holds E/ep experts, 1/etp of each (Parallel.expert_tp: without EP 1/tp of every
    # expert and its replica's own tokens; with EP E/ep whole experts or, with moe_tp, their
    # slices), and serves every token its group of ep·etp ranks routes to them: T·ep·etp/tp
    # tokens (TP ranks hold the same tokens, so each dispatches 1/tp of them).
    f = m.expert_ffn / etp
    group_tokens = T if ep == 1 else T * ep * etp / tp
    # elements each way: every (token, expert) pair, to each of the etp slices of its expert
    # with EP (each slice needs the token; the combine returns etp partial sums)
    tokens_out = T / tp * m.top_k * s.hidden * (etp if ep > 1 else 1)
    dispatch = tokens_out * lookup_dtype(c.prec.ep_dispatch).bytes
    ops: list[tuple[str, Cost]] = [("router", c.mm(T, s.hidden, m.experts, "router"))]
    if ep > 1:
        ops.append(("ep dispatch all-to-all", _ep_all_to_all(c, dispatch)))
    # one EP rank's share: the slowest rank's floor for any routing, the uniform spread's
    # mean in the expected time (ops.moe)
    # the experts are weight GEMMs too: a given GEMM compute dtype (fp8 training: Transformer
    # Engine's GroupedLinear, MaxText's fp8 quantization) runs them at its peak
    up = grouped_matmul(group_tokens, s.hidden, gate * f, m.experts, m.top_k, dtype=act,
                        weight_dtype=c.prec.experts, compute_dtype=c.prec.matmul, ranks=ep)
    ops += [
        *_up_gate(c, "experts", up, group_tokens / ep * m.top_k * f, kind),
        ("experts down", grouped_matmul(group_tokens, f, s.hidden, m.experts, m.top_k,
                                        dtype=act, weight_dtype=c.prec.experts,
                                        compute_dtype=c.prec.matmul, ranks=ep)),
    ]
    if ep > 1:
        ops.append(("ep combine all-to-all", _ep_all_to_all(c, tokens_out * c.act_bytes)))
    if m.shared_experts:
        fs = m.shared_experts * m.shared_ffn / c.par.tp
        ops += [*_up_gate(c, "shared experts", c.mm(T, s.hidden, gate * fs, "shared up/gate"),
                          T * fs, kind),
                ("shared experts down", c.mm(T, fs, s.hidden, "shared down"))]
    return ops


def _up_gate(c: Ctx, block: str, gemm: Cost, n: Any, kind: str) -> list[tuple[str, Cost]]:
    """The up/gate GEMM and its activation over `n` elements. Serving a gated MLP runs
    SwiGLU in the GEMM's epilogue: the GEMM writes silu(gate)·up, n elements, not the 2n of
    gate and up, and no activation kernel reads them back (CUTLASS examples/45_dual_gemm/
    thread/left_silu_and_mul.h line 65, LeftSiLUAndMul on the two accumulators, bf16 / fp16;
    TensorRT-LLM cpp/tensorrt_llm/kernels/cutlass_kernels/fused_gated_gemm/
    fused_gated_gemm_kernel_template_sm90.h line 55, DeviceGemmGatedSm90 with a SiLu
    activation, fp8; its MoE FC1, moe_gemm/moe_gemm_template_dispatch.h use_fused_moe ->
    sm80_generic_fused_moe_gemm_kernelLauncher with EpilogueOpDefaultSilu, fp16 / bf16).
    Training keeps the activation a kernel of its own: its backward reads the gate and up
    outputs, so the forward writes them anyway (Liger-Kernel's swiglu, ops.elementwise)."""
    activation = elementwise(n, kind, c.prec.activations)
    if c.phase.kind == "train" or kind != "swiglu":
        return [(f"{block} up/gate", gemm), (f"{block} activation", activation)]
    saved = n * c.act_bytes  # the gate half of the GEMM's output
    runs = None if gemm.runs is None else Cost(  # what the expected time reads (MoE)
        flops=gemm.runs.flops, bytes={"hbm": gemm.runs.bytes["hbm"] - saved},
        name=f"{gemm.runs.name} + swiglu epilogue", vector_flops=activation.vector_flops,
        special_ops=activation.special_ops, op=gemm.op)
    fused = Cost(flops=gemm.flops, bytes={"hbm": gemm.bytes["hbm"] - saved},
                 steps=functools.partial(_epilogue_steps, gemm, activation, saved),
                 name=f"{gemm.name} + swiglu epilogue", vector_flops=activation.vector_flops,
                 special_ops=activation.special_ops, runs=runs, op=gemm.op)
    return [(f"{block} up/gate", fused)]


def _epilogue_steps(gemm: Cost, activation: Cost, saved: Any) -> tuple[Term, ...]:
    """The fused GEMM's derivation: the GEMM's, the activation's arithmetic, the bytes."""
    flops = tuple(Term(f"swiglu epilogue: {t.name}", t.expr, t.repeat)
                  for t in activation.terms if "bytes" not in t.name)
    hbm = Sym("GEMM HBM bytes", gemm.bytes["hbm"]) - Sym("gate half never written", saved)
    return (*gemm.terms, *flops, Term("HBM bytes, swiglu in the epilogue", hbm))

def _ep_all_to_all(c: Ctx, nbytes: Any) -> Cost:
    """The EP group's dispatch (or combine) of `nbytes` (every token once per routed expert),
    as the expert kernels send it: one copy per destination rank, and across scale-up
    domains one per destination domain (`one_copy_per_destination`), under the model's
    group-limited routing where it has one."""
    cost = c.place.comm("all-to-all", nbytes, "ep", c.par.ep)
    _, in_domain = c.place.links["ep"]
    moe = c.spec.moe
    if moe is None:
        return cost
    from ..ops.collectives.expert_parallel import one_copy_per_destination

    return one_copy_per_destination(cost, moe.top_k, c.par.ep, in_domain, moe.experts,
                                    moe.groups, moe.topk_groups)


def layer_ops(c: Ctx, moe_layer: bool, window: int | None, kind: str = "window"
              ) -> list[tuple[str, Cost]]:
    """One decoder layer's forward ops on this chip (pre-norm residual blocks). Each block
    opens with one fused kernel, the residual add of the block before and its own norm
    (vLLM's fused_add_rms_norm); the first layer's has no add to fuse and the last layer's
    add fuses with the final norm (edge_ops: FIRST_NORM, FINAL_NORM).

    Under TP each rank runs the norm on 1/tp of the tokens where a published stack does
    (Ctx.norm_split): training (Megatron's sequence parallelism) and serving an RMSNorm model
    (vLLM's SequenceParallelismPass, opt-in, tokens padded to a multiple of tp, decode
    included). Its patterns match RMSNorm only and no other engine's split was found to
    cite, so a LayerNorm model's serving norms stay whole on every rank, and so does the
    final norm (on the logits' tokens only). Norms fused into the all-reduce kernel itself
    (TensorRT-LLM / FlashInfer allreduce_fusion) are not modelled.

    The norm is not fused into the next linear's prologue: the one published kernel found
    (aws-neuron/nki-samples src/nki_samples/reference/allocated_fused_linear.py line 17,
    allocated_fused_rms_norm_qkv: RMSNorm(hidden) @ wQKV) is Trainium's, takes no residual
    add and at most 512 output columns, and no GPU engine ships one; it would save one pass
    of the tokens a block.

    Serving a gated MLP runs SwiGLU in the up/gate GEMM's epilogue (`_up_gate`: CUTLASS's
    dual GEMM, TensorRT-LLM's fused gated GEMM and fused MoE FC1); training keeps it a fused
    kernel of its own (two inputs read, one output written: the backward needs the inputs)."""
    s, T = c.spec, c.norm_tokens
    norm = elementwise(T * s.hidden, "add_" + s.norm, c.prec.activations)
    return [(NORMS[0], norm), *_attention_ops(c, window, kind),
            *_chunk_attention(c, window, kind),
            *c.tp_all_reduce("attention"),
            (NORMS[1], norm), *_mlp_ops(c, moe_layer),
            *c.tp_all_reduce("mlp", "all-gather" if moe_layer and c.par.ep > 1 else "all-reduce")]


def edge_ops(c: Ctx, first_norm: bool = True) -> list[tuple[str, Cost]]:
    """Embedding lookup, the first layer's norm (no residual add to fuse: `first_norm`, the
    layer rows then count one attention norm less), the last layer's residual add fused with
    the final norm, and the LM head (one pipeline stage each, averaged)."""
    s, act = c.spec, c.prec.activations
    # serving needs logits only for the newest token(s), which one CP rank holds; training
    # needs them everywhere
    # (chunked-prefill prompts: one logit each)
    logits_tokens = c.tokens - c.chunk_tokens + c.chunk_prompts \
        if c.phase.kind != "prefill" else c.seqs / c.par.cp
    # the tables keep their own dtype (Precision.tables): quantization leaves them out
    first = [(FIRST_NORM, elementwise(c.norm_tokens * s.hidden, s.norm, act))] \
        if first_norm else []
    return [("embedding", embedding_lookup(c.tokens, s.hidden, c.prec.tables, act)), *first,
            # the last layer's residual add fused with the final norm, one kernel of 4 passes
            # (vllm-project/vllm vllm/model_executor/models/llama.py, LlamaModel.forward:
            # self.norm(hidden_states, residual), fused_add_rms_norm)
            (FINAL_NORM, elementwise(logits_tokens * s.hidden, "add_" + s.norm, act)),
            ("lm head", matmul(logits_tokens, s.hidden, s.vocab / c.par.tp, act, c.prec.tables,
                               None, None, "lm head"))]
