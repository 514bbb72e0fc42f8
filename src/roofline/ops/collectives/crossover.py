"""Where a collective turns from latency-bound to bandwidth-bound: the message size at which
its steps' and calls' latency equals its transfer time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...cost import Cost
from ...derivation import (
    Num,
)

if TYPE_CHECKING:
    from ...evaluate import Estimate


def crossover_from_times(nbytes: float, est: Estimate) -> float | None:
    """The message size below which an evaluated collective is latency-bound. Each link's
    alpha-beta chain is latency + bytes/bandwidth, linear in the message size; the bound is
    the busiest chain, `latency` where that chain's latency exceeds its transfer time. None
    when nothing moves."""
    links = [k for k in est.chain_s if float(est.time_s[k]) > 0]
    if not links:
        return None
    slope = {k: float(est.time_s[k]) / nbytes for k in links}  # seconds per message byte
    fixed = {k: float(est.chain_s[k]) - float(est.time_s[k]) for k in links}

    def latency_bound(m: float) -> bool:
        busiest = max(links, key=lambda k: fixed[k] + slope[k] * m)
        return fixed[busiest] > slope[busiest] * m

    lo, hi = 0.0, max(fixed[k] / slope[k] for k in links)  # past it no chain is latency-led
    if not latency_bound(1e-30):
        return 0.0
    for _ in range(100):  # the switch, by bisection on the piecewise-linear chains
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if latency_bound(mid) else (lo, mid)
    return hi


def latency_crossover_bytes(cost: Cost, nbytes: Any, latency_s: float,
                            bandwidth_Bps: float, link: str, base_latency_s: float = 0.0) -> Num:
    """Message size at which the latency (alpha·steps + base·calls) equals bytes/bandwidth on
    one link (costs are linear in the message size, so it is latency·W / (bytes per byte of
    message))."""
    per_byte = np.asarray(cost.link_bytes[link]) / np.asarray(nbytes, dtype=float)
    latency = np.asarray(cost.link_steps[link]) * latency_s \
        + np.asarray(cost.link_calls.get(link, 0.0)) * base_latency_s
    value = latency * bandwidth_Bps / per_byte
    return float(value) if value.ndim == 0 else value
