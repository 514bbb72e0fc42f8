"""The expected time of a whole step: each op of the bound's schedule at its own expected
pace (`op.expected`: derated roofs, tile waves, its launch), on the same critical path.

The bound's step (models.analysis / models.schedule) already places every op: in series,
overlapped (only its exposed share counts) or in the pipeline's bubble. Each op's share of
that path is stretched by its own expected / bound ratio, so exposed communication, the
pipeline bubble and kernel launches all follow the schedule the bound assumed; where a link
is busier than the path (the "communication not hidden" line), the step is at least that
link's whole traffic at the link's efficiency.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import Num, any_true, maximum, ratio, unwrap
from ..dtypes import dtype as lookup_dtype
from ..hardware import Chip, System, load_chip
from ..models import ModelAnalysis
from ..models.schedule import RUN
from ..opid import Attention, Gemm
from ..serialize import jsonable
from .interval import STEP_KINDS, spread
from .kernels import framework_attention
from .op import dequant_family, expected_from, figure_lookups, source
from .protocols import hardware_class
from .table import engine, lookup, lookup_framework
from .utilization import utilizations

if TYPE_CHECKING:
    from ..measure.calibration import Calibration


# Engines whose tensor-parallel all-reduce is the library's (NCCL's pick, captured in the
# CUDA graph), not a custom one-shot / two-shot kernel: gpt-fast's tp.py hooks
# torch.distributed._functional_collectives.all_reduce on an "nccl" process group
# (pytorch-labs/gpt-fast tp.py), as torchao's copy of its generate.py does
NCCL_ONLY = ("gpt-fast",)


def library_all_reduce(chip: Chip, engine_name: str | None, tp: int) -> bool:
    """Whether an engine's tensor-parallel all-reduce over `tp` ranks of `chip` is the
    library's (NCCL's pick, captured in the graph) rather than its own one- / two-shot
    kernel: gpt-fast's always; where the chip's GPUs talk over PCIe alone, TensorRT-LLM's at
    any `tp` (it falls back to NCCL without NVLink between the ranks: NVIDIA/TensorRT-LLM
    cpp/tensorrt_llm/thop/allreduceOp.cpp `ifFallbackToNCCL`, "NVLINK not supported"; the
    TensorRT plugin cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp likewise) and
    the other engines' beyond 2 ranks (vLLM's custom all-reduce, which SGLang copies, is off
    on "more than two PCIe-only GPUs": vllm/distributed/device_communicators/
    custom_all_reduce.py)."""
    if engine_name in NCCL_ONLY:
        return True
    link = chip.links.get("scale-up")
    if link is None or hardware_class(chip, "scale-up") != "pci":
        return False
    return engine_name == "tensorrt-llm" or tp > 2


@dataclass(frozen=True, eq=False)
class ExpectedStep:
    """A step's expected time beside its bound (per chip, like the analysis)."""

    analysis: ModelAnalysis
    t_s: Num
    launch_s: Num  # overheads on the critical path (launches, collective calls)
    efficiency: dict[str, Num]  # resource -> achievable / roof (time-weighted over the step)
    sources: dict[str, str]
    engine: str | None = None  # the serving / generation engine whose factors it took

    @property
    def ttft_s(self) -> Num | None:
        return self.t_s if self.analysis.phase.kind == "prefill" else None

    @property
    def tpot_s(self) -> Num | None:
        a = self.analysis
        return unwrap(np.asarray(self.t_s) / a.phase.q_len) if a.phase.kind == "decode" \
            else None

    @property
    def tokens_per_s(self) -> Num:
        a = self.analysis
        return unwrap(a.phase.batch * a.phase.q_len / np.asarray(self.t_s))

    @property
    def flops_per_s(self) -> Num:
        return unwrap(np.asarray(self.analysis.flops) / np.asarray(self.t_s))

    @property
    def mfu(self) -> Num:
        a = self.analysis
        return unwrap(np.asarray(a.mfu) * np.asarray(a.t_lower_s) / np.asarray(self.t_s))

    @property
    def kind(self) -> str:
        """The kind of published rows whose spread gives the 80% interval (train, decode,
        prefill; a continuous-batching iteration: serving)."""
        return STEP_KINDS[self.analysis.phase.kind]

    def figures(self) -> dict[str, Any]:
        """Every expected figure with its 80% interval (`X_p10`, `X_p90`), as numbers or
        arrays (a sweep's)."""
        return spread({
            "t_s": self.t_s, "bound_t_s": self.analysis.t_lower_s, "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s, "tokens_per_s": self.tokens_per_s,
            "flops_per_s": self.flops_per_s, "mfu": self.mfu, "overhead_s": self.launch_s,
            "efficiency": self.efficiency, "sources": self.sources, "engine": self.engine},
            self.analysis.t_lower_s, self.kind)

    def to_dict(self) -> dict[str, Any]:
        return dict(jsonable(self.figures()))

    def interval(self, figure: str = "t_s") -> tuple[Num, Num]:
        """The 10th and 90th percentile of what `figure` (t_s, tpot_s, tokens_per_s, ...)
        will measure.

        >>> from roofline.models import analyze, decode
        >>> e = expected_step(analyze("llama-3-8b", "h100", decode(batch=8, context=4096)))
        >>> lo, hi = e.interval("tpot_s")
        >>> bool(e.analysis.t_lower_s <= lo <= e.tpot_s <= hi)
        True
        """
        data = self.figures()
        return data[f"{figure}_p10"], data[f"{figure}_p90"]


