"""Critical points: the size at which a piece of work stops waiting on memory or links.

Closed forms where the algebra gives one (built from `Sym`s like the ops, so each carries its
derivation), a vectorized numeric root otherwise. Everything accepts numpy arrays.

critical_batch (the JAX Scaling Book, https://jax-ml.github.io/scaling-book/roofline/: matrix
multiplication, Question 5): matmul X[M,K] x W[K,N] on a chip with peak P (FLOP/s, the
compute dtype's) and HBM bandwidth BW is compute-bound when
    2·M·K·N / P >= (M·K·s_x + K·N·s_w + M·N·s_o) / BW
    <=> M·(2·K·N/P - (K·s_x + N·s_o)/BW) >= K·N·s_w/BW,
so  M* = (K·N·s_w/BW) / (2·K·N/P - (K·s_x + N·s_o)/BW)   (inf if the bracket is <= 0:
the activations alone outweigh the work and no M makes it compute-bound). Dividing through
by K·N/BW gives M* = s_w / (2·BW/P - s_x/N - s_o/K), whose limit for large K and N is
    M* = s_w·P / (2·BW)
- the ridge point P/BW scaled by s_w/2: H100 bf16 295, int8 weights 148, int4 weights 74,
fp8 (twice the peak, half the bytes) 295 again. Weight-only quantization lowers the critical
batch; quantizing weights, activations and compute together leaves it unchanged.

critical_shard_dim (the same chapter's network communication rooflines): X[B,D] x W[D,F]
with D sharded over chips. With two chips each computes a partial sum over its shard
d = D/2, 2·B·d·F FLOPs, and the partial sums Y_i[B,F] (s bytes per element) are summed
across the link: each chip sends B·F·s bytes per direction (one swap with two chips; in
general bytes_factor·B·F·s). Compute-bound when
    2·B·d·F / P >= bytes_factor·B·F·s / W   <=>   d >= bytes_factor·s·P / (2·W)
B and F cancel: the per-chip contraction shard decides, not the batch. W is the link's
bandwidth PER DIRECTION (H100 NVLink 450 GB/s, not the 900 GB/s bidirectional figure
some write-ups divide by): bf16 on H100 gives d* ≈ 2200 over NVLink, ≈ 20000
over a 50 GB/s NIC. Link latency (alpha) is ignored: this is the bandwidth-only bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .cost import Cost
from .derivation import Expr, Num, Sym, Term, unwrap
from .dtypes import DType, operand_dtypes
from .dtypes import dtype as lookup_dtype
from .errors import RooflineError
from .evaluate import COMPUTE, evaluate
from .hardware import Chip, load_chip
from .ops._common import size

__all__ = ["critical_batch", "critical_batch_term", "critical_shard_dim", "critical_shard_dim_term",
           "crossover", "decode_critical_batch"]



def _bound(expr: Expr) -> np.ndarray[Any, Any]:
    """A critical point is positive; a non-positive or undefined solution means 'never'."""
    value = np.asarray(expr.value, dtype=float)
    return np.where(np.isfinite(value) & (value > 0), value, np.inf)


# --- generic: the smallest x at which make_cost(x) turns compute-bound ------------------------


def crossover(
    make_cost: Callable[[np.ndarray[Any, Any]], Cost],
    hw: Chip | str,
    lo: object,
    hi: object,
    *,
    iterations: int = 60,
) -> Num:
    """The smallest x in [lo, hi] at which `evaluate(make_cost(x), hw)` is compute-bound.

    Compute-bound means the compute time is >= the time of every other resource (ties go to
    compute, as in `evaluate`). Assumes the work turns compute-bound once and stays so as x
    grows (true of a matmul in M, K or N). Geometric bisection on whole arrays at once:
    `make_cost` receives an array of x values (the broadcast shape of lo, hi and whatever
    arrays it closes over) and must return a Cost of that shape. After 60 halvings the
    bracket is (hi/lo)^(2^-60) wide: machine precision for any range.

    Returns lo where the work is already compute-bound at lo and inf where it is still not
    at hi; scalars in, a float out.

    >>> from roofline import matmul
    >>> round(crossover(lambda m: matmul(m, 8192, 8192), "h100", 1, 1e6), 1)
    318.3
    """
    chip = load_chip(hw)
    lo_arr, hi_arr = _positive("lo", lo), _positive("hi", hi)
    if np.any(hi_arr < lo_arr):
        raise RooflineError(f"hi: must be >= lo, got lo={lo!r}, hi={hi!r}")
    if int(iterations) < 1:
        raise RooflineError(f"iterations: must be at least 1, got {iterations!r}")

    def compute_bound(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.asarray(evaluate(make_cost(x), chip).bound) == COMPUTE

    at_lo = compute_bound(np.broadcast_to(lo_arr, np.broadcast_shapes(lo_arr.shape,
                                                                      hi_arr.shape)))
    shape = np.broadcast_shapes(lo_arr.shape, hi_arr.shape, at_lo.shape)
    a = np.broadcast_to(lo_arr, shape).copy()  # not compute-bound (unless at_lo)
    b = np.broadcast_to(hi_arr, shape).copy()  # compute-bound (if at_hi)
    at_lo = np.broadcast_to(at_lo, shape)
    at_hi = np.broadcast_to(compute_bound(b), shape)
    for _ in range(int(iterations)):
        mid = np.sqrt(a * b)
        ok = np.broadcast_to(compute_bound(mid), shape)
        b = np.where(ok, mid, b)
        a = np.where(ok, a, mid)
    return unwrap(np.where(at_lo, np.broadcast_to(lo_arr, shape), np.where(at_hi, b, np.inf)))


def _positive(name: str, value: object) -> np.ndarray[Any, Any]:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise RooflineError(f"{name}: expected a positive number, got {value!r}") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise RooflineError(f"{name}: must be a positive finite number (the search is "
                            f"geometric), got {value!r}")
    return arr


# --- matmul: the critical batch -----------------------------------------------------------


def critical_batch_term(
    hw: Chip | str,
    k: object,
    n: object,
    dtype: str | DType,
    weight_dtype: str | DType | None,
    out_dtype: str | DType | None,
    compute_dtype: str | DType | None,
) -> Term:
    chip = load_chip(hw)
    x, w, o, c = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    P = Sym("P", chip.peak_flops(c.name))
    BW = Sym("BW", chip.level("hbm").bandwidth_Bps)
    sx, sw, so = Sym("s_x", x.bytes), Sym("s_w", w.bytes), Sym("s_o", o.bytes)
    expr: Expr
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if k is None and n is None:
            expr = sw * P / (2 * BW)
        elif k is not None and n is not None:
            K, N = size("K", k), size("N", n)
            expr = (K * N * sw / BW) / (2 * K * N / P - (K * sx + N * so) / BW)
        elif k is not None:  # N -> inf: the s_x/N term vanishes
            expr = sw / (2 * BW / P - so / size("K", k))
        else:  # K -> inf: the s_o/K term vanishes
            expr = sw / (2 * BW / P - sx / size("N", n))
    return Term("M*", expr)


def critical_batch(
    hw: Chip | str,
    k: object = None,
    n: object = None,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
) -> Num:
    """Tokens M at which matmul(M, K, N) turns compute-bound on `hw` (HBM roofline).

    M* = (K·N·s_w/BW) / (2·K·N/P - (K·s_x + N·s_o)/BW), inf where no M suffices; with
    k = n = None the large-K, N limit s_w·P/(2·BW) (module docstring). A leftover None
    dimension is taken as large. The compute dtype defaults to the activation dtype, so
    weight-only int8/int4 uses the bf16 peak. Not rounded: the first whole batch that is
    compute-bound is ceil(M*).

    >>> round(critical_batch("h100"), 1), round(critical_batch("h100", weight_dtype="int4"), 1)
    (295.3, 73.8)
    """
    term = critical_batch_term(hw, k, n, dtype, weight_dtype, out_dtype, compute_dtype)
    return unwrap(_bound(term.expr))


def decode_critical_batch(
    hw: Chip | str,
    k: object = None,
    n: object = None,
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    q_len: object = 1,
) -> Num:
    """Sequences at which decode's weight GEMMs turn compute-bound: M* / q_len.

    Each decoding sequence puts q_len tokens through every weight matrix per step (1 for
    plain decoding, k + 1 or so for speculative decoding that verifies k drafted tokens), so
    the critical token count M* is reached with M*/q_len sequences.

    Only the weight GEMMs follow this. Decode attention does NOT become compute-bound by
    batching: each sequence reads its own KV cache, so its intensity is set by the query
    heads per KV head (GQA) and q_len, not by the number of sequences (a claim that batching
    32 sequences lifts decode attention to ~250 FLOP/B is wrong).

    >>> round(decode_critical_batch("h100", q_len=4), 1)
    73.8
    """
    chip = load_chip(hw)
    key = ("decode critical batch", k, n, dtype, weight_dtype, out_dtype, compute_dtype, q_len)
    try:  # a chip's figure for these dtypes: kept on the chip (a whole-model estimate asks)
        return cast(Num, chip.memo[key])
    except TypeError:  # array arguments: computed each time
        return _decode_critical_batch(chip, key)
    except KeyError:
        found = _decode_critical_batch(chip, key)
        if isinstance(found, float):  # one number; an array a caller could change is not kept
            chip.memo[key] = found
        return found


def _decode_critical_batch(chip: Chip, key: tuple[Any, ...]) -> Num:
    k, n, dtype, weight_dtype, out_dtype, compute_dtype, q_len = key[1:]
    term = critical_batch_term(chip, k, n, dtype, weight_dtype, out_dtype, compute_dtype)
    per_sequence = term.expr / size("q_len", q_len)
    return unwrap(_bound(per_sequence))


# --- sharded contraction: the critical shard dimension --------------------------------------


def critical_shard_dim_term(hw: Chip | str, link: str, dtype: str | DType,
                             bytes_factor: object) -> Term:
    chip = load_chip(hw)
    d = lookup_dtype(dtype)
    P = Sym("P", chip.peak_flops(d.name))
    W = Sym("W", chip.link(link).bandwidth_Bps)
    f = size("f", bytes_factor, "bytes_factor")
    # partial sums leave a GEMM in at least 16 bits (fp8 / fp4 GEMMs accumulate and emit bf16)
    partial = Sym("s", max(d.bytes, 2.0))
    return Term("d*", f * partial * P / (2 * W))


def critical_shard_dim(
    hw: Chip | str,
    link: str = "scale-up",
    dtype: str | DType = "bf16",
    bytes_factor: object = 1.0,
) -> Num:
    """Per-chip contraction shard D/n above which a D-sharded matmul is compute-bound.

    d* = bytes_factor·s·P / (2·W) with W the link's per-direction bandwidth, P the dtype's
    peak and s its element size (the partial sums travel in the same dtype). bytes_factor
    is the bytes each chip sends per direction, in units of one B·F partial sum: 1 for the
    two-chip swap of the Scaling Book's network rooflines
    (https://jax-ml.github.io/scaling-book/roofline/). The collectives work will generalise it;
    a ring all-reduce over n chips sends 2(n-1)/n partial sums per chip (1 at n = 2, -> 2 for
    large n), a reduce-scatter alone (n-1)/n.

    >>> round(critical_shard_dim("h100")), round(critical_shard_dim("h100", "scale-out"))
    (2199, 19788)
    """
    return unwrap(critical_shard_dim_term(hw, link, dtype, bytes_factor).expr.value)
