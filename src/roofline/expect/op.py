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

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import Num, unwrap
from ..dtypes import dtype as lookup_dtype
from ..evaluate import COMPUTE, SFU, VECTOR, Estimate, evaluate
from ..hardware import Chip, System, load_chip
from ..hardware.model import Efficiency
from ..opid import Attention, Gemm, LinearAttention
from ..ops.collectives import GRAPH_KERNELS
from ..serialize import jsonable
from .interval import op_kind, spread
from .kernels import linear_kind
from .physics import attention_kernel, kernel_launches, tile_utilization
from .table import figures, lookup

if TYPE_CHECKING:
    from ..measure.calibration import Calibration

LABEL = "expected"
WHAT = "a forecast with efficiencies from"  # the text label: what the expected time is


@dataclass(frozen=True, eq=False)
class Expected:
    """An expected time beside its bound (both per chip). `derated` is the evaluator's
    estimate on the derated chip; `overhead_s` what is added to its t_lower."""

    t_s: Num
    bound: Estimate
    derated: Estimate
    overhead_s: Num
    efficiency: Mapping[str, Num]  # resource -> achievable / roof applied to it
    sources: Mapping[str, str]  # figure -> its source (or what it was fitted to)

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
    if weights is None or not cost.flops or isinstance(cost.op, Attention | LinearAttention):
        return None
    family = lookup_dtype(weights).peak
    computes = {lookup_dtype(dt).peak for dt in cost.flops}
    return None if family in computes or lookup_dtype(weights).bits >= 16 else family