def expected_step(a: ModelAnalysis, hw: Chip | System | str | None = None,
                  calibration: Calibration | None = None, cuda_graphs: bool | None = None,
                  framework: str | None = None, imbalance: float = 1.0,
                  prefill_chunk: Num | None = None, dynamic_chunks: bool = False,
                  straggle: Any = 1.0) -> ExpectedStep:
    """The expected time of the analysed step (`hw`: the chip it was analysed on, needed
    when that is a chip file rather than a catalog chip). `cuda_graphs` (default: for decode
    steps, as vLLM, SGLang and TensorRT-LLM capture them) sets the per-kernel launch cost;
    `framework.<phase>` the share of the step the framework leaves to the kernels, or
    `framework.<phase>.<engine>` for a named serving engine (`table.engine`: vllm, sglang,
    tensorrt-llm, gpt-fast, ...) where one is fitted. `imbalance` (>= 1): the hottest
    expert-parallel rank's routed tokens over the mean (EPLB's max / mean): the routed-expert
    GEMMs wait for that rank (never the bound's: an even routing is possible). `straggle`
    (>= 1): the busiest attention-DP rank's own tokens over the mean, on every other op. Either
    lengthens only an op's token work (math, vector, special functions), not its weight stream
    (`slowest_rank`: a weight-streaming GEMM reads each resident expert once, whatever its
    token count).
    `prefill_chunk` (a pipelined prefill: pp > 1): the tokens of each chunk one prompt
    passes through the stages in (its whole length: no chunking), `dynamic_chunks` whether
    the engine shrinks later chunks to hold the first one's time (`pipeline_fill`); None
    times the pipeline as full, as the bound does.

    >>> from roofline.models import analyze, decode
    >>> e = expected_step(analyze("llama-3-8b", "h100", decode(batch=1, context=1024)))
    >>> bool(e.t_s >= e.analysis.t_lower_s)
    True
    """
    chip = load_chip(hw if hw is not None else a.hardware)
    kind = a.phase.kind  # train, prefill, decode, mixed (a continuous-batching iteration)
    # a training step bounded under no named schedule has the best published one as its
    # bound; the forecast times what the frameworks run (schedule.RUN), as it was fitted
    run = a.under(RUN) if kind == "train" and not a.schedule_named else a
    graphs = kind in ("decode", "mixed") if cuda_graphs is None else cuda_graphs
    looked = figure_lookups(chip, calibration, step=True)
    figs = looked.figs
    sources: dict[str, str] = {}
    total: Any = 0.0
    overhead: Any = 0.0
    by_resource: dict[str, list[Any]] = {}
    path: Any = 0.0  # the bound's critical path, without the line below
    quadratic: Any = 0.0  # what attention adds to `total`: it grows with the prefix
    core = run.parts.core  # the bound's rows, their estimates and their share of the path
    times = core.times
    rows = run.parts.rows
    utils = utilizations([row.cost for row in rows], chip)  # per kind of op, in one pass
    hbm_eff = lookup(figs, "hbm")[1].value
    # a dense model's graph-replayed step (decode, continuous batching): each kernel's fixed
    # cost on its own (step_kernel_s) and, with it, each op streaming off HBM at its HBM
    # figure, outside the framework factor (`streamed`). An MoE step keeps the factor over
    # the whole step, with the graph launch: its engines' routing, token permutation and
    # per-expert kernels are what the factor was fitted to
    split = graph_split(a, graphs)
    streamed: Any = 0.0
    # a training framework's own attention kernel where it is not the architecture's default
    attention_kernel = framework_attention(framework, chip) if kind == "train" else None
    name = engine(framework) if framework else None
    nccl = library_all_reduce(chip, name, a.parallel.tp)  # its collectives: the library's pick
    computed: Any = 0.0  # of it, the ops on neither HBM nor a link: tensor-core-bound work
    for row, est, lower, util in zip(rows, core.ests, times.critical_s, utils, strict=True):
        path = path + lower
        library = nccl and graphs and bool(row.cost.link_calls or row.cost.link_steps)
        one = expected_from(row.cost, chip, looked, est, util,
                            cuda_graphs=graphs and not library, in_graph=library,
                            kernel=attention_kernel if isinstance(row.cost.op, Attention)
                            else None,
                            dequant=weight_only(row.cost),
                            graph_kernel="step_kernel_s" if split else "graph_launch_s")
        sources.update(one.sources)
        bound_one = one.bound.t_lower_s
        # the routed experts' GEMMs (typed: a grouped GEMM) wait for the hottest EP rank, the
        # other ops for the attention-DP rank with the most tokens
        routed = isinstance(row.cost.op, Gemm) and row.cost.op.grouped
        hot = slowest_rank(one.derated.time_s, imbalance if routed else straggle)
        share = lower * ratio(one.t_s, bound_one, 1.0) * hot
        total = total + share
        if isinstance(row.cost.op, Attention):
            quadratic = quadratic + share
        if kind == "train" and isinstance(row.cost.op, Gemm):  # its operands cast to fp8
            rows_each = routed_rows(row.cost, a.phase.work_factor)
            total = total + lower * ratio(cast_s(row.cost, a.precision.activations, chip,
                                                 hbm_eff, rows_each), bound_one, 0.0)
        launches = lower * ratio(one.overhead_s, bound_one, 0.0)
        overhead = overhead + launches
        if split:
            work = lower * ratio(one.t_s - one.overhead_s, bound_one, 0.0)
            on_hbm = on_hbm_roof(one.derated.time_s)
            streamed = streamed + launches + work * on_hbm
            computed = computed + work * (1.0 - on_hbm) * (1.0 - on_link_roof(
                one.derated.time_s))
        for resource, eff in one.efficiency.items():
            by_resource.setdefault(resource, []).append((lower, eff))
    link_floor: Any = 0.0
    moe = a.params_active < a.params_total
    if any_true(times.not_hidden_s > 0):  # a link busier than the path: at the link's pace
        link = str(times.not_hidden_link)
        if link not in LINKS:  # the link per point: the slower figure
            link = min(LINKS, key=lambda k: figs[k].value)
        key, fig = lookup(figs, link)
        sources[key] = fig.source
        # the link's whole traffic (path + line) at the link's pace, unless the path at its
        # ops' own pace is longer: charging only the line at the link's pace made a faster
        # roof (shorter path, longer line) give a slower step. In a dense model's step the
        # busy link carries bulk weight gathers and gradient reductions (FSDP, DP, TP) at
        # the link figure's achieved bandwidth: the framework factor below (the share of
        # time the chip spends on its kernels) does not slow it. An MoE step's busy link
        # carries the EP dispatch, whose pace rides on the token permutation the MoE factor
        # was fitted over: it stays under that factor
        link_floor = (path + times.not_hidden_s) / fig.value
        if moe:
            total, link_floor = maximum(total, link_floor), 0.0
    efficiency = {}
    for resource, pairs in by_resource.items():  # weighted by each op's share of the path
        weight = sum(w for w, _ in pairs)
        efficiency[resource] = unwrap(ratio(sum(w * e for w, e in pairs), weight, pairs[0][1]))
    key, factor = lookup_framework(figs, kind, name, moe=moe)
    sources[key] = source(factor)
    efficiency["framework"] = factor.value
    # the framework factor: the share of the step the engine keeps the chip on its kernels.
    # In a dense graph-replayed step it times only what is not `streamed`: tensor-core-bound
    # GEMMs and attention (prefill chunks) and collectives; where the engine has its own
    # figure for the tensor-core-bound share (framework.compute.<engine>), that share takes
    # it, its collectives keep the decode factor
    compute = factor
    if split and f"framework.compute.{name}" in figs:
        compute = figs[f"framework.compute.{name}"]
        sources[f"framework.compute.{name}"] = source(compute)
        efficiency["framework_compute"] = compute.value
    t = maximum(streamed + computed / compute.value
                + (total - streamed - computed) / factor.value, link_floor)
    if prefill_chunk is not None and kind == "prefill" and a.parallel.pp > 1:
        t = t * pipeline_fill(a.phase.q_len, prefill_chunk, a.parallel.pp,
                              ratio(quadratic, total, 0.0), dynamic_chunks)
    t = maximum(t, a.t_lower_s)  # never below the bound
    return ExpectedStep(a, unwrap(t), unwrap(overhead), efficiency, sources, name)


