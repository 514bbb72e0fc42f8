"""Waiting for a prefill: the queueing model, stated.

Prompts are served first come, first served by a deterministic server (the chunked-prefill
budget of an aggregated replica, or a prefill instance), requests arriving as a Poisson
stream: M/D/1. Its mean wait (Pollaczek-Khinchine with zero service variance) is

    W_q = rho * S / (2 (1 - rho)),   rho = lambda * S,

S the service time one request takes from the server. rho >= 1 never drains (inf).
An approximation for a batched server (it serves several prompts in one pass), and zero in
a closed loop (a fixed number of clients: a new request starts when one finishes).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def md1_wait_s(rho: Any, service_s: Any) -> Any:
    rho = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1, rho * np.asarray(service_s) / (2 * (1 - rho)), np.inf)

