"""Published training throughput never beats the schedule-aware lower bound (issue 13).

Every `train` row of benchmarks/validation/systems.csv whose model and chip the catalog
has is analysed with its published layout (tp, pp, dp, cp, ep, vpp, micro-batches, ZeRO /
FSDP, recomputation, fp8 GEMMs). The bound assumes every overlap the frameworks offer
(TP comm-GEMM overlap, EP overlap, the interleaved schedule where vpp > 1), so it is the
fastest the layout could run. Rows in TFLOP/s or MFU become tokens/s with the largest FLOPs
per token of their convention (6·N + 12·L·h·s, full attention), the smallest throughput
they can mean. measured / bound must stay <= 1 for every row. The rows and the bound are
benchmarks/validation/cases.py's (`cases.training_case`), the one path check.py scores the
expected time on too.
"""

from __future__ import annotations

import statistics

import cases  # benchmarks/validation (tests/conftest.py): the rows and the bound, one path
import pytest
from cases import Training

CASES = [cases.training_case(r) for r in cases.rows(("train",), cases.SYSTEMS_CSV)]
CHECKED = [c for c in CASES if not c.skip]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=pytest.mark.xfail(
    strict=True, reason=cases.BEATEN[c.id])) if c.id in cases.BEATEN else pytest.param(c, id=c.id)
    for c in CHECKED])
def test_no_published_training_run_beats_the_bound(case: Training) -> None:
    # but the known misses (cases.BEATEN: strict xfails until fixed)
    assert case.ratio <= 1.0, f"{case.id} ({case.source}): measured/bound {case.ratio:.3f}"


def test_rows_checked_and_the_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(CHECKED) >= 30
    ratios = [c.ratio for c in CHECKED]
    with capsys.disabled():
        print(f"\n{len(CHECKED)} published training rows checked, {len(CASES) - len(CHECKED)} "
              f"skipped; measured/bound max {max(ratios):.2f}, median "
              f"{statistics.median(ratios):.2f}")
    assert all(c.skip for c in CASES if c not in CHECKED)
