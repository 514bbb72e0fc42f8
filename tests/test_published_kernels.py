"""Published kernel measurements against the tool's bound: measured/bound <= 1 for every row.

Rows: benchmarks/validation/ops.csv (each with its source: repository@commit file#line, or
paper and figure), kinds gemm, attention_fwd, attention_bwd and hbm. Each row's figure is
turned into a time in the source's own FLOP convention, and the bound is the tool's t_lower
for the same work on the row's chip:

- gemm: `matmul(m, k, n)` (2·M·N·K FLOPs, the sources' convention too); a grouped GEMM is
  `groups` such matmuls (m is M per group).
- attention_fwd: `attention(B, N, N, H, Hkv, d, causal, impl="flash")` with the chip's flash
  defaults (SRAM tiling, L2); the measured time is FlashAttention's FLOPs, 4·B·N²·H·d (halved
  when causal), over the TFLOP/s printed.
- attention_bwd: FlashAttention's backward convention (2.5x the forward's FLOPs). Bound: 2.5x
  ... the backward op (`ops.attention_backward`, FlashAttention-2 Algorithm 2) on the chip's
  tiling, its query-side re-reads served by L2 where they fit (as the forward's K/V).
- hbm: a measured (effective) bandwidth against the chip's HBM roof.

Where a row leaves something open (shape order MxNxK vs MxKxN, output dtype, SKU, dtype not
printed), every reading is bounded and the loosest one is kept: a bound must hold for the
row whatever it meant. Rows on chips the catalog lacks are skipped with the reason.
``pytest -s tests/test_published_kernels.py -k table`` prints the per-kind table (README).
The rows and the bound are benchmarks/validation/cases.py's (`cases.kernel_ratio`), the one
path check.py scores the expected time on too.
"""

from __future__ import annotations

import statistics
from typing import Any

import cases  # benchmarks/validation (tests/conftest.py): the rows and the bound, one path
import pytest
from cases import Row, Unbounded

from roofline import evaluate, load_chip
from roofline.ops.attention import attention, flash_tiling

KINDS = cases.KERNEL_KINDS


def _param(row: Row) -> Any:
    return pytest.param(row, id=row.id)


@pytest.mark.parametrize("row", [_param(r) for r in cases.rows(KINDS)])
def test_published_kernel_never_beats_the_bound(row: Row) -> None:
    try:
        ratio = cases.kernel_ratio(row)
    except Unbounded as why:
        pytest.skip(f"{row.id}: {why}")
    assert ratio <= 1.0, (f"{row.id} ({row.source}) runs at {ratio:.3f}x the tool's bound on "
                          f"{row.chip}: the bound is too tight")


def table() -> list[tuple[str, int, float, float, int]]:
    """Per kind: rows bounded, max and median measured/bound, rows skipped."""
    out = []
    for kind in KINDS:
        ratios, skipped = [], 0
        for row in cases.rows((kind,)):
            try:
                ratios.append(cases.kernel_ratio(row))
            except Unbounded:
                skipped += 1
        out.append((kind, len(ratios), max(ratios), statistics.median(ratios), skipped))
    return out


def format_table() -> str:
    lines = ["| kind | rows | max measured/bound | median | skipped (chip or shape unknown) |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {n} | {hi:.2f} | {med:.2f} | {sk} |" for k, n, hi, med, sk in table()]
    return "\n".join(lines)


def test_every_kind_has_bounded_rows_and_the_table_prints(capsys: Any) -> None:
    summary = table()
    assert [k for k, *_ in summary] == list(KINDS)
    for kind, n, hi, med, _ in summary:
        assert n >= 5, f"{kind}: only {n} rows could be bounded"
        assert med <= hi <= 1.0
    with capsys.disabled():
        print("\n" + format_table())


def test_flash_forward_d256_short_sequences_are_compute_or_l2_bound_not_hbm() -> None:
    # FA3 Figure 5e on H100: d = 256 at 512 and 2k tokens. Charging every K/V re-read to HBM
    # called them HBM-bound at 1.12x and 1.03x their measured speed.
    wanted = ("fa3-h100-d256-s512-nc-fwd-fp16", "fa3-h100-d256-s2k-nc-fwd-fp16")
    found = [r for r in cases.rows(("attention_fwd",)) if r.id in wanted]
    assert len(found) == len(wanted)
    for row in found:
        chip = load_chip(row.chip)
        est = evaluate(attention(**cases.attention_shape(row), impl="flash", **flash_tiling(chip)),
                       chip)
        assert est.bound in ("compute", "l2")
        assert cases.kernel_ratio(row) < 0.8


def test_row_flop_conventions() -> None:
    by_id = {r.id: r for r in cases.rows(("attention_fwd", "attention_bwd"))}
    # FlashAttention halves causal FLOPs: 4·B·N²·H·d / 2 (FA3 Figure 5d, d = 128, N = 512)
    fa3 = by_id["fa3-h100-d128-s512-causal-fwd-fp16"]
    assert cases.fa_forward_flops(fa3) == 2.0 * 32 * 512**2 * 16 * 128
    # aiter counts causal FLOPs in full: its 2105 TFLOP/s is ~1052 in FlashAttention's terms
    aiter = by_id["aiter-mi355x-d128-s8k-gqa-causal-bwd"]
    assert cases.fa_forward_flops(aiter) == 4.0 * 8 * 8192**2 * 64 * 128
    assert cases.attention_shape(aiter)["kv_heads"] == 8  # GQA, from the row's notes


def test_backward_reuses_the_query_side_in_l2() -> None:
    # FA3 / FA4 backward at 8k-16k tokens: charging every Q/dO/dQ re-read to HBM put the bound
    # below the measured speed (FA3 d128 on H100 1.27x, FA4 on B200 1.37x); served by L2
    # where the query side of the heads in flight fits, every row holds
    long = [r for r in cases.rows(("attention_bwd",)) if cases.attention_shape(r)["q_len"] >= 8192]
    assert len(long) >= 8
    for row in long:
        chip = cases.kernel_chips(row)[0]
        cost = cases.backward_cost(row, chip)
        if "l2" in cost.bytes:
            assert cost.bytes["l2"] >= cost.bytes["hbm"]
        assert cases.kernel_ratio(row) <= 1.0
