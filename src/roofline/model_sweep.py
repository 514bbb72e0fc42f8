"""A model sweep evaluated chunk by chunk: any number of points in bounded memory.

Each configuration (chip, TP/PP/DP/EP, dtypes) is a batch x length grid; the grid is cut
into chunks of at most CHUNK_POINTS points along the batch rows (one row is cut along the
length when it alone is larger, into pieces of at least two columns), each chunk one
vectorized `step_summary` (the step's times without the per-op tables). Chunks come out in
point order, so the same points in one piece or in many give the same columns, frontier and
bound changes.

With `expect`, each chunk also gets the expected time (`expect.expected_step`), which reads
the per-op rows of a full `analyze`: only then are they built, in smaller chunks (they hold
every op's arrays), so the default sweep does no more work than before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ParameterError, RooflineError
from .hardware import Chip
from .hardware.catalog import load_chips
from .models import Parallel, Precision, analyze, decode, model_precision, prefill, train
from .models.catalog import load_model
from .models.graph import check_layout
from .models.summary import StepSummary, step_summary
from .sweep_frame import Array, Columns, SweepResult

if TYPE_CHECKING:
    from .expect import ExpectedStep

CHUNK_POINTS = 1 << 17  # points per vectorized call: 1 MB per full-grid array keeps the
# working set near the caches (fastest measured: 2x smaller or larger is 15-30% slower),
# while the per-call overhead (~2 ms) stays small beside the chunk's work
EXPECT_CHUNK_POINTS = 1 << 14  # with `expect`: the per-op arrays of ~40 ops per point
CONFIG_COLUMNS = ("hardware", "tp", "pp", "dp", "ep", "chips", "weight_dtype", "kv_dtype")
POINT_COLUMNS = ("t_lower_s", "t_upper_s", "tokens_per_s", "mfu", "memory_bytes", "fits")
EXPECTED_COLUMNS = ("expected_t_s", "expected_t_s_p10", "expected_t_s_p90",
                    "expected_tokens_per_s", "expected_mfu")
ORDER = [*CONFIG_COLUMNS, "batch", "length", "t_lower_s", "t_upper_s", "tokens_per_s",
         "bound", "mfu", "memory_bytes", "fits"]
EXPECTED_ORDER = [*CONFIG_COLUMNS, "batch", "length", "t_lower_s", "expected_t_s",
                  "expected_t_s_p10", "expected_t_s_p90", "t_upper_s", "tokens_per_s",
                  "expected_tokens_per_s", "bound", "mfu", "expected_mfu", "memory_bytes",
                  "fits"]  # each expected beside its bound


def configurations(hardware: Sequence[str], tp: Sequence[int] = (1,), pp: Sequence[int] = (1,),
                   dp: Sequence[int] = (1,), ep: Sequence[int] = (1,),
                   weight_dtypes: Sequence[str] = ("bf16",),
                   kv_dtypes: Sequence[str] = ("bf16",),
                   precision: Callable[[Chip, str, str], Precision] | None = None,
                   microbatches: int = 1) -> Iterator[tuple[Chip, Parallel, Precision,
                                                            dict[str, Any]]]:
    """Every combination of the categorical axes: the chip, its parallelism and dtypes, and
    the configuration's columns. `precision(chip, weights, kv)` builds the dtypes (default:
    bf16 activations). An ep of -1: every chip of the instance holds its share of the
    experts (ep = tp·dp)."""
    make = precision or (lambda chip, w, kv: Precision(weights=w, activations="bf16",
                                                       kv_cache=kv))
    for chip, t, p, d, e, w, kv in itertools.product(load_chips(hardware), tp, pp,
                                                     dp, ep, weight_dtypes, kv_dtypes):
        e = t * d if e == -1 else e
        par = Parallel(tp=t, pp=p, dp=d, ep=e, microbatches=microbatches)
        yield chip, par, make(chip, w, kv), {"hardware": chip.id, "tp": t, "pp": p, "dp": d,
                                             "ep": e, "weight_dtype": w, "kv_dtype": kv}


@dataclass(frozen=True)
class _Config:
    chip: Chip
    par: Parallel
    prec: Precision
    columns: dict[str, Any]  # the configuration's own columns
    batch: Array  # the total batches this configuration runs


@dataclass(frozen=True)
class Piece:
    """One chunk's points: rows batch[i0:i1] x length[j0:j1] of configuration `config`."""

    config: int
    batch: Array  # (rows, 1)
    length: Array  # (1, cols)
    rows: Array  # (rows, 1): the batch's codes (into ModelSweep.batch_table)
    cols: Array  # (1, cols): the length's codes (into ModelSweep.length)
    summary: StepSummary
    bound: Array  # codes into ModelSweep.bound_names, broadcastable to the grid
    expected: ExpectedStep | None = None  # with `expect`

    @property
    def shape(self) -> tuple[int, int]:
        return self.batch.shape[0], self.length.shape[1]

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    def values(self) -> dict[str, Any]:
        s, e = self.summary, self.expected
        values = {"t_lower_s": s.t_lower_s, "t_upper_s": s.t_upper_s,
                  "tokens_per_s": s.tokens_per_s, "mfu": s.mfu,
                  "memory_bytes": s.memory_bytes, "fits": s.fits}
        if e is not None:  # with its 80% interval (roofline.expect.interval)
            f = e.figures()
            values.update({"expected_t_s": f["t_s"], "expected_t_s_p10": f["t_s_p10"],
                           "expected_t_s_p90": f["t_s_p90"],
                           "expected_tokens_per_s": f["tokens_per_s"],
                           "expected_mfu": f["mfu"]})
        return values


