"""The expected time of one op: its Cost on the chip derated to achievable efficiencies (the
one evaluator), plus the overheads a roofline leaves out.

    t_expected = evaluate(cost, chip.derated(efficiency)).t_lower + launch + calls · call

Per resource the efficiency is a sourced figure of the chip (`table.figures`): tensor cores
at the achievable GEMM fraction for the dtype (the attention kernel's fraction for attention)
times the wave utilization of the op's tiles (`physics`); HBM at its streaming fraction;
each link at its achievable bus bandwidth. Every efficiency is in (0, 1] and every overhead
>= 0, so the expected time is never below the bound, which stays beside it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import Num, maximum, minimum, unwrap
from ..dtypes import dtype as lookup_dtype
from ..evaluate import COMPUTE, SFU, VECTOR, Estimate, evaluate
from ..hardware import Chip, System, load_chip
from ..hardware.model import Efficiency
from ..opid import Attention, Gemm, LinearAttention
from ..ops.collectives import GRAPH_KERNELS
from ..serialize import jsonable
from .interval import op_kind, spread
from .kernels import linear_kind
from .physics import (
    SEPARATE_RECURRENCE,
    attention_kernel,
    attention_operands,
    attention_waves,
    decode_attention,
    kernel_launches,
    recurrence_waves,
)
from .protocols import with_protocols
from .table import figures, lookup
from .utilization import utilizations

if TYPE_CHECKING:
    from ..measure.calibration import Calibration

LABEL = "expected"
GROUPED = "matmul_grouped"  # the figure kind of an MoE grouped GEMM (matmul_grouped.<peak>)
WHAT = "a forecast with efficiencies from"  # the text label: what the expected time is


@dataclass(frozen=True, eq=False, init=False)
class Expected:
    """An expected time beside its bound (both per chip). `derated` is the evaluator's
    estimate on the derated chip; `overhead_s` what is added to its t_lower."""

    t_s: Num
    bound: Estimate
    derated: Estimate
    overhead_s: Num
    efficiency: Mapping[str, Num]  # resource -> achievable / roof applied to it
    sources: Mapping[str, str]  # figure -> its source (or what it was fitted to)

    def __init__(self, t_s: Num, bound: Estimate, derated: Estimate, overhead_s: Num,
                 efficiency: Mapping[str, Num], sources: Mapping[str, str]) -> None:
        # written straight into the instance dict, once (as evaluate.Estimate: one per op of
        # every step a forecast times)
        fields = self.__dict__
        fields["t_s"], fields["bound"], fields["derated"] = t_s, bound, derated
        fields["overhead_s"], fields["efficiency"], fields["sources"] = (
            overhead_s, efficiency, sources)

    @property
    def flops_per_s(self) -> Num:
        with np.errstate(divide="ignore", invalid="ignore"):
            return unwrap(np.asarray(self.bound.flops, dtype=float) / np.asarray(self.t_s))

    @property
    def slowdown(self) -> Num:
        """expected / bound (>= 1)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.asarray(self.bound.t_lower_s, dtype=float)
            return unwrap(np.where(b > 0, np.asarray(self.t_s) / b, 1.0))

    def figures(self, rates: Mapping[str, Num] | None = None) -> dict[str, Any]:
        """Every expected figure with its 80% interval (`X_p10`, `X_p90`), as numbers or
        arrays (`rates`: the op's own rates at the bound, such as a collective's algbw_Bps
        and busbw_Bps, given at the expected pace too)."""
        data: dict[str, Any] = {"t_s": self.t_s, "bound_t_s": self.bound.t_lower_s,
                                "overhead_s": self.overhead_s,
                                "efficiency": dict(self.efficiency),
                                "sources": dict(self.sources), "bound": self.derated.bound}
        if self.bound.cost.has_arithmetic:
            data["flops_per_s"] = self.flops_per_s
        for key, value in (rates or {}).items():
            data[key] = unwrap(np.asarray(value) / np.asarray(self.slowdown))
        return spread(data, self.bound.t_lower_s, self.kind)

    def to_dict(self, rates: Mapping[str, Num] | None = None) -> dict[str, Any]:
        """The JSON block (`figures`)."""
        return dict(jsonable(self.figures(rates)))

    @property
    def kind(self) -> str:
        """The kind of published rows whose spread around their forecasts gives the 80%
        interval (interval.op_kind)."""
        return op_kind(self.bound.cost)

    def interval(self, figure: str = "t_s") -> tuple[Num, Num]:
        """The 10th and 90th percentile of what `figure` (t_s, flops_per_s) will measure.

        >>> from roofline.ops.matmul import matmul
        >>> e = expected(matmul(4096, 4096, 4096), "h100")
        >>> lo, hi = e.interval()
        >>> bool(e.bound.t_lower_s <= lo <= e.t_s <= hi)
        True
        """
        data = self.figures()
        return data[f"{figure}_p10"], data[f"{figure}_p90"]


