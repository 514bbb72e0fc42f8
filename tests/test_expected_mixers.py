"""The expected time of chunked linear attention (its sequential recurrence over few CTAs, its
kernel family's figure), of MoE grouped GEMMs (whole tiles per expert) and a served request's
own cost in its TTFT (expect.physics, expect.kernels, expect.table, serve.plan)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline import load_chip
from roofline.expect import expected
from roofline.expect.kernels import linear_kind
from roofline.expect.physics import (
    flashinfer_segments,
    gemm_utilization,
    recurrence_chain,
    recurrence_waves,
    tile_utilization,
)
from roofline.expect.table import DEFAULTS, request_s
from roofline.ops.linear_attention import linear_attention
from roofline.ops.moe import grouped_matmul


def _gdn(batch, length, heads):
    return linear_attention(batch, length, length, heads=heads, key_heads=heads, key_dim=128,
                            value_dim=128, kind="gated_deltanet", conv_dim=1, conv_kernel=1)


def test_the_recurrence_walks_its_chunks_in_waves_of_chains_by_hand():
    chip = load_chip("h200")  # 132 SMs
    # one CTA per (sequence, head) walks ceil(4096 / 64) = 64 chunks: 16 chains, one wave
    assert recurrence_chain(_gdn(1, 4096, 16).op, 132) == (16, 64)
    assert recurrence_waves(_gdn(1, 4096, 16).op, chip) == 64
    assert recurrence_waves(_gdn(4, 4096, 64).op, chip) == 2 * 64  # 256 chains: two waves
    # FLA's state kernel splits d_v = 128 in blocks of 64: twice the chains
    assert recurrence_chain(_gdn(1, 4096, 16).op, 132, "fla") == (32, 64)
    # ... and runs one dot per 64 rows of d_k a step: d_k = 64 steps at half the time
    d64 = linear_attention(2, 32768, 32768, heads=4, key_heads=4, key_dim=64, value_dim=64,
                           kind="gated_deltanet", conv_dim=1, conv_kernel=1).op
    assert recurrence_chain(d64, 132, "fla") == (8, 512 / 2)
    assert recurrence_chain(d64, 132, "flashinfer-fused") == (8, 512)
    # FlashQLA's planner: 8 heads x 512 chunks on 132 SMs -> segments of
    # 2^round(log2(3·sqrt(8·512/132))) = 16 chunks, 32 a sequence, each walked twice
    few = _gdn(1, 32768, 8).op
    assert recurrence_chain(few, 132, "flashqla") == (8 * 32, 2 * 16)
    assert recurrence_waves(few, chip, "flashqla") == 2 * 32  # 256 chains: two waves
    # B·H = 64 fills the machine's planner: no split; SM100 splits only from 192 chunks
    assert recurrence_chain(_gdn(1, 32768, 64).op, 132, "flashqla") == (64, 512)
    assert recurrence_chain(_gdn(1, 8192, 8).op, 148, "flashqla", blackwell=True) == (8, 128)
    assert recurrence_chain(_gdn(1, 8192, 8).op, 132, "flashqla")[0] > 8


def test_flashinfers_context_parallel_plan_by_hand():
    # H100, 132 SMs, h_v = 8: B·H·2 = 16 < 132 splits. 2048 tokens: ceil(2048/512)·8·2 = 64
    # < 132, the short plan: C = sqrt(2048·64) = 362.04 -> 384 (6 chunks), 6 segments; its
    # walk: 2·6 (MN precompute, prefill) + 6 (fixup) = 18 chunk steps over 8·6 = 48 CTAs
    assert flashinfer_segments(1.0, 8.0, 2048.0, 64.0, 132) == (48.0, 18.0)
    # 16384 tokens: 32·8·2 = 512 >= 132, one wave of 132 // 8 = 16 segments: C = 1024
    assert flashinfer_segments(1.0, 8.0, 16384.0, 64.0, 132) == (128.0, 2 * 16 + 16)
    # two sequences of 4096 share the 16 segments: 8 each of 512 tokens
    assert flashinfer_segments(2.0, 8.0, 4096.0, 64.0, 132) == (128.0, 2 * 8 + 8)
    # SM100 splits only below SMs / 4 (148 / 4 = 37): h_v = 40 walks whole; SM90 splits
    # (80 < 132) into 132 // 40 = 3 segments: C = 1366 -> 1536 (24 chunks), 2·24 + 3 steps
    assert flashinfer_segments(1.0, 40.0, 4096.0, 64.0, 148, sm100=True) == (40.0, 64.0)
    assert flashinfer_segments(1.0, 40.0, 4096.0, 64.0, 132) == (120.0, 2 * 24 + 3)
    # a GDDR card: SMs / 3, and a fixup step costs half a chunk step (F/P = 1/2, H <= 16):
    # 8 heads, 2048 tokens on 188 SMs: C = sqrt(2048·64/2) = 256, 8 segments -> 2·4 + 4
    assert flashinfer_segments(1.0, 8.0, 2048.0, 64.0, 188, gddr=True) == (64.0, 12.0)
    # the kernel before the split (flashinfer-fused) walks each (sequence, head) whole
    few = _gdn(1, 32768, 8).op
    assert recurrence_chain(few, 132, "flashinfer-fused") == (8, 512)
    assert recurrence_chain(few, 132, "flashinfer")[1] < 512


def test_a_walk_bounds_a_fused_kernel_and_adds_to_a_separate_one_by_hand():
    chip = load_chip("h200")
    cost = _gdn(1, 32768, 8)
    fig = {k: DEFAULTS[k].value for k in DEFAULTS}
    launch = fig["launch_s"]
    derated = {"compute": cost.flops["bf16"] / chip.peak_flops("bf16"),
               "hbm": cost.bytes["hbm"] / chip.bandwidth_Bps("hbm") / fig["hbm"]}
    for kernel in ("flashinfer", "fla"):
        e = fig[f"linear_attention.{kernel}"]
        roofs = max(derated["compute"] / e, derated["hbm"] / e)
        walk = fig[f"linear_attention_chain_s.{kernel}"] * recurrence_waves(cost.op, chip,
                                                                            kernel)
        t = expected(cost, chip, kernel=kernel).t_s
        if kernel == "fla":  # its own kernel between the others: the times add
            assert t == pytest.approx(roofs + walk + launch, rel=1e-9)
        else:  # fused: the walk and the parallel work overlap
            assert t == pytest.approx(max(roofs, walk) + launch, rel=1e-9)
    # a long lone sequence is the walk's: fewer heads, same time per chunk step
    few, many = expected(_gdn(1, 65536, 8), chip), expected(_gdn(1, 65536, 64), chip)
    assert few.t_s / few.bound.t_lower_s > many.t_s / many.bound.t_lower_s
    assert few.t_s >= few.bound.t_lower_s and many.t_s >= many.bound.t_lower_s


def test_a_linear_kernel_figure_derates_either_roof():
    chip = load_chip("h200")
    assert linear_kind(1) == "linear_attention_decode"
    assert linear_kind(np.array([1.0, 4096.0])) == "linear_attention"  # a chunked point
    assert linear_kind(4096, "mamba2") == "ssd" and linear_kind(1, "mamba2") == \
        "linear_attention_decode"
    # a decode step is HBM-bound: its time is the bytes at the HBM fraction x kernel figure
    step = linear_attention(32, 1, 1000, heads=32, key_heads=32, key_dim=128, value_dim=128,
                            kind="gated_deltanet", conv_dim=1, conv_kernel=1)
    e = expected(step, chip, kernel="tileops")
    fraction = DEFAULTS["hbm"].value * DEFAULTS["linear_attention_decode.tileops"].value
    assert e.efficiency["hbm"] == pytest.approx(fraction)
    assert e.t_s == pytest.approx(step.bytes["hbm"] / (chip.bandwidth_Bps("hbm") * fraction)
                                  + e.overhead_s, rel=1e-9)
    # mamba-ssm's five Triton kernels are expected slower than a fused one, never the bound
    ssd = linear_attention(8, 2048, 2048, heads=80, key_heads=1, key_dim=128, value_dim=64,
                           kind="mamba2", conv_dim=1, conv_kernel=1)
    slow, fused = expected(ssd, chip, kernel="mamba-ssm"), expected(ssd, chip, kernel="tileops")
    assert slow.t_s > fused.t_s >= fused.bound.t_lower_s


def test_a_grouped_gemm_pads_each_experts_rows_to_whole_tiles():
    chip = load_chip("h100")  # 132 SMs
    # 64 tokens x top-8 over 256 experts: ~2.3 tokens per touched expert, a tile of Hopper's
    # 64 MMA rows each (physics.MMA_ROWS)
    g = grouped_matmul(64, 7168, 2048, experts=256, top_k=8)
    m, experts = float(g.op.m), float(g.op.groups)
    assert tile_utilization(g, chip) == pytest.approx(
        float(gemm_utilization(m, 2048, 132, experts, min_rows=64)))
    assert tile_utilization(g, chip) < 0.2  # mostly padding
    # many tokens per expert: whole tiles, nearly no waste
    big = grouped_matmul(65536, 7168, 2048, experts=256, top_k=8)
    assert tile_utilization(big, chip) > 0.9
    assert expected(g, chip).t_s >= expected(g, chip).bound.t_lower_s


def test_a_served_request_pays_its_engines_own_cost_in_its_ttft():
    from roofline.serve import Load, Space, Workload, plan

    assert request_s("sglang")[1].value == DEFAULTS["request_s.sglang"].value > 0
    assert request_s("no-such-engine")[0] == "request_s"
    w = Workload.from_lengths(1024, 128)
    space = Space(tp=(1,), chunks=(8192,))

    def ttft(**kw):
        c = plan("llama-3.1-8b", ["h100"], w, space=space, load=Load(concurrency=1), **kw).columns
        return c["ttft_s"], c

    sglang, c = ttft(expect=True, framework="sglang")
    plain, _ = ttft(expect=True)
    bound, _ = ttft()
    assert np.all(c["request_s"] == DEFAULTS["request_s.sglang"].value)
    # TensorRT-LLM's first token waits its iterations of the running batch beside its own time
    _, trt = ttft(expect=True, framework="tensorrt-llm")
    steps = DEFAULTS["first_token_steps.tensorrt-llm"].value
    assert steps > 0 and DEFAULTS["first_token_steps"].value == 0
    assert np.allclose(trt["request_s"], DEFAULTS["request_s.tensorrt-llm"].value
                       + steps * trt["t_step_s"], rtol=1e-12)
    assert np.all(sglang >= bound)
    # the generic forecast has no per-request cost: its TTFT is its prefill and queue
    assert np.allclose(c["ttft_s"] - c["request_s"], c["prefill_s"] + c["queue_s"]
                       + c["kv_transfer_s"] + c.get("handoff_s", 0.0))
    assert np.all(plain >= bound)


def test_an_engines_burst_share_and_the_generic_one():
    from roofline.serve.burst import IN_STEP, burst_share

    assert burst_share(None) == IN_STEP == DEFAULTS["burst_share"].value
    assert burst_share("no-such-engine") == IN_STEP
    assert burst_share("vllm-0.12.0") == DEFAULTS["burst_share.vllm"].value
    # SGLang pauses decoding for its prefill batches: its clients wait more of the burst
    assert burst_share("sglang") > burst_share("vllm")
    assert all(0 <= burst_share(e) <= 1 for e in ("vllm", "sglang", "tensorrt-llm"))
