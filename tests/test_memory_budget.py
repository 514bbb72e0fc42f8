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


@pytest.mark.parametrize(("budget", "needle"), [
    (MemoryBudget(0.0), "--mem-util"), (MemoryBudget(1.5), "--mem-util"),
    (MemoryBudget(1.0, -1.0), "--reserve"), (MemoryBudget(0.5, 1e12), "leaves nothing"),
])
def test_bad_budgets_are_one_line_errors(budget, needle):
    with pytest.raises(RooflineError, match=needle):
        analyze("llama-3-8b", "h100", decode(1, 1024), budget=budget)
