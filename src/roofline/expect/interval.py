"""How sure a forecast is: the 80% interval (10th to 90th percentile) of what an expected
figure will measure, from how published measurements of its kind fell around their forecasts.

Per kind (gemm, attention_fwd, decode, train, serving, ...), `intervals.json` holds the 10th
and 90th percentile of measured time / expected time over the fit half of the cited rows
(benchmarks/validation: `check.py --intervals` writes it). They are split-conformal
quantiles: the ⌊0.1·(n+1)⌋-th and ⌈0.9·(n+1)⌉-th of the n sorted ratios, which cover at
least 80% of new rows of that kind whatever their distribution (and widen by themselves where
rows are few); a kind with fewer than 9 rows takes the band of all rows. The file also says
how often the band held on the other, held-out half.

    t_p10 = max(bound, t · lo)        t_p90 = t · hi

A rate (tokens/s, FLOP/s, bus bandwidth) spans the same interval inverted. No band reaches
below the bound: no measurement can.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, floats, maximum, unwrap
from ..opid import Attention, Gemm, LinearAttention, Plain

INTERVALS = Path(__file__).with_name("intervals.json")
POOLED = "all"  # the band of every row, for a kind with too few of its own
TIMES = ("t_s", "ttft_s", "tpot_s")  # expected figures that are durations
RATES = ("tokens_per_s", "flops_per_s", "mfu", "busbw_Bps", "algbw_Bps")  # work / duration


@dataclass(frozen=True)
class Band:
    """The 10th and 90th percentile of measured / expected time for one kind of figure."""

    kind: str  # the rows it came from (POOLED: every kind)
    lo: float
    hi: float
    rows: int  # fit-half rows it was taken from
    held_out_coverage: float  # the share of the held-out half's rows inside it

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "p10_ratio": self.lo, "p90_ratio": self.hi,
                "rows": self.rows, "held_out_coverage": self.held_out_coverage,
                "source": "measured / expected time of published rows: split-conformal "
                          "10th-90th percentile of benchmarks/validation's fit half"}


@cache
def bands() -> dict[str, Band]:
    from ..files import read_json

    data = read_json(INTERVALS, "interval file")
    return {kind: Band(kind, float(b["p10_ratio"]), float(b["p90_ratio"]), int(b["rows"]),
                       float(b["held_out_coverage"])) for kind, b in data["kinds"].items()}


def band(kind: str) -> Band:
    """The band of `kind`, or of every row where the kind has too few rows of its own."""
    table = bands()
    return table.get(kind) or table[POOLED]


def op_kind(cost: Cost) -> str:
    """The validation kind whose rows an op's forecast is judged against."""
    op = cost.op
    if isinstance(op, Attention):
        if op.backward:
            return "attention_bwd"
        if op.impl == "decode" or bool(np.all(np.asarray(op.q_len) <= 16)):  # a few queries
            return "mla_decode" if op.mla else "attention_decode"
        return "attention_fwd"
    if isinstance(op, Gemm):
        return "gemm"
    if isinstance(op, LinearAttention):
        return "linear_attention"
    if cost.link_bytes or cost.link_steps:  # (an EP dispatch measured alone: moe_dispatch)
        return "collective"
    if isinstance(op, Plain) or (cost.bytes and not cost.has_arithmetic):
        return "hbm"  # elementwise, embedding, optimizer: streams over HBM
    return POOLED


STEP_KINDS = {"train": "train", "decode": "decode", "prefill": "prefill", "mixed": "serving"}


def columns(values: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """`X_p10` and `X_p90` for each column X of a table of expected figures (a serving
    plan's), X's band named in `kinds`; a duration (TIMES) spans the band, a rate (any other)
    the band inverted. No bound beside them here: the low end is the band's."""
    out = {}
    for key, kind in kinds.items():
        b, v = band(kind), np.asarray(values[key], dtype=float)
        lo, hi = (b.lo, b.hi) if key in TIMES else (1 / b.hi, 1 / b.lo)
        out[f"{key}_p10"], out[f"{key}_p90"] = v * lo, v * hi
    return out


def spread(figures: dict[str, Any], bound_t_s: Num, kind: str) -> dict[str, Any]:
    """`figures` (an expected JSON block) with X_p10 and X_p90 beside every duration and rate
    it holds, and the band it took (`interval`)."""
    b = band(kind)
    t = floats(figures["t_s"])  # one point: Python floats, as numpy would compute them
    if type(t) is float and not t:  # no time: numpy's NaN, not a ZeroDivisionError
        t = np.asarray(t)
    t_lo = maximum(floats(bound_t_s), t * b.lo)
    t_hi = t * b.hi
    out = dict(figures)
    for key, value in figures.items():
        if value is None or isinstance(value, dict):
            continue
        if key in TIMES:  # the same interval, as a share of the step where it is one
            v = floats(value)
            out[f"{key}_p10"], out[f"{key}_p90"] = unwrap(v * t_lo / t), unwrap(v * t_hi / t)
        elif key in RATES:  # the slower end of the time is the lower rate
            v = floats(value)
            out[f"{key}_p10"], out[f"{key}_p90"] = unwrap(v * t / t_hi), unwrap(v * t / t_lo)
    out["interval"] = b.to_dict()
    return out