def pipeline_fill(prompt: Num, chunk: Num, pp: int, attention_share: Num,
                  dynamic: bool = False) -> Num:
    """How much longer one prompt's prefill through `pp` pipeline stages takes than the
    full pipeline the bound assumes: its chunks follow one another through the stages, so
    the last stage finishes (pp - 1) slowest-chunk stage times after the first stage's
    whole work (a flow shop of equal stages), 1 + (pp - 1) · t_max / T.
    A chunk of c = x·L tokens costs (1 - a)·x of the pass's time T in the token-wise ops and
    a·(its causal score pairs' share) in attention (`attention_share` a): the last chunk
    of a fixed size a·(1 - (1 - x)²); a whole prompt (x = 1) runs the stages in series.
    SGLang's dynamic chunking shrinks each next chunk to the first chunk's time, down to a
    quarter of its size, which leaves the blog's bubble (pp - 1)/(pp - 1 + M) of M equal
    chunks (lmsys.org/blog/2026-01-15-chunked-pipeline, "Dynamic chunking"): t_max is the
    first chunk's time or the last quarter-size chunk's, the longer."""
    x = np.minimum(np.asarray(chunk, dtype=float) / np.asarray(prompt, dtype=float), 1.0)
    a = np.asarray(attention_share, dtype=float)

    def last(x: Any) -> Any:  # a chunk of x·L tokens at the end of the prompt
        return (1.0 - a) * x + a * (1.0 - (1.0 - x) ** 2)

    slowest = np.maximum((1.0 - a) * x + a * x * x, last(x / 4.0)) if dynamic else last(x)
    return unwrap(1.0 + (pp - 1) * slowest)


