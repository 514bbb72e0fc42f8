"""The collectives as declared operations (`roofline op allreduce ...`, `run_op`): their
parameters, where a group sits on the chip's system (placement, link share, hierarchy), the
fastest algorithm ("auto"), and nccl-tests' bandwidth figures."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ParameterError
from ..hardware import Chip, make_system
from .collectives import (
    ALGORITHMS,
    AUTO,
    COLLECTIVES,
    DEFAULT_ALGO,
    IMPLEMENTS,
    busbw_factor,
    collective,
    crossover_from_times,
)
from .params import OpDecl, Param

if TYPE_CHECKING:
    from ..evaluate import Estimate

def placement(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """Where a group sits on the chip's system: a group larger than the scale-up domain goes
    hierarchical, a group gets its share of the link (a torus ring the ports along its axes,
    a full-mesh group one port per peer), and NVLS needs the switch."""
    return _place(kwargs, chip, pair=False)


def _place(kwargs: dict[str, Any], chip: Chip, pair: bool) -> dict[str, Any]:
    link = kwargs.get("link", "scale-up")
    system = make_system(chip)
    if kwargs.get("domain_size") is None and link == "scale-up" and "scale-up" in chip.links:
        kwargs["domain_size"] = system.chips_per_domain
    ranks = kwargs.get("ranks", kwargs.get("shards", kwargs.get("tp", 1)))
    if kwargs.get("link_share") is None:
        domain = kwargs.get("domain_size")
        inside = ranks if domain is None else domain
        # a send/recv has one peer; a group past a domain spreads evenly over the fewest
        # domains that hold it (ops.collectives.hierarchical): that many ranks share a link
        with np.errstate(divide="ignore", invalid="ignore"):  # bad ranks: refused below
            group = 2 if pair else np.asarray(ranks) / np.ceil(np.asarray(ranks) / inside)
        kwargs["link_share"] = system.link_share(link, group) if link in chip.links else 1.0
    if kwargs.get("algo") == "nvls" and not chip.link(link).in_switch_reduction:
        raise ParameterError("algo", f"nvls needs in-switch reduction (NVLink SHARP), which "
                            f"{chip.id!r}'s {link} link does not have (use ring or tree)")
    return kwargs


def _collective_placement(kind: str) -> Callable[[dict[str, Any], Chip], dict[str, Any]]:
    """The placement, and "auto" kept for the collective to pick per size (its Cost keeps
    the floor and the library's own pick beside it; `op --json` echoes `Cost.algorithm`)."""
    def prepare(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
        kwargs = _place(kwargs, chip, pair=kind == "send-recv")
        if kwargs.get("algo") is None:  # not given: NCCL's all-to-all, else the fastest
            kwargs["algo"] = DEFAULT_ALGO.get(kind, AUTO)
        kwargs["chip"] = chip  # "auto" picks on it; one- and two-shot check their peers
        return kwargs

    return prepare


def placement_params(algo: str | None = "ring", algorithms: tuple[str, ...] = (
        "ring", "tree", "nvls"), algo_help: str = "algorithm") -> tuple[Param, ...]:
    """The placement options: link, algorithm (default and choices), domain, link share."""
    return (
        Param("link", "link the group sits on (a group larger than the scale-up domain also "
              "uses scale-out)", "choice", "scale-up", choices=("scale-up", "scale-out")),
        Param("algo", algo_help, "choice", algo, choices=algorithms),
        Param("domain_size", "ranks per scale-up domain (default: the chip's)"),
        Param("link_share", "fraction of the link's bandwidth the group can use (default: the "
              "chip's topology: a switch gives all of it, a full mesh one port per peer, a "
              "torus ring the ports along its axes)", "float", bounds=(1e-3, 1.0)),
    )


PLACEMENT_PARAMS = placement_params()  # sharded-matmul and tp-layer: named algorithms


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
            out["latency_crossover_bytes"] = crossover_from_times(nbytes, est)
        return out

    return extras


def _declare(kind: str) -> OpDecl:
    algorithms = (*IMPLEMENTS[kind], AUTO) if kind != "send-recv" else (*ALGORITHMS, AUTO)
    # the function's own default (None) resolves in the placement: auto needs the chip
    algo_help = ("algorithm (default direct, NCCL's: every peer at once; auto picks the "
                 "fastest on this chip)" if kind == "all-to-all" else
                 "algorithm (default auto: per size, the one with the smallest alpha-beta "
                 "time on this chip, library or engine kernel)")
    return OpDecl(
        kind.replace("-", ""), f"{kind} of --bytes over --ranks ranks (alpha-beta model)",
        partial(collective, kind), (
            Param("nbytes", "message size as nccl-tests counts it (e.g. 64MiB, 1GB)",
                  "bytes", required=True, flag="--bytes"),
            Param("ranks", "ranks in the group", required=True),
            *placement_params(None, algorithms, algo_help)),
        _collective_placement(kind), _bandwidths(kind), aliases=(kind,))


COLLECTIVE_OPS = tuple(_declare(kind) for kind in COLLECTIVES)
