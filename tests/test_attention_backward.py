"""Attention backward (FlashAttention-2 style): FLOPs 2.5x the forward's GEMMs, its IO
against an explicit loop-nest simulation of Algorithm 2."""

import itertools
import math

import pytest

import roofline as rl
from roofline.ops.attention import attention
from roofline.ops.attention_backward import attention_backward


def simulated_bytes(B, Lq, Lkv, H, Hkv, d, dv, s, bc, causal):
    """FA2 backward, loop by loop: outer over K/V blocks, inner over query rows that see it."""
    total = 0.0
    total += 2 * B * Lkv * Hkv * (d + dv) * s  # K, V read; dK, dV written once
    total += 2 * B * Lq * H * dv * s + 2 * B * Lq * H * 4  # O, dO for D; logsumexp and D
    row = d * s + dv * s + 2 * d * 4
    for _b, _h in itertools.product(range(B), range(H)):
        for start in range(0, Lkv, bc):
            keys = range(start, min(start + bc, Lkv))
            for i in range(Lq):
                position = Lkv - Lq + i
                if not causal or any(k <= position for k in keys):
                    total += row
    return total


@pytest.mark.parametrize(("Lq", "Lkv", "causal", "bc"),
                         [(64, 64, False, 16), (48, 64, False, 8), (64, 64, True, 16),
                          (3, 40, True, 7), (40, 40, True, 13)])
def test_traffic_against_the_loop_nest(Lq, Lkv, causal, bc):
    B, H, Hkv, d, dv = 2, 4, 2, 16, 8
    cost = attention_backward(B, Lq, Lkv, H, Hkv, d, dv, causal=causal, block_kv=bc)
    sim = simulated_bytes(B, Lq, Lkv, H, Hkv, d, dv, 2, bc, causal)
    if not causal and Lkv % bc == 0:  # whole blocks: exact
        assert cost.bytes["hbm"] == pytest.approx(sim, rel=1e-12)
    else:  # partly visible blocks load whole rows: the formula never overcounts
        assert cost.bytes["hbm"] <= sim * (1 + 1e-12)
        assert cost.bytes["hbm"] >= 0.5 * sim


@pytest.mark.parametrize("causal", [True, False])
def test_flops_are_two_and_a_half_forwards(causal):
    fwd = attention(2, 1024, 1024, 8, head_dim=128, causal=causal, block_q=128)
    bwd = attention_backward(2, 1024, 1024, 8, head_dim=128, causal=causal, block_kv=128)
    assert bwd.flops["bf16"] == pytest.approx(2.5 * fwd.flops["bf16"], rel=1e-12)
    assert bwd.special_ops == fwd.special_ops  # P recomputed: one exp per score again
    pairs = 1024 * 1024 - (1024 * 1023 / 2 if causal else 0)
    assert bwd.flops["bf16"] == 2 * 2 * 8 * pairs * (3 * 128 + 2 * 128)


def test_kv_block_from_the_sram_budget():
    # the K and V tiles in shared memory (the fp32 dK, dV accumulators in registers / tensor
    # memory): 233472 / (2·(128 + 128)) = 456 keys
    cost = attention_backward(1, 4096, 4096, 8, head_dim=128, sram_bytes=233472)
    assert any(t.render().endswith("= 456") for t in cost.terms)
    est = rl.evaluate(cost, "h100")
    assert math.isfinite(est.t_lower_s) and est.t_lower_s > 0


def test_op_attention_pass_on_the_cli(run_cli):
    import json

    runs = {}
    for direction in ("forward", "backward", "forward-backward"):
        code, out, _ = run_cli("op", "attention", "--q-len", "2048", "--heads", "16",
                               "--pass", direction, "--json")
        assert code == 0
        runs[direction] = json.loads(out)
    f, b, fb = (runs[k]["flops_by_dtype"]["bf16"] for k in ("forward", "backward",
                                                            "forward-backward"))
    assert b == pytest.approx(2.5 * f) and fb == pytest.approx(f + b)
    code, _, err = run_cli("op", "attention", "--q-len", "1", "--kv-len", "9", "--heads", "16",
                           "--impl", "decode", "--pass", "backward")
    assert code == 2 and "--impl flash is the one with a backward pass" in err
