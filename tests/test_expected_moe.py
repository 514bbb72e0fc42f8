"""The expected time of MoE layers and steps: grouped GEMMs at their architecture's figure,
attention-DP replicas waiting for the one that runs a prompt."""

from __future__ import annotations

import numpy as np
import pytest

from roofline import load_chip
from roofline.expect import expected
from roofline.ops.matmul import matmul
from roofline.ops.moe import grouped_matmul
from roofline.serve import Load, Space, Workload, grid, plan


def test_blackwell_fp4_grouped_gemm_by_hand() -> None:
    # 8192 tokens, top-2 of 8 experts: 2048 rows an expert, N 4096, K 7168 (compute-bound)
    cost = grouped_matmul(8192, 7168, 4096, experts=8, top_k=2, dtype="nvfp4")
    e = expected(cost, "b200")
    flops = 2 * 8192 * 2 * 7168 * 4096
    # 128x256 tiles: 16 x 16 per expert, 2048 in all over 148 SMs: 14 waves
    util = 2048 / (14 * 148)
    assert e.efficiency["compute"] == pytest.approx(0.34 * util)
    assert "matmul_grouped.fp4" in e.sources
    assert float(e.t_s) == pytest.approx(flops / (9e15 * 0.34 * util) + 4e-6, rel=1e-6)
    assert e.t_s >= e.bound.t_lower_s


def test_only_grouped_gemms_with_a_figure_take_it() -> None:
    dense = expected(matmul(16384, 7168, 4096, "nvfp4"), "b200")  # one GEMM: the matmul figure
    assert "matmul_grouped.fp4" not in dense.sources
    fp8 = expected(grouped_matmul(8192, 7168, 4096, experts=8, top_k=2, dtype="fp8"), "b200")
    assert "matmul_grouped.fp4" not in fp8.sources  # no fp8 grouped figure: the fp8 GEMMs'
    hopper = expected(grouped_matmul(8192, 7168, 4096, experts=8, top_k=2, dtype="fp8"), "h100")
    assert not any(k.startswith("matmul_grouped") for k in hopper.sources)
    # the same FLOPs as one dense GEMM run faster than as the experts' grouped GEMM
    grouped = expected(grouped_matmul(8192, 7168, 4096, experts=8, top_k=2, dtype="nvfp4"),
                       load_chip("b200"))
    assert grouped.t_s > dense.t_s


def test_any_replica_share() -> None:
    assert float(grid.any_replica_share(0.1, 8)) == pytest.approx(1 - 0.9 ** 8)
    assert float(grid.any_replica_share(0.25, 1)) == pytest.approx(0.25)
    shares = np.linspace(0.0, 1.0, 11)
    many = grid.any_replica_share(shares, 4)
    assert np.all(many >= shares - 1e-12) and np.all(many <= 1.0)
    assert np.all(np.diff(many) >= 0)


def _tpot(monkeypatch: pytest.MonkeyPatch, stall: bool) -> float:
    if not stall:
        monkeypatch.setattr(grid, "any_replica_share", lambda share, replicas: share)
    w = Workload.from_lengths(1024, 256)
    p = plan("deepseek-v3", ["h200"], w, space=Space(tp=(1,), dp=(8,), ep=(8,)),
             load=Load(concurrency=512), expect=True, framework="sglang")
    return float(p.columns["tpot_s"][0])


def test_attention_dp_replicas_wait_for_a_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """With attention DP over the experts' group, an iteration in which any replica runs a
    prompt runs at a prompt's pace for all: the mean iteration is longer than if the
    replicas ran their prompts together."""
    stalled = _tpot(monkeypatch, True)
    together = _tpot(monkeypatch, False)
    assert stalled > together
