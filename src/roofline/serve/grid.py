"""One instance's operating points, as arrays: aggregated (continuous batching with chunked
prefill) and disaggregated (a decode pool fed by a prefill pool).

Steady state of an aggregated instance with B sequences decoding (all micro-batches), s
tokens per step (speculative decoding: s = (1 - a^(k+1)) / (1 - a)), D = (n_out - 1) / s
decode steps per request and L' uncached prompt tokens per request:

    B / D requests finish per iteration, so B·L'/D prompt tokens join each iteration
    (chunked prefill, at most `chunk` per replica); iteration time t = step_time of that
    mixed step; TPOT = t / s; output tokens/s = B·s / t; requests/s = B / (D·t).
    TTFT = ceil(L'/chunk) iterations carrying the request's own chunks (split evenly: the
    fastest split, since an op's time is convex in its tokens) + the M/G/1 wait for the
    replica's prefill budget (service: L'/chunk of an iteration with a full chunk).

Averaging the prefill tokens over iterations gives a lower bound on the mean iteration
time where each op's time is convex in its token count (Jensen): a dense model's. A MoE
model's expert reads are concave in it (uniform routing's touched experts saturate; the
bound's any-routing read, top_k·min(T, 1) experts, ops.moe, is flat once a step has a
token), so the mean is also bounded by the iterations that carry the cycle's prompt tokens
in full chunks, the rest decoding alone (`_chunked_cycle`; with the flat read it matches
the even spread wherever every step has a token). The expected time runs that cycle for
every model (engines schedule a prompt into one iteration whole, up to the budget), each
step with the engine's per-iteration cost (`runtime.IterationCost`); a closed loop's
clients that stay in step queue their prompts through the budget together
(`burst_ttft_s`).

Disaggregated: the decode pool runs decode steps only (TPOT = t_decode / s); a prefill
instance runs `chunk` tokens' worth of prompts per pass; prefill instances are added per
decode instance until the prefill pool's utilization is rho (searched), and TTFT = the
prefill pass + its M/G/1 wait + the KV transfer to the decode pool (a closed loop: its
wait for a decode slot, and in the expected time the share IN_STEP of the burst its clients'
prompts queue through the prefill workers' passes, `burst.prefill_burst_s`). Every point also has
its p50 / p90 / p99 TTFT and TPOT over requests (tails.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParameterError
from .burst import IN_STEP, burst_share, burst_ttft_s, prefill_burst_s
from .iteration import Engine
from .queueing import mg1_wait_s
from .tails import (
    Wait,
    attention_share,
    chunked_prefill,
    decode_spread,
    prompt_shape,
    tpot_quantiles,
    ttft_quantiles,
)
from .workload import Workload

RHO = np.array([0.3, 0.5, 0.7, 0.85, 0.95])  # prefill-pool utilizations searched (disagg)
GRID_POINTS = 40  # running-batch values per instance when the batch is searched


def running_grid(e: Engine, w: Workload, batch: Any = None, concurrency: int | None = None
                 ) -> tuple[np.ndarray[Any, Any], int]:
    """Running-batch values to evaluate (multiples of dp·pp) and the most that fit. A closed
    loop runs its concurrency (or all that fit); a given batch list keeps the multiples of
    dp·pp (those over capacity are marked, not dropped); else a geometric grid up to capacity."""
    most, unit = e.max_running(w), e.unit
    if concurrency is not None:
        values = np.array([max(unit, min(concurrency, most) // unit * unit)], dtype=float)
    elif batch is not None:  # each of dp replicas and pp micro-batches holds a whole share
        given = np.asarray(batch, dtype=float)
        values = given[np.mod(given, unit) == 0]
        if values.size == 0:
            raise ParameterError("batch", f": no value is a multiple of dp·pp ({unit}), got "
                                 + ", ".join(f"{b:g}" for b in given))
    else:
        top = max(1, most // unit)
        values = unit * np.unique(np.round(np.geomspace(1, top, GRID_POINTS)))
    return values, most


def _columns(a: Any, index: Any) -> dict[str, Any]:
    """The iteration's bound and its time by resource at the chosen points."""
    bound = np.broadcast_to(np.asarray(a.bound), np.shape(a.t_lower_s))[index]
    parts = {f"time_{k}_s": np.broadcast_to(v, np.shape(a.t_lower_s))[index]
             for k, v in a.time_by_resource.items()}
    return {"bound": bound, **parts}


