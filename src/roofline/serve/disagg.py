"""A disaggregated deployment's operating points, as arrays: a decode pool fed by a prefill
pool.

Disaggregated: the decode pool runs decode steps only (TPOT = t_decode / s); a prefill
instance runs `chunk` tokens' worth of prompts per pass; prefill instances are added per
decode instance until the prefill pool's utilization is rho (searched), and TTFT = the
prefill pass + its M/G/1 wait + the KV transfer to the decode pool (a closed loop: its
wait for a decode slot, and in the expected time the share IN_STEP of the burst its clients'
prompts queue through the prefill workers' passes, `burst.prefill_burst_s`). Every point also has
its p50 / p90 / p99 TTFT and TPOT over requests (tails.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .burst import IN_STEP, prefill_burst_s
from .grid import RHO, point_columns, tpot_slope
from .iteration import Engine
from .queueing import mg1_wait_s
from .tails import (
    Wait,
    attention_share,
    decode_spread,
    prompt_shape,
    tpot_quantiles,
    ttft_quantiles,
)
from .workload import Workload


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
    slope = None if rate is None else tpot_slope(t_dec, d.running)[idx] * d.engine.unit
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
        **point_columns(d.decode, idx), **tails,
    }
