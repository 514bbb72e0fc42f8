"""A closed loop's burst: clients that send together queue their prompts through a
replica's prefill budget (aggregated: the chunk of each iteration; disaggregated: a prefill
worker's passes) first come first served."""

from __future__ import annotations

from typing import Any

import numpy as np

from .iteration import Engine
from .workload import Workload

# The share of a burst's queue (`burst_ttft_s` beyond a lone prompt's TTFT) a closed
# loop's client waits on average: the clients send together at first and drift out of step
# over the rounds. Fitted: the value that minimises the median |measured / expected - 1| of
# TTFT on the fit half of benchmarks/validation/silicon.py (NVIDIA's silicon_sample runs),
# fitted on the aggregated rows' chunk budget and applied as it is to a prefill pool's
# passes; per engine where a named one has its own (roofline.expect.table `burst_share`)
IN_STEP = 0.26


def burst_share(framework: str | None) -> float:
    """The share of the burst's queue a client of `framework`'s engine waits (IN_STEP
    without an engine or a figure of its own)."""
    if not framework:
        return IN_STEP
    from ..expect.table import DEFAULTS, engine, lookup

    name, figure = lookup(DEFAULTS, "burst_share", engine(framework))
    return figure.value if name != "burst_share" else IN_STEP


def burst_ttft_s(k: Any, prompt: Any, chunk: Any, t_alone: Any, t_full: Any) -> Any:
    """The mean TTFT of k prompts of `prompt` tokens that reach one replica at once and pass
    through its `chunk`-token prefill budget first come first served: prompt i (1..k) has
    its first token after j_i = ceil(i·prompt / chunk) iterations, each iteration the decode
    step (`t_alone`) plus its prompt tokens' share of a full chunk's extra time (`t_full`;
    linear in the tokens, the burst's last iteration partly filled):
    TTFT_i = j_i·t_alone + min(j_i·chunk, k·prompt) / chunk · (t_full - t_alone)."""
    k, prompt, chunk, t_alone, t_full = np.broadcast_arrays(
        np.maximum(np.round(np.asarray(k, dtype=float)), 1.0), *(
            np.asarray(x, dtype=float) for x in (prompt, chunk, t_alone, t_full)))
    i = np.arange(1, int(np.max(k)) + 1, dtype=float).reshape(-1, *([1] * k.ndim))
    j = np.ceil(i * prompt / chunk)
    each = j * t_alone + np.minimum(j * chunk, k * prompt) / chunk * (t_full - t_alone)
    return np.sum(np.where(i <= k, each, 0.0), axis=0) / k


def prefill_burst_s(pe: Engine, prompts: Any, w: Workload, k: Any, t_pass: Any) -> Any:
    """A disaggregated prefill replica's burst queue: k prompts arriving at once pass through
    it first come first served, `prompts` a pass, pp passes in flight (`burst_ttft_s` with
    passes for iterations, nothing between them): the mean TTFT beyond a lone prompt's."""
    chunk, Lu, service = prompts * w.uncached_len, w.uncached_len, t_pass / pe.par.pp
    extra = burst_ttft_s(k, Lu, chunk, 0.0, service) - burst_ttft_s(1, Lu, chunk, 0.0, service)
    return np.maximum(extra, 0.0)
