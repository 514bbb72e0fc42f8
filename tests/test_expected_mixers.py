"""The expected time of chunked linear attention (its sequential recurrence over few CTAs, its
kernel family's figure), of MoE grouped GEMMs (whole tiles per expert) and a served request's
own cost in its TTFT (expect.physics, expect.kernels, expect.table, serve.plan)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline import load_chip
from roofline.expect import expected
from roofline.expect.kernels import linear_kind
from roofline.expect.physics import gemm_utilization, tile_utilization
from roofline.expect.table import DEFAULTS, request_s
from roofline.ops.linear_attention import linear_attention
from roofline.ops.moe import grouped_matmul


def _gdn(batch, length, heads):
    return linear_attention(batch, length, length, heads=heads, key_heads=heads, key_dim=128,
                            value_dim=128, kind="gated_deltanet", conv_dim=1, conv_kernel=1)


def test_the_recurrence_runs_one_cta_per_sequence_and_head_by_hand():
    chip = load_chip("h200")  # 132 SMs
    assert tile_utilization(_gdn(1, 4096, 16), chip) == pytest.approx(16 / 132)
    assert tile_utilization(_gdn(4, 4096, 64), chip) == pytest.approx(256 / 264)  # 2 waves
    # fewer heads: fewer busy SMs, the same work per token and head takes longer per token
    few, many = expected(_gdn(1, 8192, 8), chip), expected(_gdn(1, 8192, 64), chip)
    assert few.t_s / few.bound.t_lower_s > many.t_s / many.bound.t_lower_s
    assert few.t_s >= few.bound.t_lower_s and many.t_s >= many.bound.t_lower_s


def test_a_linear_kernel_figure_derates_either_roof():
    chip = load_chip("h200")
    assert linear_kind(1) == "linear_attention_decode"
    assert linear_kind(np.array([1.0, 4096.0])) == "linear_attention"  # a chunked point
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
    # 64 tokens x top-8 over 256 experts: ~2.3 tokens per touched expert, a 16-row tile each
    g = grouped_matmul(64, 7168, 2048, experts=256, top_k=8)
    m, experts = float(g.op.m), float(g.op.groups)
    assert tile_utilization(g, chip) == pytest.approx(
        float(gemm_utilization(m, 2048, 132, experts)))
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
