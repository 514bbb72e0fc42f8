"""Matmuls with many weight matrices: batched (one weight per batch element) and MoE experts.

Counting conventions (a multiply-add is 2 FLOPs; HBM traffic is the untiled lower bound,
every operand read once and every output written once, as for `matmul`):

batched_matmul: X[B,M,K] x W[B,K,N] -> Y[B,M,N], each batch element with its own weight:
    FLOPs = 2·B·M·N·K,  bytes = B·(M·K·s_x + K·N·s_w + M·N·s_o).
    Nothing is shared between batch elements, so batching does not raise the intensity: with
    M = 1 it stays ≈ 2/s_w whatever B is (the JAX Scaling Book,
    https://jax-ml.github.io/scaling-book/roofline/, Question 4: ≈ 2 for int8, ≈ 1 for bf16).
    This is the MoE efficiency problem: tokens spread over many experts each meet a weight
    matrix that few other tokens share.

grouped_matmul: T tokens routed to `top_k` of E experts, each expert a [K,N] weight
(one call per weight matrix of the expert MLP; fuse gate and up as N = 2·F if you like):
    FLOPs count the ACTIVE experts only: 2·T·top_k·K·N.
    Activations: each routed (token, expert) pair reads the token's K inputs and writes its
    N outputs: T·top_k·(K·s_x + N·s_o) (the per-expert gather/scatter is not deduplicated).
    Weights are read once per TOUCHED expert (one that got at least one token): E_t·K·N·s_w.

The bound holds for any routing. Each token picks top_k distinct experts and all T tokens
may pick the same ones, so any routing touches at least
    E_min = top_k·min(T, 1)
experts (min(T, 1): a fractional T, an average over steps, scales the one-token case down
to none). Over an expert-parallel group of R ranks, each holding E/R whole experts, a step
takes its slowest rank, which reads at least the mean rank's bytes:
    E_hot = top_k·min(T, 1)/R experts' weights + T·top_k/R pairs' activations.
(Whole experts allow more: the top_k touched lie on at most R ranks, so one holds
ceil(top_k/R) of them, and ranks holding fewer take at most T·(ceil(top_k/R) - 1) <
T·top_k/R pairs each, so one of those holding ceil(top_k/R) also takes the mean pairs. Not
taken: the expected time spreads the uniform E_t evenly over the ranks, a mean rank, which
at a few tokens over more ranks than top_k reads less than ceil(top_k/R) experts, and
lifting it to the floor moved NVIDIA's and InferenceX's batch-1 EP decode rows away from
their measurements: benchmarks/validation/check.py, decode held-out median 16.2% -> 16.6%.)
Routing that collapses onto few experts reaches it: NVIDIA's gpt-oss-120b runs with dummy
weights (benchmarks/validation/silicon.py) beat a bound of uniformly touched experts by up
to 1.78x.

The expected time (`Cost.runs`) reads the experts a trained router touches, taken as
uniform routing (its balancing loss spreads real text over the experts; each token picks
top_k distinct experts, every top_k-subset equally likely, tokens independent):
    P(a given expert is among one token's top_k) = C(E-1, top_k-1) / C(E, top_k) = top_k/E,
    P(no token picks it) = (1 - top_k/E)^T,
    E[E_t] = sum over the E experts of P(picked at least once) = E·(1 - (1 - top_k/E)^T)
by linearity of expectation (the experts are not independent; linearity does not need it).
Weight bytes are linear in E_t, so this gives the exact expected traffic, not an
approximation. It tends to E for many tokens and is at most min(E, T·top_k); over R ranks
it is spread evenly (E_t/R a rank, never below E_hot). Uniform is the largest expected E_t
of any router of independent tokens: with expert e drawn with chance p_e per token (the
p_e summing to top_k), E[E_t] = Σ 1 − (1 − p_e)^T, each term concave in p_e, is largest at
p_e = top_k/E (Jensen). Real routers are not uniform; pass the measured
`tokens_per_expert` to use real counts (the bound and the expected time then both read the
counted experts).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import call, derived, steps, sym, value
from ..dtypes import DType, operand_dtypes
from ..errors import RooflineError
from ..opid import Gemm
from ._common import shown, size, whole
from .params import OpDecl, Param, dtype_params


@derived
def batched_matmul(
    batch: object,
    m: object,
    k: object,
    n: object,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
) -> Cost:
    """X[B,M,K] x W[B,K,N] -> Y[B,M,N] with a separate weight per batch element.

    >>> from roofline import evaluate
    >>> est = evaluate(batched_matmul(64, 1, 8192, 8192, "int8"), "h100")
    >>> round(est.intensity["hbm"], 2), est.bound
    (2.0, 'hbm')
    """
    x, w, o, c = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    B, M, K, N = size("B", batch), size("M", m), size("K", k), size("N", n)
    sx, sw, so = sym("s_x", x.bytes), sym("s_w", w.bytes), sym("s_o", o.bytes)
    flops = 2 * B * M * N * K
    hbm = B * (M * K * sx + K * N * sw + M * N * so)
    return Cost(
        flops={c.peak: value(flops)},
        bytes={"hbm": value(hbm)},
        steps=steps(("FLOPs", flops), ("HBM bytes", hbm)),
        name="batched_matmul",
        op=Gemm(value(M), value(N), value(K), w.name, value(B)),
    )


def _counts(tokens_per_expert: object, experts: object) -> np.ndarray[Any, Any]:
    try:
        counts = np.asarray(tokens_per_expert, dtype=float)
    except (TypeError, ValueError):
        raise RooflineError("tokens_per_expert: expected an array of token counts, one per "
                            f"expert, got {tokens_per_expert!r}") from None
    if counts.ndim == 0 or counts.shape[-1] == 0:
        raise RooflineError("tokens_per_expert: expected a 1-D array of length E (or an array "
                            f"whose last axis is E), got shape {counts.shape}")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise RooflineError("tokens_per_expert: counts must be finite and >= 0")
    if np.any(counts.sum(axis=-1) <= 0):
        raise RooflineError("tokens_per_expert: at least one token must be routed")
    if experts is not None:
        e = np.asarray(experts, dtype=float)
        if e.ndim != 0 or float(e) != counts.shape[-1]:
            raise RooflineError(f"experts: {experts!r} does not match the last axis of "
                                f"tokens_per_expert (length {counts.shape[-1]})")
    return counts


@derived
def grouped_matmul(
    tokens: object,
    k: object,
    n: object,
    experts: object,
    top_k: object,
    tokens_per_expert: object = None,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    ranks: object = 1,
) -> Cost:
    """T tokens through `top_k` of E experts, each expert a [K,N] weight (MoE layer).

    The bound reads the experts any routing must touch (module docstring): top_k·min(T, 1),
    over `ranks` expert-parallel ranks (E/ranks whole experts each; the Cost is one rank's,
    the slowest one's floor) a ranks-th of them. The expected time
    (`Cost.runs`) reads the experts uniform routing touches, E·(1 - (1 - top_k/E)^T), spread
    evenly over the ranks. With `tokens_per_expert` (length E, or any array whose last axis
    is E) the touched experts are those with a count > 0, for both, and T = sum / top_k;
    `tokens` and `experts` may then be None, and if given must agree (counts summing to
    T·top_k, last axis of length E).

    >>> c = grouped_matmul(64, 7168, 2048, experts=256, top_k=8)
    >>> c.explain()[1]
    'touched experts, any routing = top_k·min_1(T) = 8·min_1(64) = 8'
    >>> round(float(c.bytes["hbm"]) / 1e9, 3), round(float(c.runs.bytes["hbm"]) / 1e9, 2)
    (0.244, 6.54)
    """
    x, w, o, c = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    K, N = size("K", k), size("N", n)
    TOPK = whole("top_k", top_k)
    R = whole("ranks", ranks)
    if tokens_per_expert is None:
        if tokens is None or experts is None:
            raise RooflineError("tokens and experts are required unless tokens_per_expert "
                                "is given")
        T, E = size("T", tokens), whole("E", experts, "experts")
        if np.any(np.asarray(value(TOPK)) > np.asarray(value(E))):
            raise RooflineError(f"top_k: at most the number of experts ({shown(experts)}), "
                                f"got {shown(top_k)}")
        uniform_term = E * (1 - (1 - TOPK / E) ** T)
        E_t = sym("E_t", value(uniform_term))
        at_most_one = call("min_1", _at_most_one, T)
        any_term = TOPK * at_most_one
        hot_term = any_term / R  # the slowest rank: at least the mean rank's
    else:
        counts = _counts(tokens_per_expert, experts)
        if np.any(np.asarray(value(TOPK)) > counts.shape[-1]):
            raise RooflineError(f"top_k: at most the number of experts "
                                f"({counts.shape[-1]}), got {shown(top_k)}")
        routed = counts.sum(axis=-1)
        if tokens is None:
            t_value = routed / np.asarray(value(TOPK))
            T = sym("T", float(t_value) if t_value.ndim == 0 else t_value)
        else:
            T = size("T", tokens)
            expected = np.asarray(value(T)) * np.asarray(value(TOPK))
            if not np.allclose(routed, expected, rtol=1e-9, atol=0):
                raise RooflineError(
                    f"tokens_per_expert: counts sum to {_show(routed)} but tokens·top_k = "
                    f"{_show(expected)} (each token goes to exactly top_k experts)")
        if np.any(counts > np.expand_dims(np.asarray(value(T)), -1)):
            raise RooflineError("tokens_per_expert: an expert got more than `tokens` tokens "
                                "(a token's top_k experts are distinct)")
        n_touched = np.count_nonzero(counts > 0, axis=-1).astype(float)
        E_t = sym("E_t", float(n_touched) if n_touched.ndim == 0 else n_touched)
        uniform_term = any_term = E_t
        hot_term = E_t / R  # placement unknown: the mean rank's, at most the hottest's
    sx, sw, so = sym("s_x", x.bytes), sym("s_w", w.bytes), sym("s_o", o.bytes)
    flops = 2 * T * TOPK * K * N
    pairs = T * TOPK * (K * sx + N * so)  # the routed (token, expert) pairs' activations
    expected_hbm = pairs + E_t * K * N * sw  # the whole group's, uniform routing
    # one GEMM per touched expert, over the tokens it was routed (on average)
    record = Gemm(value(T * TOPK / E_t), value(N), value(K), w.name, value(E_t), grouped=True)
    uniform = Cost(flops={c.peak: value(flops)}, bytes={"hbm": value(expected_hbm)},
                   name="grouped_matmul", op=record)
    one = value(R) == 1
    if not one:
        uniform = uniform.scaled(1 / value(R))
    E_hot = sym("E_hot", value(hot_term))
    hbm = (pairs if one else pairs / R) + E_hot * K * N * sw
    bound_hbm = value(hbm)
    # (uniform E_t >= top_k·min(T, 1): Bernoulli below one token; the maximum only keeps
    # rounding from putting the expected read a byte under the bound's)
    runs = Cost(flops=uniform.flops, bytes={"hbm": np.maximum(uniform.bytes["hbm"], bound_hbm)},
                name="grouped_matmul, uniform routing", op=record)
    named = [("FLOPs", flops if one else flops / R),
             ("touched experts, any routing", any_term)]
    if not one:
        named.append(("a rank's experts, any routing", hot_term))
    named += [("HBM bytes", hbm),
              ("touched experts, uniform routing (expected time)", uniform_term),
              ("HBM bytes, uniform routing (expected time)",
               expected_hbm if one else expected_hbm / R)]
    return Cost(flops=uniform.flops, bytes={"hbm": bound_hbm}, steps=steps(*named),
                name="grouped_matmul", runs=runs, op=record)


def _at_most_one(v: Any) -> Any:
    return min(v, 1.0) if type(v) is float else np.minimum(v, 1.0)


def _show(values: np.ndarray[Any, Any]) -> str:
    flat = np.asarray(values, dtype=float).ravel()
    if flat.size == 1:
        return f"{flat[0]:g}"
    return "[" + ", ".join(f"{v:g}" for v in flat[:4]) + (", ...]" if flat.size > 4 else "]")


_DTYPES = dtype_params("dtype", "weight", "out", "compute")
BATCHED_MATMUL = OpDecl(
    "batched-matmul", "X[B,M,K] x W[B,K,N]: a separate weight per batch element",
    batched_matmul, (
        Param("batch", "batch elements (each with its own weight)", required=True),
        Param("m", "rows per batch element", default=1),
        Param("k", "contraction dimension", required=True),
        Param("n", "output features", required=True), *_DTYPES))
GROUPED_MATMUL = OpDecl(
    "grouped-matmul", "MoE experts: T tokens routed to top-k of E [K,N] experts",
    grouped_matmul, (
        Param("tokens", "tokens entering the MoE layer", required=True),
        Param("k", "input features", required=True),
        Param("n", "output features per expert", required=True),
        Param("experts", "routed experts E", required=True),
        Param("top_k", "experts per token", required=True), *_DTYPES,
        Param("ranks", "expert-parallel ranks holding E/ranks experts each (the Cost is one "
              "rank's)", default=1)))


def remote_domain_copies(top_k: int, domains: float, experts: int | None = None,
                         groups: int = 1, topk_groups: int = 1) -> float:
    """Copies of one token an expert-parallel dispatch must send across scale-up domains: one
    per OTHER domain holding at least one of its top_k experts (the kernels send a token once
    per destination domain and fan it out inside: DeepEP internode, HybridEP, MORI), under
    uniform routing: (domains - 1)·P(a domain is hit), P = 1 - C(E - E/b, k)/C(E, k) for E
    experts over b domains; without E, 1 - (1 - 1/b)^k, the many-experts limit, which is
    never more (drawing k distinct experts hits a domain at least as often).

    Group-limited routing (DeepSeek-V3/R1's config: n_group = 8 groups, topk_group = 4): a
    token picks `topk_groups` of the `groups` expert groups (consecutive blocks of E/G
    experts), then its top_k experts among those groups' E_c = g·E/G (DeepSeek-V3 report,
    arXiv:2412.19437 §2.1.2 "node-limited routing"; DeepEP's tests route so,
    tests/legacy/test_internode.py L42-46). Uniform over both choices: a domain holding whole
    groups (G a multiple of b) is hit with P = sum over j of P(j of its G/b groups are
    chosen, hypergeometric)·(1 - C(E_c - j·E/G, k)/C(E_c, k)); a domain inside one group (b
    a multiple of G) with P = (g/G)·(1 - C(E_c - E/b, k)/C(E_c, k)); without E the limits
    (1 - j/g)^k and (1 - G/(b·g))^k for the misses. Blocks that do not nest: the unrestricted
    count (as without groups). DeepSeek-V3 over 8 nodes: 3.17 remote copies, not 4.6."""
    if domains <= 1:
        return 0.0
    if experts is not None and top_k > experts:
        raise RooflineError(f"top_k ({top_k}) exceeds the {experts} experts")
    return (domains - 1.0) * domain_hit(top_k, domains, experts, groups, topk_groups)


def domain_hit(top_k: int, domains: float, experts: int | None = None, groups: int = 1,
               topk_groups: int = 1) -> float:
    """P(one given domain of `domains` equal blocks of experts holds at least one of a
    token's top_k experts), as `remote_domain_copies` routes them."""
    b = float(domains)
    if groups < 1 or not 1 <= topk_groups <= groups:
        raise RooflineError(f"topk_group ({topk_groups}) must be between 1 and n_group "
                            f"({groups})")
    nested = b == int(b) and (groups % int(b) == 0 or int(b) % groups == 0)
    if topk_groups == groups or not nested:
        if experts is None or experts % b:  # uneven domains: the limit, never more
            return 1.0 - (1.0 - 1.0 / b) ** top_k
        return 1.0 - math.comb(experts - int(experts // b), top_k) / math.comb(experts, top_k)
    d, g = int(b), topk_groups
    chosen = None  # E_c; uneven blocks: the many-experts limit
    if experts is not None and not experts % groups and not experts % d:
        chosen = experts * g // groups
    if chosen is not None and top_k > chosen:
        raise RooflineError(f"top_k ({top_k}) exceeds the {chosen} experts of the "
                            f"{topk_groups} groups a token may use")

    def miss(share_experts: int, share: float) -> float:
        """P(none of the top_k lands on `share_experts` of the chosen experts)."""
        if chosen is None or experts is None:
            return (1.0 - share) ** top_k
        return math.comb(chosen - share_experts, top_k) / math.comb(chosen, top_k)

    if d % groups == 0:  # a group spans d/G domains
        per_domain = 0 if experts is None else experts // d
        return g / groups * (1.0 - miss(per_domain, groups / (d * g)))
    per_domain = groups // d  # whole groups per domain: j of them chosen
    hit = 0.0
    for j in range(1, min(per_domain, g) + 1):
        p_j = math.comb(per_domain, j) * math.comb(groups - per_domain, g - j) / math.comb(
            groups, g)
        hit += p_j * (1.0 - miss(0 if experts is None else j * experts // groups, j / g))
    return hit
