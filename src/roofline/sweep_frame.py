"""A sweep's points as columns, and the answers read from them: the frontier, the Pareto set.

Categorical columns (the chip, parallel degrees, dtypes, the bound) and a model sweep's
axes (batch, length) are held as small integer codes into a table of values and decoded only
when a caller reads them, so a million points carry a few bytes of labels each, not a string
(or a repeated float) apiece. The frontier is a
reduction (`Frontier`) that takes the points chunk by chunk, so a sweep of any size can be
answered without keeping it; a whole result is simply its one chunk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


class Columns(Mapping[str, Array]):
    """Equal-length columns in `order`: plain arrays, or `decoded[key] = (code, table)`:
    the column is `table[codes[code]]`, decoded (and kept) on first access."""

    def __init__(self, order: list[str], data: dict[str, Array], codes: dict[str, Array],
                 decoded: dict[str, tuple[str, Array]]) -> None:
        self.order, self.data, self.codes, self.decoded = order, data, codes, decoded
        self._cache: dict[str, Array] = {}

    def __getitem__(self, key: str) -> Array:
        if key in self.data:
            return self.data[key]
        if key not in self.decoded:
            raise KeyError(key)
        if key not in self._cache:
            code, table = self.decoded[key]
            self._cache[key] = table[self.codes[code]]
        return self._cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)

    def value(self, key: str, i: int) -> Any:
        """One point's value, without decoding the column."""
        if key in self.data:
            return self.data[key][i].item()
        code, table = self.decoded[key]
        return table[self.codes[code][i]].item()

    def groups(self, key: str) -> tuple[Array, Array]:
        """(codes, values) of a column, values sorted: column == values[codes]."""
        if key in self.decoded:
            code, table = self.decoded[key]
            names, inverse = np.unique(table, return_inverse=True)
            return inverse.ravel()[self.codes[code]], names
        names, inverse = np.unique(self.data[key], return_inverse=True)
        return inverse.ravel(), names


def groups(columns: Mapping[str, Array], key: str) -> tuple[Array, Array]:
    if isinstance(columns, Columns):
        return columns.groups(key)
    names, inverse = np.unique(columns[key], return_inverse=True)
    return inverse.ravel(), names


@dataclass(frozen=True)
class SweepResult:
    """Column arrays, one entry per point (all configurations concatenated), and where the
    bound changes along the batch axis of each configuration."""

    phase: str
    columns: Mapping[str, Array]
    bound_changes: list[dict[str, Any]] = field(default_factory=list)
    expected_sources: dict[str, str] = field(default_factory=dict)  # with expected columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def frontier(self, max_latency_s: float | None = None, expected: bool = False
                 ) -> dict[str, Any]:
        """Best throughput per chip kind (within a latency target, fitting in memory) and
        the fewest chips that fit; ranked by the bound, or by the expected columns (a sweep
        run with `expect`) when `expected`."""
        reduce = Frontier(max_latency_s, expected)
        reduce.add(self)
        return reduce.result(self.bound_changes)

    def pareto(self, max_latency_s: float | None = None, expected: bool = False) -> list[int]:
        """Points no other feasible point beats on both latency and throughput."""
        c = self.columns
        latency, tokens = ranking(expected)
        return pareto_front(c[latency], c[tokens], feasible(c, max_latency_s, latency))

    def to_frame(self) -> Any:
        """Every point as a pandas DataFrame (pandas is an optional extra)."""
        from .render.frames import frame

        return frame({k: self.columns[k] for k in self.columns})

    def _repr_html_(self) -> str:  # a notebook shows the Pareto frontier
        from .render.frames import columns_html

        front = self.pareto()
        return columns_html(f"sweep ({self.phase}): {len(self)} points, Pareto frontier "
                            f"({len(front)})", self.columns, rows=front[:40] or None)

    def row(self, i: int) -> dict[str, Any]:
        c = self.columns
        if isinstance(c, Columns):
            return {k: c.value(k, i) for k in c}
        return {k: v[i].item() for k, v in c.items()}


def ranking(expected: bool) -> tuple[str, str]:
    """The (latency, throughput) columns a frontier ranks by: the bound's, or the expected
    ones (a forecast, from a sweep run with `expect`)."""
    return ("expected_t_s", "expected_tokens_per_s") if expected else \
        ("t_lower_s", "tokens_per_s")


