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


def test_serving_rmsnorms_are_sequence_parallel_under_tp_as_vllm_runs_them():
    a = analyze("llama-3-70b", "h100", decode(64, 1024), Parallel(tp=8))
    # by hand (vLLM's SequenceParallelismPass): 64 tokens / 8 ranks = 8 tokens a rank, x 8192
    # x 4 passes x 2 B per kernel; two kernels a layer, 80 layers, less the first layer's
    # attention norm, which has no add to fuse (2 passes, also 8 tokens a rank)
    assert sum(_norm_bytes(a).values()) == pytest.approx((2 * 80 - 1) * 8 * 8192 * 4 * 2)
    first = next(op for op in a.ops if op.name == "first norm (no add)")
    assert first.hbm_bytes == pytest.approx(8 * 8192 * 2 * 2)
    # 10 tokens pad to 16: 2 a rank, not 1.25
    odd = analyze("llama-3-70b", "h100", decode(10, 1024), Parallel(tp=8))
    assert sum(_norm_bytes(odd).values()) == pytest.approx((2 * 80 - 1) * 2 * 8192 * 4 * 2)


def test_serving_layernorms_stay_whole_on_every_tp_rank():
    # vLLM's pass matches RMSNorm only: OPT's 32 layers of 4096 normalise all 64 tokens on
    # each of 4 ranks, 4 passes x 2 B (fused add + layernorm), 2 x 32 - 1 kernels
    a = analyze("opt-6.7b", "h100", decode(64, 1024), Parallel(tp=4))
    assert sum(_norm_bytes(a).values()) == pytest.approx((2 * 32 - 1) * 64 * 4096 * 4 * 2)


def test_the_first_norm_has_no_add_and_the_last_add_fuses_with_the_final_norm():
    a = analyze("llama-3-8b", "h100", decode(16, 1024))
    byname = {op.name: op for op in a.ops if op.group == "model"}
    # by hand: the first layer reads the embedding's 16 x 4096 and writes the norm (2 passes
    # of 2 B); the last layer's residual add and the final norm read two inputs and write two
    # (vLLM's fused_add_rms_norm: 4 passes)
    assert byname["first norm (no add)"].hbm_bytes == \
        pytest.approx(16 * 4096 * 2 * 2)  # once a step
    assert byname["residual + final norm"].hbm_bytes == pytest.approx(16 * 4096 * 4 * 2)
    counts = {op.name: op.count for op in a.ops if op.group != "model" and "norm" in op.name}
    assert counts == {"residual + attention norm": 31, "residual + mlp norm": 32}
    # with 4 stages, the stage that holds the embedding holds the first layer: 8 - 1
    pp = analyze("llama-3-8b", "h100", decode(16, 1024), Parallel(pp=4))
    assert [op.count for op in pp.ops if op.name == "residual + attention norm"] == [7]


def _row(a, name):
    return next(op for op in a.ops if op.name == name)


def test_serving_runs_swiglu_in_the_up_gate_gemms_epilogue():
    a = analyze("llama-3-70b", "h100", decode(64, 1024), Parallel(tp=8))
    assert not [op for op in a.ops if "activation" in op.name]
    up = _row(a, "mlp up/gate")
    # by hand: reads 64 x 8192 activations and the 8192 x 7168 gate + up shard, writes only
    # silu(gate)·up, 64 x 3584 (not 64 x 7168), all bf16
    assert up.cost.bytes["hbm"] == pytest.approx((64 * 8192 + 8192 * 7168 + 64 * 3584) * 2)
    assert "swiglu epilogue" in up.cost.name
    # the activation's arithmetic stays: 5 ops an element, one exp
    assert up.cost.total_flops == pytest.approx(2 * 64 * 8192 * 7168 + 5 * 64 * 3584)
    assert any("gate half never written" in line for line in up.cost.explain())


def test_training_keeps_swiglu_a_kernel_of_its_own():
    a = analyze("llama-3-8b", "h100", train(8, 4096), Parallel(microbatches=8))
    assert "swiglu" not in _row(a, "mlp up/gate").cost.name
    act = _row(a, "mlp activation")  # reads gate and up, writes the product: 3 passes,
    # and the backward's 5 (Liger-Kernel) over 4096 tokens x 14336
    assert act.cost.bytes["hbm"] == pytest.approx(4096 * 14336 * 2 * (3 + 5))


def test_serving_moe_experts_and_shared_experts_fuse_swiglu_too():
    from roofline.ops.moe import grouped_matmul

    a = analyze("deepseek-v3", "h200-sxm", decode(256, 2048), Parallel(tp=8))
    assert not [op for op in a.ops if "activation" in op.name]
    # by hand: 256 tokens, top-8 of 256 experts, each rank 1/8 of each expert's 2048 columns
    # (TP'd experts): the gate half of the output, 256 x 8 x 256 elements of 2 B, never
    # written
    whole = grouped_matmul(256, 7168, 2 * 256, 256, 8, dtype="bf16", weight_dtype="fp8")
    up = next(op for op in a.ops if op.name == "experts up/gate")
    assert up.cost.bytes["hbm"] == pytest.approx(whole.bytes["hbm"] - 256 * 8 * 256 * 2)
    shared = next(op for op in a.ops if op.name == "shared experts up/gate")
    assert shared.cost.bytes["hbm"] == pytest.approx((256 * 7168 + 7168 * 512 + 256 * 256) * 1
                                             + 256 * 7168 + 256 * 256)


def test_training_norms_are_sequence_parallel_and_move_two_forwards():
    tp8 = analyze("llama-3-70b", "h100", train(16, 4096), Parallel(tp=8, dp=1, pp=4,
                                                                   microbatches=16))
    # by hand, per micro-batch of one 4096-token sequence on 20 layers of a stage: each TP
    # rank normalises 4096 / 8 tokens, 4 passes of 8192 x 2 B, forward and backward; two
    # kernels a layer, 16 micro-batches a step; the first layer's attention norm (no add to
    # fuse) is a row of its own
    per_kernel = 4096 / 8 * 8192 * 4 * 2 * 2
    assert sum(_norm_bytes(tp8).values()) == pytest.approx(16 * (2 * 20 - 1) * per_kernel)
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


def test_serving_memory_keeps_the_epilogues_output_alone():
    a = analyze("llama-3-70b", "h100", decode(64, 1024), Parallel(tp=8))
    # by hand: 64 tokens x (input + residual, 2 x 8192, and silu(gate)·up, 28672 / 8) x 2 B,
    # plus the fp32 logits of 64 tokens over 128256 / 8 vocabulary columns
    layer = 64 * (2 * 8192 + 28672 / 8) * 2
    assert a.memory.activations_bytes == pytest.approx(layer + 64 * 128256 / 8 * 4)