def aggregated(e: Engine, w: Workload, running: Any, chunks: Any,
               rate: float | None = None, concurrency: float | None = None,
               replicas: int | None = None) -> dict[str, Any]:
    """Points over (running batch, chunk): arrays of shape (len(running), len(chunks)).
    With `rate` (requests/s offered to the whole deployment) each point sets the instance
    count n = ceil(rate / its capacity) and the latencies are those at the load rate / n;
    `replicas` (a GPU budget's whole instances) fixes n instead: each carries rate / n, or
    its capacity without a rate (`concurrency` is then per instance: the caller's share).
    With `concurrency` (a closed loop of that many clients per instance) the loop settles
    (`_settle`) where its clients, its running slots and its prefill budget allow."""
    B = np.asarray(running, dtype=float)[:, None]
    chunk = np.asarray(chunks, dtype=float)[None, :]
    dp, s, D, Lu = e.par.dp, w.tokens_per_step, w.decode_steps, w.uncached_len
    closed_loop = concurrency is not None
    admitted = B * Lu / D + 0 * chunk  # prompt tokens per iteration, instance-wide
    if closed_loop:  # at most what the prefill budget admits, as a first guess
        admitted = np.minimum(admitted, dp * chunk)
    steady = admitted
    pieces = np.ceil(Lu / chunk)  # iterations one prompt's prefill spans
    own = dp * Lu / pieces + 0 * B  # each replica runs one prompt's even share
    full = dp * chunk + 0 * B
    a = e.iteration(np.broadcast_to(B, (3, *steady.shape)), w, np.stack([steady, own, full]))
    t = np.asarray(e.step_time(a))
    t_it, t_own, t_full = t[0], t[1], t[2]
    t_it = _chunked_cycle(e, w, B + 0 * chunk, steady, dp * chunk + 0 * B, t_it)
    capacity = admitted / Lu / t_it  # requests/s at this running batch: the prompts admitted
    load = capacity
    idx = np.broadcast_to(np.arange(B.shape[0])[:, None], t_it.shape)
    instances = np.full(t_it.shape, float(replicas or 1))
    if rate is not None:  # the operating point at rate / n: the largest batch not above it
        instances = instances if replicas else np.ceil(rate / capacity)
        load = rate / instances
        idx = np.stack([np.clip(np.searchsorted(capacity[:, j], load[:, j], side="right") - 1,
                                0, None) for j in range(t_it.shape[1])], axis=1)
    cols = np.broadcast_to(np.arange(t_it.shape[1])[None, :], t_it.shape)
    pick = (idx, cols)
    service = Lu / chunk * t_full[pick]
    rho = load / dp * service  # each replica's prefill budget is one M/G/1 server
    prefill_s = pieces * t_own[pick]
    columns = _columns(a, (0, *pick))
    shape = prompt_shape(w)
    slope = None if rate is None else _slope(t_it, B[:, 0])[pick] * e.unit  # per sequence
    share = attention_share(a)[(0, *pick)]
    if closed_loop:
        assert concurrency is not None
        B, t_set, prefill_s, load, wait, columns, burst, burst_wait = _settle(
            e, w, B + 0 * chunk, chunk, concurrency, t_it[pick], prefill_s)
        t_it = t_set
        rho = np.minimum(load / dp * service, 1.0)
        feasible = np.ones(rho.shape, dtype=bool)  # a closed loop settles somewhere
        queue = Wait.in_burst(wait - burst_wait, burst, burst_wait)
    else:
        wait = mg1_wait_s(rho, service, np.mean(shape ** 2) - 1)
        feasible = (steady[pick] / dp <= chunk) & (rho < 1)
        queue = Wait(rho=rho, service_s=service)
        if replicas and rate is not None:  # the budget's instances carry the rate
            feasible = feasible & (load <= capacity.max(axis=0, keepdims=True))
    prefill_k, beta = chunked_prefill(shape * Lu, chunk, t_own[pick], t_full[pick], prefill_s)
    tails = ttft_quantiles(prefill_k, queue, shape)
    tpot = t_it[pick] / s
    tails.update(tpot_quantiles(tpot, *decode_spread(
        w, t_it[pick], np.broadcast_to(B, t_it.shape)[pick] / e.unit, share, beta,
        load * Lu * t_it[pick] / dp, chunk, slope)))
    tokens = load * w.output_len  # output tokens/s per instance at this load
    chips = instances * e.chips
    return {
        "running": np.broadcast_to(B, t_it.shape)[pick], "chunk": chunk + 0 * B,
        "instances": instances, "gpus": chips, "prefill_workers": 0 * chips,
        "decode_workers": 0 * chips,
        "chips": chips, "decode_chips": chips, "output_tokens_per_s": tokens * instances,
        "requests_per_s": load * instances, "tpot_s": tpot, "prefill_s": prefill_s,
        "queue_s": wait, "kv_transfer_s": 0.0 * rho, "ttft_s": prefill_s + wait,
        "t_step_s": t_it[pick], "utilization": rho, "feasible": feasible,
        "prefill_ratio": 0.0 * rho, **columns, **tails,
    }


