"""A collective over a group larger than one scale-up domain: a phase inside each domain
(scale-up) and one across domains (scale-out), a group that does not fill whole domains
spread evenly over the fewest that hold it."""

from __future__ import annotations

import numpy as np

from ...cost import Cost
from ...derivation import (
    Num,
    Quantity,
    Term,
    any_true,
    define,
    steps,
    sym,
    unwrap,
    value,
)
from .flat import flat_phase, full_steps


def hierarchical_cost(kind: str, algo: str, n: Quantity, m: Quantity, in_domain: Num,
                  share: Quantity) -> Cost:
    terms: list[Term] = []
    uneven = np.mod(np.asarray(value(n)), np.asarray(in_domain)) != 0
    if np.any(uneven):
        # n ranks that do not fill whole domains (16 of 9-per-domain): spread them evenly over
        # the fewest domains that hold them, b = ceil(n / a) with n / b ranks in each
        fewest = np.ceil(np.asarray(value(n)) / np.asarray(in_domain))
        in_domain = unwrap(np.where(uneven, np.asarray(value(n)) / fewest,
                                    np.asarray(in_domain) * 1.0))
    a = sym("a", in_domain)
    b = define(terms, "scale-up domains spanned", "b", n / a)
    if kind == "all-reduce":
        up_steps, up_bytes = flat_phase("all-reduce", algo if algo == "nvls" else "ring", a, m)
        out_steps, out_bytes = flat_phase("all-reduce", "tree" if algo == "tree" else "ring", b,
                                     m / a)
    elif kind in ("all-gather", "reduce-scatter"):
        up_steps, up_bytes = flat_phase(kind, "ring", a, m)
        out_steps, out_bytes = flat_phase(kind, "ring", b, m / a)
    elif kind == "broadcast":
        up_steps, up_bytes = flat_phase(kind, algo, a, m)
        out_steps, out_bytes = flat_phase(kind, algo, b, m)
    else:  # all-to-all: (a-1) peers inside the domain, n-a outside; direct: one round each
        up_bytes, out_bytes = (a - 1) / n * m, (n - a) / n * m
        up_steps, out_steps = (a - 1, n - a) if algo == "pairwise" else \
            (sym("[a > 1]", (np.asarray(value(a)) > 1) * 1.0),
             sym("[b > 1]", (np.asarray(value(b)) > 1) * 1.0))
    if any_true(value(share) < 1):  # the group's share of the scale-up link (link_share)
        up_bytes = up_bytes / share
    inside = (np.asarray(value(a)) > 1) * 1.0  # a phase over one rank moves nothing
    across = (np.asarray(value(b)) > 1) * 1.0
    if not np.all(inside):
        up_steps, up_bytes = up_steps * sym("[a > 1]", inside), up_bytes * sym("[a > 1]", inside)
    terms += steps(("scale-up steps", up_steps), ("scale-up bytes", up_bytes),
                   ("scale-out steps", out_steps), ("scale-out bytes", out_bytes))
    # one call: its launch precedes the phase on each link it uses (a group of one: none)
    return Cost(link_bytes={"scale-up": value(up_bytes), "scale-out": value(out_bytes)},
                link_steps={"scale-up": full_steps(value(up_steps), m),
                            "scale-out": full_steps(value(out_steps), m)},
                link_calls={"scale-up": full_steps(inside, m), "scale-out": full_steps(across, m)},
                steps=tuple(terms), name=f"{kind} ({algo}, hierarchical)", algorithm=algo)
