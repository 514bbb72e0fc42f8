"""The one place the serving model gets a step's time from, and the steps it times.

`step_time` is the hook: the bound (`t_floor_s`: every resource of the step overlapped,
what an engine overlapping its ops reaches), or with `expect` the expected time
(`roofline.expect.expected_step`: each op at its achievable efficiency, plus launches), and
every serving figure follows.
The steps are the model graph's own phases (`models.step`): a
continuous-batching iteration is `mixed` (the decode step of the running batch carrying
chunked-prefill tokens through the same weight reads), a disaggregated decode pool runs
`decode`, a prefill pool runs prefill phases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..dtypes import dtype as lookup_dtype
from ..evaluate import evaluate
from ..hardware import Chip
from ..models import ModelAnalysis, ModelSpec, Parallel, Phase, Precision, analyze
from ..models.memory import MemoryFootprint, footprint, kv_bytes_per_token
from ..models.schedule import NOT_HIDDEN
from ..models.step import MemoryBudget, decode, mixed
from ..ops.collectives import collective
from .workload import Workload


def step_time(a: ModelAnalysis, expect: bool = False, chip: Chip | None = None,
              framework: str | None = None, imbalance: float = 1.0,
              straggle: Any = 1.0) -> Any:
    """Seconds per step: the analysis' floor (every resource of the step overlapped), or
    its expected time (`chip`: the chip it was analysed on, where that is not a catalog
    chip; `framework`: the serving engine whose fitted factor applies,
    roofline.expect.table.engine; `imbalance`: the hottest EP rank's expert load over the
    mean, on the expected expert GEMMs only; `straggle`: the busiest attention-DP rank's
    tokens over the mean, on the expected other ops).

    The bound is the floor, not the ops-one-after-another `t_lower_s`: a serving engine may
    run a step's compute-bound GEMMs (a prompt's chunk) beside its memory-bound decode
    attention (NanoFlow's nano-batches, Zhu et al., OSDI 2025, arXiv 2408.12757), and a
    measured run reaches below the sequential sum: NVIDIA's Llama-3.1-8B FP8 vLLM run on
    one H200 (2000x100, 64 clients; benchmarks/validation/silicon.py) steps in 9.74 ms
    with ~1150 prompt tokens and ~56 decoders, where their ops in sequence take 10.8 ms
    and the step's floor 8.9 ms."""
    if expect:
        from ..expect import expected_step

        return expected_step(a, chip, framework=framework, imbalance=imbalance,
                             straggle=straggle).t_s
    return a.t_floor_s


def collective_calls(a: ModelAnalysis) -> float:
    """Collectives one step calls: each communicating op once per layer it repeats in (a TP
    all-reduce after attention and after the MLP: 2 per layer; EP dispatch and combine)."""
    return float(sum(op.count for op in a.ops if op.name != NOT_HIDDEN
                     and any(np.any(np.asarray(v) > 0) for v in
                            (*op.cost.link_calls.values(), *op.cost.link_steps.values()))))


def activation_dtype(weights: str, chip: Chip) -> str:
    """Compute dtype when none is given: fp8 / fp4 weights run fp8 / fp4 GEMMs (W8A8, NVFP4
    W4A4, as the serving engines' quantized checkpoints do) where the chip has that peak;
    integer and 16-bit weights compute in bf16."""
    peak = lookup_dtype(weights).peak
    return peak if peak in ("fp8", "fp6", "fp4") and peak in chip.peaks else "bf16"


# The hottest EP rank's routed tokens over the mean with no load balancer: TensorRT-LLM's
# DeepSeek-R1 run on 32 GB200 (EP 32, 256 experts, 8 per rank) measured an imbalance ratio
# (max - mean) / mean of 1.564 averaged over layers and iterations, 0.11 with EPLB's 32
# redundant experts (TensorRT-LLM tech blog 4, "Scaling Expert Parallelism in
# TensorRT-LLM (Part 1)", Table 1: github.com/NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/
# blog4_Scaling_Expert_Parallelism_in_TensorRT-LLM.md)
UNBALANCED_EXPERTS = 2.564
# The attention-DP rank with the most tokens over the mean, where an in-flight-batching
# engine mixes one rank's prompt chunk into the others' decode steps: DeepSeek-V3 with
# attention DP 8 and EP 8 on 8 GB200 ran at an average per-iteration balance ratio (mean /
# max tokens over the ranks) of 54.11% with round-robin scheduling, 25,664 tokens/s against
# 34,140 once balanced (TensorRT-LLM tech blog 10, "ADP Balance Strategy": github.com/NVIDIA/
# TensorRT-LLM docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md)
ADP_STRAGGLE = 1 / 0.5411


def expert_imbalance(stated: float | None, par: Parallel) -> float:
    """The expected expert GEMMs' hottest-rank factor: 1 without EP, the stated one (EPLB's
    max / mean), else UNBALANCED_EXPERTS where attention-DP replicas feed the EP group.

    >>> expert_imbalance(None, Parallel(dp=8, ep=8)), expert_imbalance(1.2, Parallel(dp=8, ep=8))
    (2.564, 1.2)
    >>> expert_imbalance(None, Parallel(tp=8, ep=8)), expert_imbalance(2.0, Parallel(tp=8))
    (1.0, 1.0)
    """
    if par.ep <= 1:
        return 1.0
    if stated is not None:
        return stated
    return UNBALANCED_EXPERTS if par.dp > 1 else 1.0


def attention_dp_straggle(par: Parallel, phase: Phase) -> Any:
    """The busiest attention-DP rank's tokens over the mean in a step: ADP_STRAGGLE where
    attention-DP replicas feed one EP group (they wait for each other at every dispatch) and
    the step carries prompt chunks (per point of a sweep); 1 for a decode-only step (a
    disaggregated decode pool) or replicas that never meet.

    >>> from roofline.models.step import mixed
    >>> float(attention_dp_straggle(Parallel(dp=8, ep=8), mixed(8, 1024, 2048, 2048))) > 1.5
    True
    >>> float(attention_dp_straggle(Parallel(dp=8, ep=8), decode(8, 1024))), \\
    ...     float(attention_dp_straggle(Parallel(tp=8, ep=8), mixed(8, 1024, 2048, 2048)))
    (1.0, 1.0)
    """
    if par.dp <= 1 or par.ep <= 1:
        return 1.0
    chunks = np.asarray(phase.prefill_tokens, dtype=float) > 0
    return np.where(chunks, ADP_STRAGGLE, 1.0) if chunks.ndim else \
        (ADP_STRAGGLE if chunks else 1.0)


def draft_module(spec: ModelSpec) -> ModelSpec:
    """The one-layer draft a speculative step runs per draft token: a decoder layer of the
    target's own shape (an MoE layer for an MoE model, as DeepSeek-V3's MTP module is), with
    the target's embedding and LM head.

    >>> from roofline.models import load_model
    >>> d = draft_module(load_model("deepseek-r1"))
    >>> d.layers, d.moe.first_dense_layers
    (1, 0)
    """
    moe = replace(spec.moe, first_dense_layers=0, dense_layers=frozenset()) if spec.moe \
        else None
    return replace(spec, layers=1, moe=moe, sliding_layers=spec.sliding_layers[-1:],
                   chunked_layers=spec.chunked_layers[-1:],
                   linear_layers=spec.linear_layers[-1:])


@dataclass(frozen=True)
class Engine:
    """One instance: a model on tp·pp·dp chips of one kind, with its dtypes and memory."""

    spec: ModelSpec
    chip: Chip
    par: Parallel
    prec: Precision
    budget: MemoryBudget
    impl: str = "flash"
    expect: bool = False  # step times are expected times, not bounds
    framework: str | None = None  # the engine of the expected times (vllm, sglang, ...)
    max_seqs: int | None = None  # the engine's cap on running sequences (runtime.Runtime)
    chunk: float | None = None  # the named engine's prefill chunk (None: the plan searches)
    # the hottest EP rank's expert load over the mean (EPLB's max / mean): the expected expert
    # GEMMs run that much longer; never the bound (an even routing is possible)
    imbalance: float = 1.0

    def step_time(self, a: ModelAnalysis) -> Any:
        """The step's bound, or its expected time with the engine's per-iteration cost
        (runtime.IterationCost: host scheduling per iteration and per sequence of each
        replica's scheduler, each collective's call)."""
        t = step_time(a, self.expect, self.chip, self.framework, self.imbalance,
                      attention_dp_straggle(self.par, a.phase))
        if not self.expect:
            return t
        from ..expect.step import collective_kernel_s
        t = t + self.drafting_s(a)
        from .runtime import iteration_cost

        per_rank = np.asarray(a.phase.batch, dtype=float) * self.par.pp / self.par.dp
        # a dense graph-replayed step already charges each collective its kernel boundary
        # (step_kernel_s), which holds what the per-collective cost adds to a graph launch
        return iteration_cost(self.framework).seconds(t, a.t_lower_s, per_rank,
                                                      collective_calls(a),
                                                      collective_kernel_s(a, self.chip))

    def drafting_s(self, a: ModelAnalysis) -> Any:
        """The expected time a speculative step spends drafting (0 without drafts): k passes
        of a one-layer draft module over each sequence's newest token, each pass its layer,
        the embedding and the shared LM head (DeepSeek's MTP module chained k times, as
        TensorRT-LLM's MTP-Eagle and SGLang's NextN run it; an EAGLE head is one decoder
        layer too: TensorRT-LLM tech blog 2, github.com/NVIDIA/TensorRT-LLM docs/source/
        blogs/tech_blog/blog2_DeepSeek_R1_MTP_Implementation_and_Optimization.md). The
        bound takes drafts as free."""
        k = np.asarray(a.phase.q_len, dtype=float) - 1  # a decode step's drafts per sequence
        if a.phase.kind != "decode" or not np.any(k > 0):
            return 0.0
        draft = analyze(draft_module(self.spec), self.chip,
                        decode(a.phase.batch, np.asarray(a.phase.kv_len) - a.phase.q_len),
                        self.par, self.prec, impl=self.impl, budget=self.budget)
        return k * step_time(draft, True, self.chip, self.framework, self.imbalance)

    @property
    def chips(self) -> int:
        return self.par.chips

    @property
    def unit(self) -> int:
        """Running sequences come in multiples of dp (each replica the same) times pp (one
        micro-batch per pipeline stage in flight)."""
        return self.par.dp * self.par.pp

    def analyze(self, phase: Phase) -> ModelAnalysis:
        return analyze(self.spec, self.chip, phase, self.par, self.prec, impl=self.impl,
                       budget=self.budget)

    def footprint(self, w: Workload) -> MemoryFootprint:
        """Per chip: the weights, then per sequence its paged KV blocks (and activations,
        recurrent state), within the memory budget; a shared prefix-cache hit is held
        once."""
        device = self.chip.memory[0].capacity_bytes or 0.0
        shared = w.shared_prefix_tokens * float(kv_bytes_per_token(self.spec, self.par,
                                                                   self.prec))
        budget = MemoryBudget(self.budget.util, self.budget.reserve_bytes + shared)
        # TensorRT-LLM's default capacity scheduler (GUARANTEED_NO_EVICT) admits a request
        # only with KV blocks for its prompt plus its maximum output reserved
        # (https://nvidia.github.io/TensorRT-LLM/performance/performance-tuning-guide/
        # useful-runtime-flags.html): its expected running batch is that many, not the
        # mean context's (a bound keeps the mean: an engine may run MAX_UTILIZATION)
        reserve = self.expect and self.framework == "tensorrt-llm"
        phase = decode(self.par.dp, w.kv_tokens_per_sequence(reserve), w.verify_len)
        return footprint(self.spec, phase, self.par, self.prec, budget.usable(device))

    def max_running(self, w: Workload) -> int:
        """Most sequences the instance can hold at once (`footprint`), at most the engine's
        cap."""
        fp = self.footprint(w)
        # (the cap is per engine process: one per data-parallel replica)
        most = min(float(np.asarray(fp.max_batch)),
                   float(self.max_seqs * self.par.dp if self.max_seqs else 1e7))
        return int(most // self.unit * self.unit)

    def iteration(self, running: Any, w: Workload, prefill_tokens: Any) -> ModelAnalysis:
        """A continuous-batching iteration of `running` sequences (all micro-batches)."""
        batch = np.asarray(running, dtype=float) / self.par.pp
        if not np.any(prefill_tokens):
            return self.analyze(decode(batch, w.decode_context, w.verify_len))
        return self.analyze(mixed(batch, w.decode_context, np.asarray(prefill_tokens) /
                                  self.par.pp, w.input_len, w.verify_len,
                                  cached=w.input_len - w.uncached_len))

    def prefill(self, prompts: Any, w: Workload) -> ModelAnalysis:
        """A prefill pool's forward pass over `prompts` prompts (uncached tokens only)."""
        return self.analyze(Phase("prefill", np.asarray(prompts, dtype=float),
                                  w.uncached_len, w.input_len))

    def kv_transfer_s(self, w: Workload) -> float:
        """Moving one request's KV cache from this (prefill) instance to a decode instance:
        one copy of the cache, spread evenly over this instance's chips, each sending its part
        over its scale-out link (the scale-up link where the chip has no scale-out)."""
        one_copy = w.input_len * float(kv_bytes_per_token(self.spec, Parallel(), self.prec))
        link = "scale-out" if "scale-out" in self.chip.links else "scale-up"
        cost = collective("send-recv", one_copy / (self.par.tp * self.par.pp), 2, link=link)
        return float(evaluate(cost, self.chip).t_lower_s)