def _slope(t: Any, running: Any) -> Any:
    """d(step time) / d(running sequences) along the running grid (0 where it has one
    value or repeats one)."""
    if np.size(running) < 2:
        return np.zeros_like(t)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.gradient(t, running, axis=0), posinf=0.0, neginf=0.0)


def _settle(e: Engine, w: Workload, running: Any, chunk: Any, concurrency: float,
            t_full_load: Any, prefill_full_load: Any
            ) -> tuple[Any, Any, Any, Any, Any, dict[str, Any], Any, Any]:
    """A closed loop's operating point: (sequences decoding, iteration time, own prefill,
    requests/s, wait, the iteration's bound and time by resource, the prompts per replica
    arriving together: 1 where they do not, and the part of the wait they queue behind each
    other). Its clients cycle
    through a wait, their prefill (ceil(L'/chunk) iterations) and D decode iterations, so
    requests/s = min(clients / (prefill + D·t),
    running slots / (D·t), dp·chunk / (L'·t)) (Little's law; the slots those memory holds,
    the prompts the chunk admits). One step of the fixed point from the fullest load (every
    slot decoding, the budget full, slower steps and prefill than the loop's): the rate it
    gives is at most the loop's, so the iteration re-timed at that load (its decoders
    rounded down to whole units, with the prompt tokens of the *other* clients: a client
    decoding alone carries none) is no slower than the loop's (TPOT stays a lower bound),
    and the rate at that time no lower.
    Clients beyond the slots (more than memory holds) wait; a remainder below one dp·pp
    unit is not counted as waiting clients."""
    dp, D, Lu, unit = e.par.dp, w.decode_steps, w.uncached_len, e.unit
    slots = running
    clients = np.where(concurrency - slots >= unit, concurrency, slots)
    pieces = np.ceil(Lu / chunk)

    def rate(t: Any, prefill: Any) -> Any:
        return np.minimum(np.minimum(clients / (prefill + D * t), slots / (D * t)),
                          dp * chunk / (Lu * t))

    first = rate(t_full_load, prefill_full_load)  # at most the loop's rate
    decoding = np.clip(np.floor(first * D * t_full_load / unit) * unit, unit, slots)
    others = first * Lu * t_full_load * (clients - 1) / clients + 0 * decoding
    own = dp * Lu / pieces + 0 * decoding

    def timed(prompt_tokens: Any) -> tuple[Any, dict[str, Any]]:
        """The step's time and its columns (a step carries prompt tokens everywhere or
        nowhere: one analysis each, merged point by point)."""
        if np.all(prompt_tokens > 0) or not np.any(prompt_tokens):
            a = e.iteration(decoding, w, prompt_tokens)
            return np.asarray(e.step_time(a)), _columns(a, ...)
        some = prompt_tokens > 0
        (t1, c1), (t0, c0) = timed(np.where(some, prompt_tokens, 1.0)), timed(0 * some)
        return np.where(some, t1, t0), {k: np.where(some, c1.get(k, 0.0), c0.get(k, 0.0))
                                        for k in dict.fromkeys([*c1, *c0])}

    (t_it, columns), prefill_s = timed(others), pieces * timed(own)[0]
    t_it = _chunked_cycle(e, w, decoding, others, dp * chunk + 0 * decoding, t_it)
    load = rate(t_it, prefill_s)
    cycle = prefill_s + D * t_it  # no wait where the clients, not the slots, set the rate
    wait = np.where(load >= clients / cycle, 0.0, np.maximum(clients / load - cycle, 0.0))
    burst, burst_wait = np.ones(np.shape(wait)), np.zeros(np.shape(wait))
    if e.expect and w.in_step:  # a benchmark's clients send together and, with equal
        # lengths (Workload.in_step), stay in step: each round a replica's k prompts arrive
        # at once and pass through its chunk budget first come first served (the expected
        # time only: a bound cannot assume the clients stay in step)
        k = np.minimum(clients, slots) / dp
        alone = e.step_time(e.iteration(decoding, w, 0))
        full = e.step_time(e.iteration(decoding, w, dp * chunk + 0 * decoding))
        extra = burst_ttft_s(k, Lu, chunk, alone, full) - burst_ttft_s(1, Lu, chunk, alone, full)
        share = burst_share(e.framework)
        burst_wait = share * np.maximum(extra, 0.0)  # beyond a lone prompt's, same model
        wait = wait + burst_wait
        # the prompts a burst prefills before its clients decode are that share of the
        # other clients' prompt tokens: they leave the decode iterations (TPOT) for the
        # burst (TTFT), the cycle's time (and so the rate) unchanged
        t_it = alone + (1.0 - share) * np.maximum(t_it - alone, 0.0)
        burst = np.maximum(k, 1.0) + 0 * wait
    return decoding, t_it, prefill_s, load, wait, columns, burst, burst_wait


