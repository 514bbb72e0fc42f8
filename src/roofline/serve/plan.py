"""The search: every configuration's operating points, the targets, the best per chip kind
and the Pareto frontiers. Categorical axes (chip, tp/pp/dp/ep, dtypes, mode) are looped as
`sweep` loops them (`sweep.configurations`); the running batch, the chunk size and the
prefill pool's utilization are arrays, one analysis per configuration and step kind."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..dtypes import dtype as lookup_dtype
from ..errors import ParameterError, RooflineError
from ..expect.table import engine as engine_name
from ..models import Parallel, Precision, load_model, model_precision
from ..models.spec import ModelSpec
from ..models.step import MemoryBudget
from ..sweep import configurations, pareto_front
from .deployment import check_deployment, pinned
from .disagg import Pools, disaggregated, pools, splits
from .grid import aggregated, running_grid
from .iteration import Engine, activation_dtype, expert_imbalance
from .point import Column, Config, Mask, Scalar, ServePoint
from .runtime import RUNTIMES, Runtime, check_runs_on, runtime
from .workload import Workload

MODES = ("aggregated", "disaggregated")
SEARCHED_CHUNKS = (512, 2048, 8192)  # with no engine named: its prefill budget is searched
INTEGERS = ("running", "chunk", "instances", "chips", "decode_chips", "max_running", "tp",
            "pp", "dp", "ep", "moe_tp", "prefill_tp", "prefill_pp", "prefill_dp", "prefill_ep",
            "prefill_moe_tp", "gpus", "prefill_workers", "decode_workers")


@dataclass(frozen=True)
class Targets:
    ttft_s: float | None = None
    tpot_s: float | None = None
    ttft_p99_s: float | None = None  # on the 99th percentile over requests (tails.py)
    tpot_p99_s: float | None = None


@dataclass(frozen=True)
class Space:
    """What is searched; a single value pins an axis. None: the defaults below."""

    tp: Sequence[int] = (1, 2, 4, 8)
    pp: Sequence[int] = (1,)
    # None: 1 for a dense model; for an MoE model also attention data parallelism over the
    # experts' EP group (dp 2, 4, 8 with ep = tp·dp), the layout the MoE serving recipes and
    # AIConfigurator pick at large batch
    dp: Sequence[int] | None = None
    ep: Sequence[int] | None = None  # None: 1, and for MoE models also ep = tp·dp
    weight_dtypes: Sequence[str] | None = None  # None: the checkpoint's own
    kv_dtypes: Sequence[str] | None = None  # None: the model's activation dtype (engines' auto)
    dtype: str | None = None  # compute dtype; None: activation_dtype() per weight dtype
    batch: Sequence[float] | None = None  # running sequences per instance (all its replicas)
    # prompt tokens per iteration per replica; None: the named engine's budget
    # (runtime.Runtime.chunk_tokens), or these three searched where none is named
    chunks: Sequence[float] | None = None
    modes: Sequence[str] = ("aggregated",)
    max_chips: int = 64
    # expert tensor parallelism (Parallel.moe_tp; ep = tp·dp / moe_tp where ep is not given);
    # None: implied by ep
    moe_tp: Sequence[int] | None = None
    # the whole deployment's GPUs: whole instances filling it (aggregated), or whole decode
    # and prefill workers within it, every split searched (disaggregated); None: the
    # capacity of one instance (aggregated) or of the smallest whole disaggregated deployment
    gpus: int | None = None
    # a disaggregated deployment's prefill pool: its layouts (None: those of tp, dp, ep,
    # which are the decode pool's) and the pinned worker counts of each pool
    prefill_tp: Sequence[int] | None = None
    prefill_dp: Sequence[int] | None = None
    prefill_ep: Sequence[int] | None = None
    prefill_workers: int | None = None
    decode_workers: int | None = None
    # the hottest EP rank's expert load over the mean (EPLB's max/mean), applied to the
    # expected time of the expert GEMMs only (Engine.imbalance); None: iteration.expert_imbalance
    eplb: float | None = None


@dataclass(frozen=True)
class Load:
    """How much traffic: None for the capacity at the targets, an open-loop Poisson `rate`
    (requests/s to the whole deployment) or a closed loop of `concurrency` clients."""

    rate: float | None = None
    concurrency: int | None = None


def _engines(spec: ModelSpec, hardware: Sequence[str], space: Space,
             budget: MemoryBudget | None, expect: bool = False, framework: str | None = None,
             limits: bool = True) -> tuple[list[tuple[Engine, Config]], list[str]]:
    """Every valid instance configuration; invalid ones (tp not dividing the heads, ep on a
    dense model, more chips than allowed) are skipped with the reason, unless all are. The
    engine's defaults (runtime.py) set the memory budget where none is given and cap the
    running sequences."""
    native = model_precision(spec)
    weights = list(space.weight_dtypes or [native.weights])
    kvs = list(space.kv_dtypes or [native.kv])
    eps = list(space.ep or [1, -1] if spec.moe else space.ep or [1])
    if space.moe_tp and not space.ep:  # ep = tp·dp / moe_tp, set per layout below
        eps = [-1]

    def precision(chip: Any, w: str, kv: str) -> Precision:
        act = space.dtype or activation_dtype(w, chip)
        if space.weight_dtypes is None and w == native.weights:
            return model_precision(spec, None, act, kv)  # the checkpoint's own mix (gpt-oss)
        # experts the checkpoint keeps narrower (gpt-oss's mxfp4) stay so: never widened
        experts = native.expert_weights if native.expert_weights and \
            lookup_dtype(native.expert_weights).bits < lookup_dtype(w).bits else None
        return Precision(weights=w, activations=act, kv_cache=kv, expert_weights=experts)

    out: list[tuple[Engine, Config]] = []
    skipped: list[str] = []
    dps: Sequence[int] = space.dp or ((1, 2, 4, 8) if spec.moe else (1,))
    tps = list(dict.fromkeys([*space.tp, *(space.prefill_tp or ())]))
    dps = list(dict.fromkeys([*dps, *(space.prefill_dp or ())]))
    eps = list(dict.fromkeys([*eps, *(space.prefill_ep or ())]))
    layouts = [(chip, par, prec, config) for chip, par0, prec, config0 in configurations(
        hardware, tps, space.pp, dps, eps, weights, kvs, precision)
        for par, config in _expert_splits(par0, config0, space, skipped, spec.moe is not None)]
    for chip, par, prec, config in layouts:
        if prec.expert_weights and prec.expert_weights != prec.weights:  # say the mix
            config["weight_dtype"] = f"{prec.weights}+{prec.expert_weights} experts"
        if par.chips > space.max_chips:
            skipped.append(f"{_name(config)}: {par.chips} chips > --max-chips "
                           f"{space.max_chips}")
            continue
        if framework:
            check_runs_on(engine_name(framework), chip)
        rt = runtime(engine_name(framework) if framework else None, chip, par.tp)
        mem = budget or MemoryBudget(rt.memory_fraction)
        out.append((Engine(spec, chip, par, prec, mem, expect=expect, framework=framework,
                           max_seqs=rt.max_running if limits else None,
                           chunk=rt.chunk_tokens if rt.engine in RUNTIMES else None,
                           imbalance=expert_imbalance(space.eplb, par)),
                    {**config, "dtype": prec.activations, "memory_fraction": mem.util,
                     "reserve_bytes": mem.reserve_bytes}))
    return out, skipped


def _expert_splits(par: Parallel, config: Config, space: Space, skipped: list[str],
                   moe: bool) -> list[tuple[Parallel, Config]]:
    """A layout with each expert-TP degree asked for (ep = tp·dp / moe_tp where ep is
    searched), skipping those that do not split tp·dp; every layout says its expert TP."""
    if not space.moe_tp:  # a dense model has no experts to split: 0
        return [(par, {**config, "moe_tp": par.expert_tp if moe else 0})]
    out = []
    for m in space.moe_tp:
        if not m:  # 0: the split ep implies
            out.append((par, {**config, "moe_tp": par.expert_tp if moe else 0}))
            continue
        ranks = par.tp * par.dp
        ep = ranks // m if not space.ep else par.ep
        if m * ep != ranks:
            skipped.append(f"{_name(config)} moe_tp {m}: moe_tp x ep must equal tp·dp "
                           f"({ranks})")
            continue
        out.append((replace(par, ep=ep, moe_tp=m), {**config, "ep": ep, "moe_tp": m}))
    return out


def _side(config: Config, space: Space, prefill: bool) -> bool:
    """Whether a layout belongs to the decode (or aggregated) side or the prefill pool."""
    tp, dp, ep = (space.prefill_tp, space.prefill_dp, space.prefill_ep) if prefill else \
        (None, None, None)
    tp, dp, ep = tp or space.tp, dp or space.dp, ep or space.ep
    return config["tp"] in tp and (dp is None or config["dp"] in dp) and \
        (ep is None or config["ep"] in ep)


@dataclass(frozen=True)
class ServePlan:
    """Every operating point as columns (one entry each), and the question it answers."""

    model: str
    workload: Workload
    targets: Targets
    load: Load
    columns: dict[str, Column]
    skipped: list[str] = field(default_factory=list)
    expected: bool = False  # step times are expected times (a forecast), not bounds
    engine: str | None = None  # the engine whose fitted factors the expected times took
    # per chip id: the engine's (or the generic) defaults the plan assumed, at TP 1 (a row's
    # memory_fraction column has its own TP's)
    runtimes: dict[str, Runtime] = field(default_factory=dict)
    # per chip id: the TDP that tokens_per_joule divides by, with its source (the chip file's
    # tdp_w, tdp_source, tdp_estimated; tdp_w None where the file gives none)
    tdp: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus: int | None = None  # the deployment's GPU budget (Space.gpus), None: per chip

    def __len__(self) -> int:
        return len(self.columns["tpot_s"])

    def __repr__(self) -> str:
        what = "expected" if self.expected else "bounds"
        return (f"ServePlan({self.model}: {len(self)} operating points, "
                f"{int(self.ok.sum())} meet the targets; {what})")

    def to_frame(self) -> Any:
        """Every operating point as a pandas DataFrame (pandas is an optional extra)."""
        from ..render.frames import frame

        return frame(self.columns)

    def _repr_html_(self) -> str:  # a notebook shows the best point per chip, then all
        from ..render.frames import columns_html

        front = self.frontier("tpot_s")  # every chip together
        keys = [k for k in ("hardware", "mode", "chips", "tp", "weight_dtype", "kv_dtype",
                            "running", "chunk", "output_tokens_per_s_per_chip",
                            "requests_per_s", "ttft_s", "tpot_s", "e2e_s", "bound")
                if k in self.columns]
        return columns_html(f"{self!r}: the Pareto frontier against TPOT", self.columns,
                            rows=front or None, keys=keys)

    @property
    def ok(self) -> Mask:
        """Points that fit, can sustain their load, and meet both targets."""
        c = self.columns
        ok = c["fits"] & c["feasible"]
        if self.targets.ttft_s is not None:
            ok = ok & (c["ttft_s"] <= self.targets.ttft_s)
        if self.targets.tpot_s is not None:
            ok = ok & (c["tpot_s"] <= self.targets.tpot_s)
        for key, limit in (("ttft_s_p99", self.targets.ttft_p99_s),
                           ("tpot_s_p99", self.targets.tpot_p99_s)):
            if limit is not None:
                ok = ok & (c[key] <= limit)
        return np.asarray(ok, dtype=bool)

    def best(self) -> dict[str, ServePoint]:
        """Per chip kind, the point with the most output tokens/s per chip meeting the
        targets (with a rate: the fewest chips; under a GPU budget the most output tokens/s
        of the deployment: the budget is paid for whole; ties go to the lower TPOT)."""
        c, ok = self.columns, self.ok
        rank = c["output_tokens_per_s" if self.gpus else "output_tokens_per_s_per_chip"]
        out = {}
        for hw in dict.fromkeys(c["hardware"].tolist()):
            idx = np.flatnonzero(ok & (c["hardware"] == hw))
            if idx.size:
                i = idx[np.lexsort((c["tpot_s"][idx], -rank[idx]))[0]]
                out[hw] = self.point(int(i))
        return out

    def frontier(self, against: str = "tpot_s", hardware: str | None = None) -> list[int]:
        """Points no other beats on both `against` (tpot_s or ttft_s, lower is better) and
        output tokens/s per chip, among those meeting the other target."""
        c = self.columns
        ok = c["fits"] & c["feasible"]
        other = "ttft_s" if against == "tpot_s" else "tpot_s"
        limit = getattr(self.targets, other)
        if limit is not None:
            ok = ok & (c[other] <= limit)
        for key, tail in (("ttft_s_p99", self.targets.ttft_p99_s),
                          ("tpot_s_p99", self.targets.tpot_p99_s)):
            if tail is not None:  # the tail targets hold along either frontier
                ok = ok & (c[key] <= tail)
        if hardware is not None:
            ok = ok & (c["hardware"] == hardware)
        return pareto_front(c[against], c["output_tokens_per_s_per_chip"], ok)

    def point(self, i: int) -> ServePoint:
        """Operating point `i` as a typed record (frontier() gives indices)."""
        return ServePoint.of(self.columns, i)

    def row(self, i: int) -> dict[str, Scalar]:
        """Operating point `i` as --json writes it: every column by name."""
        return {k: v[i].item() for k, v in self.columns.items()}


def plan(model: str | ModelSpec, hardware: Sequence[str], workload: Workload,
         targets: Targets | None = None, space: Space | None = None, load: Load | None = None,
         budget: MemoryBudget | None = None, prices: dict[str, float] | None = None,
         expect: bool = False, framework: str | None = None,
         engine_limits: bool = True) -> ServePlan:
    """Every operating point of every configuration (see grid.py and disagg.py for the model); with
    `expect`, step times are expected times (roofline.expect) instead of bounds, with the
    fitted factor of the serving engine `framework` names where one exists. The engine's
    defaults (runtime.py: its memory fraction where `budget` is None, its cap on running
    sequences, its prefill chunk where `space` names none) apply unless not
    `engine_limits` (a published run whose own settings are not known)."""
    spec = load_model(model)
    targets, space, load = targets or Targets(), space or Space(), load or Load()
    name = engine_name(framework) if framework else None
    for mode in space.modes:
        if mode not in MODES:
            raise RooflineError(f"unknown mode {mode!r} (allowed: {', '.join(MODES)})")
    if load.rate is not None and load.concurrency is not None:
        raise ParameterError("rate", "(open loop) or {concurrency} (closed loop), not both",
                             where="give ", mentions=("concurrency",))
    if load.rate is not None and space.batch is not None and len(space.batch) == 1:
        # an open loop's running batch is what the load keeps in flight (Little's law:
        # rate x time in decode); a pinned one it cannot sustain reported a TPOT no run sees
        raise ParameterError("batch", "pins the running batch, {rate} sets it (Little's law: "
                             "rate x decode time): give one, or a {batch} grid to pick from",
                             mentions=("rate", "batch"))
    check_deployment(space)
    engines, skipped = _engines(spec, hardware, space, budget, expect, framework,
                                engine_limits)
    groups: list[dict[str, Column]] = []

    def add(config: Config, cols: dict[str, Column], most: int) -> None:
        shape = np.broadcast(*cols.values()).shape
        flat = {k: np.broadcast_to(v, shape).ravel() for k, v in cols.items()}
        flat["fits"] = flat["running"] <= most
        flat["max_running"] = np.full(flat["running"].size, float(most))
        flat.update({k: np.full(flat["running"].size, v) for k, v in config.items()})
        groups.append(flat)

    batch = None if space.batch is None else np.asarray(space.batch, dtype=float)
    sides: list[tuple[Engine, Config, Pools, int, Column]] = []
    for e, config in engines:
        chunks = np.asarray(space.chunks or ((e.chunk,) if e.chunk else SEARCHED_CHUNKS),
                            dtype=float)
        fp = e.footprint(workload)  # what a plan that fits nothing says: explain.infeasible
        config = {**config, "weights_bytes_per_chip": fp.weights_bytes,
                  "usable_bytes_per_chip": fp.capacity_bytes}
        replicas = None if space.gpus is None else space.gpus // e.chips
        try:
            if replicas == 0:  # the budget holds no whole instance of this layout
                raise ParameterError("gpus", f"{space.gpus} < the {e.chips} chips of one "
                                     "instance")
            # a closed loop's clients spread over the budget's whole instances
            clients = load.concurrency if load.concurrency is None or not replicas else \
                max(1, load.concurrency // replicas)
            running, most = running_grid(e, workload, batch, clients)
            if "aggregated" in space.modes and _side(config, space, False):
                cols = aggregated(e, workload, running, chunks, load.rate, clients, replicas)
                add({**config, "mode": "aggregated", **_prefill_config(config)}, cols, most)
            if "disaggregated" in space.modes:
                # a closed loop's decode workers each run their share of the clients: pinned,
                # that share; under a budget (the split searched) the whole grid, each point
                # marked where its split's share cannot fill it
                share = load.concurrency
                if share is not None and pinned(space):
                    share = max(1, round(share / space.decode_workers)) \
                        if space.decode_workers else None
                running, most = running_grid(e, workload, batch, share)
                sides.append((e, config, pools(e, workload, running, chunks), most, chunks))
        except RooflineError as exc:  # e.g. tp not dividing the heads: skipped, said why
            skipped.append(f"{_name(config)}: {exc}")
    for d, dconf, dpool, most, chunks in sides:
        for p, pconf, ppool, _, _ in sides:
            if p.chip.id != d.chip.id or p.prec != d.prec:  # one chip kind, one set of dtypes
                continue
            if not (_side(dconf, space, False) and _side(pconf, space, True)):
                continue
            workers = None
            if pinned(space):
                workers = splits(d.chips, p.chips, space.gpus, space.decode_workers,
                                 space.prefill_workers)
                if not workers[0].size:
                    skipped.append(f"{_name(dconf)} with prefill {_name(pconf)}: no whole "
                                   f"decode and prefill workers within --gpus {space.gpus}")
                    continue
            add({**dconf, "mode": "disaggregated", **_prefill_config(pconf)},
                disaggregated(dpool, ppool, workload, chunks, load.rate, load.concurrency,
                              workers), most)
    if not groups:
        raise RooflineError("no configuration is valid: " + "; ".join(dict.fromkeys(skipped)))
    keys = list(dict.fromkeys(k for g in groups for k in g))  # a resource one lacks: 0 s
    columns = {k: np.concatenate([g.get(k, np.zeros(g["running"].size)) for g in groups])
               for k in keys}
    if expect:  # a request's own time (HTTP, tokenization, scheduling) in its TTFT, and
        # the iterations its first token waits beyond its prefill (first_token_steps)
        from ..expect.table import first_token_steps, request_s

        columns["request_s"] = np.full(columns["ttft_s"].shape, request_s(name)[1].value) \
            + first_token_steps(name)[1].value * columns["t_step_s"]
        columns["ttft_s"] = columns["ttft_s"] + columns["request_s"]
    _derive(columns, workload, prices or {}, engines)
    if expect:  # the 80% interval of each expected figure: TTFT as prefill steps measured,
        # the rest as serving runs (roofline.expect.interval)
        from ..expect.interval import columns as intervals

        # named X_lo80 / X_hi80 here: a plan's X_p50 / X_p90 / X_p99 are its tails (tails.py)
        columns.update({k[:-4] + ("_lo80" if k.endswith("_p10") else "_hi80"): v
                        for k, v in intervals(columns, {
                            "ttft_s": "prefill", "tpot_s": "serving",
                            "output_tokens_per_s": "serving"}).items()})
    shown = set(columns["hardware"].tolist())
    tdp = {e.chip.id: {"tdp_w": e.chip.tdp_w, "source": e.chip.tdp_source,
                       "estimated": e.chip.tdp_estimated} for e, _ in engines
           if e.chip.id in shown}
    runtimes = {e.chip.id: runtime(name, e.chip) for e, _ in engines if e.chip.id in shown}
    if budget is not None:  # the memory the user gave, not the engine's
        runtimes = {k: replace(rt, memory_fraction=budget.util,
                               reserve_bytes=budget.reserve_bytes)
                    for k, rt in runtimes.items()}
    plan = ServePlan(spec.name, workload, targets, load, columns, skipped, expect,
                     name if expect else None, runtimes, tdp, space.gpus)
    columns["meets_targets"] = plan.ok  # fits, sustains its load, meets every target
    for key in INTEGERS:  # counts print as counts (where whole: a disaggregated plan's
        if key in columns and np.all(np.mod(columns[key], 1) == 0):  # pools can be split)
            columns[key] = columns[key].astype(np.int64)
    return plan


def _name(config: Config) -> str:
    return " ".join(f"{k} {config[k]}" for k in ("hardware", "tp", "pp", "dp", "ep",
                                                  "weight_dtype", "kv_dtype"))


def _prefill_config(config: Config) -> Config:
    return {f"prefill_{k}": config[k] for k in ("tp", "pp", "dp", "ep", "moe_tp")}


def _derive(c: dict[str, Column], w: Workload, prices: dict[str, float],
            engines: list[tuple[Engine, Config]]) -> None:
    """Per-chip figures, end-to-end latency, cost and energy."""
    c["output_tokens_per_s_per_chip"] = c["output_tokens_per_s"] / c["chips"]
    c["total_tokens_per_s"] = c["requests_per_s"] * (w.input_len + w.output_len)
    c["e2e_s"] = c["ttft_s"] + (w.output_len - 1) * c["tpot_s"]
    tdp = {e.chip.id: e.chip.tdp_w or math.nan for e, _ in engines}
    watts = np.array([tdp[h] for h in c["hardware"]])
    c["tdp_w"] = watts  # the chip file's tdp_w (its source: ServePlan.tdp)
    # an upper bound on tokens per joule only as far as the throughput is one: a chip can
    # draw less than its TDP (memory-bound steps often do)
    c["tokens_per_joule"] = c["output_tokens_per_s_per_chip"] / watts
    # a clocked chip (h100-sxm@915MHz) rents as its part: the price given for h100-sxm
    price = np.array([prices.get(h, prices.get(h.split("@")[0], math.nan))
                      for h in c["hardware"]])
    c["usd_per_mtok"] = price / 3600 / c["output_tokens_per_s_per_chip"] * 1e6
