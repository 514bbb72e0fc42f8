"""Formulas that carry their own derivation, built only when it is read.

An op writes its FLOPs and bytes once, with `+ - * /` on its sizes. Run on `Sym`bols, the
result is an `Expr` that holds the value (a float or numpy array) and prints itself
symbolically and with the numbers filled in, so `--explain` shows
``FLOPs = 2·M·N·K = 2·128·8192·8192 = 1.718e+10`` from the one formula that computed it.
Building that tree costs ~30x the arithmetic, and a whole-model estimate reads no
derivation, so an op (`derived`) runs on plain numbers and its Cost re-runs it on symbols
the first time its derivation is read: the same formula, the same values.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, Union

import numpy as np

from .records import record

if TYPE_CHECKING:
    from .cost import Cost

Num = float | np.ndarray[Any, Any]
Operand = Union["Expr", float, int]
Quantity = Any  # a number or array (an op running on numbers), or an Expr (on symbols)

_PRECEDENCE = {"+": 1, "-": 1, "·": 2, "/": 2, "^": 3}


def _fmt_number(value: Num, exact_below: float = 1e7) -> str:
    """Whole numbers below `exact_below` in full, others to 4 significant digits; an array as
    its range."""
    arr = np.asarray(value)
    if arr.size != 1:
        lo, hi = float(arr.min()), float(arr.max())
        return f"[{_fmt_number(lo, exact_below)}…{_fmt_number(hi, exact_below)}]"
    v = float(arr.item())  # a (1, 1) grid too: float() takes only 0-d arrays
    if math.isfinite(v) and v == int(v) and abs(v) < exact_below:
        return str(int(v))
    return f"{v:.4g}"


class Expr:
    """A value together with the formula that produced it."""

    __slots__ = ("value",)
    value: Num

    precedence = 4  # atoms bind tighter than any operator

    def formula(self) -> str:
        raise NotImplementedError

    def substituted(self) -> str:
        raise NotImplementedError

    def derivation(self, name: str) -> str:
        """'name = formula = numbers = value' (steps that repeat the previous one are dropped)."""
        formula = self.formula()
        if name.endswith(f" {formula}"):  # "block rows Br = Br = 128": say Br once
            formula = name
        parts = [name, formula, self.substituted(), _fmt_result(self.value)]
        kept = [parts[0]]
        for p in parts[1:]:
            if p != kept[-1]:
                kept.append(p)
        return " = ".join(kept)

    def __add__(self, other: Operand) -> Expr:
        return _Bin("+", self, _lift(other))

    def __radd__(self, other: Operand) -> Expr:
        return _Bin("+", _lift(other), self)

    def __sub__(self, other: Operand) -> Expr:
        return _Bin("-", self, _lift(other))

    def __rsub__(self, other: Operand) -> Expr:
        return _Bin("-", _lift(other), self)

    def __mul__(self, other: Operand) -> Expr:
        return _Bin("·", self, _lift(other))

    def __rmul__(self, other: Operand) -> Expr:
        return _Bin("·", _lift(other), self)

    def __truediv__(self, other: Operand) -> Expr:
        return _Bin("/", self, _lift(other))

    def __rtruediv__(self, other: Operand) -> Expr:
        return _Bin("/", _lift(other), self)

    def __pow__(self, other: Operand) -> Expr:
        return _Bin("^", self, _lift(other))


def _fmt_result(value: Num) -> str:
    return _fmt_number(value, exact_below=1e5)


class Sym(Expr):
    """A named quantity: Sym('M', 128) prints as 'M' and as '128'."""

    __slots__ = ("name",)

    def __init__(self, name: str, value: Num) -> None:
        self.name = name
        self.value = value

    def formula(self) -> str:
        return self.name

    def substituted(self) -> str:
        return _fmt_number(self.value)


class Const(Expr):
    """A literal number that prints the same in both forms."""

    def __init__(self, value: float) -> None:
        self.value = value

    def formula(self) -> str:
        return _fmt_number(self.value)

    def substituted(self) -> str:
        return _fmt_number(self.value)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "·": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "^": lambda a, b: np.power(a, b),
}


class _Bin(Expr):
    __slots__ = ("left", "op", "right")

    def __init__(self, op: str, left: Expr, right: Expr) -> None:
        self.op, self.left, self.right = op, left, right
        self.value = _OPS[op](left.value, right.value)

    @property
    def precedence(self) -> int:  # type: ignore[override]
        return _PRECEDENCE[self.op]

    def _render(self, part: Callable[[Expr], str]) -> str:
        p = self.precedence
        left = part(self.left)
        if self.left.precedence < p:
            left = f"({left})"
        right = part(self.right)
        # a - (b + c) and a / (b · c) need brackets on the right even at equal precedence
        if self.right.precedence < p or (self.right.precedence == p and self.op in "-/^"):
            right = f"({right})"
        sep = self.op if self.op in "·^" else f" {self.op} "
        return f"{left}{sep}{right}"

    def formula(self) -> str:
        return self._render(lambda e: e.formula())

    def substituted(self) -> str:
        return self._render(lambda e: e.substituted())


class Call(Expr):
    """A function applied elementwise, e.g. Call('ceil', np.ceil, N / B)."""

    __slots__ = ("arg", "fn_name")

    def __init__(self, fn_name: str, fn: Callable[[Num], Num], arg: Expr) -> None:
        self.fn_name, self.arg = fn_name, arg
        self.value = fn(arg.value)

    def formula(self) -> str:
        return f"{self.fn_name}({self.arg.formula()})"

    def substituted(self) -> str:
        return f"{self.fn_name}({self.arg.substituted()})"


# How formulas run. SYMBOLS (the default, so a formula helper called on its own returns an
# Expr) builds derivation trees; an op (`derived`) runs on NUMBERS; DERIVING re-runs an op on
# symbols for its derivation. A context variable, so threads and tasks keep their own.
_SYMBOLS, _NUMBERS, _DERIVING = 0, 1, 2
_MODE: ContextVar[int] = ContextVar("roofline_formula_mode", default=_SYMBOLS)
_mode = _MODE.get  # bound once: formulas ask it a few hundred times per whole-model estimate
# For the hottest input helper (ops._common.size), which inlines `sym`: one Python call less
# per size of every op of a whole-model estimate.
NUMBERS, formula_mode = _NUMBERS, _mode

F = TypeVar("F", bound=Callable[..., Any])


def symbolic() -> bool:
    """Whether formulas build derivation trees here (not inside an op running on numbers)."""
    return _mode() != _NUMBERS


def sym(name: str, number: Num) -> Quantity:
    """A named quantity: a Sym, or just its number when running on numbers."""
    return number if _mode() == _NUMBERS else Sym(name, number)


def value(x: Quantity) -> Any:
    """The number behind a quantity: an Expr's value, or the number itself."""
    return x.value if isinstance(x, Expr) else x


