"""The memory budget: a fraction of what the device exposes, less a reserve (issue 12)."""

import pytest

from roofline.errors import RooflineError
from roofline.models import Parallel, analyze, decode, load_model, param_counts
from roofline.models.step import MemoryBudget


def test_largest_batch_follows_the_usable_memory_by_hand():
    spec = load_model("llama-3-70b")
    weights = param_counts(spec).total * 2 / 4
    kv_per_sequence = spec.layers * 2 * spec.kv_heads * spec.head_dim * 2 * 4096 / 4
    for budget in (MemoryBudget(), MemoryBudget(0.9), MemoryBudget(0.9, 2e9)):
        a = analyze(spec, "h100", decode(1, 4096), Parallel(tp=4), budget=budget)
        usable = 85.52e9 * budget.util - budget.reserve_bytes
        assert a.memory.capacity_bytes == pytest.approx(usable)
        assert a.memory.max_batch == int((usable - weights) / kv_per_sequence)
    assert "90% of 85.5 GB exposed less 2 GB reserved" in a.memory_budget


@pytest.mark.parametrize(("args", "needle"), [
    ((0.0,), r"util must be in \(0, 1\], got 0.0"), ((1.5,), "util must be in"),
    ((True,), "util must be in"), ((1.0, -1.0), "reserve_bytes must be a finite number >= 0"),
])
def test_bad_budgets_fail_when_built_naming_the_field(args, needle):
    with pytest.raises(RooflineError, match=needle):
        MemoryBudget(*args)


def test_a_reserve_past_the_capacity_is_a_one_line_error():
    with pytest.raises(RooflineError, match="reserve_bytes of 1e\\+12 B leaves nothing"):
        analyze("llama-3-8b", "h100", decode(1, 1024), budget=MemoryBudget(0.5, 1e12))
