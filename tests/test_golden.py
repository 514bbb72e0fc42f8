"""The committed golden (tests/golden/analyses.json) recomputed entry by entry.

Exact: floats compare by repr (bit for bit). Every entry is a scalar analysis or a small
array computed by the same code in the same order, so no summation order may vary; a fast
path that moves one bit is a change to review. A change meant to move numbers regenerates
the file (`python tests/golden/make.py`) and shows its diff in review.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "golden"


def _make() -> Any:
    spec = importlib.util.spec_from_file_location("golden_make", GOLDEN / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make = _make()


def differences(want: dict[str, Any], got: dict[str, Any], limit: int = 8) -> list[str]:
    """The first `limit` differing entries, readable: key, committed, now."""
    out = [f"{k}: missing now" for k in want if k not in got]
    out += [f"{k}: new (not in the golden)" for k in got if k not in want]
    for key, old in want.items():
        if key in got and repr(old) != repr(got[key]):
            new = got[key]
            if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
                moved = [(o, n) for o, n in zip(old, new, strict=True) if repr(o) != repr(n)]
                old, new = [o for o, _ in moved], [n for _, n in moved]  # only what moved
            out.append(f"{key}:\n    golden {old!r}\n    now    {new!r}")
    return out[:limit]


def test_the_golden_is_reproduced_exactly():
    want = json.loads((GOLDEN / "analyses.json").read_text(encoding="utf-8"))
    got = json.loads(make.dumps(make.entries()))  # through JSON, as written
    diff = differences(want, got)
    assert not diff, ("numbers moved from tests/golden/analyses.json (if meant: python "
                      "tests/golden/make.py, and review its diff):\n" + "\n".join(diff))


def test_the_golden_covers_what_it_claims():
    data = json.loads((GOLDEN / "analyses.json").read_text(encoding="utf-8"))
    assert len(make.ANALYSES) >= 30
    assert {phase[0] for _, _, _, phase, _, _ in make.ANALYSES} == {"decode", "prefill",
                                                                      "train"}
    for name in make.EXPLAINED:
        assert any("derivation" in line for line in data[f"{name}/explain-op"])
    assert sum(k.startswith("collective/") for k in data) >= 500
    assert (GOLDEN / "analyses.json").stat().st_size < 400_000


@pytest.mark.parametrize("perturb", ["float", "string", "missing"])
def test_a_moved_number_fails_with_a_readable_diff(perturb):
    want = json.loads((GOLDEN / "analyses.json").read_text(encoding="utf-8"))
    got = dict(want)
    key = "llama3-8b-decode/t_lower_s"
    if perturb == "float":
        got[key] = want[key] * (1 + 2**-52)  # one ulp
    elif perturb == "string":
        got["llama3-8b-decode/bound"] = "compute"
    else:
        del got[key]
    diff = differences(want, got)
    assert len(diff) == 1 and diff[0].startswith("llama3-8b-decode/"), diff