def call(fn_name: str, fn: Callable[[Any], Any], arg: Quantity) -> Quantity:
    """`fn` applied elementwise: a Call on symbols, the plain result on numbers."""
    return Call(fn_name, fn, arg) if isinstance(arg, Expr) else fn(arg)


def steps(*named: tuple[str, Quantity]) -> tuple[Term, ...]:
    """Derivation steps from (name, formula) pairs; none when running on numbers."""
    return () if _mode() == _NUMBERS else tuple(Term(n, e) for n, e in named)


def derived(op: F) -> F:
    """An op that runs on plain numbers; the Cost it returns re-runs it on symbols the first
    time its derivation is read (`Cost.terms`). While a derivation is built it runs as its
    caller (on symbols)."""
    @functools.wraps(op)
    def run(*args: Any, **kwargs: Any) -> Cost:
        mode = _mode()
        if mode == _DERIVING:
            return op(*args, **kwargs)
        if mode == _NUMBERS:  # already on numbers (a model's builder, or another op)
            cost = op(*args, **kwargs)
        else:
            token = _MODE.set(_NUMBERS)
            try:
                cost = op(*args, **kwargs)
            finally:
                _MODE.reset(token)
        # its derivation: this op re-run on symbols when Cost.terms is first read
        cost.__dict__["steps"] = functools.partial(_derivation, run, args, kwargs)
        return cost
    return run  # type: ignore[return-value]


