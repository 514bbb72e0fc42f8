"""One instance's operating points, as arrays: aggregated (continuous batching with chunked
prefill); the disaggregated pools are in disagg.py.

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
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import ParameterError
from .burst import burst_share, burst_ttft_s
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


def point_columns(a: Any, index: Any) -> dict[str, Any]:
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
    columns = point_columns(a, (0, *pick))
    shape = prompt_shape(w)
    slope = None if rate is None else tpot_slope(t_it, B[:, 0])[pick] * e.unit  # per sequence
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


def tpot_slope(t: Any, running: Any) -> Any:
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
            return np.asarray(e.step_time(a)), point_columns(a, ...)
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