def _chunked_cycle(e: Engine, w: Workload, running: Any, prompt_tokens: Any, cap: Any,
                   t_even: Any) -> Any:
    """The mean iteration time of `running` sequences decoding while `prompt_tokens` per
    iteration (on average) join them, at most `cap` per iteration: the lesser of the even
    spread's `t_even` and the cycle in which a share prompt_tokens / cap of the iterations
    carries a full `cap` and the rest decode alone. Per op, each resource's time is linear
    (compute, links) or concave (memory: a MoE layer's expert reads) in its tokens, so each
    resource's total over any spread is at least that cycle's, and the bound's step (the
    floor: every resource of the step overlapped, `iteration.step_time`) is the busiest
    resource's total. Dense models' bound: the even one. The expected time is that cycle's,
    timed as engines run it (`_expected_cycle`)."""
    if not np.any(prompt_tokens):
        return t_even
    share = np.clip(np.asarray(prompt_tokens, dtype=float) / cap, 0.0, 1.0)
    if e.expect:
        return _expected_cycle(e, w, running, share, cap)
    if e.spec.moe is None:
        return t_even
    alone = e.iteration(running, w, 0)
    full = e.iteration(running, w, cap)
    zero = {(op.group, op.name): op for op in alone.ops}
    totals: dict[str, Any] = {}  # per resource, the cycle's mean time on it
    for op in full.ops:
        other = zero.get((op.group, op.name))
        t0 = {} if other is None else other.time_s
        for r, t in op.time_s.items():  # (a row only a decode step had is left out: less)
            totals[r] = totals.get(r, 0.0) + (1 - share) * np.asarray(t0.get(r, 0.0)) \
                + share * np.asarray(t)
    return np.minimum(t_even, functools.reduce(np.maximum, totals.values()))