class FigureLookups(dict[tuple[str, str | None], tuple[str, float, str]]):
    """The figures of a chip (`table.figures`), each looked up once: `self[kind, variant]` is
    the key, value and source `table.lookup` finds for it. A step's ops take the same few
    figures again and again, and so do the steps of a serving plan."""

    def __init__(self, figs: Mapping[str, Efficiency], kept: object = None) -> None:
        super().__init__()
        self.figs = figs
        self.kept = kept  # the figures table.figures keeps on the chip, if these are those

    def __missing__(self, kind_variant: tuple[str, str | None]) -> tuple[str, float, str]:
        key, fig = lookup(self.figs, *kind_variant)
        found = self[kind_variant] = (key, fig.value, source(fig))
        return found


def figure_lookups(chip: Chip, calibration: Calibration | None = None,
                   step: bool = False) -> FigureLookups:
    """The figures of `chip` (and `calibration`) to take (`step`: a whole step's, no
    power-limited GEMM fraction: table.figures): without a calibration, kept on the chip for
    as long as `table.figures` keeps its own there (a fit that drops those, to read changed
    figures, drops these too)."""
    if calibration is not None:
        return FigureLookups(figures(chip, calibration, step))
    lookups = "expect.lookups.step" if step else "expect.lookups"
    kept = chip.memo.get("expect.figures", {}).get(step)  # table.figures' own
    found = chip.memo.get(lookups)
    if found is None or kept is None or found.kept is not kept:
        figs = figures(chip, step=step)
        found = chip.memo[lookups] = FigureLookups(figs, chip.memo["expect.figures"][step])
    return cast(FigureLookups, found)


def describe(sources: Mapping[str, str]) -> str:
    """'the chip file (matmul.bf16, hbm), fitted defaults (launch_s)': the label's tail."""
    fitted = [k for k, s in sources.items() if s.startswith("fitted")]
    measured = [k for k, s in sources.items() if s.startswith("measured")]
    cited = [k for k in sources if k not in fitted and k not in measured]
    parts = ([f"published measurements ({', '.join(cited)})"] if cited else []) + (
        [f"a local calibration ({', '.join(measured)})"] if measured else []) + (
        [f"fitted factors ({', '.join(fitted)})"] if fitted else [])
    return "; ".join(parts) or "none"


def source(e: Efficiency) -> str:
    """Where a figure came from, in words (a fitted one: the rows it was fitted to)."""
    return f"fitted to {e.fitted}" if e.source == "fitted" else e.source


def dequant_family(weights: Any, cost: Cost) -> str | None:
    """The weight dtype family of a weight-only-quantized GEMM (int8 / int4 / fp4 weights
    dequantized into bf16 / fp16 math, as gpt-fast, torchao, Marlin and AWQ kernels do), or
    None: no weights named, not a GEMM, or weights already in the compute dtype's family."""
    if weights is None or not cost.flops or isinstance(cost.op, (Attention, LinearAttention)):
        return None
    return _dequant_family(weights, tuple(cost.flops))


