"""`record`: `dataclasses.dataclass`, with the `__repr__`, `__eq__` and `__hash__` it writes
compiled when first looked up rather than when the class is made.

dataclasses (CPython 3.11) writes each method as source text and compiles it with `exec`
when the class is made (`_create_fn` in Lib/dataclasses.py): about 0.2M instructions per
method plus 1.6K per character of its source, counted with callgrind. `roofline model`
makes 43 records at start-up and reads the hash of two and no record's repr or equality:
writing their 112 `__repr__`, `__eq__` and `__hash__` on first use took its start from 743M
to 698M instructions (`python -c "import numpy"`: 376M). Each is written by dataclasses
itself, for a copy of the class with the same fields (`make_dataclass`), so it is the method
`@dataclass` would have written; the class's `__init__` and a frozen class's guards
(`__setattr__`, `__delattr__`) are written at once, as `@dataclass` writes them: the frozen
`__init__` comes only with them. The records the CLI's start makes use it
(tests/test_record_methods.py checks it against `@dataclass`); `__dataclass_params__`
records `repr` and `eq` as False.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

# what make_dataclass is asked for to write each method alone (unsafe_hash: the hash of the
# fields dataclass hashes, written without __eq__)
_WRITTEN_BY: dict[str, dict[str, Any]] = {
    "__repr__": {"repr": True, "eq": False},
    "__eq__": {"repr": False, "eq": True},
    "__hash__": {"repr": False, "eq": False, "unsafe_hash": True},
}


class _OnFirstUse:
    """The dataclass method `name` of `owner`, written on its first lookup (then stored on
    `owner` in place of this descriptor)."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: type, name: str) -> None:
        self.owner, self.name = owner, name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        twin = make_dataclass(
            self.owner.__name__,
            [(f.name, f.type, field(repr=f.repr, hash=f.hash, compare=f.compare))
             for f in fields(self.owner)],
            init=False, **_WRITTEN_BY[self.name])
        method = twin.__dict__[self.name]
        setattr(self.owner, self.name, method)
        return method.__get__(obj, objtype)


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, init: bool = True, repr: bool = True, eq: bool = True, frozen: bool = False,
           slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, init: bool = True, repr: bool = True,
           eq: bool = True, frozen: bool = False,
           slots: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """`@dataclass(init=..., repr=..., eq=..., frozen=..., slots=...)`, its `__repr__`,
    `__eq__` and `__hash__` written on first use."""

    def wrap(cls: type[T]) -> type[T]:
        body = dict(cls.__dict__)
        made = dataclass(cls, init=init, repr=False, eq=False, frozen=frozen, slots=slots)
        for name, wanted in (("__repr__", repr), ("__eq__", eq)):
            if wanted and name not in body:
                setattr(made, name, _OnFirstUse(made, name))
        # dataclass's hash rule without unsafe_hash (`_hash_action` in Lib/dataclasses.py):
        # with eq, a class that sets no __hash__ of its own gets the fields' hash when frozen
        # and none otherwise (a __hash__ = None that Python put beside the body's __eq__ is
        # not one of its own)
        own_hash = body.get("__hash__", MISSING)
        if eq and (own_hash is MISSING or (own_hash is None and "__eq__" in body)):
            name = "__hash__"
            setattr(made, name, _OnFirstUse(made, name) if frozen else None)
        return made

    return wrap if cls is None else wrap(cls)


__all__ = ["record"]
