"""The expert-parallel all-to-all as the expert kernels send it: one copy of a token per
destination rank (and per destination domain across domains)."""

from __future__ import annotations

import functools
import math

from ...cost import Cost
from ...derivation import (
    Sym,
    Term,
)
from ..moe import remote_domain_copies


def one_copy_per_destination(cost: Cost, top_k: int, ranks: float,
                             in_domain: float | None = None,
                             experts: int | None = None, groups: int = 1,
                             topk_groups: int = 1) -> Cost:
    """An expert-parallel all-to-all of every (token, expert) pair (`cost`: top_k copies of a
    token, the other ranks' share of them on the links) as the expert kernels send it: one
    copy per destination rank holding any of its experts (the rank runs all of them: DeepEP,
    pplx-kernels, MORI) and, across scale-up domains (`in_domain` ranks each), one per
    destination domain, fanned out there (DeepEP internode, HybridEP, MORI). Copies under
    uniform routing: `moe.remote_domain_copies`, group-limited where the model routes so
    (`groups`, `topk_groups`: its config's n_group, topk_group). DeepSeek-V3 over EP 8: 4.6
    copies, not 7 (3.2 with its 4-of-8 groups); over 8 8-GPU nodes 3.2 across, not 7. The
    expected time keeps the per-copy volume (`Cost.runs`), which HybridEP's, MORI's and the
    low-latency kernels' measured times follow; DeepEP's V1 normal kernels run this
    schedule (`expected(..., engine_kernels=True)`: their 32 rows ran 2.3x the per-copy
    forecast across nodes; moe_dispatch held-out error 18.5% -> 12.6% with it).

    Not a floor for any routing, unlike the expert reads (ops.moe): a router sending every
    token to experts on its own rank (possible where a rank holds top_k experts or more)
    sends nothing. The two floors trade against each other: that routing reads top_k
    experts a rank, where the expert floor's ceil(top_k/ep) gathers every token onto the
    same few experts, one copy to each of their ranks. Kept as uniform routing's copies
    (DeepSeek-V3 on 8 H200s: 0.9 of the 6.4 ms bound of a 64-sequence decode step,
    latency-bound; 9.8 of 118.9 ms in a 2 x 4096-token prefill)."""
    route = (experts, groups, topk_groups)
    shares = dict.fromkeys(cost.link_bytes, _copy_share(top_k, ranks, *route))
    across = False  # one copy per destination domain on the scale-out link
    if in_domain is not None and ranks > in_domain and "scale-out" in shares:
        across = True
        # the group spread evenly over the fewest domains that hold it, as `hierarchical`
        # splits it: (n - n/b)/n of every copy crosses
        shares["scale-out"] = _copy_share(top_k, math.ceil(ranks / in_domain), *route)
    if all(share >= 1.0 for share in shares.values()):
        return cost
    return Cost(link_bytes={link: nbytes * shares[link]
                            for link, nbytes in cost.link_bytes.items()},
                link_steps=cost.link_steps, link_calls=cost.link_calls,
                steps=functools.partial(_per_destination_terms, cost, shares, across),
                name=f"{cost.name}, one copy per destination", algorithm=cost.algorithm,
                runs=cost)


def _copy_share(top_k: int, destinations: float, experts: int | None, groups: int = 1,
                topk_groups: int = 1) -> float:
    """The share of a token's copies to other destinations that one copy per destination
    sends: remote copies over top_k·(1 - 1/d); never more than every copy."""
    if destinations <= 1:
        return 1.0
    return min(1.0, remote_domain_copies(top_k, destinations, experts, groups, topk_groups) / (
        top_k * (1.0 - 1.0 / destinations)))


def _per_destination_terms(cost: Cost, shares: dict[str, float], across: bool
                           ) -> tuple[Term, ...]:
    return (*cost.terms, *(Term(f"{link} bytes, one copy per destination "
                                + ("domain" if link == "scale-out" and across else "rank"),
                                Sym("share", share) * Sym(f"{link} bytes",
                                                          cost.link_bytes[link]))
                           for link, share in shares.items() if share < 1.0))
