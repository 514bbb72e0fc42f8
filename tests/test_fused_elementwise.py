"""Elementwise work in a whole model: the residual add fused with the next norm (vLLM's
fused_add_rms_norm, Apex / Transformer Engine / Liger-Kernel fused norms), sequence
parallelism under TP in training (what models/memory.py keeps), and fused backward kernels'
bytes (Liger-Kernel), not 3x the forward on every rank."""

import pytest

from roofline.models import Parallel, analyze, decode, train
from roofline.ops import elementwise


def test_a_fused_add_rmsnorm_moves_four_passes_not_five():
    # by hand: reads the residual and the block output, writes both results: 4·N·2 bytes
    fused = elementwise(1e6, "add_rmsnorm")
    assert fused.bytes["hbm"] == 4 * 1e6 * 2
    apart = elementwise(1e6, "add").bytes["hbm"] + elementwise(1e6, "rmsnorm").bytes["hbm"]
    assert apart == 5 * 1e6 * 2 > fused.bytes["hbm"]


def _norm_bytes(a):
    return {op.name: op.hbm_bytes for op in a.ops if "norm" in op.name  # all occurrences
            and op.group != "model"}


def test_serving_norms_run_whole_on_every_tp_rank_fused_with_the_residual_add():
    a = analyze("llama-3-70b", "h100", decode(64, 1024), Parallel(tp=8))
    # by hand: 64 tokens x 8192 x 4 passes x 2 B per kernel, two kernels per layer, 80 layers
    assert sum(_norm_bytes(a).values()) == pytest.approx(2 * 80 * 64 * 8192 * 4 * 2)


def test_training_norms_are_sequence_parallel_and_move_two_forwards():
    tp8 = analyze("llama-3-70b", "h100", train(16, 4096), Parallel(tp=8, dp=1, pp=4,
                                                                   microbatches=16))
    # by hand, per micro-batch of one 4096-token sequence on 20 layers of a stage: each TP
    # rank normalises 4096 / 8 tokens, 4 passes of 8192 x 2 B, forward and backward; two
    # kernels a layer, 16 micro-batches a step
    per_kernel = 4096 / 8 * 8192 * 4 * 2 * 2
    assert sum(_norm_bytes(tp8).values()) == pytest.approx(16 * 2 * 20 * per_kernel)
    # the model's FLOPs count each token's norm once across the ranks (MFU unchanged by SP)
    tp1 = analyze("llama-3-70b", "h100", train(16, 4096), Parallel(pp=4, microbatches=16))
    shares = [sum(r.model_flops * r.count for r in a.parts.rows if "norm" in r.name
                  and r.group != "model") for a in (tp8, tp1)]
    assert shares[0] * 8 == pytest.approx(shares[1])


def test_elementwise_is_a_small_share_of_a_tp8_training_bound():
    a = analyze("llama-3-70b", "h100", train(64, 4096), Parallel(tp=8, pp=4, dp=2,
                                                                 microbatches=16))
    t = a.parts.core.times
    rows = a.parts.rows
    elementwise_s = sum(lower for r, lower in zip(rows, t.critical_s, strict=True)
                        if "norm" in r.name or "activation" in r.name)
    # norms, residual adds and SwiGLU were 18% of this step's bound (2.35 s: every rank
    # whole, 3x the forward's bytes, unfused); now 3.7% of 1.98 s
    assert elementwise_s / a.t_lower_s < 0.04
    assert a.t_lower_s <= a.t_upper_s