@functools.lru_cache(maxsize=256)
def _peak_family(dt: str) -> str:
    """The peak a compute dtype runs at (fp8_e5m2 -> fp8), asked per op of every step."""
    return lookup_dtype(dt).peak


@functools.lru_cache(maxsize=256)
def _dequant_family(weights: str, computes: tuple[str, ...]) -> str | None:
    """dequant_family of weights in `weights` under GEMMs in `computes` (asked per GEMM of
    every step)."""
    family = lookup_dtype(weights).peak
    return None if family in {lookup_dtype(dt).peak for dt in computes} or \
        lookup_dtype(weights).bits >= 16 else family


def expected(cost: Cost, hw: Chip | System | str, calibration: Calibration | None = None,
             kernel: str | None = None, cuda_graphs: bool = False,
             dequant: str | None = None, engine_kernels: bool = False,
             in_graph: bool = False) -> Expected:
    """The expected time of one op on one chip (per chip; arrays broadcast like evaluate).

    `kernel` names the attention kernel measured against (fa2, fa3, cudnn, ...; default: the
    chip's own figure). `calibration` (a `measure` file) overrides the chip's figures.
    `dequant` names the weight dtype family (int8, int4, fp4, ...) of a weight-only-quantized
    GEMM: its HBM stream runs at the dequantizing kernel's fraction of the streaming one.
    Under `cuda_graphs` a collective is one more kernel of the graph (the serving engines'
    one- or two-shot custom all-reduce), so its call costs a graph launch, not NCCL's host
    latency; outside them a collective whose bound is an engine's two-shot kernel is
    expected to run the library's pick (`Cost.runs`), unless `engine_kernels` (an engine's
    custom all-reduce timed on its own, or DeepEP's normal dispatch / combine, one copy per
    destination: the kernel the bound names runs, one engine call each). `in_graph`: a
    library's collective launched in a CUDA / HIP graph or timed on the device (nccl-tests
    -G, a profiler's kernel time): the library's pick still runs, but its call costs the
    kernel's own fixed time (`collective_call_s.graph`), not the host-side enqueue.

    >>> from roofline.ops.matmul import matmul
    >>> e = expected(matmul(4096, 4096, 4096), "h100")
    >>> bool(e.t_s >= e.bound.t_lower_s)
    True
    """
    chip = load_chip(hw)
    return expected_from(cost, chip, figure_lookups(chip, calibration),
                         evaluate(cost, chip), None, kernel, cuda_graphs, dequant,
                         engine_kernels, in_graph)


