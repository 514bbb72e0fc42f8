"""Tail latency: p50 / p90 / p99 of TTFT and TPOT over requests, analytic (no simulation).

The means (grid.py) are one request of mean lengths at the operating point; the tails are
the distribution over requests at that same point, from two sources:

Request lengths. `Workload.sample` holds up to 64 equally likely (prompt, output) pairs
(every request of `--lengths`, or rows at evenly spaced ranks). A request's own prefill
scales with its prompt: aggregated, ceil(L'/chunk) iterations of the base time plus beta
per own prompt token (beta, the base: the point's own-share and full-chunk iterations,
grid.py); disaggregated, the prefill pass grows once its prompt exceeds the pass's tokens,
and the KV transfer is proportional to its prompt.

The queue. Open loop (`--rate`, or a point's own rate at capacity): each replica's prefill
budget is an M/G/1 FIFO server, Poisson arrivals at utilization rho, service S
proportional to the uncached prompt. The wait's tail is the Cramer-Lundberg asymptotic

    P(W > y) ~ C exp(-theta y),   rho (E[exp(theta S)] - 1) = theta E[S] ... (solved for
    theta by Newton's method), C = (1 - rho) / (lambda E[S exp(theta S)] - 1),

capped at P(W > 0) = rho (exact for M/G/1); see S. Asmussen, Applied Probability and
Queues, 2nd ed. (2003), ch. XIII, and H. C. Tijms, A First Course in Stochastic Models
(2003), ch. 2, which finds the asymptotic accurate well before the far tail. For M/D/1
at rho 0.5 it gives p90 = 1.503 D and p99 = 3.34 D, within 1% of Erlang's exact formula
(tests/test_serve_tails.py). TTFT = own prefill + W (independent: FIFO), its
quantiles by bisection on the mixture's CDF. Closed loop (`--concurrency`): no Poisson
queue; a client waits the loop's slot wait (constant), and where the benchmark's clients
stay in step (equal lengths, expected times) the k prompts of a round arrive at once, so
the j-th waits j of them, j uniform on 0 .. k - 1 (continuous: the p-quantile waits
p (k - 1) prompts' service; its mean is the grid's (k - 1) / 2).

TPOT of a request = its decode steps' mean time t, the point's mean step t_bar shifted
and spread by what its steps carry (relative to t_bar, with h the step's share spent in
attention over the KV context, n the sequences one step carries, c_bar and sigma_c^2 the
step-weighted mean and variance of contexts, a request at context c = L + n_out / 2 for
D = (n_out - 1) / s steps):

    own context      d = h (c - c_bar) / (n c_bar)   (+ g / ((1 - f) t_bar) in an open loop)
    others' contexts var = h^2 (n - 1) sigma_c^2 / (n c_bar)^2 * r_w(D)
    chunked prefill  var = beta^2 m min(chunk - m, E[L'^2] / E[L']) min(1, k_c / D) / t^2
    open-loop batch  var = g^2 n / (1 - f) * r_f(D) / t^2,   f = n g / t_bar

m the prompt tokens a replica's step carries on average (its variance: at most a
two-point 0 / chunk spread, at most the compound Poisson one), k_c = ceil(E[L'] / chunk)
the steps one prompt spans, g the step time per added sequence (the grid's neighbouring
batches). The decoding count of an open loop is Poisson (M/G/inf) with variance n, raised
to n / (1 - f) because a longer step admits more arrivals (f: the step's elasticity in n).
r(T, D) = 1 - T / (3 D) (T <= D), (D / T)(1 - D / (3 T)) otherwise, is the variance of a
T-step mean of a unit process whose autocorrelation falls linearly to zero over D steps
(an M/D/inf occupancy's). The others' contexts take M/G/inf's autocorrelation,
E[(D - u)+] / E[D] (a mixture of such triangles, of widths D_j and weights D_j / sum D):
r_w(D) = sum_j D_j r(D, D_j) / sum_j D_j; the open loop's count relaxes 1 / (1 - f) times
slower (its arrivals follow its excursions), so its widths are D_j / (1 - f): r_f. TPOT is
Gaussian about t_bar (1 + d) with that variance per request, a mixture over requests.
Against a seeded simulation of a decode pool (Poisson arrivals, each step affine in the
sequences and their contexts; tests/test_serve_tails.py) p50 and p90 land within 0.5%;
p99 within 0.5% for one request shape, 5% low for four (the simulated far tail is heavier
than Gaussian near the feedback limit, f = 0.43 there).

These are a distribution of requests at the point, not the forecast's 80% interval (the
`X_lo80` / `X_hi80` columns of `--expect`); in a bounds plan they are the bound's step times
spread over requests, not bounds themselves.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .point import Floats

if TYPE_CHECKING:
    from .workload import Workload

PERCENTILES = (50, 90, 99)
SAMPLE_ROWS = 64  # requests kept to describe a length distribution
_BISECT = 18  # halvings of the bracket: 4e-6 of its width


def representative(ins: npt.ArrayLike, outs: npt.ArrayLike, rows: int = SAMPLE_ROWS
                   ) -> tuple[tuple[float, float], ...]:
    """At most `rows` equally likely (prompt, output) pairs: every request, or those at
    evenly spaced ranks by prompt then output length (each a real request)."""
    prompts, outputs = np.atleast_1d(ins), np.atleast_1d(outs)
    order = np.lexsort((outputs, prompts))
    if order.size > rows:
        order = order[((np.arange(rows) + 0.5) * order.size / rows).astype(int)]
    return tuple((float(prompts[i]), float(outputs[i])) for i in order)


def _pairs(w: Workload) -> tuple[Floats, Floats]:
    pairs = np.array(w.sample or ((w.input_len, w.output_len),), dtype=float)
    return pairs[:, 0], pairs[:, 1]


def prompt_shape(w: Workload) -> Floats:
    """Each sampled request's uncached prompt over their mean (the service times' shape)."""
    ins, _ = _pairs(w)
    return ins / ins.mean()


def correlation_factor(steps: Any, width: Any) -> Any:
    """r(T, D): the variance of a T-step mean of a process with unit variance whose
    autocorrelation falls linearly from 1 to 0 over D steps."""
    T, D = np.asarray(steps, dtype=float), np.maximum(np.asarray(width, dtype=float), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(T <= D, 1 - T / (3 * D), D / T * (1 - D / (3 * T)))


def cramer_lundberg(rho: Any, shape: Any) -> tuple[Any, Any]:
    """(theta E[S], C) of the M/G/1 wait's tail P(W > y) ~ C exp(-theta y) at utilization
    rho, service times E[S] * shape (equally likely; mean 1). Newton's method on
    g(v) = ln(rho) + ln((M(v) - 1) / v), M the moment generating function of `shape`: g
    increases and is convex in v, and starts right of its root at the heavy-traffic bound
    2 (1 - rho) / (rho E[shape^2]) (there M(v) - 1 >= v + v^2 E[shape^2] / 2), so the
    iterates fall monotonically onto it."""
    rho = np.clip(np.asarray(rho, dtype=float), 1e-9, 1 - 1e-9)[..., None]
    s = np.asarray(shape, dtype=float)
    top = s.max()
    v = 2 * (1 - rho) / (rho * float(np.mean(s * s)))

    def log_mgf(v: Any, weight: Any) -> Any:  # ln mean(weight e^{v s}), stable for large v
        return v[..., 0] * top + np.log(np.mean(weight * np.exp(v * (s - top)), axis=-1))

    for _ in range(40):
        lm = log_mgf(v, 1.0)
        small = lm < 30
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            m1 = np.where(small, np.mean(np.expm1(np.where(small[..., None], v * s, 0.0)),
                                         axis=-1), np.exp(np.minimum(lm, 700)))
            log_m1 = np.where(small, np.log(m1), lm + np.log1p(-np.exp(-lm)))
            g = np.log(rho[..., 0]) + log_m1 - np.log(v[..., 0])
            dm = np.exp(log_mgf(v, s) - log_m1)  # M'(v) / (M(v) - 1)
            step = g / (dm - 1 / v[..., 0])
        step = np.nan_to_num(step, nan=0.0)
        v = v - step[..., None]
        if np.all(np.abs(step) <= 1e-12 * v[..., 0]):
            break
    v = v[..., 0]
    rho = rho[..., 0]
    log_c = np.log1p(-rho) - (np.log(rho) + log_mgf(v[..., None], s)
                              + np.log1p(-np.exp(-np.log(rho) - log_mgf(v[..., None], s))))
    return v, np.exp(log_c)


@dataclass(frozen=True)
class Wait:
    """A point's wait before its prefill: open loop, M/G/1 (`rho` > 0, `service_s` its mean
    service); closed loop, `fixed_s` plus a burst of `burst` prompts of `service_s` each."""

    rho: Any = 0.0
    service_s: Any = 0.0
    fixed_s: Any = 0.0
    burst: Any = 1.0

    @classmethod
    def in_burst(cls, fixed_s: Any, k: Any, mean_s: Any) -> Wait:
        """A closed loop's wait: `fixed_s`, then `k` prompts arriving together whose queue
        behind each other averages `mean_s`, spread evenly over the k arrival positions."""
        k = np.asarray(k, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(k > 1, 2 * np.asarray(mean_s) / (k - 1), 0.0)
        return cls(service_s=step, fixed_s=fixed_s, burst=k)


def wait_tail(wait: Wait, shape: Any) -> tuple[Any, Any, Any]:
    """(P(W > 0), C, theta) per point for the open loop's M/G/1 wait."""
    rho = np.asarray(wait.rho, dtype=float)
    busy = (rho > 1 - max(PERCENTILES) / 100) & (rho < 1)  # else no quantile waits
    v, c = np.ones_like(rho), np.zeros_like(rho)
    if np.any(busy):
        v[busy], c[busy] = cramer_lundberg(rho[busy], shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = v / np.asarray(wait.service_s, dtype=float)
    return np.where(rho >= 1, 1.0, rho), np.where(rho >= 1, np.inf, c), theta


def ttft_quantiles(prefill_s: Any, wait: Wait, shape: Any) -> dict[str, Any]:
    """p50 / p90 / p99 of own prefill (`prefill_s`, per point and sampled request) plus the
    wait; inf where the queue never drains."""
    x = np.asarray(prefill_s, dtype=float)
    points = np.zeros(x.shape[:-1])
    p0, c, theta = (v + points for v in wait_tail(wait, shape))
    fixed = np.asarray(wait.fixed_s, dtype=float) + points
    span = (np.maximum(np.asarray(wait.burst, dtype=float), 1) - 1) \
        * np.asarray(wait.service_s, dtype=float) + points
    open_loop = np.asarray(wait.rho, dtype=float) + points > 0

    def cdf(t: Any) -> Any:
        y = t[..., None] - x - fixed[..., None]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            tail = np.minimum(p0[..., None], c[..., None] * np.exp(-theta[..., None] * y))
            ramp = np.where(span[..., None] > 0, np.clip(y / span[..., None], 0, 1), 1.0)
            g = np.where(open_loop[..., None], 1 - tail, ramp)
        return np.mean(np.where(y >= 0, g, 0.0), axis=-1)

    q = _levels(p0)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = np.where(p0 > 1 - q, np.log(np.maximum(c, 1e-300) / (1 - q)) / theta, 0.0)
    own = np.where(open_loop, np.maximum(own, 0.0), q * span)
    lo = x.min(axis=-1) + fixed + 0 * q
    # one request shape: closed form
    value = lo + own if x.shape[-1] == 1 else _bisect(
        cdf, q, lo, x.max(axis=-1) + fixed + np.where(open_loop, own, span))
    value = np.where(p0 >= 1, np.inf, value)
    return {f"ttft_s_p{p}": v for p, v in zip(PERCENTILES, value, strict=True)}


def _levels(like: Any) -> Any:
    """The percentiles as probabilities, on a leading axis before `like`'s."""
    return (np.array(PERCENTILES, dtype=float) / 100).reshape((-1,) + (1,) * np.ndim(like))


def chunked_prefill(prompts: Any, chunk: Any, t_own: Any, t_full: Any, prefill_s: Any
                    ) -> tuple[Any, Any]:
    """Each sampled request's own prefill in an aggregated replica (per point and request)
    and beta, the iteration's time per prompt token: ceil(L'/chunk) iterations of the base
    time plus beta per own token, beta the slope from the mean request's own-share
    iteration (`t_own`, L'/pieces tokens) to a full chunk's (`t_full`); scaled so that the
    mean request's is the point's `prefill_s`."""
    mean = float(np.mean(prompts))
    pieces = np.ceil(mean / chunk)
    share = mean / pieces
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(chunk - share >= 1, (t_full - t_own) / (chunk - share), 0.0)
    beta = np.maximum(np.nan_to_num(beta), 0.0)
    base = np.maximum(t_own - beta * share, 0.0)[..., None]
    own = np.ceil(prompts / np.asarray(chunk)[..., None]) * base + beta[..., None] * prompts
    return np.asarray(prefill_s)[..., None] * own / (pieces * t_own)[..., None], beta


def _bisect(cdf: Any, q: Any, lo: Any, hi: Any) -> Any:
    """The least t with cdf(t) >= q, per point, between `lo` (cdf < q or at the least) and
    `hi` (cdf >= q)."""
    lo = np.array(lo, dtype=float)
    hi = np.array(hi, dtype=float)
    for _ in range(_BISECT):
        mid = (lo + hi) / 2
        above = cdf(mid) >= q
        hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
    return hi


def _normal_cdf(z: Any) -> Any:
    """Phi(z) from erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7)."""
    x = np.abs(z) / math.sqrt(2)
    t = 1 / (1 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    erf = 1 - poly * np.exp(-x * x)
    return 0.5 * (1 + np.sign(z) * erf)


def decode_spread(w: Workload, t_step_s: Any, sequences: Any, attention_share: Any,
                  beta_s: Any = 0.0, prompt_tokens: Any = 0.0, chunk: Any = 1.0,
                  batch_slope_s: Any = None) -> tuple[Any, Any]:
    """Per point and sampled request: TPOT's relative shift and variance (module doc).
    `sequences`: n per step; `prompt_tokens`: m per replica step; `batch_slope_s`: g, or
    None for a running batch that does not fluctuate (capacity, closed loop)."""
    ins, outs = _pairs(w)
    steps = (outs - 1) / w.tokens_per_step
    weight = outs - 1
    context = ins + outs / 2
    c_bar = float(np.sum(weight * context) / np.sum(weight))
    var_c = float(np.sum(weight * ((context - c_bar) ** 2 + outs ** 2 / 12)) / np.sum(weight))
    t = np.asarray(t_step_s, dtype=float)[..., None]
    n = np.maximum(np.asarray(sequences, dtype=float), 1)[..., None]
    h = np.asarray(attention_share, dtype=float)[..., None]
    # M/G/inf's autocorrelation E[(D - u)+] / E[D]: triangles of width D_j, weights D_j
    r, slowed = _correlations(tuple(steps))
    shift = h * (context - c_bar) / (n * c_bar)
    var = h ** 2 * (n - 1) * var_c / (n * c_bar) ** 2 * r
    uncached = ins * (1 - w.prefix_hit)
    m = np.asarray(prompt_tokens, dtype=float)[..., None]
    ch = np.asarray(chunk, dtype=float)[..., None]
    spread = m * np.minimum(np.maximum(ch - m, 0), np.mean(uncached ** 2) / np.mean(uncached))
    span = np.ceil(np.mean(uncached) / ch)
    beta = np.asarray(beta_s, dtype=float)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        var = var + np.nan_to_num(beta ** 2 * spread * np.minimum(1, span / steps) / t ** 2)
        if batch_slope_s is not None:
            g = np.asarray(batch_slope_s, dtype=float)[..., None]
            # arrivals per step grow with the step: Poisson's n / (1 - f), f = n g / t
            feedback = 1 / (1 - np.clip(n * g / t, 0.0, 0.9))
            slow = _slowed(slowed, feedback[..., 0])
            var = var + np.nan_to_num(g ** 2 * n * feedback * slow / t ** 2)
            # a request lives through more steps where more run: the steps it sees average
            # E[n t] / E[n] = t_bar + g Var(n) / n
            shift = shift + np.nan_to_num(g * feedback / t)
    return shift + 0 * var, var + 0 * shift


_SLOWER = np.geomspace(1.0, 10.0, 32)  # 1 / (1 - f) for f up to 0.9


@functools.lru_cache(maxsize=8)
def _correlations(steps: tuple[float, ...]) -> tuple[Any, Any]:
    """r_w per request, and r_f per request at each of _SLOWER (module doc)."""
    d = np.array(steps)
    weight = d / d.sum()
    widths = d[None, None, :] * _SLOWER[:, None, None]
    return correlation_factor(d[:, None], d[None, :]) @ weight, \
        correlation_factor(d[None, :, None], widths) @ weight


def _slowed(table: Any, slower: Any) -> Any:
    """r_f per point and request, interpolated in log(1 / (1 - f)) along `table`."""
    at = np.interp(np.log(slower), np.log(_SLOWER), np.arange(_SLOWER.size))
    i = np.clip(np.floor(at).astype(int), 0, _SLOWER.size - 2)
    frac = (at - i)[..., None]
    return table[i] * (1 - frac) + table[i + 1] * frac


def tpot_quantiles(tpot_s: Any, shift: Any, var: Any) -> dict[str, Any]:
    """p50 / p90 / p99 of the requests' TPOT: a mixture of Gaussians, one per request."""
    mean = np.asarray(tpot_s, dtype=float)[..., None] * (1 + shift)
    sd = np.asarray(tpot_s, dtype=float)[..., None] * np.sqrt(var)
    if mean.shape[-1] == 1:
        z = np.array([NormalDist().inv_cdf(p / 100) for p in PERCENTILES])
        value = mean[..., 0] + z.reshape((-1,) + (1,) * (mean.ndim - 1)) * sd[..., 0]
    else:
        def cdf(t: Any) -> Any:
            with np.errstate(divide="ignore", invalid="ignore"):
                u = np.where(sd > 0, (t[..., None] - mean) / sd,
                             np.where(t[..., None] >= mean, np.inf, -np.inf))
            return np.mean(_normal_cdf(u), axis=-1)
        lo, hi = (mean - 4 * sd).min(axis=-1), (mean + 4 * sd).max(axis=-1)
        q = _levels(lo)
        value = _bisect(cdf, q, lo + 0 * q, hi + 0 * q)
    return {f"tpot_s_p{p}": np.maximum(v, 0.0) for p, v in zip(PERCENTILES, value,
                                                                strict=True)}


_CONTEXT_OPS = ("attention", "mla attention")  # the ops that read every cached token


def attention_share(a: Any) -> Any:
    """The share of a step's lower bound spent in the attention ops that read the KV
    context (sliding-window layers excluded: their context stops growing), per point."""
    rows, critical = a.parts.rows, a.parts.core.times.critical_s
    total: Any = 0.0
    for r, t in zip(rows, critical, strict=True):
        if r.name in _CONTEXT_OPS and "window" not in r.group:
            total = total + np.asarray(t)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.clip(total / np.asarray(a.t_lower_s), 0.0, 1.0))