def expected(cost: Cost, hw: Chip | System | str, calibration: Calibration | None = None,
             kernel: str | None = None, cuda_graphs: bool = False,
             dequant: str | None = None, engine_kernels: bool = False,
             bound_estimate: Estimate | None = None) -> Expected:
    """The expected time of one op on one chip (per chip; arrays broadcast like evaluate).

    `kernel` names the attention kernel measured against (fa2, fa3, cudnn, ...; default: the
    chip's own figure). `calibration` (a `measure` file) overrides the chip's figures.
    `dequant` names the weight dtype family (int8, int4, fp4, ...) of a weight-only-quantized
    GEMM: its HBM stream runs at the dequantizing kernel's fraction of the streaming one.
    Under `cuda_graphs` a collective is one more kernel of the graph (the serving engines'
    one- or two-shot custom all-reduce), so its call costs a graph launch, not NCCL's host
    latency; outside them a collective whose bound is an engine's two-shot kernel is
    expected to run the library's pick (`Cost.runs`), unless `engine_kernels` (an engine's
    custom all-reduce timed on its own: its kernel runs, one engine call each).

    >>> from roofline.ops.matmul import matmul
    >>> e = expected(matmul(4096, 4096, 4096), "h100")
    >>> bool(e.t_s >= e.bound.t_lower_s)
    True
    """
    chip = load_chip(hw)
    figs = figures(chip, calibration)
    used: dict[str, str] = {}
    bound = cost  # what runs where the bound is the least of something faster (Cost.runs):
    # the library's pick for an engine's two-shot kernel, outside CUDA graphs (in a graph the
    # engine runs its own); the libraries' ring for a one-shot (symmetric-memory) all-gather
    # or reduce-scatter and an EP dispatch's every copy, always
    if cost.runs is not None and not engine_kernels and not (
            cuda_graphs and np.isin(cost.algorithm, GRAPH_KERNELS).any()):
        cost = cost.runs

    def take(kind: str, variant: str | None = None) -> float:
        key, fig = lookup(figs, kind, variant)
        used[key] = source(fig)
        return fig.value

    derate: dict[str, Any] = {}
    applied: dict[str, Num] = {}
    if cost.flops:
        util = tile_utilization(bound, chip)  # the op's shape: its typed record's
        op = cost.op
        attention = isinstance(op, Attention)
        linear = isinstance(op, LinearAttention)  # a chunked recurrence, not a GEMM
        kind = "attention_bwd" if isinstance(op, Attention) and op.backward else (
            "attention" if attention else linear_kind(op.q_len) if isinstance(
                op, LinearAttention) else "matmul")
        for dt in cost.flops:
            peak = lookup_dtype(dt).peak
            base = take(kind, kernel if attention or linear else peak)
            derate[f"compute.{peak}"] = base * util
        applied[COMPUTE] = unwrap(np.mean([np.asarray(v) for v in derate.values()], axis=0))
        if linear:  # a linear-attention kernel's figure is its fraction of either roof
            derate["hbm"] = base
    if "hbm" in cost.bytes:
        applied["hbm"] = derate["hbm"] = take("hbm") * (take("dequant", dequant) if dequant
                                                        else derate.get("hbm", 1.0))
    if "l2" in cost.bytes and isinstance(cost.op, Gemm):  # an L2-resident working set (a
        # GEMM timed warm): the L2's fitted fraction (attention's L2 traffic keeps the roof:
        # its rows were timed cold and fit better so)
        applied["l2"] = derate["l2"] = take("l2")
    algo = cost.algorithm  # a collective's: one name, or one per point (auto over a sweep)

    def per_algorithm(kind: str) -> Any:
        """The figure of `kind` for the algorithm of each point."""
        if algo is None or np.ndim(algo) == 0:
            return take(kind, None if algo is None else str(algo))
        names = np.asarray(algo)
        kinds = list(dict.fromkeys(names.ravel().tolist()))
        return np.select([names == a for a in kinds], [take(kind, a) for a in kinds])

    for link in LINKS:
        if link in cost.link_bytes or link in cost.link_calls:
            applied[link] = derate[link] = per_algorithm(link)
    # (a step's rows come with their bound's estimate: not evaluated twice)
    base_est = evaluate(bound, chip) if bound_estimate is None else bound_estimate
    scalar = {k: v for k, v in derate.items() if np.ndim(v) == 0}
    arrays = {k: np.asarray(v) for k, v in derate.items() if np.ndim(v)}
    if arrays:  # a per-point efficiency (tile utilization over a sweep): scale the times
        derated = _evaluate_pointwise(cost, chip, scalar, arrays)
    else:
        derated = evaluate(cost, _derated(chip, scalar), shared_special=False)
    overhead: Any = 0.0
    if cost.has_arithmetic or cost.bytes:
        overhead = take("graph_launch_s" if cuda_graphs else "launch_s") * kernel_launches(
            bound, chip)
    # one collective is one call, whatever links it crosses and whether the bound charges a
    # NCCL base latency (a one-shot all-reduce is the engine's own kernel: still one launch)
    moving = [np.asarray(c) for c in cost.link_calls.values()] + [
        (np.asarray(s) > 0) * 1.0 for s in cost.link_steps.values()]
    calls = np.maximum.reduce(np.broadcast_arrays(*moving)) if moving else np.asarray(0.0)
    if cost.link_calls or cost.link_steps:
        # in a graph: one kernel (sglang#2904: a one-shot all-reduce of 4-32 KiB on 8xH100
        # takes 5.7-7.8 us in all, within the bound's own NCCL latency of 6.6 us + steps)
        if cuda_graphs:
            per_call = take("graph_launch_s")
        elif engine_kernels:
            per_call = take("collective_call_s", "engine")
        else:
            per_call = per_algorithm("collective_call_s")
        overhead = overhead + calls * per_call
    # (the kernels it expects leave every exp on the special-function units: `evaluate`'s
    # shared_special, which only the bound allows)
    t = np.asarray(derated.t_lower_s) + overhead
    if cost.flops and attention_kernel(cost):
        # the softmax (exp on the special-function units, its arithmetic on the vector units)
        # hides behind the tensor-core GEMMs only in part (FlashAttention-3's ping-pong and
        # intra-warpgroup overlap): a share of the shorter of the two stays exposed. It is
        # what head dim 64 and fp8 / int8 kernels lose (their GEMMs shrink, the exps do not)
        times = derated.time_s
        softmax = np.maximum(np.asarray(times.get(SFU, 0.0)), np.asarray(times.get(VECTOR, 0.0)))
        t = t + take("softmax_exposed") * np.minimum(np.asarray(times.get(COMPUTE, 0.0)),
                                                     softmax)
    return Expected(unwrap(t), base_est, derated, unwrap(np.asarray(overhead)), applied, used)


def _derated(chip: Chip, efficiency: Mapping[str, Any]) -> Chip:
    """The chip derated by scalar efficiencies, kept on the chip per set of figures: a step's
    ops repeat a few sets (one per GEMM shape's tile waves), and a serving plan times its
    steps again and again."""
    key = ("expect.derated", *sorted((k, float(v)) for k, v in efficiency.items()))
    found = chip.memo.get(key)
    if found is None:
        found = chip.memo[key] = chip.derated({k: float(v) for k, v in efficiency.items()},
                                              label=LABEL)
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