def expected_from(cost: Cost, chip: Chip, found: FigureLookups, base_est: Estimate,
                  util: Any = None, kernel: str | None = None, cuda_graphs: bool = False,
                  dequant: str | None = None, engine_kernels: bool = False,
                  in_graph: bool = False, graph_kernel: str = "graph_launch_s") -> Expected:
    """`expected` from what a step already holds for each of its ops: the chip's figures
    (`found`), the op's bound (`base_est`, its estimate on `chip`) and its tile utilization
    (`util`, `utilizations`; None: found here). `graph_kernel`: the figure a kernel costs
    under CUDA graphs (a whole step's: step_kernel_s)."""
    used: dict[str, str] = {}
    bound = cost  # what runs where the bound is the least of something faster (Cost.runs):
    # the library's pick for an engine's two-shot kernel, outside CUDA graphs (in a graph the
    # engine runs its own); the libraries' ring for a one-shot (symmetric-memory) all-gather
    # or reduce-scatter and an EP dispatch's every copy, always
    if cost.runs is not None and not engine_kernels and not (
            cuda_graphs and np.isin(cost.algorithm, GRAPH_KERNELS).any()):
        cost = cost.runs
    cost = attention_operands(cost)

    def take(kind: str, variant: str | None = None) -> float:
        key, value, said = found[kind, variant]
        used[key] = said
        return value

    derate: dict[str, Any] = {}
    applied: dict[str, Num] = {}
    if cost.flops:
        if util is None:  # the op's shape: its typed record's
            util = utilizations([bound], chip)[0]
        op = cost.op
        attention = isinstance(op, Attention)
        linear = isinstance(op, LinearAttention)  # a chunked recurrence, not a GEMM
        kind = "attention_bwd" if isinstance(op, Attention) and op.backward else (
            "attention" if attention else linear_kind(op.q_len, op.mixer) if isinstance(
                op, LinearAttention) else "matmul")
        grouped = isinstance(op, Gemm) and op.grouped  # an MoE layer's experts
        for dt in cost.flops:
            peak = _peak_family(dt)
            # a grouped GEMM takes its own figure where the architecture has one
            # (kernels.py: MoE grouped GEMMs reach less of the peak than a dense GEMM)
            kind_dt = GROUPED if grouped and f"{GROUPED}.{peak}" in found.figs else kind
            base = take(kind_dt, kernel if attention or linear else peak)
            derate["compute." + peak] = base * util
        rates = list(derate.values())  # (the mean of one is itself)
        applied[COMPUTE] = unwrap(rates[0] if len(rates) == 1 else
                                  np.mean([np.asarray(v) for v in rates], axis=0))
        if linear:  # a linear-attention kernel's figure is its fraction of either roof
            derate["hbm"] = base
    if "hbm" in cost.bytes:
        applied["hbm"] = derate["hbm"] = take("hbm") * (take("dequant", dequant) if dequant
                                                        else derate.get("hbm", 1.0))
        if kernel and f"decode_hbm.{kernel}" in found.figs and decode_attention(cost):
            # a named decode kernel's share of the streaming fraction (kernels.KERNELS)
            applied["hbm"] = derate["hbm"] = derate["hbm"] * take("decode_hbm", kernel)
    if "l2" in cost.bytes and isinstance(cost.op, Gemm):  # an L2-resident working set (a
        # GEMM timed warm): the L2's fitted fraction (attention's L2 traffic keeps the roof:
        # its rows were timed cold and fit better so)
        applied["l2"] = derate["l2"] = take("l2")
    algo = cost.algorithm  # a collective's: one name, or one per point (auto over a sweep)

    def per_algorithm(kind: str) -> Any:
        """The figure of `kind` for the algorithm of each point."""
        if algo is None or type(algo) is str or np.ndim(algo) == 0:
            return take(kind, None if algo is None else str(algo))
        names = np.asarray(algo)
        kinds = list(dict.fromkeys(names.ravel().tolist()))
        return np.select([names == a for a in kinds], [take(kind, a) for a in kinds])

    if cost.link_bytes or cost.link_calls:
        for link in LINKS:
            if link in cost.link_bytes or link in cost.link_calls:
                applied[link] = derate[link] = per_algorithm(link)
    scalar: dict[str, float] = {}
    arrays: dict[str, Any] = {}
    for resource, value in derate.items():
        if type(value) is float:
            scalar[resource] = value
        elif np.ndim(value) == 0:
            scalar[resource] = float(value)
        else:
            arrays[resource] = np.asarray(value)
    if arrays:  # a per-point efficiency (tile utilization over a sweep): scale the times
        derated = _evaluate_pointwise(cost, chip, scalar, arrays)
    else:
        derated = evaluate(cost, _derated(chip, scalar), shared_special=False)
    overhead: Any = 0.0
    if cost.flops or cost.bytes or cost.has_arithmetic:
        overhead = take(graph_kernel if cuda_graphs else "launch_s") * kernel_launches(
            bound, chip, kernel)
    # one collective is one call, whatever links it crosses and whether the bound charges a
    # NCCL base latency (a one-shot all-reduce is the engine's own kernel: still one launch)
    if cost.link_calls or cost.link_steps:
        moving = [*cost.link_calls.values(), *[(np.asarray(s) > 0) * 1.0 if type(s) is not float
                                               else float(s > 0)
                                               for s in cost.link_steps.values()]]
        calls = functools.reduce(maximum, moving)
        # in a graph: one kernel (sglang#2904: a one-shot all-reduce of 4-32 KiB on 8xH100
        # takes 5.7-7.8 us in all, within the bound's own NCCL latency of 6.6 us + steps)
        if cuda_graphs:
            per_call = take(graph_kernel)
        elif engine_kernels:
            per_call = take("collective_call_s", "engine")
        elif in_graph:  # no host enqueue: the kernel's launch and its cross-GPU handshake
            per_call = take("collective_call_s", "graph")
        else:
            per_call = per_algorithm("collective_call_s")
        overhead = overhead + calls * per_call
    # (the kernels it expects leave every exp on the special-function units: `evaluate`'s
    # shared_special, which only the bound allows). A library's ring or tree runs its fastest
    # protocol; in a graph-replayed engine step the engine's own collective kernels run (as
    # for `cost.runs` above), on the bound's chain
    t = (derated.t_lower_s if cuda_graphs else
         with_protocols(derated.t_lower_s, cost, chip, derate)) + overhead
    if isinstance(cost.op, LinearAttention) and cost.flops and kind == "linear_attention":
        # the recurrence's walk over the chunks (physics.recurrence_chain): its chunk steps
        # at the kernel's time per step; a kernel of its own adds to the others' time, a
        # fused kernel overlaps them
        walk = take("linear_attention_chain_s", kernel) * recurrence_waves(cost.op, chip,
                                                                           kernel)
        t = (derated.t_lower_s + walk if kernel in SEPARATE_RECURRENCE
             else maximum(derated.t_lower_s, walk)) + overhead
    if cost.flops and attention_kernel(cost):
        # the softmax (exp on the special-function units, its arithmetic on the vector units)
        # hides behind the tensor-core GEMMs only in part (FlashAttention-3's ping-pong and
        # intra-warpgroup overlap): a share of the shorter of the two stays exposed. It is
        # what head dim 64 and fp8 / int8 kernels lose (their GEMMs shrink, the exps do not)
        times = derated.time_s
        softmax = maximum(times.get(SFU, 0.0), times.get(VECTOR, 0.0))
        t = t + take("softmax_exposed") * minimum(times.get(COMPUTE, 0.0), softmax)
        # each wave of tiles fills and drains the kernel's pipeline (physics.attention_waves)
        t = t + take(f"{kind}_tile_s", kernel) * attention_waves(bound, chip)
    return Expected(unwrap(t), base_est, derated, unwrap(overhead), applied, used)


