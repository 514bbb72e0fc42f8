"""Design-space sweeps: a grid of model configurations evaluated as numpy arrays.

Numeric axes (batch, context / prompt / sequence length, speculative k) become one
broadcast grid per configuration, analysed in a single vectorized call; only categorical
axes (chip, TP/PP/DP/EP degree, dtypes) are looped over, so a million points cost a handful
of analyses, not a million. Every point is kept: points that do not fit in memory are
marked `fits = False`, never dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import RooflineError
from .hardware import Chip, load_chip
from .models import Parallel, Precision, analyze, decode, prefill, train
from .models.catalog import load_model
from .ops.params import OpDecl
from .ops.registry import op_decl, resolve_op
from .units import parse_number

MAX_AXIS = 10_000_000  # points on one axis
MAX_POINTS = 4_000_000  # points in one sweep: about 1.5 kB of working memory each


def parse_axis(text: str, what: str, number: Callable[[str, str], float] = parse_number,
               whole: bool = True) -> np.ndarray[Any, Any]:
    """'1,8,64', '1k,8k,128k' (k = 1024 tokens), 'start:stop:xF' (geometric) or
    'start:stop:+S' (arithmetic), stop included when the step lands on it. `number` reads
    one value (parse_bytes for byte sizes: '1KiB:1GiB:x4')."""
    text = str(text).strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3 or parts[2][:1] not in ("x", "+"):
            raise RooflineError(f"{what}: a range is start:stop:xF or start:stop:+S, got {text!r}")
        start, stop = number(parts[0], what), number(parts[1], what)
        geometric = parts[2][0] == "x"
        step = parse_number(parts[2][1:], what) if geometric else number(parts[2][1:], what)
        if stop < start or (geometric and step <= 1):
            raise RooflineError(f"{what}: range {text!r} is empty or never ends")
        count = 1 + (np.floor(np.log(stop / start) / np.log(step) + 1e-9) if geometric
                     else np.floor((stop - start) / step + 1e-9))
        if count > MAX_AXIS:
            raise RooflineError(f"{what}: range {text!r} has {count:.3g} points (at most "
                                f"{MAX_AXIS:.0e} per axis)")
        steps = np.arange(int(count))
        values = start * step**steps if geometric else start + step * steps
    else:
        values = np.array([number(v, what) for v in text.split(",") if v.strip()])
    if values.size == 0:
        raise RooflineError(f"{what}: no values in {text!r}")
    if whole and np.any(values != np.round(values)):
        raise RooflineError(f"{what}: values must be whole numbers, got {text!r}")
    return values.astype(float)


def _check_points(points: int) -> None:
    if points > MAX_POINTS:
        raise RooflineError(f"the sweep has more than {MAX_POINTS:.0e} points (about 1.5 kB of "
                            "memory each); narrow an axis or split the sweep")


def parse_list(text: str, what: str = "list") -> list[str]:
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    if not values:
        raise RooflineError(f"{what}: give at least one value, got {text!r}")
    return values


@dataclass(frozen=True)
class SweepResult:
    """Column arrays, one entry per point (all configurations concatenated), and where the
    bound changes along the batch axis of each configuration."""

    phase: str
    columns: dict[str, np.ndarray[Any, Any]]
    bound_changes: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def frontier(self, max_latency_s: float | None = None) -> dict[str, Any]:
        """Best throughput per chip kind (within a latency target, fitting in memory) and
        the fewest chips that fit."""
        c = self.columns
        ok = c["fits"].astype(bool)
        if max_latency_s is not None:
            ok &= c["t_lower_s"] <= max_latency_s
        best = {}
        for hw in np.unique(c["hardware"]):
            mask = ok & (c["hardware"] == hw)
            if mask.any():
                best[str(hw)] = self.row(int(np.flatnonzero(mask)[np.argmax(
                    c["tokens_per_s"][mask])]))
        per_chip = c["tokens_per_s"] / c["chips"]
        best_per_chip = self.row(int(np.flatnonzero(ok)[np.argmax(per_chip[ok])])) \
            if ok.any() else None
        # fewest chips meeting the same constraints (the latency target too), the fastest
        # such point on a tie
        feasible = np.flatnonzero(ok)
        fewest = self.row(int(feasible[np.lexsort((-c["tokens_per_s"][feasible],
                                                   c["chips"][feasible]))[0]])) \
            if feasible.size else None
        return {"best_tokens_per_s": best, "best_tokens_per_s_per_chip": best_per_chip,
                "fewest_chips_that_fit": fewest, "bound_changes": self.bound_changes,
                "constraint": "fits in memory" + (
                    f", t_lower per step <= {max_latency_s:g} s" if max_latency_s else ""),
                "points": len(self), "feasible_points": int(ok.sum()),
                "pareto": [self.row(i) for i in self.pareto(max_latency_s)]}

    def pareto(self, max_latency_s: float | None = None) -> list[int]:
        """Points no other feasible point beats on both latency and throughput."""
        c = self.columns
        ok = c["fits"].astype(bool)
        if max_latency_s is not None:
            ok &= c["t_lower_s"] <= max_latency_s
        return pareto_front(c["t_lower_s"], c["tokens_per_s"], ok)

    def row(self, i: int) -> dict[str, Any]:
        return {k: v[i].item() for k, v in self.columns.items()}


def _bound_changes(config: dict[str, Any], batch: Any, length: Any, bound: Any
                   ) -> list[dict[str, Any]]:
    """For each length, the first batch whose bound differs from the smallest batch's."""
    bound = np.asarray(bound)
    differs = bound != bound[:1, :]
    first = differs.argmax(axis=0)
    return [{**config, "length": float(length[0, j]), "batch": float(batch[first[j], 0]),
             "from": str(bound[0, j]), "to": str(bound[first[j], j])}
            for j in np.flatnonzero(differs.any(axis=0))]