def feasible(c: Mapping[str, Array], max_latency_s: float | None,
             latency: str = "t_lower_s") -> Array:
    """The points that fit in memory (and meet the latency target, if given)."""
    ok = c["fits"].astype(bool)
    if max_latency_s is not None:
        ok &= c[latency] <= max_latency_s
    return ok


def pareto_front(latency: Any, throughput: Any, ok: Any) -> list[int]:
    """Indices of the points (where `ok`) that no other such point beats on both lower
    latency and higher throughput, fastest first (ties: the earlier point)."""
    latency, throughput = np.asarray(latency), np.asarray(throughput)
    idx = np.flatnonzero(np.asarray(ok, dtype=bool))
    if idx.size == 0:
        return []
    order = idx[np.lexsort((-throughput[idx], latency[idx]))]
    best = np.maximum.accumulate(throughput[order])
    improves = np.r_[True, best[1:] > best[:-1]]
    return [int(i) for i in order[improves]]


class Frontier:
    """The frontier of a sweep, fed chunk by chunk in point order (`add`), read with
    `result`: the same answer as over all points at once. Each best keeps the earliest
    point on a tie, as an argmax over the whole sweep would; a point off the Pareto set of
    its own chunk is off the set of the whole sweep, so only each chunk's set is kept."""

    def __init__(self, max_latency_s: float | None = None, expected: bool = False) -> None:
        self.max_latency_s, self.expected = max_latency_s, expected
        self.latency, self.tokens = ranking(expected)
        self.points = self.feasible = 0
        self.best: dict[str, tuple[float, dict[str, Any]]] = {}
        self.best_per_chip: tuple[float, dict[str, Any]] | None = None
        self.fewest: tuple[float, float, dict[str, Any]] | None = None
        self.front_latency = np.empty(0)
        self.front_tokens = np.empty(0)
        self.front_rows: list[dict[str, Any]] = []  # in point order

    def add(self, chunk: SweepResult) -> None:
        c = chunk.columns
        ok = feasible(c, self.max_latency_s, self.latency)
        self.points += len(chunk)
        self.feasible += int(ok.sum())
        if not ok.any():
            return
        tokens, latency = c[self.tokens], c[self.latency]
        codes, names = groups(c, "hardware")
        for code, hw in enumerate(names.tolist()):
            mask = ok & (codes == code)
            if mask.any():
                i = int(np.flatnonzero(mask)[np.argmax(tokens[mask])])
                if hw not in self.best or tokens[i] > self.best[hw][0]:
                    self.best[hw] = (tokens[i], chunk.row(i))
        per_chip = tokens / c["chips"]
        i = int(np.flatnonzero(ok)[np.argmax(per_chip[ok])])
        if self.best_per_chip is None or per_chip[i] > self.best_per_chip[0]:
            self.best_per_chip = (per_chip[i], chunk.row(i))
        # fewest chips meeting the same constraints (the latency target too), the fastest
        # such point on a tie
        idx = np.flatnonzero(ok)
        i = int(idx[np.lexsort((-tokens[idx], c["chips"][idx]))[0]])
        if self.fewest is None or (c["chips"][i], -tokens[i]) < self.fewest[:2]:
            self.fewest = (c["chips"][i], -tokens[i], chunk.row(i))
        front = sorted(pareto_front(latency, tokens, ok))  # point order
        latency = np.r_[self.front_latency, latency[front]]
        throughput = np.r_[self.front_tokens, tokens[front]]
        rows = self.front_rows + [chunk.row(i) for i in front]
        keep = sorted(pareto_front(latency, throughput, np.ones(latency.size, dtype=bool)))
        self.front_latency, self.front_tokens = latency[keep], throughput[keep]
        self.front_rows = [rows[i] for i in keep]

    def result(self, bound_changes: list[dict[str, Any]]) -> dict[str, Any]:
        limit = self.max_latency_s
        order = pareto_front(self.front_latency, self.front_tokens,
                             np.ones(self.front_latency.size, dtype=bool))
        return {"best_tokens_per_s": {hw: self.best[hw][1] for hw in sorted(self.best)},
                "best_tokens_per_s_per_chip": self.best_per_chip and self.best_per_chip[1],
                "fewest_chips_that_fit": self.fewest and self.fewest[2],
                "bound_changes": bound_changes,
                "ranked_by": "expected" if self.expected else "bound",
                "constraint": "fits in memory" + (
                    f", {'expected time' if self.expected else 't_lower'} per step <= "
                    f"{limit:g} s" if limit else ""),
                "points": self.points, "feasible_points": self.feasible,
                "pareto": [self.front_rows[i] for i in order]}
