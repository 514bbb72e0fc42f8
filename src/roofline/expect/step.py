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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import Num, any_true, maximum, ratio, unwrap
from ..hardware import Chip, System, load_chip
from ..models import ModelAnalysis
from ..models.schedule import RUN
from ..opid import Gemm
from ..serialize import jsonable
from .interval import STEP_KINDS, spread
from .op import dequant_family, expected_from, figure_lookups, source, utilizations
from .table import engine, lookup, lookup_framework

if TYPE_CHECKING:
    from ..measure.calibration import Calibration


# the routed experts' GEMMs (models/layers.py _mlp_ops), which wait for the hottest EP rank


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
    looked = figure_lookups(chip, calibration)
    figs = looked.figs
    sources: dict[str, str] = {}
    total: Any = 0.0
    overhead: Any = 0.0
    by_resource: dict[str, list[Any]] = {}
    path: Any = 0.0  # the bound's critical path, without the line below
    core = run.parts.core  # the bound's rows, their estimates and their share of the path
    times = core.times
    rows = run.parts.rows
    utils = utilizations([row.cost for row in rows], chip)  # per kind of op, in one pass
    # a dense model's graph-replayed step (decode, continuous batching): each kernel's fixed
    # cost on its own (step_kernel_s) and, with it, each op streaming off HBM at its HBM
    # figure, outside the framework factor (`streamed`). An MoE step keeps the factor over
    # the whole step, with the graph launch: its engines' routing, token permutation and
    # per-expert kernels are what the factor was fitted to
    split = graphs and a.params_active >= a.params_total
    streamed: Any = 0.0
    for row, est, lower, util in zip(rows, core.ests, times.critical_s, utils, strict=True):
        path = path + lower
        one = expected_from(row.cost, chip, looked, est, util, cuda_graphs=graphs,
                            dequant=weight_only(row.cost),
                            graph_kernel="step_kernel_s" if split else "graph_launch_s")
        sources.update(one.sources)
        bound_one = one.bound.t_lower_s
        # the routed experts' GEMMs (typed: a grouped GEMM) wait for the hottest EP rank, the
        # other ops for the attention-DP rank with the most tokens
        routed = isinstance(row.cost.op, Gemm) and row.cost.op.grouped
        hot = slowest_rank(one.derated.time_s, imbalance if routed else straggle)
        total = total + lower * ratio(one.t_s, bound_one, 1.0) * hot
        launches = lower * ratio(one.overhead_s, bound_one, 0.0)
        overhead = overhead + launches
        if split:
            work = lower * ratio(np.asarray(one.t_s) - np.asarray(one.overhead_s), bound_one,
                                 0.0)
            streamed = streamed + launches + work * on_hbm_roof(one.derated.time_s)
        for resource, eff in one.efficiency.items():
            by_resource.setdefault(resource, []).append((lower, eff))
    if any_true(times.not_hidden_s > 0):  # a link busier than the path: at the link's pace
        link = str(times.not_hidden_link)
        if link not in LINKS:  # the link per point: the slower figure
            link = min(LINKS, key=lambda k: figs[k].value)
        key, fig = lookup(figs, link)
        sources[key] = fig.source
        # the link's whole traffic (path + line) at the link's pace, unless the path at its
        # ops' own pace is longer: charging only the line at the link's pace made a faster
        # roof (shorter path, longer line) give a slower step
        total = maximum(total, (path + times.not_hidden_s) / fig.value)
    efficiency = {}
    for resource, pairs in by_resource.items():  # weighted by each op's share of the path
        weight = sum(w for w, _ in pairs)
        efficiency[resource] = unwrap(ratio(sum(w * e for w, e in pairs), weight, pairs[0][1]))
    name = engine(framework) if framework else None
    key, factor = lookup_framework(figs, kind, name, moe=a.params_active < a.params_total)
    sources[key] = source(factor)
    efficiency["framework"] = factor.value
    # the framework factor: the share of the step the engine keeps the chip on its kernels.
    # In a dense graph-replayed step it times only what is not `streamed`: tensor-core-bound
    # GEMMs and attention (prefill chunks) and collectives
    t = maximum(streamed + (total - streamed) / factor.value, a.t_lower_s)  # never below
    return ExpectedStep(a, unwrap(t), unwrap(overhead), efficiency, sources, name)


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
    arrays = {k: np.asarray(v, dtype=float) for k, v in times.items()}
    mean = np.maximum.reduce(list(arrays.values()))
    hot = np.maximum.reduce([v * load if k in TOKEN_WORK else v for k, v in arrays.items()])
    return unwrap(np.where(mean > 0, hot / np.where(mean > 0, mean, 1.0), 1.0))


def on_hbm_roof(times: Mapping[str, Num]) -> Num:
    """1.0 where an op's derated time is longest on HBM (it streams weights or KV cache:
    a batch-limited decode GEMM, decode attention), else 0.0 (elementwise over a sweep)."""
    if "hbm" not in times:
        return 0.0
    hbm = np.asarray(times["hbm"], dtype=float)
    others = [np.asarray(v, dtype=float) for k, v in times.items() if k != "hbm"]
    longest = np.maximum.reduce(others) if others else np.zeros_like(hbm)
    return unwrap((hbm >= longest) * 1.0)


def weight_only(cost: Cost) -> str | None:
    """The weight dtype family of a weight-only-quantized GEMM (int8 / int4 / fp4 weights
    dequantized into bf16 / fp16 math, as gpt-fast, torchao, Marlin and AWQ kernels do), or
    None: not a GEMM, or weights already in the compute dtype's family (fp8 x fp8). The GEMM's
    typed record carries its weights' dtype (the LM head's is the tables')."""
    return dequant_family(cost.op.weight_dtype, cost) if isinstance(cost.op, Gemm) else None
