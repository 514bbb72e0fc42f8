"""The one evaluator: a Cost on a Chip becomes times, a bound, intensities and ridge points.

time per resource:  compute = sum over dtypes of tensor FLOPs / tensor peak(dtype)
                    vector = sum over dtypes of vector FLOPs / vector peak(dtype)
                    sfu = transcendentals / special-function rate, or where that is
                          longer than the vector units' time the time both finish
                          together with the vector units emulating a share (a bound)
                    memory level = bytes / bandwidth
                    link = bytes / bandwidth (per direction)
                    latency = message steps · alpha + collective calls · base latency
For one op, t_lower is its lower bound: the compute units and memory levels overlap
perfectly (the max), and each link's alpha-beta chain (its latency plus its bytes over its
bandwidth: a message step cannot finish before its bytes arrive) competes on its own
(the phases of a hierarchical collective pipeline across links). t_upper is the no-overlap
sum, so t_lower <= t_upper <= (number of resources) · t_lower. The bound is the resource
that sets t_lower (ties go to compute; for a link, `latency` where alpha dominates its
chain). A whole step's times (floor, schedule-aware lower bound, no-overlap sum) are
models/analysis.py's.
Everything broadcasts: array-valued Costs give array-valued Estimates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Any

import numpy as np

from .cost import Cost
from .derivation import Num, add_all, all_one_point, one_point, unwrap, where
from .hardware import Chip, System, load_chip
from .lazy import cached_property
from .records import record
from .serialize import jsonable
from .units import format_time

COMPUTE = "compute"  # the tensor cores (matrix units)
VECTOR = "vector"  # CUDA cores / VPU: elementwise work, reductions, softmax arithmetic
SFU = "sfu"  # special-function units: exp, tanh, rsqrt
LATENCY = "latency"

# What each time of ONE op is (a whole step has its own: `models.analysis.STEP_TIMES`).
OP_TIMES = {
    "t_lower_s": "lower bound: the op's compute units and memory levels perfectly overlapped "
                 "(the max); on a link its latency and its bytes in series (alpha-beta: "
                 "latency + bytes / bandwidth), that chain competing with the rest",
    "t_upper_s": "no-overlap sum of the op's resource times",
}



@record(frozen=True, eq=False, init=False)
class Estimate:
    """A roofline bound for one Cost on one Chip. Times in seconds; a bound, not a forecast.

    The times and the bound are computed by `evaluate`; the figures derived from them
    (FLOPs, bytes, intensities, ridge points, peaks) on first use, so a whole-model analysis
    that reads only the times does not pay for them."""

    hardware: str
    cost: Cost
    time_s: Mapping[str, Num]  # resource -> seconds
    t_lower_s: Num
    t_upper_s: Num
    bound_index: Any  # index into time_s of the bounding resource (int or int array)
    chip: Chip = field(repr=False)  # whose peaks the figures use
    chain_s: Mapping[str, Num] = field(default_factory=dict)  # link -> latency + bytes/bw

    def __init__(self, hardware: str, cost: Cost, time_s: Mapping[str, Num], t_lower_s: Num,
                 t_upper_s: Num, bound_index: Any, chip: Chip,
                 chain_s: Mapping[str, Num] | None = None) -> None:
        # written straight into the instance dict, once (as Cost: ~1 us less per Estimate)
        fields = self.__dict__
        fields["hardware"], fields["cost"], fields["time_s"] = hardware, cost, time_s
        fields["t_lower_s"], fields["t_upper_s"] = t_lower_s, t_upper_s
        fields["bound_index"], fields["chip"] = bound_index, chip
        if chain_s:  # else the class's empty, read-only default
            fields["chain_s"] = chain_s

    @cached_property
    def flops(self) -> Num:
        return unwrap(np.asarray(self.cost.total_flops, dtype=float))

    @cached_property
    def flops_by_dtype(self) -> Mapping[str, Num]:
        return {k: unwrap(v) for k, v in self.cost.flops.items()}

    @cached_property
    def bytes(self) -> Mapping[str, Num]:  # memory level -> bytes
        return {k: unwrap(v) for k, v in self.cost.bytes.items()}

    @cached_property
    def link_bytes(self) -> Mapping[str, Num]:
        return {k: unwrap(v) for k, v in self.cost.link_bytes.items()}

    @cached_property
    def peak_flops_per_s(self) -> Num:
        """Effective peak: FLOPs / compute time (the dtype's peak if only one)."""
        cost, chip = self.cost, self.chip
        arithmetic = [self.time_s[u] for u in (COMPUTE, VECTOR, SFU) if u in self.time_s]
        flops = np.asarray(cost.total_flops, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            busy = max_argmax(arithmetic)[0] if arithmetic else np.asarray(0.0)
            # the units overlapped; at most all of them at once (denormals round past it)
            rates = [chip.peak_flops(dt) for dt in cost.flops] + [
                chip.vector_flops(dt) for dt in cost.vector_flops] + (
                [chip.special_ops() or 0.0] if cost.special_ops else [])
            return unwrap(np.where(busy > 0, np.minimum(flops / busy, sum(rates)), np.nan))

    @cached_property
    def attainable_flops_per_s(self) -> Num:
        """FLOPs / t_lower, at most the effective peak."""
        peak, t_lower = np.asarray(self.peak_flops_per_s), np.asarray(self.t_lower_s)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            attainable = np.where(t_lower > 0, np.asarray(self.cost.total_flops) / t_lower, 0.0)
            return unwrap(np.where(np.isfinite(peak), np.minimum(attainable, peak), attainable))

    @cached_property
    def intensity(self) -> Mapping[str, Num]:
        """Level or link -> FLOP/byte (none without FLOPs: FLOP per byte means nothing)."""
        if not self.cost.has_arithmetic:
            return {}
        flops = np.asarray(self.cost.total_flops, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return {name: unwrap(flops / np.asarray(moved)) for name, moved in
                    [*self.cost.bytes.items(), *self.cost.link_bytes.items()]}

    @cached_property
    def ridge(self) -> Mapping[str, Num]:
        """Level or link -> FLOP/byte at the effective compute peak."""
        peak = np.asarray(self.peak_flops_per_s)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return {name: unwrap(peak / self.chip.bandwidth_Bps(name))
                    for name in self.intensity}

    @property
    def bound(self) -> Any:
        """The resource that sets t_lower: a str, or an array of str for array-valued costs
        (built on demand: a million-point sweep need not carry a million strings)."""
        if isinstance(self.bound_index, int):
            return list(self.time_s)[self.bound_index]
        return unwrap(np.asarray(list(self.time_s))[self.bound_index])

    @property
    def utilization(self) -> dict[str, Num]:
        """Share of each resource's capacity used when running at t_lower."""
        with np.errstate(divide="ignore", invalid="ignore"):  # nothing to do: no share (NaN)
            return {r: unwrap(np.asarray(t) / self.t_lower_s) for r, t in self.time_s.items()}

    def __repr__(self) -> str:
        name = self.cost.name or "cost"
        if np.ndim(self.t_lower_s):
            low = np.asarray(self.t_lower_s)
            return (f"Estimate({name} on {self.hardware}: {low.size} points, t_lower "
                    f"{format_time(float(low.min()))} .. {format_time(float(low.max()))})")
        hbm = self.intensity.get("hbm")
        tail = "" if hbm is None else f", I_hbm {float(hbm):.4g} FLOP/B"
        return (f"Estimate({name} on {self.hardware}: {self.bound}-bound, t_lower "
                f"{format_time(float(self.t_lower_s))}{tail})")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (arrays become lists, NaN becomes None)."""
        return jsonable({
            "hardware": self.hardware,
            "name": self.cost.name,
            "flops": self.flops,
            "flops_by_dtype": dict(self.flops_by_dtype),
            "bytes": dict(self.bytes),
            "link_bytes": dict(self.link_bytes),
            "intensity": dict(self.intensity),
            "ridge": dict(self.ridge),
            "time_s": dict(self.time_s),
            "t_lower_s": self.t_lower_s,
            "t_upper_s": self.t_upper_s,
            "bound": self.bound,
            "peak_flops_per_s": self.peak_flops_per_s,
            "attainable_flops_per_s": self.attainable_flops_per_s,
            "utilization": self.utilization,
            "times": OP_TIMES,
        })


# What Estimate.__init__ leaves out: no link, no chain (read-only, as a Cost's empty counts)
Estimate.chain_s = MappingProxyType({})


_SCALARS = frozenset({float, int, np.float64})


def max_argmax(values: list[Any]) -> tuple[Any, Any]:
    """Elementwise max and index of the (first) max over a few broadcastable arrays.

    A loop over the handful of resources beats np.stack + argmax(axis=0), which walks a
    million-point sweep column by column. Smaller arrays go first (a (batch, 1) column
    costs nothing beside a (batch, length) grid), with ties still going to the earlier
    value in `values`.
    """
    if all_one_point(values):
        top = max(values)
        return top, values.index(top)  # the first of equals, as below
    if _SCALARS.issuperset(map(type, values)):
        scalars = [float(v) for v in values]
        top = max(scalars)
        return top, scalars.index(top)  # the first of equals, as below
    arrays = [np.asarray(v, dtype=float) for v in values]
    order = sorted(range(len(arrays)), key=lambda i: arrays[i].size)  # stable
    first = order[0]
    best: Any = arrays[first]
    index: Any = np.full(best.shape, first, dtype=np.uint8)  # a handful of resources
    seen = [first]
    for j in order[1:]:
        arr = arrays[j]
        if j > max(seen):  # every earlier winner comes first: ties stay
            wins = arr > best
        elif j < min(seen):  # this one comes first: ties go to it
            wins = arr >= best
        else:
            wins = (arr > best) | ((arr == best) & (index > j))
        shape = np.broadcast_shapes(best.shape, arr.shape)
        if index.shape == shape and shape and best is not arrays[first]:  # in place
            np.copyto(index, j, where=wins)
            np.maximum(best, arr, out=best)
        else:
            index = np.where(wins, np.uint8(j), index)
            best = np.maximum(best, arr)
        seen.append(j)
    if best is arrays[first]:
        best = best.copy()
    return np.asarray(best), np.asarray(index)


def _num(value: Any) -> Any:
    """A count as itself when it is a number or an array (scalar arithmetic stays in Python
    floats, ~30x cheaper than 0-d arrays), else as an array."""
    return value if isinstance(value, (int, float, np.ndarray)) else np.asarray(value)


def _per(amount: Any, rate: float) -> Any:
    """amount / rate; an array is multiplied by the reciprocal (within an ulp of dividing,
    and a third of the time over a sweep's grid)."""
    return amount * (1.0 / rate) if type(amount) is np.ndarray else amount / rate


def _busy(counts: Mapping[str, Num], rate: Callable[[str], float]) -> Any:
    """Σ count / rate(dtype): the units' time (dtypes share the units, so their times add)."""
    if len(counts) == 1:  # the common case: one dtype
        ((dtype, count),) = counts.items()
        if one_point(count):
            return count / rate(dtype)
        return _per(_num(count), rate(dtype))
    return add_all([_per(_num(count), rate(dtype)) for dtype, count in counts.items()])


# A transcendental the special-function units would take can run instead as a polynomial on
# the vector units (FlashAttention-4's software exp2, a cubic in three FMAs with its exponent
# added in: at least 4 fp32 instruction slots, 8 FLOPs of the vector peak, each).
EMULATED_SPECIAL_FLOPS = 8.0


def _arithmetic_times(cost: Cost, chip: Chip, times: dict[str, Num],
                      shared_special: bool = True) -> None:
    """Time per compute unit: tensor cores (`compute`), vector units, special functions.
    `shared_special`: the special functions' time is what they take when the vector units
    emulate the share that balances the two (a bound: some kernels split their exps so);
    without it the special-function units do them all (what most kernels do)."""
    if cost.flops:
        times[COMPUTE] = _busy(cost.flops, chip.peak_flops)
    if cost.vector_flops:
        times[VECTOR] = _busy(cost.vector_flops, chip.vector_flops)
    if cost.special_ops:
        rate = chip.special_ops()
        if rate:  # a chip file without the rate: no such roof (looser)
            special = add_all([_num(n) for n in cost.special_ops.values()])
            times[SFU] = _shared_with_vector(special, rate, times.get(VECTOR, 0.0),
                                             chip.vector_flops("fp32")) \
                if shared_special else _per(special, rate)


def _shared_with_vector(special: Any, rate: float, vector_s: Any, vector_rate: float) -> Any:
    """The special functions' time when the vector units (busy `vector_s`) may take a share
    of them: all on their own units while the vector units take longer (s / rate <=
    vector_s); else the time at which both finish together, (vector_s + c·s / R_v) /
    (1 + c·rate / R_v), never below vector_s: the two units' max is the least of any split."""
    alone = _per(special, rate)
    per = EMULATED_SPECIAL_FLOPS / vector_rate  # vector seconds per emulated evaluation
    shared = (vector_s + special * per) / (1.0 + rate * per)
    if one_point(alone) and one_point(vector_s):
        return alone if alone <= vector_s else shared
    return np.where(alone <= vector_s, alone, shared)


def link_times(cost: Cost, chip: Chip) -> tuple[dict[str, Num], dict[str, Num]]:
    """Per link: its bytes / bandwidth (per direction), and its latency: every message step
    pays the link's alpha and every collective call its base latency."""
    transfer: dict[str, Num] = {}
    latency: dict[str, Num] = {}
    names = cost.link_bytes.keys() | cost.link_steps.keys() | cost.link_calls.keys()
    for name in sorted(names) if len(names) > 1 else names:
        link = chip.links.get(name) or chip.link(name)  # chip.link: the error
        transfer[name] = _per(_num(cost.link_bytes.get(name, 0.0)), link.bandwidth_Bps)
        latency[name] = (_num(cost.link_steps.get(name, 0.0)) * link.latency_s
                         + _num(cost.link_calls.get(name, 0.0)) * link.base_latency_s)
    return transfer, latency


def evaluate(cost: Cost, hw: Chip | System | str, serial_comm: bool = True,
             shared_special: bool = True) -> Estimate:
    """Bound a per-chip Cost on a chip (a Chip, a System, a catalog id or alias, or a chip
    file path).

    The compute units and memory levels overlap (t_lower is their max). On each link a
    collective's message steps cannot finish before their bytes arrive, so the link's time is
    its latency plus its bytes over its bandwidth (the alpha-beta model: `chain_s`); the
    phases of a hierarchical collective on different links pipeline, so each link's chain
    competes with the other resources on its own. The bound is the largest resource (for a
    link, `latency` where alpha dominates its chain). `serial_comm=False` lets each link's
    bytes and the latency overlap like every other resource: the floor of a whole step.
    `shared_special=False` leaves every transcendental on the special-function units (the
    expected time: most kernels do); the bound lets the vector units emulate a share.
    """
    chip = hw if type(hw) is Chip else load_chip(hw)
    times: dict[str, Num] = {}
    if cost.vector_flops or cost.special_ops:
        _arithmetic_times(cost, chip, times, shared_special)
    elif cost.flops:  # a GEMM: the tensor cores alone (as _arithmetic_times, one call less)
        times[COMPUTE] = _busy(cost.flops, chip.peak_flops)
    if len(cost.bytes) == 1:  # most ops: HBM alone (chip.level raises for a level it lacks)
        ((name, amount),) = cost.bytes.items()
        rate = chip.bandwidths.get(name) or chip.level(name).bandwidth_Bps
        times[name] = amount / rate if one_point(amount) else _per(_num(amount), rate)
    elif cost.bytes:
        found = 0
        for level in chip.memory:  # chip order: outermost first
            moved = cost.bytes.get(level.name)
            if moved is not None:
                times[level.name] = (moved / level.bandwidth_Bps if one_point(moved)
                                     else _per(_num(moved), level.bandwidth_Bps))
                found += 1
        if found < len(cost.bytes):
            for name in cost.bytes:
                chip.level(name)  # raises for the level the chip lacks
    links = cost.link_bytes or cost.link_steps or cost.link_calls
    if not links and times and all_one_point(times.values()):
        # one point on compute and memory alone (most ops of a whole-model estimate): the
        # same max, first-of-equals index and sum as below, in plain Python
        local = list(times.values())
        t_lower = max(local)
        t_upper = local[0] if len(local) == 1 else sum(local, 0.0)  # as add_all (-0.0 too)
        return Estimate(chip.id, cost, times, t_lower, t_upper, local.index(t_lower), chip)
    if links and serial_comm and all_one_point(times.values()) \
            and all_one_point(_link_counts(cost)):
        return _on_links_one_point(cost, chip, times)
    chains: dict[str, Any] = {}
    if links:
        local = list(times.values())
        transfer, latency = link_times(cost, chip)
        times.update(transfer)
        if cost.link_steps or cost.link_calls:
            times[LATENCY] = add_all(list(latency.values()))
        if serial_comm:
            chains = {k: transfer[k] + latency[k] for k in transfer}
        else:  # every resource its own roof
            local = list(times.values())
    elif not times:  # an empty Cost: nothing to do
        times[COMPUTE] = 0.0
        local = [0.0]
    else:
        local = list(times.values())
    names = list(times)
    t_upper = add_all(list(times.values()))
    if local:
        t_lower, bound_index = max_argmax(local)
    else:  # a pure collective: its busiest link
        t_lower, bound_index = 0.0, names.index(next(iter(chains)))
    for name, chain in chains.items():  # each link's chain against the best so far
        which = names.index(name)
        if LATENCY in times:  # `latency` where alpha dominates the chain
            which = where(latency[name] > transfer[name], names.index(LATENCY), which)
        longer = chain > t_lower
        bound_index = where(longer, which, bound_index)  # ties: compute / memory
        t_lower = where(longer, chain, t_lower)
    return Estimate(
        hardware=chip.id, cost=cost, chain_s=_unwrapped(chains), time_s=_unwrapped(times),
        t_lower_s=unwrap(t_lower), t_upper_s=unwrap(t_upper), bound_index=unwrap(bound_index),
        chip=chip)


def _link_counts(cost: Cost) -> list[Any]:
    return [*cost.link_bytes.values(), *cost.link_steps.values(), *cost.link_calls.values()]


def _on_links_one_point(cost: Cost, chip: Chip, times: dict[str, Num]) -> Estimate:
    """`evaluate` of one point with links (a collective in a whole-model estimate): the same
    times, chains, sums and first-of-equals bound as the general path, in plain Python."""
    local = list(times.values())
    names = cost.link_bytes.keys() | cost.link_steps.keys() | cost.link_calls.keys()
    transfer: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    for name in sorted(names) if len(names) > 1 else names:
        link = chip.links.get(name) or chip.link(name)  # chip.link: the error
        transfer[name] = times[name] = cost.link_bytes.get(name, 0.0) / link.bandwidth_Bps
        latency[name] = (cost.link_steps.get(name, 0.0) * link.latency_s
                         + cost.link_calls.get(name, 0.0) * link.base_latency_s)
    if cost.link_steps or cost.link_calls:
        waits = list(latency.values())
        times[LATENCY] = waits[0] if len(waits) == 1 else sum(waits, 0.0)  # as add_all
    order = list(times)
    spent = list(times.values())
    t_upper = spent[0] if len(spent) == 1 else sum(spent, 0.0)
    if local:
        t_lower = max(local)
        bound_index = local.index(t_lower)
    else:  # a pure collective: its busiest link
        t_lower, bound_index = 0.0, order.index(next(iter(transfer)))
    chains = {}
    for name in transfer:  # each link's chain against the best so far
        chain = chains[name] = transfer[name] + latency[name]
        if chain > t_lower:  # ties: compute / memory
            t_lower = chain
            # `latency` where alpha dominates the chain
            bound_index = order.index(LATENCY if LATENCY in times and
                                      latency[name] > transfer[name] else name)
    return Estimate(chip.id, cost, times, t_lower, t_upper, bound_index, chip, chains)


def _unwrapped(values: dict[str, Any]) -> dict[str, Any]:
    """0-d arrays as Python scalars (a dict of plain floats as it is)."""
    if all_one_point(values.values()):
        return values
    return {k: unwrap(v) for k, v in values.items()}
