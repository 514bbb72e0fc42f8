"""Waiting for a prefill: the queueing model, stated.

Prompts are served first come, first served by the prefill budget of an aggregated replica
(or a prefill instance), requests arriving as a Poisson stream, each taking a service time
proportional to its uncached prompt: M/G/1. Its mean wait (Pollaczek-Khinchine) is

    W_q = rho * E[S] * (1 + c_s^2) / (2 (1 - rho)),   rho = lambda * E[S],

c_s^2 = Var(S) / E[S]^2 the service times' squared coefficient of variation (0 for one
request shape: M/D/1). rho >= 1 never drains (inf). An approximation for a batched server
(it serves several prompts in one pass), and zero in a closed loop (a fixed number of
clients: a new request starts when one finishes). The wait's distribution: tails.py.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .point import Floats


def md1_wait_s(rho: npt.ArrayLike, service_s: npt.ArrayLike) -> Floats:
    return mg1_wait_s(rho, service_s, 0.0)


def mg1_wait_s(rho: npt.ArrayLike, service_s: npt.ArrayLike, scv: npt.ArrayLike
               ) -> Floats:
    """Pollaczek-Khinchine mean wait at utilization `rho`, mean service `service_s` and the
    service times' squared coefficient of variation `scv`."""
    load = np.asarray(rho, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(load < 1, load * np.asarray(service_s) * (1 + np.asarray(scv))
                        / (2 * (1 - load)), np.inf)