def _expected_cycle(e: Engine, w: Workload, running: Any, share: Any, cap: Any) -> Any:
    """The mean expected iteration of the engines' cycle: a prompt joins one iteration whole
    (up to the chunk budget, vLLM's and SGLang's chunked prefill schedule it first come first
    served), so a share `share` of the iterations carries a full `cap` of prompt tokens and
    the rest decode alone."""
    alone = e.step_time(e.iteration(running, w, 0))
    full = e.step_time(e.iteration(running, w, cap))
    if e.spec.moe is not None and e.par.dp > 1 and e.par.ep > 1:
        share = any_replica_share(share, e.par.dp)
    return (1 - share) * alone + share * full


def any_replica_share(share: Any, replicas: int) -> Any:
    """The share of iterations in which at least one of `replicas` attention-DP replicas runs
    a prompt, each replica running one in a share `share` of them, independently (each
    admits its own requests): 1 - (1 - share)^replicas. Replicas whose experts are spread
    over all of them (EP across the attention-DP group) meet at every MoE layer's
    all-to-all, so such an iteration runs at a prompt's pace for all ("the iteration time is
    dominated by the slowest rank": TensorRT-LLM tech blog 10, ADP Balance Strategy,
    nvidia.github.io/TensorRT-LLM/blogs/tech_blog/blog10_ADP_Balance_Strategy.html, whose
    balancing, attention_dp_config.enable_balance, is off by default).

    >>> round(float(any_replica_share(0.1, 8)), 4)
    0.5695
    """
    return 1 - (1 - np.asarray(share, dtype=float)) ** replicas


@dataclass(frozen=True)
class Pools:
    """One instance's steps as a disaggregated pool member, analysed once and paired with
    every partner: decode steps over the running grid, prefill passes over the chunks."""

    engine: Engine
    running: np.ndarray[Any, Any]
    decode: Any  # ModelAnalysis of decode-only steps over `running`
    prompts: np.ndarray[Any, Any]  # prompts per prefill pass per replica, per chunk
    prefill: Any  # ModelAnalysis of those prefill passes


def pools(e: Engine, w: Workload, running: Any, chunks: Any) -> Pools:
    prompts = np.maximum(1.0, np.floor(np.asarray(chunks, dtype=float) / w.uncached_len))
    return Pools(e, np.asarray(running, dtype=float), e.iteration(running, w, 0), prompts,
                 e.prefill(e.par.dp * prompts, w))


