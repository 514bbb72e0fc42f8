"""`record` (roofline.records) behaves as `dataclass` with the same options: the repr,
equality, hash (or its absence) and frozen guard it writes on first use are dataclass's."""

from __future__ import annotations

import dataclasses
import itertools
import re
import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from roofline.records import record


def _classes(decorate: Any, own: str) -> type:
    """One class body, with a field left out of repr, compare and hash, one left out of the
    hash only, a default factory and (`own`) an __eq__ and / or __hash__ of its own."""

    class Point:
        x: float
        y: Any = field(default_factory=list, hash=False)
        note: str = field(default="n", repr=False, compare=False)

        if "eq" in own:
            def __eq__(self, other: object) -> bool:
                return isinstance(other, Point) and self.x == other.x

        if "hash" in own:
            def __hash__(self) -> int:
                return 7

    return decorate(Point)


def _shown(obj: object) -> str:
    return re.sub(r" at 0x[0-9a-f]+", "", repr(obj))  # object's repr names the address


OPTIONS = [dict(zip(("frozen", "eq", "repr", "slots"), v, strict=True))
           for v in itertools.product((False, True), repeat=4)]


@pytest.mark.parametrize("own", ["", "eq", "hash", "eq hash"])
@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_record_writes_what_dataclass_writes(options, own):
    eager = _classes(dataclass(**options), own)
    lazy = _classes(record(**options), own)
    a, b, c = lazy(1.0, [2]), lazy(1.0, [2], note="other"), lazy(3.0)
    ea, eb, ec = eager(1.0, [2]), eager(1.0, [2], note="other"), eager(3.0)
    assert _shown(a) == _shown(ea) and _shown(c) == _shown(ec)
    assert (a == b, a == c, a == 1.0, a != b) == (ea == eb, ea == ec, ea == 1.0, ea != eb)
    assert (lazy.__hash__ is None) == (eager.__hash__ is None)
    if eager.__hash__ is not None and eager.__hash__ is not object.__hash__:
        x, ex = lazy(1.0, "tuple-free"), eager(1.0, "tuple-free")  # y is not hashed
        assert hash(x) == hash(ex) and hash(lazy(1.0, [9])) == hash(eager(1.0, [9]))
    if options["frozen"]:
        for obj in (a, ea):
            with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
                obj.x = 2.0  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(lazy)] == ["x", "y", "note"]
    assert dataclasses.replace(a, x=5.0).x == 5.0
    assert lazy.__match_args__ == eager.__match_args__


def test_a_record_compares_with_its_own_class_only():
    p = _classes(record(frozen=True), "")
    q = _classes(record(frozen=True), "")
    assert p(1.0) == p(1.0) and p(1.0) != q(1.0)
    assert p(1.0).__eq__(q(1.0)) is NotImplemented


def test_a_subclass_reads_its_base_records_methods():
    base = _classes(record(frozen=True), "")

    @dataclass(frozen=True, eq=False)
    class Child(base):  # type: ignore[valid-type, misc]
        extra: int = 0

    assert repr(Child(1.0)) == "test_a_subclass_reads_its_base_records_methods.<locals>." \
        "Child(x=1.0, y=[], extra=0)"
    assert Child(1.0, ()) == Child(1.0, (), extra=5)  # the base's __eq__ compares x, y only
    assert hash(Child(1.0, ())) == hash(base(1.0, ()))


def test_the_model_command_writes_no_record_repr_or_equality():
    """What `record` is for: `roofline model` compiles the `__init__` and the frozen guards of
    its records, and the hash of the two it hashes, and no `__repr__` or `__eq__`."""
    code = (
        "import builtins, re, sys\n"
        "written = []\n"
        "run = builtins.exec\n"
        "def exec(src, *a, **k):\n"
        "    if isinstance(src, str) and src.startswith('def __create_fn__'):\n"
        "        written.append(re.search(r' def (\\w+)\\(', src).group(1))\n"
        "    return run(src, *a, **k)\n"
        "builtins.exec = exec\n"
        "from roofline.cli import main\n"
        "main(['model', 'llama-3-70b', '--hw', 'h100', '--phase', 'decode', '--tp', '4'])\n"
        "sys.stderr.write(' '.join(sorted(set(written))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    written = set(out.stderr.split())
    if not written:
        pytest.skip("this Python's dataclasses compiles no method alone")
    assert "__init__" in written and not written & {"__repr__", "__eq__"}