def numeric(fn: F) -> F:
    """A formula helper (or a builder of ops) whose callers want only numbers: runs on plain
    numbers; the ops it calls still keep their derivations (`derived`)."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if _mode() == _NUMBERS:
            return fn(*args, **kwargs)
        token = _MODE.set(_NUMBERS)
        try:
            return fn(*args, **kwargs)
        finally:
            _MODE.reset(token)
    return run  # type: ignore[return-value]


def _derivation(op: Callable[..., Cost], args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[Term, ...]:
    """An op's derivation: the op re-run on symbols (a picklable partial holds the call)."""
    token = _MODE.set(_DERIVING)
    try:
        return op(*args, **kwargs).terms
    finally:
        _MODE.reset(token)


_PLAIN = frozenset({float, int, bool})


def one_point(value: Any) -> bool:
    """A plain Python number (float, int or bool): one point, computed in plain Python,
    where numpy on a 0-d value costs ~30x a float operation. The one check each scalar fast
    path makes before its early return (as rich/cells.py's `_is_single_cell_widths` guards
    `cell_len`); numpy values and Exprs take the general path. Over many values:
    `all_one_point` (the same check, in C: ~1 us less per call than `all(map(one_point, ..))`
    on the ~40 such checks of an analysis)."""
    return type(value) in _PLAIN


def all_one_point(values: Iterable[Any]) -> bool:
    """`one_point` for every value, checked in C (their types against the same set)."""
    return _PLAIN.issuperset(map(type, values))


def unwrap(x: Any) -> Any:
    """0-d arrays back to Python scalars, so scalar inputs give scalar results."""
    if one_point(x):
        return x
    arr = np.asarray(x)
    return arr.item() if arr.ndim == 0 else arr


def floats(x: Any) -> Any:
    """x in float64: a Python float for one point (arithmetic on a 0-d array costs ~30x a
    float's), else a float array."""
    if one_point(x):
        return float(x)
    arr = np.asarray(x, dtype=float)
    return arr.item() if arr.ndim == 0 else arr


# Elementwise helpers that keep one point in plain Python: a whole-model estimate does
# hundreds of these on single numbers, where a 0-d numpy call costs ~30x a float operation.

def where(condition: Any, a: Any, b: Any) -> Any:
    """np.where, or `a if condition else b` for one point."""
    if one_point(condition) or type(condition) is np.bool_:
        return a if condition else b
    return np.where(condition, a, b)


def maximum(a: Any, b: Any) -> Any:
    """np.maximum, or max() for two Python numbers."""
    if one_point(a) and one_point(b):
        return a if a >= b else b
    return np.maximum(a, b)


def minimum(a: Any, b: Any) -> Any:
    """np.minimum, or min() for two Python numbers."""
    if one_point(a) and one_point(b):
        return a if a <= b else b
    return np.minimum(a, b)


def any_true(condition: Any) -> bool:
    """np.any, without numpy for one point."""
    if one_point(condition):
        return bool(condition)
    return bool(np.any(condition))


_second = operator.itemgetter(1)


def add_all(values: Iterable[Any]) -> Any:
    """The sum of numbers and arrays of several shapes, the smaller ones added among
    themselves first: in a batch x length sweep most ops' figures are (batch, 1) columns, and
    adding each to a (batch, length) grid would cost a pass over the grid per op. A sum this
    function allocated is added to in place (a fresh grid-sized array per addition is most of
    a sweep's memory traffic); the arrays it is given are never written."""
    if isinstance(values, list):
        if len(values) == 1:
            return values[0]
        if all_one_point(values):
            return sum(values, 0.0)
    return scaled_sum((1, v) for v in values)


