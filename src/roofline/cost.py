"""The cost algebra: what a piece of work demands of a machine, independent of any machine.

A Cost counts FLOPs per compute unit and dtype (tensor cores: `flops`; vector units:
`vector_flops`; special-function units: `special_ops`, transcendentals such as exp), bytes per
memory level, and per link the bytes, the message steps (each pays alpha) and the collective
calls (each pays the link's base latency). Costs add (work that runs one after another)
and scale (``n_layers * layer``).
Every field may hold a numpy array, so one Cost can describe a whole sweep.
Only `evaluate` turns a Cost into time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from .derivation import Num, Sym, Term, add_all
from .errors import RooflineError, brief
from .lazy import cached_property
from .opid import OpId, summed
from .records import record

MEMORY_LEVELS = ("hbm", "l2", "sram")  # outermost first; `hbm` is the chip's main memory
LINKS = ("scale-up", "scale-out")
COUNTS = ("flops", "vector_flops", "special_ops", "bytes", "link_bytes", "link_steps",
          "link_calls")  # the counted fields: they add and scale alike


_NONE: Mapping[str, Num] = MappingProxyType({})  # a count a Cost does not have


def _counts_ok(counts: Mapping[str, Num]) -> bool:
    """Every count finite and non-negative (nan fails both comparisons)."""
    for value in counts.values():
        if isinstance(value, (int, float)):
            if not 0 <= value < math.inf:
                return False
        else:  # two reductions, no temporaries
            arr = np.asarray(value)
            if arr.size and not bool(arr.min() >= 0 and arr.max() < np.inf):
                return False
    return True


def _first_bad(value: Num) -> str:
    """The first value that is negative, nan or infinite, for an error message."""
    flat = np.asarray(value, dtype=float).ravel()
    bad = flat[~((flat >= 0) & (flat < np.inf))]
    return brief(float(bad[0])) if bad.size else brief(value)


def _merge(a: Mapping[str, Num], b: Mapping[str, Num]) -> dict[str, Num]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out[key] + value if key in out else value
    return out


def _scale(a: Mapping[str, Num], factor: Num) -> dict[str, Num]:
    return {key: value * factor for key, value in a.items()}


@record(frozen=True, eq=False, init=False)
class Cost:
    """FLOPs per compute dtype; bytes per memory level; per-direction bytes and steps per link.

    Counting conventions live with the ops that build a Cost (a multiply-add is 2 FLOPs).
    """

    # Fields not given keep class-level defaults (set below the class: a read-only empty
    # mapping for a count): a whole-model estimate makes dozens of Costs, most with two or
    # three counts.
    flops: Mapping[str, Num]  # tensor-core FLOPs per dtype
    bytes: Mapping[str, Num]
    # the derivation, or how to build it on first read (derivation.derived): `terms`
    steps: tuple[Term, ...] | Callable[[], tuple[Term, ...]]
    name: str
    vector_flops: Mapping[str, Num]  # non-tensor, per dtype
    special_ops: Mapping[str, Num]  # function -> evaluations
    link_bytes: Mapping[str, Num]
    link_steps: Mapping[str, Num]
    link_calls: Mapping[str, Num]  # collective calls per link
    algorithm: Any  # a collective's algorithm: a name, or an array of names per point
    # a collective whose algorithm was picked for its time ("auto"): the least each link and
    # the latency could carry under any of its algorithms, which a step's floor takes
    least: Cost | None
    # what the expected time assumes runs outside CUDA graphs, where the bound is the least
    # of something faster: the library's pick where auto's is an engine's two-shot kernel;
    # every (token, expert) copy where an EP all-to-all's bound sends one per node (the
    # measured dispatch kernels run at that volume's pace)
    runs: Cost | None
    # what the op is (a GEMM of M x N x K, an attention call, ...): set where it is built, read
    # by the forecast (roofline.expect) instead of the name; None for a mix of kernels
    op: OpId | None

    def __init__(self, *, flops: Mapping[str, Num] | None = None,
                 bytes: Mapping[str, Num] | None = None,
                 steps: tuple[Term, ...] | Callable[[], tuple[Term, ...]] = (),
                 name: str = "", vector_flops: Mapping[str, Num] | None = None,
                 special_ops: Mapping[str, Num] | None = None,
                 link_bytes: Mapping[str, Num] | None = None,
                 link_steps: Mapping[str, Num] | None = None,
                 link_calls: Mapping[str, Num] | None = None, algorithm: Any = None,
                 least: Cost | None = None, runs: Cost | None = None,
                 op: OpId | None = None) -> None:
        # Only what is given is written, straight into the instance dict (set once, here:
        # the record stays frozen; a frozen dataclass's generated __init__ costs ~1 us more).
        # nan, inf (an overflowing size) or a negative count would become a time that looks
        # like an answer: refused where the Cost is made. One `if` per count, not a loop over
        # (name, counts) pairs: the loop costs ~0.4 us more per Cost (measured with timeit).
        fields = self.__dict__
        ok = True
        if flops:
            fields["flops"] = flops
            ok = _counts_ok(flops)
        if bytes:
            fields["bytes"] = bytes
            ok = _counts_ok(bytes) and ok
        if link_bytes:
            fields["link_bytes"] = link_bytes
            ok = _counts_ok(link_bytes) and ok
        if link_steps:
            fields["link_steps"] = link_steps
            ok = _counts_ok(link_steps) and ok
        if link_calls:
            fields["link_calls"] = link_calls
            ok = _counts_ok(link_calls) and ok
        if vector_flops:
            fields["vector_flops"] = vector_flops
            ok = _counts_ok(vector_flops) and ok
        if special_ops:
            fields["special_ops"] = special_ops
            ok = _counts_ok(special_ops) and ok
        if flops and not vector_flops and not special_ops and len(flops) == 1:
            # a GEMM's total_flops is its one count: set here (a step reads it per row, and a
            # lazy property's first read costs two Python calls)
            fields["total_flops"] = next(iter(flops.values()))
        if steps:
            fields["steps"] = steps
        if name:
            fields["name"] = name
        if algorithm is not None:
            fields["algorithm"] = algorithm
        if least is not None:
            fields["least"] = least
        if runs is not None:
            fields["runs"] = runs
        if op is not None:
            fields["op"] = op
        if not ok:
            self._refuse()

    def _refuse(self) -> None:
        """Name the first count that is negative, nan or infinite."""
        for kind in COUNTS:
            for key, value in getattr(self, kind).items():
                arr = np.asarray(value, dtype=float)
                if arr.size and not bool(arr.min() >= 0 and arr.max() < np.inf):
                    why = " (an overflow: the sizes or factors are too large, or a share too "\
                          "small)" if np.isinf(arr).any() else ""
                    raise RooflineError(f"Cost {self.name or '(unnamed)'}: {kind}[{key!r}] "
                                        f"must be finite and non-negative, got "
                                        f"{_first_bad(value)}{why}")

    @cached_property
    def terms(self) -> tuple[Term, ...]:
        """The derivation, one named step per term (built the first time it is read)."""
        return self.steps() if callable(self.steps) else self.steps

    @cached_property  # a step reads it per row, and its tables again (a GEMM's: __init__)
    def total_flops(self) -> Num:
        """All arithmetic: tensor and vector FLOPs, and special-function evaluations (one
        FLOP each), regardless of dtype."""
        return add_all([*self.flops.values(), *self.vector_flops.values(),
                        *self.special_ops.values()])

    @property
    def empty(self) -> bool:
        """No counts at all (`Cost()`, the start of a sum)."""
        return not any(getattr(self, k) for k in COUNTS)

    @property
    def has_arithmetic(self) -> bool:
        return bool(self.flops or self.vector_flops or self.special_ops)

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        name = " + ".join(n for n in (self.name, other.name) if n)
        merged: dict[str, Any] = {k: _merge(getattr(self, k), getattr(other, k)) for k in COUNTS}
        both = () if self.steps == () == other.steps else functools.partial(
            _concatenated, self, other)
        op = other.op if self.empty else self.op if other.empty else summed(self.op, other.op)
        return Cost(**merged, steps=both, name=name, op=op)

    def __radd__(self, other: Any) -> Cost:
        if isinstance(other, (int, float)) and other == 0:  # lets sum(costs) work
            return self
        return NotImplemented

    def __mul__(self, factor: Num) -> Cost:
        if isinstance(factor, Cost):
            return NotImplemented
        return self.scaled(factor)

    def scaled(self, factor: Num, symbol: str = "n") -> Cost:
        """The work repeated `factor` times; the derivation shows it as `symbol·(...)`."""
        arr = np.asarray(factor)
        if not ((arr >= 0) & (arr < np.inf)).all():
            raise RooflineError("a Cost can only be scaled by a finite, non-negative factor, "
                                f"got {_first_bad(factor)}")
        repeated = () if self.steps == () else functools.partial(
            _repeated, self, symbol, factor)
        return Cost(**{k: _scale(getattr(self, k), factor) for k in COUNTS}, steps=repeated,
                    name=self.name, algorithm=self.algorithm,
                    least=None if self.least is None else self.least.scaled(factor, symbol),
                    runs=None if self.runs is None else self.runs.scaled(factor, symbol),
                    op=self.op)

    __rmul__ = __mul__

    def explain(self) -> list[str]:
        """The derivation, one line per term."""
        return [t.render() for t in self.terms]


# What Cost.__init__ leaves out: a count not given is read-only and empty
for _field, _default in {**dict.fromkeys(COUNTS, _NONE), "steps": (), "name": "",
                         "algorithm": None, "least": None, "runs": None, "op": None}.items():
    setattr(Cost, _field, _default)


def _concatenated(a: Cost, b: Cost) -> tuple[Term, ...]:
    return a.terms + b.terms


def _repeated(cost: Cost, symbol: str, factor: Num) -> tuple[Term, ...]:
    """The steps of `cost`, each shown repeated `factor` times (`symbol·(...)`)."""
    times = Sym(symbol, factor)
    return tuple(Term(t.name, t.expr, (times, *t.repeat)) for t in cost.terms)
