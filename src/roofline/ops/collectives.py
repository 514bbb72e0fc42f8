"""Collectives in the alpha-beta model: message steps (alpha) and bytes per direction (beta).

`nbytes` is the buffer size as nccl-tests reports it: the full per-rank vector for
all-reduce, broadcast and send/recv, the full gathered output for all-gather, the full
input for reduce-scatter, and each rank's whole send buffer for all-to-all.

Per rank, over n ranks (each step sends one message; bytes are per direction):

    collective       ring / pairwise              tree (double binary)     nvls (in-switch)
    all-reduce       2(n-1) steps, 2(n-1)/n·m     2·ceil(log2 n), 2·m     2 steps, m
    all-gather       n-1,  (n-1)/n·m              -                        -
    reduce-scatter   n-1,  (n-1)/n·m              -                        -
    all-to-all       n-1,  (n-1)/n·m              -                        -
    broadcast        n-1,  m (pipelined chain)    ceil(log2 n), m          -
    send-recv        1,    m                      -                        -

The ring rows are the bandwidth-optimal schedules (Thakur et al.); "tree" is NCCL's
pipelined double binary tree: log-depth latency, but each rank moves about 2·m. "nvls" is
NVLink SHARP: every GPU pushes its m bytes into the switch, which reduces and multicasts the
result back: m each way in two steps (ideal; needs a link with in-switch reduction).

A group larger than one scale-up domain (`domain_size` ranks) runs hierarchically, with
a = domain_size ranks inside each domain and b = n / a domains (a group that does not fill
whole domains is spread evenly over the fewest that hold it: b = ceil(n / domain_size),
a = n / b): all-reduce = reduce-scatter
inside (a, m) + all-reduce across (b, m/a, each GPU on its own NIC) + all-gather inside
(a, m); all-gather / reduce-scatter / broadcast split the same way; all-to-all sends
(a-1)/n·m over the scale-up link and (n-a)/n·m over scale-out. The phases sit on different
links, so the evaluator's t_lower assumes them pipelined and t_upper serial.

busbw (nccl-tests): algbw = m / t; busbw = algbw · factor with factor 2(n-1)/n for
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and
send-recv — so a ring all-reduce's busbw approaches the per-direction link bandwidth.
Reduction arithmetic (a few adds per element) and the HBM traffic of the buffers are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost import LINKS, Cost
from ..derivation import Call, Expr, Num, Sym, Term, define, unwrap
from ..errors import RooflineError, unknown
from ..hardware import Chip, make_system
from ._common import size, whole
from .params import OpDecl, Param

if TYPE_CHECKING:
    from ..evaluate import Estimate

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast",
               "send-recv")
ALGORITHMS = ("ring", "tree", "nvls")

_BUSBW_FACTOR: dict[str, Callable[[Num], Num]] = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: np.ones_like(np.asarray(n, dtype=float)),
    "send-recv": lambda n: np.ones_like(np.asarray(n, dtype=float)),
}


def busbw_factor(kind: str, ranks: Any) -> Num:
    """nccl-tests' factor from algorithm bandwidth to bus bandwidth."""
    if kind not in _BUSBW_FACTOR:
        raise unknown("collective", kind, COLLECTIVES)
    value = _BUSBW_FACTOR[kind](np.asarray(ranks, dtype=float))
    return float(value) if np.ndim(value) == 0 else value


def _log2(n: Expr) -> Expr:
    return Call("ceil_log2", lambda v: np.ceil(np.log2(v)), n)


def _flat(kind: str, algo: str, n: Expr, m: Expr) -> tuple[Expr, Expr]:
    """(steps, bytes per direction) for one phase over n ranks on one link."""
    if kind == "send-recv":
        return Sym("1", 1.0), m
    if algo == "ring":
        if kind == "all-reduce":
            return 2 * (n - 1), 2 * (n - 1) / n * m
        if kind == "broadcast":
            return n - 1, m
        return n - 1, (n - 1) / n * m
    if algo == "tree" and kind in ("all-reduce", "broadcast"):
        depth = _log2(n)
        return (2 * depth, 2 * m) if kind == "all-reduce" else (depth, m)
    if algo == "nvls" and kind == "all-reduce":
        return Sym("2", 2.0), m
    raise RooflineError(f"algorithm {algo!r} does not implement {kind} (ring does all; tree: "
                        "all-reduce, broadcast; nvls: all-reduce)")


