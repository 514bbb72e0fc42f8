"""One operating point of a serving plan as a typed record, read from the plan's columns
(`ServePlan.columns`, the vectorized arrays stay the one source): what the renderers, the
launch commands and the explanations read by attribute instead of by string key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

Scalar = str | int | float | bool
Column = npt.NDArray[Any]  # one plan column: float64, int64, bool or str
Mask = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
Config = dict[str, Scalar]  # one configuration's categorical and per-chip values
# a count a disaggregated plan can split into pool shares: an int where the plan's column is
# whole (plan.INTEGERS), else a float, kept as the column has it so it prints the same
Count = float


@dataclass(frozen=True)
class Layout:
    """One worker's (or one aggregated instance's) parallel layout."""

    tp: int
    pp: int
    dp: int
    ep: int
    moe_tp: int  # expert tensor parallelism; 0 for a dense model

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


@dataclass(frozen=True)
class ServePoint:
    """One operating point: its configuration, its times and throughputs, and whether it
    meets the targets. Counts a disaggregated plan can split into pool shares (chips,
    workers) are `Count`s; `columns` is the point's whole
    row in the plan's column order (what --json and --csv write), including the
    per-resource step times (time_<resource>_s)."""

    hardware: str
    mode: str  # aggregated or disaggregated
    weight_dtype: str
    kv_dtype: str
    dtype: str  # the compute (activation) dtype
    bound: str  # the resource bounding the step
    # the instance's (aggregated) or a decode worker's layout, then a prefill worker's
    tp: int
    pp: int
    dp: int
    ep: int
    moe_tp: int
    prefill_tp: int
    prefill_pp: int
    prefill_dp: int
    prefill_ep: int
    prefill_moe_tp: int
    running: Count  # sequences per instance (a decode worker's)
    max_running: Count  # what the KV cache (and the engine's cap) holds
    chunk: Count  # prompt tokens per iteration per replica
    instances: Count
    gpus: Count
    chips: Count
    decode_chips: Count
    prefill_workers: Count
    decode_workers: Count
    prefill_ratio: float  # prefill workers per decode worker the load needs
    memory_fraction: float
    output_tokens_per_s: float
    output_tokens_per_s_per_chip: float
    requests_per_s: float
    total_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    prefill_s: float
    queue_s: float
    kv_transfer_s: float
    t_step_s: float
    utilization: float
    tokens_per_joule: float
    usd_per_mtok: float  # NaN without a price
    tdp_w: float  # NaN where the chip file gives none
    # percentiles over requests (tails.py)
    ttft_s_p50: float
    ttft_s_p90: float
    ttft_s_p99: float
    tpot_s_p50: float
    tpot_s_p90: float
    tpot_s_p99: float
    fits: bool
    feasible: bool
    meets_targets: bool
    columns: Mapping[str, Scalar] = field(repr=False, compare=False)
    # a forecast's 80% interval (roofline.expect.interval); None for bounds
    ttft_s_lo80: float | None = None
    ttft_s_hi80: float | None = None
    tpot_s_lo80: float | None = None
    tpot_s_hi80: float | None = None
    output_tokens_per_s_lo80: float | None = None
    output_tokens_per_s_hi80: float | None = None
    # what stops a larger batch and what would move the point (explain.annotate)
    limit: str | None = None
    what_would_move_it: tuple[str, ...] = ()

    @classmethod
    def of(cls, columns: Mapping[str, Column], i: int) -> ServePoint:
        """Row `i` of a plan's columns; a missing column or a count that is not whole where
        an integer is declared raises ValueError naming it."""
        row = {k: v[i].item() for k, v in columns.items()}
        values: dict[str, Any] = {"columns": row}
        for f in fields(cls):
            convert = _CONVERT.get(str(f.type))
            if convert is None:  # columns, limit, what_would_move_it: not columns
                continue
            if f.name not in row:
                if str(f.type).endswith("| None"):
                    continue
                raise ValueError(f"ServePoint: the plan has no column {f.name!r}")
            values[f.name] = convert(f.name, row[f.name])
        return cls(**values)

    def layout(self, prefill: bool = False) -> Layout:
        """The instance's (a decode worker's) layout, or a prefill worker's."""
        if prefill:
            return Layout(self.prefill_tp, self.prefill_pp, self.prefill_dp, self.prefill_ep,
                          self.prefill_moe_tp)
        return Layout(self.tp, self.pp, self.dp, self.ep, self.moe_tp)

    def explained(self, limit: str, moves: list[str]) -> ServePoint:
        return replace(self, limit=limit, what_would_move_it=tuple(moves))

    def to_dict(self) -> dict[str, Any]:
        """The row as --json writes it: every column in the plan's order, then (explained)
        the limit and the levers."""
        out: dict[str, Any] = dict(self.columns)
        if self.limit is not None:
            out.update(limit=self.limit, what_would_move_it=list(self.what_would_move_it))
        return out


def _int(name: str, value: Scalar) -> int:
    if isinstance(value, str) or not float(value).is_integer():
        raise ValueError(f"ServePoint: {name} is a whole number, got {value!r}")
    return int(value)


def _count(name: str, value: Scalar) -> Count:
    if isinstance(value, (str, bool)) or not value >= 0:
        raise ValueError(f"ServePoint: {name} is a count >= 0, got {value!r}")
    return value


def _float(name: str, value: Scalar) -> float:
    if isinstance(value, str):
        raise ValueError(f"ServePoint: {name} is a number, got {value!r}")
    return float(value)


def _bool(name: str, value: Scalar) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"ServePoint: {name} is true or false, got {value!r}")
    return bool(value)


def _str(name: str, value: Scalar) -> str:
    if not isinstance(value, str):
        raise ValueError(f"ServePoint: {name} is text, got {value!r}")
    return value


_CONVERT = {"Count": _count, "int": _int, "float": _float, "bool": _bool, "str": _str,
            "float | None": _float}