class ModelSweep:
    """`sweep_model`'s points, computed on iteration as SweepResult chunks in point order
    (`bound_changes` and `expected_sources` are complete once iterated); `collect()` keeps
    them all. With `expect`, every point also has its expected time, tokens/s and MFU."""

    def __init__(self, model: str, hardware: Sequence[str], phase: str, batch: Any,
                 length: Any, tp: Sequence[int] = (1,), pp: Sequence[int] = (1,),
                 dp: Sequence[int] = (1,), ep: Sequence[int] = (1,),
                 weight_dtypes: Sequence[str] | None = None,
                 kv_dtypes: Sequence[str] = ("bf16",), dtype: str = "bf16", k: int = 1,
                 microbatches: int = 1, batch_per_replica: bool = False,
                 chunk_points: int = CHUNK_POINTS, expect: bool = False,
                 engine: str | None = None) -> None:
        self.spec = load_model(model)
        self.expect = expect or engine is not None
        self.engine = engine  # the serving engine whose fitted factors the forecast takes
        if expect:
            chunk_points = min(chunk_points, EXPECT_CHUNK_POINTS)
        self.length = np.asarray(length, dtype=float).ravel()
        if phase not in ("decode", "prefill", "train"):
            raise RooflineError(f"unknown phase {phase!r} (allowed: decode, prefill, train)")
        self.phase, self.k, self.chunk_points = phase, k, max(1, int(chunk_points))
        given = np.asarray(batch, dtype=float).ravel()
        self.configs: list[_Config] = []
        self.skipped: list[str] = []  # configurations the model cannot run, and why
        # weights not given: the checkpoint's own (as `model` and `serve`), named so
        native = model_precision(self.spec, None, dtype)
        own = native.weights + (f"+{native.expert_weights} experts"
                                if native.expert_weights else "")
        for chip, par, prec, config in configurations(
                hardware, tp, pp, dp, ep, weight_dtypes or (own,), kv_dtypes,
                lambda chip, w, kv: model_precision(self.spec, None if w == own else w, dtype,
                                                    kv),
                microbatches):
            d = par.dp
            total = given * d if batch_per_replica else given[np.mod(given, d) == 0]
            try:
                if total.size == 0:
                    raise ParameterError("batch", f": no value is divisible by dp {d} (the "
                                         "batch is the total over replicas; batch_per_replica "
                                         "gives it per replica)")
                check_layout(self.spec, self._phase(total[:1], self.length[:1]), par)
            except RooflineError as exc:  # e.g. ep past dp·tp in a tp x ep grid: skipped
                self.skipped.append(", ".join(f"{k} {v}" for k, v in config.items()
                                              if k != "hardware") + f" on {chip.id}: {exc}")
                continue
            self.configs.append(_Config(chip, par, prec, {**config, "chips": par.chips}, total))
        if not self.configs:
            raise RooflineError("no configuration is valid: " + "; ".join(self.skipped))
        self.points = sum(c.batch.size for c in self.configs) * self.length.size
        # the batch and length columns as codes too: each point's row of the configuration's
        # batches (all configurations' batches in one table) and its length's index
        self.batch_table = np.concatenate([c.batch for c in self.configs])
        self.batch_offset = np.cumsum([0, *(c.batch.size for c in self.configs)])[:-1]
        # the configuration columns as lookup tables, indexed by the configuration's code
        self.tables = {key: np.array([c.columns[key] for c in self.configs])
                       for key in CONFIG_COLUMNS}
        self.bound_names: list[str] = []  # grows as chunks meet new bounds
        self.bound_changes: list[dict[str, Any]] = []
        self.expected_sources: dict[str, str] = {}  # figure -> source, with `expect`
        self.point_columns = POINT_COLUMNS + (EXPECTED_COLUMNS if expect else ())
        self.axis_codes = {"batch": _code_dtype(self.batch_table.size),
                           "length": _code_dtype(self.length.size)}

    def _phase(self, b: Array, n: Array) -> Any:
        if self.phase == "decode":
            return decode(b, n, self.k)
        return prefill(b, n) if self.phase == "prefill" else train(b, n)

    def _codes(self, names: tuple[str, ...]) -> Array:
        for name in names:
            if name not in self.bound_names:
                self.bound_names.append(name)
        return np.array([self.bound_names.index(n) for n in names], dtype=np.uint8)

    def pieces(self) -> Iterator[Piece]:
        """Every chunk, in point order; records the bound changes as it goes."""
        self.bound_changes = []
        n_len = self.length.size
        for ci, cfg in enumerate(self.configs):
            rows = max(1, self.chunk_points // n_len)
            # a row cut along the length keeps at least 2 columns per piece: the step's sums
            # add (batch, 1) terms before (batch, length) ones (derivation.add_all), so a
            # piece keeps the whole grid's order of addition, and its bits, only while those
            # two shapes stay apart
            cols = n_len if rows > 1 or n_len <= self.chunk_points else \
                max(2, self.chunk_points)
            starts = list(range(0, n_len, cols))
            if len(starts) > 1 and n_len - starts[-1] == 1:
                starts.pop()  # the last column joins the piece before it
            first = np.zeros(n_len, dtype=np.uint8)  # the smallest batch's bound per length
            change = np.full(n_len, -1)  # the row where the bound first differs
            to = np.zeros(n_len, dtype=np.uint8)
            for i0 in range(0, cfg.batch.size, rows):
                b = cfg.batch[i0:i0 + rows, None]
                for j0, j1 in zip(starts, [*starts[1:], n_len], strict=True):
                    n = self.length[None, j0:j1]
                    phase = self._phase(b, n)
                    s = step_summary(self.spec, cfg.chip, phase, cfg.par, cfg.prec)
                    expected = None
                    if self.expect:  # the per-op rows, only here (the module's docstring)
                        from .expect import expected_step

                        expected = expected_step(analyze(self.spec, cfg.chip, phase, cfg.par,
                                                         cfg.prec), cfg.chip,
                                                 framework=self.engine)
                        self.expected_sources.update(expected.sources)
                    bound = self._codes(s.bound_names)[s.bound_index]
                    grid = np.broadcast_to(bound, (b.shape[0], n.shape[1]))
                    if i0 == 0:
                        first[j0:j1] = grid[0]
                    open_ = change[j0:j1] < 0
                    differs = (grid != first[j0:j1]) & open_
                    hit = differs.any(axis=0)
                    if hit.any():
                        at = differs.argmax(axis=0)
                        cols_hit = np.flatnonzero(hit)
                        change[j0 + cols_hit] = i0 + at[cols_hit]
                        to[j0 + cols_hit] = grid[at[cols_hit], cols_hit]
                    rows_code = (self.batch_offset[ci] + np.arange(i0, i0 + b.shape[0]))[:, None]
                    yield Piece(ci, b, n, rows_code, np.arange(j0, j1)[None, :], s, bound,
                                expected)
            self.bound_changes += [
                {**{k: v for k, v in cfg.columns.items() if k != "chips"},
                 "length": float(self.length[j]), "batch": float(cfg.batch[change[j]]),
                 "from": self.bound_names[first[j]], "to": self.bound_names[to[j]]}
                for j in np.flatnonzero(change >= 0)]

    def _columns(self, codes: dict[str, Array], data: dict[str, Array]) -> Columns:
        decoded = {key: ("config", table) for key, table in self.tables.items()}
        decoded.update(bound=("bound", np.array(self.bound_names or [""])),
                       batch=("batch", self.batch_table), length=("length", self.length))
        return Columns(EXPECTED_ORDER if self.expect else ORDER, data, codes, decoded)

    def _codes_of(self, piece: Piece) -> dict[str, Any]:
        """A piece's coded columns (broadcastable to its grid)."""
        return {"config": np.asarray(piece.config), "bound": piece.bound, "batch": piece.rows,
                "length": piece.cols}

    def _code_types(self) -> dict[str, Any]:
        return {"config": _code_dtype(len(self.configs)), "bound": np.uint8, **self.axis_codes}

    def __iter__(self) -> Iterator[SweepResult]:
        types = self._code_types()
        for piece in self.pieces():
            shape = piece.shape
            data = {k: np.broadcast_to(v, shape).ravel() for k, v in piece.values().items()}
            data["fits"] = data["fits"].astype(bool)
            codes = {k: np.broadcast_to(v, shape).ravel().astype(types[k], copy=False)
                     for k, v in self._codes_of(piece).items()}
            yield SweepResult(self.phase, self._columns(codes, data),
                              expected_sources=self.expected_sources)

    def collect(self) -> SweepResult:
        """Every point in one SweepResult, each chunk written in place (no concatenation)."""
        size = self.points
        data = {k: np.empty(size, dtype=bool if k == "fits" else float)
                for k in self.point_columns}
        codes = {k: np.empty(size, dtype=t) for k, t in self._code_types().items()}
        at = 0
        for piece in self.pieces():
            shape, end = piece.shape, at + piece.size
            for key, value in piece.values().items():
                data[key][at:end].reshape(shape)[...] = value
            for key, value in self._codes_of(piece).items():
                codes[key][at:end].reshape(shape)[...] = value
            at = end
        return SweepResult(self.phase, self._columns(codes, data),
                           self.bound_changes, dict(self.expected_sources))


def _code_dtype(n: int) -> type[np.unsignedinteger[Any]]:
    return np.uint8 if n <= 256 else np.uint16 if n <= 65536 else np.uint32
