"""Design-space sweeps: a grid of model configurations evaluated as numpy arrays.

Numeric axes (batch, context / prompt / sequence length, speculative k) become one
broadcast grid per configuration, analysed in a single vectorized call; only categorical
axes (chip, TP/PP/DP/EP degree, dtypes) are looped over, so a million points cost a handful
of analyses, not a million. Every point is kept: points that do not fit in memory are
marked `fits = False`, never dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import RooflineError
from .hardware.catalog import load_chips
from .model_sweep import ModelSweep, configurations
from .ops.params import OpDecl
from .ops.registry import op_decl, resolve_op
from .sweep_frame import Frontier, SweepResult, pareto_front
from .units import parse_number

__all__ = ["Frontier", "ModelSweep", "SweepResult", "configurations", "pareto_front",
           "parse_axis", "parse_list", "sweep_model", "sweep_op"]

MAX_AXIS = 10_000_000  # points on one axis
MAX_POINTS = 20_000_000  # points a SweepResult keeps in memory (about 50 B each); a
# streamed sweep (`ModelSweep`, the CLI) has no limit: it works chunk by chunk


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
        raise RooflineError(f"the sweep has more than {MAX_POINTS:.0e} points to keep in memory "
                            "(about 50 B each); stream it (roofline.sweep.ModelSweep; on the "
                            "command line: sweep model with a CSV output) or narrow an axis")


def parse_list(text: str, what: str = "list") -> list[str]:
    values = [v.strip() for v in str(text).split(",") if v.strip()]
    if not values:
        raise RooflineError(f"{what}: give at least one value, got {text!r}")
    return values


def sweep_model(model: str, hardware: Sequence[str], phase: str, batch: Any, length: Any,
                tp: Sequence[int] = (1,), pp: Sequence[int] = (1,), dp: Sequence[int] = (1,),
                ep: Sequence[int] = (1,), weight_dtypes: Sequence[str] | None = None,
                kv_dtypes: Sequence[str] = ("bf16",), dtype: str = "bf16", k: int = 1,
                microbatches: int = 1, batch_per_replica: bool = False,
                expect: bool = False) -> SweepResult:
    """Analyse every combination; `length` is the context (decode), prompt length (prefill)
    or sequence length (train). `batch` is the total over data-parallel replicas, as in
    `analyze` (a configuration skips the batches its dp does not divide); with
    `batch_per_replica` it is per replica (the total is batch x dp). Every point is kept in
    memory (about 50 B each); `ModelSweep` streams a sweep of any size chunk by chunk.
    `weight_dtypes` None: the checkpoint's own (`model_precision`). `expect` adds the
    expected time beside the bound (`expected_t_s`,
    `expected_tokens_per_s`, `expected_mfu`: `expect.expected_step` of each point)."""
    sweep = ModelSweep(model, hardware, phase, batch, length, tp, pp, dp, ep, weight_dtypes,
                       kv_dtypes, dtype, k, microbatches, batch_per_replica, expect=expect)
    _check_points(sweep.points)
    return sweep.collect()


def sweep_op(op: str | OpDecl, hardware: Sequence[str], numeric: dict[str, np.ndarray[Any, Any]],
             categorical: Mapping[str, Sequence[Any]] | None = None,
             fixed: Mapping[str, Any] | None = None, expect: bool = False) -> SweepResult:
    """Evaluate a registered op (`roofline.ops.OPS`) over a grid: each numeric argument gets
    its own array axis (one evaluation per chip and categorical combination covers the whole
    grid); defaults are filled in as `roofline.ops.resolve_op` does. `expect` adds the
    expected time beside the bound (`expected_t_s`, `expected_flops_per_s`; for a collective
    also the bound's and the expected algbw / busbw): `expect.expected` of each point.

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
    sources: dict[str, str] = {}
    keys = list(categorical)
    for chip in load_chips(hardware):
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
            if expect:
                column.update({k: np.broadcast_to(v, shape).ravel() for k, v in
                               _op_expected(decl, kwargs, chip, est, sources).items()})
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
    return SweepResult("op", {k: np.concatenate(v) for k, v in parts.items()}, changes,
                       sources)


def _op_expected(decl: OpDecl, kwargs: dict[str, Any], chip: Any, est: Any,
                 sources: dict[str, str]) -> dict[str, Any]:
    """The expected columns of one evaluation over the grid: each point's figures are those
    of the op run at that point alone (its collective algorithm, its weight-only dequant)."""
    from .expect import expected
    from .expect.op import dequant_family
    from .ops.collective_decls import COLLECTIVE_OPS
    from .ops.collectives import COLLECTIVES, busbw_factor

    # a collective's Cost names each point's algorithm: expected() takes each its own
    e = expected(est.cost, chip, dequant=dequant_family(kwargs.get("weight_dtype"), est.cost))
    sources.update(e.sources)
    t: Any = np.asarray(e.t_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {"expected_t_s": t,
               "expected_flops_per_s": np.asarray(est.flops, dtype=float) / t}
        kind = dict(zip((d.name for d in COLLECTIVE_OPS), COLLECTIVES, strict=True)).get(
            decl.name)
        if kind is not None:  # nccl-tests' figures (as `op --expect`), bound and expected
            factor = busbw_factor(kind, kwargs["ranks"])
            for label, time in (("", np.asarray(est.t_lower_s)), ("expected_", t)):
                algbw = np.where(time > 0, kwargs["nbytes"] / time, np.nan)
                out[f"{label}algbw_Bps"] = algbw
                out[f"{label}busbw_Bps"] = algbw * factor
    return out