def graph_split(a: ModelAnalysis, cuda_graphs: bool | None = None) -> bool:
    """Whether `expected_step` times `a` as a dense model's graph-replayed step: each kernel
    (a collective's too) costs `step_kernel_s` on its own, not a graph launch (decode and
    continuous-batching steps replay CUDA graphs unless `cuda_graphs` says otherwise)."""
    graphs = a.phase.kind in ("decode", "mixed") if cuda_graphs is None else cuda_graphs
    return bool(graphs) and a.params_active >= a.params_total


def collective_kernel_s(a: ModelAnalysis, chip: Chip) -> float:
    """What `expected_step` already charges each collective call of `a` on `chip` beyond a
    graph launch: step_kernel_s - graph_launch_s in a dense graph-replayed step (the kernel
    boundary of the custom all-reduce), else 0. A serving engine's per-collective cost
    (serve.runtime.IterationCost.collective_s, fitted beside a graph launch) is that much
    smaller there."""
    if not graph_split(a):
        return 0.0
    figs = figure_lookups(chip, step=True)
    return max(figs["step_kernel_s", None][1] - figs["graph_launch_s", None][1], 0.0)


TOKEN_WORK = ("compute", "vector", "sfu")  # the resources an op's tokens load


def slowest_rank(times: Mapping[str, Num], load: Any) -> Any:
    """How much longer an op runs on a rank carrying `load` times the mean rank's tokens: its
    token work (math, vector, special functions) scales, its weight stream and its links do
    not; the op takes its longest resource either way (elementwise over a sweep, `load`
    too).

    >>> slowest_rank({"compute": 1.0, "hbm": 2.0}, 3.0), slowest_rank({"compute": 1.0}, 2.0)
    (1.5, 2.0)
    >>> slowest_rank({"compute": 1.0, "hbm": 4.0}, 3.0)
    1.0
    """
    if np.ndim(load) == 0 and load == 1.0:
        return 1.0
    longest = functools.reduce(maximum, times.values(), 0.0)  # on the mean rank
    hot = functools.reduce(maximum, (v * load if k in TOKEN_WORK else v
                                     for k, v in times.items()), 0.0)
    return unwrap(np.where(np.asarray(longest) > 0,
                           hot / np.where(np.asarray(longest) > 0, longest, 1.0), 1.0))


