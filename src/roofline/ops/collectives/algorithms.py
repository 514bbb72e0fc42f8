"""The vocabulary of collectives: which collectives and algorithms there are, which algorithm
implements which collective, which run outside the libraries, nccl-tests' bus-bandwidth
factor, and the checks that a named algorithm can run where it is asked to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...derivation import (
    Num,
)
from ...errors import RooflineError, unknown
from ...hardware import Chip

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast",
               "send-recv")


ALGORITHMS = ("ring", "tree", "nvls", "direct", "pairwise", "one-shot", "two-shot")


AUTO = "auto"  # per message size, the algorithm with the smallest alpha-beta time


# which algorithms implement each collective (a send-recv is one message under any name)
IMPLEMENTS: dict[str, tuple[str, ...]] = {
    "all-reduce": ("ring", "tree", "nvls", "one-shot", "two-shot"),
    "all-gather": ("ring", "one-shot"), "reduce-scatter": ("ring", "one-shot"),
    "broadcast": ("ring", "tree"),
    "all-to-all": ("direct", "pairwise", "ring"), "send-recv": ("ring",),
}


SHOTS = ("one-shot", "two-shot")  # kernels that read or write every peer's buffer directly


# over a switch or full mesh (the engines' custom all-reduce, symmetric-memory all-gather and
# reduce-scatter): no NCCL base latency
# Weighed by "auto" for the bound, but not what the expected time assumes runs outside CUDA
# graphs: there the pick without it (NCCL / RCCL's ring or tree, NVLS, or the all-reduce
# one-shot the model was fitted with, at the sizes where two-shot wins), kept as the Cost's
# `runs`. A one-shot all-gather or reduce-scatter needs symmetric (registered) buffers, which
# a plain NCCL call does not have: the libraries run a ring.
ENGINE_ONLY: dict[str, tuple[str, ...]] = {"all-reduce": ("two-shot",),
                                           "all-gather": ("one-shot",),
                                           "reduce-scatter": ("one-shot",)}


# in a CUDA graph an engine runs its own all-reduce kernel (its custom all-reduce), not the
# libraries' pick; its all-gathers and reduce-scatters stay NCCL's
GRAPH_KERNELS = ENGINE_ONLY["all-reduce"]


DEFAULT_ALGO = {"all-to-all": "direct"}  # NCCL's all-to-all; the others: auto (ring without a chip)


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


def check_algo(kind: str, algo: str) -> None:
    if algo not in ALGORITHMS:
        raise unknown("algorithm", algo, (*ALGORITHMS, AUTO))
    # a send-recv is one message under any name but the engines' all-reduce kernels'
    if (kind != "send-recv" or algo in SHOTS) and algo not in IMPLEMENTS[kind]:
        raise RooflineError(f"algorithm {algo!r} does not implement {kind} (it has: "
                            f"{', '.join(IMPLEMENTS[kind])}, or {AUTO})")


def in_reach(chip: Chip, link: str) -> bool:
    """Every peer of the link directly reachable: a scale-up switch or full mesh (what one-
    and two-shot kernels read their peers' buffers over)."""
    up = chip.links.get(link)
    return up is not None and link == "scale-up" and up.topology in ("switch", "mesh")


def check_direct(kind: str, algo: str, link: str, chip: Chip | None) -> None:
    """One- and two-shot reach every peer's buffer directly: a scale-up switch or full mesh
    (on a chip without one, name ring or tree; "auto" weighs them only where they run)."""
    if link != "scale-up" or (chip is not None and not in_reach(chip, link)):
        up = chip.links.get(link) if chip is not None else None
        where = f"{chip.id}'s {link} link is a {up.topology}" if up is not None and \
            chip is not None and link == "scale-up" else f"not the {link} link"
        others = [a for a in IMPLEMENTS[kind] if a not in SHOTS]
        raise RooflineError(f"a {algo} {kind} reaches every peer's buffer directly over a "
                            f"scale-up switch or full mesh ({where}): use "
                            f"{', '.join(others)} or auto")