def collective(
    kind: str,
    nbytes: Any,
    ranks: Any,
    algo: str = "ring",
    link: str = "scale-up",
    domain_size: Any = None,
    link_share: Any = 1.0,
) -> Cost:
    """One collective over `ranks` ranks as a per-rank Cost on the link(s) it uses.

    `domain_size` (ranks per scale-up domain) makes a larger group hierarchical: the part
    inside a domain runs on `link` (scale-up) and the part across domains on scale-out.
    `link_share` is the fraction of that link's bandwidth the group can use (a ring along one
    axis of a TPU torus uses 2 of its 4 or 6 ports: `System.link_share`); its bytes count
    as 1/link_share as many, so the evaluator's bandwidth stays the chip's figure.

    >>> c = collective("all-reduce", 8 * 2**30, 8)
    >>> round(c.link_bytes["scale-up"] / 2**30, 3), c.link_steps["scale-up"]
    (14.0, 14.0)
    """
    if kind not in COLLECTIVES:
        raise unknown("collective", kind, COLLECTIVES)
    if algo not in ALGORITHMS:
        raise unknown("algorithm", algo, ALGORITHMS)
    if link not in LINKS:
        raise unknown("link", link, LINKS)
    m = size("m", nbytes, "bytes")
    n = whole("n", ranks, "ranks")
    # ranks = 1 is allowed (a sweep may include it): 0 steps and 0 bytes
    hierarchical = domain_size is not None and link == "scale-up" and kind != "send-recv" \
        and np.any(np.asarray(n.value) > np.asarray(domain_size))
    share = size("share", link_share, "link_share")
    if np.any(np.asarray(share.value) > 1):
        raise RooflineError(f"link_share: a fraction in (0, 1], got {link_share!r}")
    if not hierarchical:
        steps, traffic = _flat(kind, algo, n, m)
        if np.any(np.asarray(n.value) == 1):  # a group of one moves nothing, on any algorithm
            others = Sym("[n > 1]", (np.asarray(n.value) > 1) * 1.0)
            steps, traffic = steps * others, traffic * others
        if np.any(np.asarray(share.value) < 1):
            traffic = traffic / share
        return Cost(link_bytes={link: traffic.value}, link_steps={link: _full(steps.value, m)},
                    terms=(Term(f"{link} steps", steps), Term(f"{link} bytes", traffic)),
                    name=f"{kind} ({algo})")
    domain = whole("a", domain_size, "domain_size")
    # a group smaller than a domain stays inside it: a = min(n, domain), b = n / a domains
    a = Sym("a", np.minimum(np.asarray(n.value), np.asarray(domain.value)) * 1.0)
    return _hierarchical(kind, algo, n, m, Sym("a", unwrap(a.value)))



def _full(value: Num, like: Expr) -> Num:
    """Steps broadcast to the message shape, so a sweep over sizes gives arrays throughout."""
    shape = np.broadcast_shapes(np.shape(value), np.shape(like.value))
    return value if shape == () else np.broadcast_to(value, shape)


def _hierarchical(kind: str, algo: str, n: Sym, m: Sym, a: Sym) -> Cost:
    terms: list[Term] = []
    uneven = np.mod(np.asarray(n.value), np.asarray(a.value)) != 0
    if np.any(uneven):
        # n ranks that do not fill whole domains (16 of 9-per-domain): spread them evenly over
        # the fewest domains that hold them, b = ceil(n / a) with n / b ranks in each
        fewest = np.ceil(np.asarray(n.value) / np.asarray(a.value))
        a = Sym("a", unwrap(np.where(uneven, np.asarray(n.value) / fewest,
                                     np.asarray(a.value) * 1.0)))
    b = define(terms, "scale-up domains spanned", "b", n / a)
    if kind == "all-reduce":
        up_steps, up_bytes = _flat("all-reduce", algo if algo == "nvls" else "ring", a, m)
        out_steps, out_bytes = _flat("all-reduce", "tree" if algo == "tree" else "ring", b,
                                     m / a)
    elif kind in ("all-gather", "reduce-scatter"):
        up_steps, up_bytes = _flat(kind, "ring", a, m)
        out_steps, out_bytes = _flat(kind, "ring", b, m / a)
    elif kind == "broadcast":
        up_steps, up_bytes = _flat(kind, algo, a, m)
        out_steps, out_bytes = _flat(kind, algo, b, m)
    else:  # all-to-all: (a-1) peers inside the domain, n-a outside
        up_steps, up_bytes = a - 1, (a - 1) / n * m
        out_steps, out_bytes = n - a, (n - a) / n * m
    terms += [Term("scale-up steps", up_steps), Term("scale-up bytes", up_bytes),
              Term("scale-out steps", out_steps), Term("scale-out bytes", out_bytes)]
    return Cost(link_bytes={"scale-up": up_bytes.value, "scale-out": out_bytes.value},
                link_steps={"scale-up": _full(up_steps.value, m),
                            "scale-out": _full(out_steps.value, m)},
                terms=tuple(terms), name=f"{kind} ({algo}, hierarchical)")