def scaled_sum(pairs: Iterable[tuple[float, Any]]) -> Any:
    """Σ n·v over (n, v) pairs, added as `add_all` adds; the products it makes (n ≠ 1) are
    its own, so they are summed into in place rather than copied."""
    if isinstance(pairs, list) and all_one_point(map(_second, pairs)):
        return sum([v if n == 1 else n * v for n, v in pairs], 0.0)  # as times_n
    groups: dict[tuple[int, ...], Any] = {}
    owned: set[tuple[int, ...]] = set()  # groups whose sum is an array made here
    for n, v in pairs:
        shape = v.shape if type(v) is np.ndarray else ()
        term, fresh = (v, False) if n == 1 else (n * v, type(v) is np.ndarray)
        fresh = fresh and term.dtype == np.float64 and shape != ()
        if shape not in groups:
            groups[shape] = term
        elif shape in owned:
            np.add(groups[shape], term, out=groups[shape])
            continue
        elif fresh:  # add the sum so far into the new product
            groups[shape] = np.add(term, groups[shape], out=term)
        else:
            groups[shape] = groups[shape] + term
            fresh = type(groups[shape]) is np.ndarray and groups[shape].dtype == np.float64
        if fresh:
            owned.add(shape)
    if len(groups) == 1:  # no pass to add a zero
        return next(iter(groups.values()))
    out: Any = 0.0
    for shape in sorted(groups, key=math.prod):  # the largest last: often one grid
        if shape in owned and np.broadcast_shapes(np.shape(out), shape) == shape:
            out = np.add(groups[shape], out, out=groups[shape])
        else:
            out = out + groups[shape]
    return out


def in_shape(value: Any, shape: tuple[int, ...]) -> Any:
    """A figure in a grid's shape (the same at every point where it does not vary); a
    Python number for one point."""
    return unwrap(value) if shape == () else np.array(np.broadcast_to(value, shape))


def times_n(n: float, value: Any) -> Any:
    """n · value, without a pass over an array when n is 1."""
    return value if n == 1 else n * value


def ratio(a: Any, b: Any, otherwise: float) -> Any:
    """a / b where b > 0, else `otherwise` (intensity of no bytes: inf)."""
    if one_point(a) and one_point(b):
        return a / b if b > 0 else otherwise
    with np.errstate(divide="ignore", invalid="ignore"):
        return unwrap(np.where(np.asarray(b) > 0, np.asarray(a) / b, otherwise))


def _lift(x: Operand) -> Expr:
    return x if isinstance(x, Expr) else Const(float(x))


@record(frozen=True)
class Term:
    """One named step of an op's derivation (rendered only when asked for).

    `repeat` holds the factors the step was scaled by (``n_layers·(...)``); they are applied
    only when rendering, so scaling a Cost over a million-point sweep costs nothing here.
    """

    name: str
    expr: Expr
    repeat: tuple[Sym, ...] = ()

    def full(self) -> Expr:
        expr = self.expr
        for factor in reversed(self.repeat):  # the latest scaling is outermost
            expr = factor * expr
        return expr

    def render(self) -> str:
        return self.full().derivation(self.name)


def define(terms: list[Term], label: str, symbol: str, expr: Quantity) -> Quantity:
    """Record `label symbol = expr` as a derivation step; later formulas use just `symbol`
    (on numbers: just the number)."""
    if _mode() == _NUMBERS:
        return expr
    terms.append(Term(f"{label} {symbol}", expr))
    return Sym(symbol, expr.value)


def note(terms: list[Term], name: str, expr: Quantity) -> None:
    """Record a derivation step (not when running on numbers)."""
    if _mode() != _NUMBERS:
        terms.append(Term(name, expr))
