"""`collective`: one collective as a per-rank Cost, named, picked by "auto", or per point of a
sweep whose group size varies."""

from __future__ import annotations

from typing import Any

from ...cost import LINKS, Cost
from ...derivation import (
    derived,
    symbolic,
    value,
)
from ...errors import RooflineError, unknown
from ...hardware import Chip
from .._common import whole
from .algorithms import AUTO, COLLECTIVES, DEFAULT_ALGO, IMPLEMENTS, SHOTS, check_direct
from .auto import PerByte, choose, from_units, sized
from .named import named_collective
from .pointwise import group_index, ndim, per_pick, pointwise, varies


@derived
def collective(
    kind: str,
    nbytes: Any,
    ranks: Any,
    algo: Any = None,
    link: str = "scale-up",
    domain_size: Any = None,
    link_share: Any = 1.0,
    chip: Chip | None = None,
) -> Cost:
    """One collective over `ranks` ranks as a per-rank Cost on the link(s) it uses.

    `algo` is a name, "auto" (needs `chip`: see `choose_algorithm`) or an array of names
    (one per message size, as "auto" picks them). Default: "direct" for all-to-all; for the
    others "auto" with a chip, else "ring".
    `domain_size` (ranks per scale-up domain) makes a larger group hierarchical: the part
    inside a domain runs on `link` (scale-up) and the part across domains on scale-out.
    `link_share` is the fraction of that link's bandwidth the group can use (a ring along one
    axis of a TPU torus uses 2 of its 4 or 6 ports, a pair on a full mesh one of its ports:
    `System.link_share`); its bytes count as 1/link_share as many, so the evaluator's
    bandwidth stays the chip's figure.

    >>> c = collective("all-reduce", 8 * 2**30, 8)
    >>> round(c.link_bytes["scale-up"] / 2**30, 3), c.link_steps["scale-up"]
    (14.0, 14.0)
    """
    if kind not in COLLECTIVES:
        raise unknown("collective", kind, COLLECTIVES)
    if link not in LINKS:
        raise unknown("link", link, LINKS)
    if algo is None:
        algo = DEFAULT_ALGO.get(kind, AUTO if chip is not None else "ring")
    if isinstance(algo, str) and algo == AUTO and chip is None:
        raise RooflineError("algorithm 'auto' is chosen on a chip's link: pass chip= (or "
                            "name the algorithm: " + ", ".join(IMPLEMENTS[kind]) + ")")
    if isinstance(algo, str) and algo in SHOTS:
        check_direct(kind, algo, link, chip)
    if ndim(ranks) or ndim(domain_size):  # checked before they split a sweep
        whole("n", ranks, "ranks")
        if domain_size is not None:
            whole("a", domain_size, "domain_size")
        if varies(ranks) or varies(domain_size):
            return _by_group(kind, nbytes, ranks, algo, link, domain_size, link_share, chip)
    auto: PerByte | None = None
    library: Any = None  # the libraries' pick where auto's is an engine-only kernel
    if isinstance(algo, str) and algo == AUTO:
        assert chip is not None
        algo, auto, library = choose(kind, nbytes, ranks, chip, link, domain_size,
                                      link_share)
    if auto is not None and not symbolic():  # "auto" on numbers: the one-byte Costs scaled
        m = value(nbytes)
        return from_units(auto, algo, m, kind,
                          least=None if auto.least is None else sized(auto.least, m),
                          runs=None if library is None else from_units(auto, library, m, kind))
    # a named algorithm, or the derivation of the picked one
    return per_pick(algo, kind, lambda a: named_collective(kind, a, nbytes, ranks, link,
                                                       domain_size, link_share))


def _by_group(kind: str, nbytes: Any, ranks: Any, algo: Any, link: str, domain_size: Any,
              link_share: Any, chip: Chip | None) -> Cost:
    """Group or domain sizes that vary over a sweep: each distinct pair is its own collective
    (flat inside one domain, hierarchical past it, with its own candidate algorithms),
    taken point by point."""
    index, groups = group_index(nbytes, ranks, domain_size, link_share, algo)
    costs = {i: collective(kind, nbytes, r, names, link, d, share, chip)
             for i, (r, d, share, names) in enumerate(groups)}
    label = "/".join(f"{r:g}" + ("" if d is None else f" of {d:g}") for r, d, _, _ in groups)
    return pointwise(index, costs, f"{kind} (per group: {label} ranks)", "group")