def splits(decode_chips: int, prefill_chips: int, gpus: int | None,
           decode_workers: int | None = None, prefill_workers: int | None = None
           ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Whole (decode workers, prefill workers) a deployment can take: every count of decode
    workers the budget `gpus` allows with the rest of it in prefill workers (more prefill
    workers only shorten the queue), or the pinned counts (within the budget where both are
    given). Empty where none fits."""
    if decode_workers and prefill_workers:
        d, p = np.array([decode_workers]), np.array([prefill_workers])
        within = gpus is None or decode_workers * decode_chips + prefill_workers * \
            prefill_chips <= gpus
        return (d, p) if within else (d[:0], p[:0])
    assert gpus is not None
    d = np.arange(1, gpus // decode_chips + 1) if decode_workers is None else \
        np.array([decode_workers])
    p = (gpus - d * decode_chips) // prefill_chips if prefill_workers is None else \
        np.full(d.size, prefill_workers)
    keep = (p >= 1) & (d * decode_chips + p * prefill_chips <= gpus)
    return d[keep], p[keep]


def disaggregated(d: Pools, p: Pools, w: Workload, chunks: Any, rate: float | None = None,
                  concurrency: float | None = None,
                  workers: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """Points over (decode running batch, prefill chunk, a third axis): arrays of shape
    (len(running), len(chunks), len(third)). Without `workers` the third axis is the
    prefill pool's utilization rho (RHO): without `rate`, one decode worker per
    ceil(prefill workers at rho) (or, under one, one prefill worker per floor(1 / that)
    decode workers), whole workers at the pool ratio the throughput needs (`prefill_ratio`,
    fractional, is that ratio at scale); with it both pools are whole counts sized to the
    rate. With `workers` (whole decode and prefill counts, `splits`: a GPU budget or a
    pinned deployment) the third axis is those splits: each carries the rate, its clients
    (`concurrency` over the whole deployment) or, with neither, its decode capacity."""
    B = d.running[:, None, None]
    chunk = np.asarray(chunks, dtype=float)[None, :, None]
    third = RHO if workers is None else np.asarray(workers[0], dtype=float)
    rho = third[None, None, :]
    s, D = w.tokens_per_step, w.decode_steps
    t_dec = np.asarray(d.engine.step_time(d.decode)) + 0 * d.running
    t_p = np.asarray(p.engine.step_time(p.prefill))[None, :, None] + 0 * B * rho
    pe = p.engine
    # service per request: a pass of dp·prompts, pp passes in flight
    per_prompt = t_p / (pe.par.dp * pe.par.pp * p.prompts[None, :, None])
    capacity = B / (D * t_dec[:, None, None]) + 0 * per_prompt  # req/s per decode instance
    transfer_s = pe.kv_transfer_s(w)
    clients = ratio = None
    idx = np.broadcast_to(np.arange(B.shape[0])[:, None, None], capacity.shape)
    feasible = np.ones(capacity.shape, dtype=bool)
    if workers is not None:
        decoders = np.asarray(workers[0], dtype=float)[None, None, :] + 0 * capacity
        prefillers = np.asarray(workers[1], dtype=float)[None, None, :] + 0 * capacity
        load = capacity
        if rate is not None:  # each decode worker's share, at the largest batch not above it
            load = rate / decoders
            idx = np.clip(np.searchsorted(capacity[:, 0, 0], load, side="right") - 1, 0,
                          None)
            feasible = load <= capacity.max(axis=0, keepdims=True)
        else:
            if concurrency is not None:
                per = concurrency / decoders  # each decode worker's clients; a batch a
                # whole unit above them is one these clients cannot fill (running_grid
                # rounds fewer clients than one unit up to it)
                feasible = per > B - d.engine.unit
                clients = np.where(per - B >= d.engine.unit, per, B + 0 * load)
                load = np.minimum(clients / (t_p + transfer_s + D * t_dec[:, None, None]),
                                  capacity)
            # at most what the prefill workers pass: all of it in a closed loop (its clients
            # wait their turn, no queue grows without end), else the top utilization searched
            # (an open queue at 100% never drains); a pool that cannot feed the decode batch
            # runs it partly empty (its TPOT is then that of a larger batch than runs: above
            # the bound, never below)
            cap = 1.0 if concurrency is not None else RHO[-1]
            load = np.minimum(load, cap * prefillers / (decoders * per_prompt))
        used = load * decoders * per_prompt / prefillers
    elif rate is None:
        load = capacity
        if concurrency is not None:  # Little's law: clients cycle through prefill + decode;
            # those beyond the running slots wait (a remainder under one unit does not)
            clients = np.where(concurrency - B >= d.engine.unit, concurrency, B + 0 * load)
            load = np.minimum(clients / (t_p + transfer_s + D * t_dec[:, None, None]),
                              capacity)
        ratio = load * per_prompt / rho  # prefill workers per decode worker at rho
        # the smallest whole deployment at that ratio: prefill utilization rho or below
        decoders = np.where(ratio >= 1, 1.0, np.floor(1 / ratio))
        prefillers = np.where(ratio >= 1, np.ceil(ratio), 1.0)
        used = load * decoders * per_prompt / prefillers
    else:  # decode latency at the load each decode instance really carries
        decoders = np.ceil(rate / capacity)
        prefillers = np.ceil(rate * per_prompt / rho)
        used = rate * per_prompt / prefillers
        load = rate / decoders
        idx = np.clip(np.searchsorted(capacity[:, 0, 0], load, side="right") - 1, 0, None)
    shape = prompt_shape(w)
    if clients is not None:  # the closed loop's wait for a running slot (none where the
        cycle = t_p + transfer_s + D * t_dec[idx]  # clients, not the slots, set the rate)
        wait = np.where(load >= clients / cycle, 0.0, np.maximum(clients / load - cycle, 0.0))
        queue = Wait(fixed_s=wait)
        if pe.expect and w.in_step:  # the clients' prompts reach the prefill pool together
            k = np.maximum(np.minimum(clients, B) * decoders / (prefillers * pe.par.dp), 1.0)
            burst_wait = IN_STEP * prefill_burst_s(pe, p.prompts[None, :, None], w, k, t_p)
            queue = Wait.in_burst(wait, k, burst_wait)  # (the expected time only)
            wait = wait + burst_wait
    else:
        wait = mg1_wait_s(used, per_prompt, np.mean(shape ** 2) - 1)
        queue = Wait(rho=used, service_s=per_prompt)
    transfer = transfer_s + 0 * wait
    handoff = 0 * wait  # the expected hand-off between the pools (router, transfer setup)
    if pe.expect:
        from ..expect.table import engine as engine_name
        from ..expect.table import handoff_s

        handoff = handoff + handoff_s(engine_name(pe.framework) if pe.framework else None
                                      )[1].value
    # a request's prefill pass grows once its prompt exceeds the pass's prompts; its KV
    # transfer is proportional to its prompt (tails.py)
    own_pass = np.maximum(1.0, shape / p.prompts[None, :, None, None])
    tails = ttft_quantiles((t_p + 0 * wait)[..., None] * own_pass
                           + transfer[..., None] * shape + handoff[..., None], queue, shape)
    slope = None if rate is None else _slope(t_dec, d.running)[idx] * d.engine.unit
    tails.update(tpot_quantiles(t_dec[idx] / s, *decode_spread(
        w, t_dec[idx], d.running[idx] / d.engine.unit, attention_share(d.decode)[idx],
        batch_slope_s=slope)))
    chips = decoders * d.engine.chips + prefillers * pe.chips
    return {
        "running": d.running[idx], "chunk": chunk + 0 * wait, "instances": decoders,
        "gpus": chips, "prefill_workers": prefillers, "decode_workers": decoders,
        "chips": chips, "decode_chips": decoders * d.engine.chips,
        "output_tokens_per_s": load * decoders * w.output_len,
        "requests_per_s": load * decoders, "tpot_s": t_dec[idx] / s, "prefill_s": t_p,
        "queue_s": wait, "kv_transfer_s": transfer, "handoff_s": handoff,
        "ttft_s": t_p + wait + transfer + handoff,
        "t_step_s": t_dec[idx], "utilization": used,
        # a closed loop's saturated prefill pool (utilization 1) is steady: its clients wait
        "feasible": feasible & ((used < 1) | (clients is not None) & (used <= 1 + 1e-12))
        & np.asarray(p.prefill.memory.fits)[None, :, None],
        "prefill_ratio": prefillers / decoders if ratio is None else ratio,
        **_columns(d.decode, idx), **tails,
    }
