"""A serving search's deployment settings checked before it runs: a GPU budget, pinned worker
counts and an expert imbalance that can be planned (one-line errors naming the parameter)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ParameterError

if TYPE_CHECKING:
    from .plan import Space


def check_deployment(space: Space) -> None:
    """One-line errors for a budget, worker pins or an imbalance that cannot be planned."""
    if space.eplb is not None and not space.eplb >= 1:
        raise ParameterError("eplb", f": the hottest rank's expert load over the mean is >= 1, "
                             f"got {space.eplb:g}")
    if space.gpus is not None and space.gpus < 1:
        raise ParameterError("gpus", f": a whole number of GPUs >= 1, got {space.gpus}")
    one = [n for n, v in (("decode_workers", space.decode_workers),
                          ("prefill_workers", space.prefill_workers)) if v]
    if len(one) == 1 and space.gpus is None:
        raise ParameterError(one[0], "pins one pool: give the other's workers too, or {gpus} "
                             "to fill the budget with it", mentions=("gpus",))
    disagg_only = [n for n, v in (("prefill_tp", space.prefill_tp),
                                  ("prefill_dp", space.prefill_dp),
                                  ("prefill_ep", space.prefill_ep), *((n, 1) for n in one))
                   if v]
    if disagg_only and "disaggregated" not in space.modes:
        raise ParameterError(disagg_only[0], "sets a disaggregated deployment: add {modes} "
                             "disaggregated", mentions=("modes",))


def pinned(space: Space) -> bool:
    """Disaggregated workers are whole counts the budget or the user sets."""
    return space.gpus is not None or bool(space.decode_workers and space.prefill_workers)