def pareto_front(latency: Any, throughput: Any, ok: Any) -> list[int]:
    """Indices of the points (where `ok`) that no other such point beats on both lower
    latency and higher throughput, fastest first."""
    latency, throughput = np.asarray(latency), np.asarray(throughput)
    idx = np.flatnonzero(np.asarray(ok, dtype=bool))
    if idx.size == 0:
        return []
    order = idx[np.lexsort((-throughput[idx], latency[idx]))]
    best = np.maximum.accumulate(throughput[order])
    improves = np.r_[True, best[1:] > best[:-1]]
    return [int(i) for i in order[improves]]


def configurations(hardware: Sequence[str], tp: Sequence[int] = (1,), pp: Sequence[int] = (1,),
                   dp: Sequence[int] = (1,), ep: Sequence[int] = (1,),
                   weight_dtypes: Sequence[str] = ("bf16",),
                   kv_dtypes: Sequence[str] = ("bf16",),
                   precision: Callable[[Chip, str, str], Precision] | None = None,
                   microbatches: int = 1) -> Iterator[tuple[Chip, Parallel, Precision,
                                                            dict[str, Any]]]:
    """Every combination of the categorical axes: the chip, its parallelism and dtypes, and
    the configuration's columns. `precision(chip, weights, kv)` builds the dtypes (default:
    bf16 activations)."""
    make = precision or (lambda chip, w, kv: Precision(weights=w, activations="bf16",
                                                       kv_cache=kv))
    for chip, t, p, d, e, w, kv in itertools.product([load_chip(h) for h in hardware], tp, pp,
                                                     dp, ep, weight_dtypes, kv_dtypes):
        par = Parallel(tp=t, pp=p, dp=d, ep=e, microbatches=microbatches)
        yield chip, par, make(chip, w, kv), {"hardware": chip.id, "tp": t, "pp": p, "dp": d,
                                             "ep": e, "weight_dtype": w, "kv_dtype": kv}


def sweep_model(model: str, hardware: Sequence[str], phase: str, batch: Any, length: Any,
                tp: Sequence[int] = (1,), pp: Sequence[int] = (1,), dp: Sequence[int] = (1,),
                ep: Sequence[int] = (1,), weight_dtypes: Sequence[str] = ("bf16",),
                kv_dtypes: Sequence[str] = ("bf16",), dtype: str = "bf16", k: int = 1,
                microbatches: int = 1, batch_per_replica: bool = False) -> SweepResult:
    """Analyse every combination; `length` is the context (decode), prompt length (prefill)
    or sequence length (train). `batch` is the total over data-parallel replicas, as in
    `analyze` (a configuration skips the batches its dp does not divide); with
    `batch_per_replica` it is per replica (the total is batch x dp)."""
    spec = load_model(model)
    configs = len(hardware) * len(tp) * len(pp) * len(dp) * len(ep) * len(weight_dtypes) * len(
        kv_dtypes)
    _check_points(configs * np.size(batch) * np.size(length))
    n = np.asarray(length, dtype=float)[None, :]
    steps = {"decode": lambda b: decode(b, n, k), "prefill": lambda b: prefill(b, n),
             "train": lambda b: train(b, n)}
    if phase not in steps:
        raise RooflineError(f"unknown phase {phase!r} (allowed: {', '.join(steps)})")
    parts: dict[str, list[np.ndarray[Any, Any]]] = {}
    changes: list[dict[str, Any]] = []
    given = np.asarray(batch, dtype=float)
    for chip, par, prec, config in configurations(
            hardware, tp, pp, dp, ep, weight_dtypes, kv_dtypes,
            lambda chip, w, kv: Precision(weights=w, activations=dtype, kv_cache=kv),
            microbatches):
        d = par.dp
        total = given * d if batch_per_replica else given[np.mod(given, d) == 0]
        if total.size == 0:
            raise RooflineError(f"--batch: no value is divisible by dp {d} (the batch is the "
                                "total over replicas; --batch-per-replica gives it per "
                                "replica)")
        b = total[:, None]
        bb, nn = np.broadcast_arrays(b, n)
        a = analyze(spec, chip, steps[phase](b), par, prec)
        changes += _bound_changes(config, bb, nn, np.broadcast_to(a.bound, bb.shape))
        size = bb.size
        column = {
            "hardware": np.full(size, chip.id), "tp": np.full(size, par.tp),
            "pp": np.full(size, par.pp), "dp": np.full(size, d), "ep": np.full(size, par.ep),
            "chips": np.full(size, par.chips),
            "weight_dtype": np.full(size, prec.weights), "kv_dtype": np.full(size, prec.kv),
            "batch": bb.ravel(), "length": nn.ravel(),
            "t_lower_s": np.broadcast_to(a.t_lower_s, bb.shape).ravel(),
            "t_upper_s": np.broadcast_to(a.t_upper_s, bb.shape).ravel(),
            "tokens_per_s": np.broadcast_to(a.tokens_per_s, bb.shape).ravel(),
            "bound": np.broadcast_to(a.bound, bb.shape).ravel(),
            "mfu": np.broadcast_to(a.mfu, bb.shape).ravel(),
            "memory_bytes": np.broadcast_to(a.memory.total_bytes, bb.shape).ravel(),
            "fits": np.broadcast_to(a.memory.fits, bb.shape).ravel(),
        }
        for key, value in column.items():
            parts.setdefault(key, []).append(np.asarray(value))
    return SweepResult(phase, {k: np.concatenate(v) for k, v in parts.items()}, changes)