def on_hbm_roof(times: Mapping[str, Num]) -> Num:
    """1.0 where an op's derated time is longest on HBM (it streams weights or KV cache:
    a batch-limited decode GEMM, decode attention), else 0.0 (elementwise over a sweep)."""
    if "hbm" not in times:
        return 0.0
    longest = functools.reduce(maximum, (v for k, v in times.items() if k != "hbm"), 0.0)
    return unwrap((times["hbm"] >= longest) * 1.0)


def on_link_roof(times: Mapping[str, Num]) -> Num:
    """1.0 where an op's derated time is longest on a link or its call latency (a
    collective), else 0.0 (elementwise over a sweep)."""
    comm = ("latency", *LINKS)
    links = [v for k, v in times.items() if k in comm]
    if not links:
        return 0.0
    longest = functools.reduce(maximum, (v for k, v in times.items() if k not in comm), 0.0)
    return unwrap((functools.reduce(maximum, links) > longest) * 1.0)


def weight_only(cost: Cost) -> str | None:
    """The weight dtype family of a weight-only-quantized GEMM (int8 / int4 / fp4 weights
    dequantized into bf16 / fp16 math, as gpt-fast, torchao, Marlin and AWQ kernels do), or
    None: not a GEMM, or weights already in the compute dtype's family (fp8 x fp8). The GEMM's
    typed record carries its weights' dtype (the LM head's is the tables')."""
    return dequant_family(cost.op.weight_dtype, cost) if isinstance(cost.op, Gemm) else None


# bytes per element a training GEMM's quantization moves for each operand it casts: the
# bf16 operand read, its 8-bit (or narrower) copy written twice, row-wise for the GEMM that
# reads it as is and column-wise (transposed) for the one that reads it transposed
CAST_COPIES = 2


def routed_rows(cost: Cost, work_factor: float = 1.0) -> Num:
    """The rows of X (and of dY) one GEMM call of `cost` multiplies on this chip: a dense
    GEMM's M (each product's, times a batched one's products); a grouped (MoE) GEMM's routed
    (token, expert) rows on this rank, its FLOPs over 2·N·K (its record's M is the mean
    expert's, and the rank holds a share of its touched experts), `work_factor` the training
    step's passes its FLOPs count (forward + backward: 3)."""
    op = cost.op
    if not isinstance(op, Gemm):
        return 0.0
    if not op.grouped:
        return unwrap(np.asarray(op.m) * np.asarray(op.groups))
    per_pass = np.asarray(cost.total_flops) / work_factor
    return unwrap(per_pass / (2.0 * np.asarray(op.n) * np.asarray(op.k)))


def cast_s(cost: Cost, activations: str, chip: Chip, hbm_eff: float,
           rows: Num | None = None) -> Num:
    """The HBM time a training step spends casting one GEMM's operands to its narrow float
    compute dtype (fp8, fp6, fp4), forward and backward: 0 for any other GEMM.

    Transformer Engine quantizes a Linear's input X [M, K] in the forward and its output
    gradient dY [M, N] in the backward, each into a row-wise and a column-wise copy
    (the wgrad GEMM X^T dY reads both transposed): `cast_transpose` kernels,
    NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py; torchao's float8
    training casts the same operands (torchao/float8/float8_linear.py). A memory-bound pass
    the GEMMs' own roofs leave out: at Llama-8B's widths on H100 about a tenth of the fp8
    GEMM time, so the step gains ~1.3x from fp8, not the 2x of the peaks (llm-foundry's
    H100 tables: MPT-3B 1.15-1.31x over bf16, scripts/train/benchmarking/README.md)."""
    op = cost.op
    narrow = [dt for dt in cost.flops if lookup_dtype(dt).peak in ("fp8", "fp6", "fp4")]
    if not isinstance(op, Gemm) or not narrow:
        return 0.0
    element = lookup_dtype(activations).bits / 8 + CAST_COPIES * lookup_dtype(narrow[0]).bits / 8
    # rows of X and dY (`routed_rows`; a grouped GEMM's from its FLOPs: one pass's unless given)
    n_rows = routed_rows(cost) if rows is None else rows
    nbytes = np.asarray(n_rows) * (np.asarray(op.k) + np.asarray(op.n))
    return unwrap(nbytes * element / (chip.bandwidth_Bps("hbm") * hbm_eff))