def crossover_from_times(nbytes: float, time_s: Mapping[str, Any], links: Any) -> float | None:
    """The same crossover from an evaluated collective's per-resource times, on one link or
    across a hierarchical collective's phases: link times grow linearly with the message,
    the alpha·steps latency does not, so latency holds below nbytes·t_latency / (slowest
    link's time). None when nothing moves."""
    wire = max((float(time_s[k]) for k in links), default=0.0)
    return nbytes * float(time_s.get("latency", 0.0)) / wire if wire > 0 else None


def latency_crossover_bytes(cost: Cost, nbytes: Any, latency_s: float,
                            bandwidth_Bps: float, link: str) -> Num:
    """Message size at which alpha·steps equals bytes/bandwidth on one link (costs are
    linear in the message size, so it is steps·alpha·W / (bytes per byte of message))."""
    per_byte = np.asarray(cost.link_bytes[link]) / np.asarray(nbytes, dtype=float)
    value = np.asarray(cost.link_steps[link]) * latency_s * bandwidth_Bps / per_byte
    return float(value) if value.ndim == 0 else value


# --- declarations: the collectives as `roofline op allreduce ...` and `run_op` see them -----


def placement(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """Where a group sits on the chip's system: a group larger than the scale-up domain goes
    hierarchical, a torus ring gets its share of the ports, and NVLS needs the switch."""
    link = kwargs.get("link", "scale-up")
    system = make_system(chip)
    if kwargs.get("domain_size") is None and link == "scale-up" and "scale-up" in chip.links:
        kwargs["domain_size"] = system.chips_per_domain
    ranks = kwargs.get("ranks", kwargs.get("shards", kwargs.get("tp", 1)))
    if kwargs.get("link_share") is None:  # a torus ring uses the ports along its axes
        inside = kwargs.get("domain_size") or ranks
        kwargs["link_share"] = system.link_share(link, np.minimum(ranks, inside)) \
            if link == "scale-up" else 1.0
    if kwargs.get("algo") == "nvls" and not chip.link(link).in_switch_reduction:
        raise RooflineError(f"--algo nvls needs in-switch reduction (NVLink SHARP), which "
                            f"{chip.id!r}'s {link} link does not have (use ring or tree)")
    return kwargs


PLACEMENT_PARAMS = (
    Param("link", "link the group sits on (a group larger than the scale-up domain also "
          "uses scale-out)", "choice", "scale-up", choices=("scale-up", "scale-out")),
    Param("algo", "algorithm", "choice", "ring", choices=ALGORITHMS),
    Param("domain_size", "ranks per scale-up domain (default: the chip's)"),
    Param("link_share", "fraction of the link's bandwidth the group can use (default: the "
          "chip's; a torus ring uses the ports along its axes)", "float"),
)


def _bandwidths(kind: str) -> Callable[[dict[str, Any], Estimate], dict[str, Any]]:
    """nccl-tests' figures for an evaluated collective, and where latency stops ruling."""
    def extras(kwargs: dict[str, Any], est: Estimate) -> dict[str, Any]:
        nbytes, ranks = kwargs["nbytes"], kwargs["ranks"]
        t = float(est.t_lower_s)
        algbw = nbytes / t if t > 0 else None  # one rank: nothing moves, no bandwidth to quote
        out = {"algbw_Bps": algbw,
               "busbw_Bps": None if algbw is None else algbw * float(busbw_factor(kind, ranks)),
               "latency_crossover_bytes": None}
        if algbw is not None:
            out["latency_crossover_bytes"] = crossover_from_times(nbytes, est.time_s,
                                                                  est.cost.link_bytes)
        return out

    return extras


COLLECTIVE_OPS = tuple(
    OpDecl(kind.replace("-", ""), f"{kind} of --bytes over --ranks ranks (alpha-beta model)",
           partial(collective, kind), (
               Param("nbytes", "message size as nccl-tests counts it (e.g. 64MiB, 1GB)",
                     "bytes", required=True, flag="--bytes"),
               Param("ranks", "ranks in the group", required=True), *PLACEMENT_PARAMS),
           placement, _bandwidths(kind), aliases=(kind,))
    for kind in COLLECTIVES)