DERATED = 4096  # derated chips kept per chip


def _derated(chip: Chip, efficiency: Mapping[str, float]) -> Chip:
    """The chip derated by scalar efficiencies, kept on the chip per set of figures: a step's
    ops repeat a few sets (one per GEMM shape's tile waves), and a serving plan times its
    steps again and again."""
    kept = chip.memo.setdefault("expect.derated", {})
    key = tuple(sorted(efficiency.items()))
    found = kept.get(key)
    if found is None:
        if len(kept) >= DERATED:  # (one per op shape: a long serving search makes many)
            kept.clear()
        found = kept[key] = chip.derated(dict(efficiency), label=LABEL)
    return cast(Chip, found)


def _evaluate_pointwise(cost: Cost, chip: Chip, scalar: Mapping[str, float],
                        arrays: Mapping[str, Any]) -> Estimate:
    """Array-valued efficiencies: the chip derated by the scalar ones and, per point, the
    Cost's FLOPs of each dtype (or a link's bytes) divided by its array efficiency (the same
    time as a peak or bandwidth times that efficiency: FLOPs / (peak · e)). Tensor FLOPs
    (tile utilization over a sweep) and links (each point's collective algorithm) take
    array efficiencies."""
    flops = {dt: np.asarray(f) / arrays[f"compute.{lookup_dtype(dt).peak}"]
             if f"compute.{lookup_dtype(dt).peak}" in arrays else f
             for dt, f in cost.flops.items()}
    link_bytes = {k: np.asarray(b) / arrays[k] if k in arrays else b
                  for k, b in cost.link_bytes.items()}
    return evaluate(replace(cost, flops=flops, link_bytes=link_bytes),
                    chip.derated(dict(scalar), label=LABEL), shared_special=False)