def sweep_op(op: str | OpDecl, hardware: Sequence[str], numeric: dict[str, np.ndarray[Any, Any]],
             categorical: Mapping[str, Sequence[Any]] | None = None,
             fixed: Mapping[str, Any] | None = None) -> SweepResult:
    """Evaluate a registered op (`roofline.ops.OPS`) over a grid: each numeric argument gets
    its own array axis (one evaluation per chip and categorical combination covers the whole
    grid); defaults are filled in as `roofline.ops.resolve_op` does.

    >>> import numpy as np
    >>> r = sweep_op("matmul", ["h100"], {"m": np.array([1.0, 4096.0]), "k": np.array([8192.0]),
    ...              "n": np.array([8192.0])})
    >>> [str(b) for b in r.columns["bound"]]
    ['hbm', 'compute']
    """
    from .evaluate import evaluate

    decl = op_decl(op)
    categorical, fixed = categorical or {}, fixed or {}

    names = list(numeric)
    shape = tuple(len(v) for v in numeric.values())
    configs = len(hardware) * int(np.prod([len(v) for v in categorical.values()]))
    _check_points(configs * int(np.prod(shape)))
    axes = {name: values.reshape([-1 if i == k else 1 for i in range(len(names))])
            for k, (name, values) in enumerate(numeric.items())}
    parts: dict[str, list[np.ndarray[Any, Any]]] = {}
    changes: list[dict[str, Any]] = []
    keys = list(categorical)
    for chip_name in hardware:
        chip = load_chip(chip_name)
        for combo in itertools.product(*categorical.values()):
            config = dict(zip(keys, combo, strict=True))
            kwargs = resolve_op(decl, chip, **{**fixed, **config, **axes})
            est = evaluate(decl.function(**kwargs), chip)
            size = int(np.prod(shape))
            grid = np.meshgrid(*numeric.values(), indexing="ij")
            column: dict[str, Any] = {"hardware": np.full(size, chip.id)}
            column.update({k: np.full(size, str(v)) for k, v in config.items()})
            column.update({n: g.ravel() for n, g in zip(names, grid, strict=True)})
            column.update({
                "t_lower_s": np.broadcast_to(est.t_lower_s, shape).ravel(),
                "t_upper_s": np.broadcast_to(est.t_upper_s, shape).ravel(),
                "attainable_flops_per_s": np.broadcast_to(est.attainable_flops_per_s,
                                                          shape).ravel(),
                "bound": np.broadcast_to(est.bound, shape).ravel(),
                "fits": np.ones(size, dtype=bool),
                "chips": np.ones(size), "tokens_per_s": np.zeros(size),
            })
            for key, value in column.items():
                parts.setdefault(key, []).append(np.asarray(value))
            if names:
                bound = np.broadcast_to(est.bound, shape).reshape(shape[0], -1)
                first = numeric[names[0]]
                changes += [{"hardware": chip.id, **config, "axis": names[0],
                             "at": float(first[i]), "from": str(bound[0, j]),
                             "to": str(bound[i, j])}
                            for j in range(min(bound.shape[1], 50))
                            for i in [int(np.argmax(bound[:, j] != bound[0, j]))] if i > 0]
    return SweepResult("op", {k: np.concatenate(v) for k, v in parts.items()}, changes)
