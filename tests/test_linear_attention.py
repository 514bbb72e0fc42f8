"""Linear attention (Gated DeltaNet / Mamba-2) and the hybrid Qwen3-Next model built on it."""

from dataclasses import replace

import numpy as np
import pytest

from roofline import RooflineError
from roofline.models import Parallel, Precision, analyze, decode, load_model, prefill
from roofline.models.memory import state_bytes_per_sequence
from roofline.models.step import kv_bytes_per_token_per_layer
from roofline.ops import OPS, linear_attention, recurrent_state_bytes, run_op

QWEN3_NEXT = "qwen3-next-80b-a3b"


def test_state_bytes_by_hand():
    # Qwen3-Next's DeltaNet: 32 value heads x 128 x 128 fp32 = 2 MiB; its convolution keeps
    # 3 inputs of 2·16·128 + 32·128 = 8192 channels in bf16 = 48 KiB
    assert recurrent_state_bytes(32, 128, 128) == 32 * 128 * 128 * 4
    assert recurrent_state_bytes(32, 128, 128, conv_dim=8192, conv_kernel=4) == \
        32 * 128 * 128 * 4 + 8192 * 3 * 2
    # Mamba-2: heads x head_dim x d_state (Nemotron-H 56B: 256 heads, 64, 256)
    assert recurrent_state_bytes(256, 256, 64, "bf16") == 256 * 64 * 256 * 2


def test_decode_reads_and_writes_the_state_once_whatever_the_context():
    short = linear_attention(8, 1, 1024, heads=32, key_heads=16)
    long = linear_attention(8, 1, 1_000_000, heads=32, key_heads=16)
    assert short.bytes == long.bytes and short.flops == long.flops
    state = 8 * recurrent_state_bytes(32, 128, 128, conv_dim=8192, conv_kernel=4)
    io = 8 * (2 * 16 * 128 + 32 * 128 + 2 * 32 + 32 * 128) * 2  # q, k, v, gates in; o out
    assert short.bytes["hbm"] == pytest.approx(2 * state + io)


def test_a_fresh_prompt_only_writes_the_state():
    fresh = linear_attention(1, 4096, heads=32, key_heads=16)
    continued = linear_attention(1, 4096, 8192, heads=32, key_heads=16)
    state = recurrent_state_bytes(32, 128, 128, conv_dim=8192, conv_kernel=4)
    assert continued.bytes["hbm"] - fresh.bytes["hbm"] == pytest.approx(state)


def test_flops_by_hand_and_linear_in_tokens():
    # per token and head: 2·3·dk·dv (state) + 2·min(C, Lq)·(3·dk + 2·dv) (chunk) ; conv 2·4·ch
    c = linear_attention(2, 4096, heads=32, key_heads=16, chunk=64)
    per_head_token = 2 * 3 * 128 * 128 + 2 * 64 * (3 * 128 + 2 * 128)
    conv = 2 * 4 * 8192
    assert c.flops["bf16"] == pytest.approx(2 * 4096 * (32 * per_head_token + conv))
    # past one chunk, the work is linear in the prompt (no quadratic term, unlike attention)
    assert linear_attention(1, 8192).flops["bf16"] == pytest.approx(
        2 * linear_attention(1, 4096).flops["bf16"])
    mamba = linear_attention(1, 1, heads=4, key_dim=8, value_dim=16, kind="mamba2", conv_dim=2,
                             conv_kernel=4)
    assert mamba.flops["bf16"] == pytest.approx(4 * (2 * 2 * 8 * 16 + 2 * (8 + 16)) + 2 * 4 * 2)
    # Mamba-2's C·Bᵀ runs once per group (key_heads = n_groups), its product with X per head
    # (mamba_ssm ssd_combined.py: bmm_chunk_fwd over groups, chunk_scan over heads)
    ssd = linear_attention(1, 512, heads=8, key_heads=1, key_dim=128, value_dim=64,
                           kind="mamba2", chunk=256, conv_dim=1, conv_kernel=1)
    assert ssd.flops["bf16"] == pytest.approx(
        512 * (8 * (2 * 2 * 128 * 64 + 2 * 256 * 64) + 1 * 2 * 256 * 128) + 2 * 512)
    assert ssd.flops["bf16"] < linear_attention(
        1, 512, heads=8, key_heads=8, key_dim=128, value_dim=64, kind="mamba2", chunk=256,
        conv_dim=1, conv_kernel=1).flops["bf16"]


def test_vectorized_over_a_sweep():
    batch = np.array([1, 8, 64])
    c = linear_attention(batch, 1, 4096)
    singles = [linear_attention(b, 1, 4096).bytes["hbm"] for b in batch]
    assert np.allclose(c.bytes["hbm"], singles)


@pytest.mark.parametrize(("kwargs", "needle"), [
    (dict(kind="mamba3"), "unknown linear attention kind 'mamba3'"),
    (dict(q_len=8, kv_len=4), "q_len must not exceed kv_len"),
    (dict(heads=0), "heads: must be a positive"),
])
def test_bad_input_names_the_field(kwargs, needle):
    args = dict(batch=1, q_len=1) | kwargs
    with pytest.raises(RooflineError, match=needle):
        linear_attention(**args)


def test_registered_with_its_own_explain():
    assert "linear-attention" in OPS
    est = run_op("linear-attention", "h100", q_len=1, kv_len=65536, key_heads=16)
    assert est.bound == "hbm"
    names = [t.name for t in est.cost.terms]
    assert any("state bytes" in n for n in names) and "FLOPs" in names


# --- the hybrid model --------------------------------------------------------------------


def test_qwen3_next_layers_are_3_linear_to_1_attention():
    spec = load_model(QWEN3_NEXT)
    kinds = [spec.layer_attention(i)[0] for i in range(spec.layers)]
    assert kinds.count("linear") == 36 and kinds.count("full") == 12
    assert all(kinds[i] == "full" for i in range(3, 48, 4))


def test_hybrid_decode_grows_with_context_only_through_its_attention_layers():
    spec, par, prec = load_model(QWEN3_NEXT), Parallel(), Precision()
    batch = 8
    short = analyze(spec, "h100", decode(batch, 8192), par, prec)
    long = analyze(spec, "h100", decode(batch, 65536), par, prec)
    attention_layers = sum(spec.layer_attention(i)[0] == "full" for i in range(spec.layers))
    kv_growth = attention_layers * batch * (65536 - 8192) * kv_bytes_per_token_per_layer(
        spec, par, prec)
    assert long.bytes["hbm"] - short.bytes["hbm"] == pytest.approx(kv_growth, rel=1e-9)
    by_name = {(op.group, op.name): op for op in short.ops}
    for (group, name), op in by_name.items():
        if "attention" in name and "linear" in group:  # the recurrence: no growth at all
            other = next(o for o in long.ops if (o.group, o.name) == (group, name))
            assert other.hbm_bytes == op.hbm_bytes


def test_hybrid_memory_counts_the_state_not_a_kv_cache():
    spec, par, prec = load_model(QWEN3_NEXT), Parallel(tp=2), Precision()
    a = analyze(spec, "h200", decode(4, 32768), par, prec)
    # only the 12 attention layers cache K/V: 2 KV heads x 256 x 2 (K and V) x 2 B, 1 per rank
    assert a.memory.kv_bytes_per_token == 12 * 1 * 256 * 2 * 2
    per_sequence = 36 * recurrent_state_bytes(16, 128, 128, conv_dim=4096, conv_kernel=4)
    assert state_bytes_per_sequence(spec, par, prec) == per_sequence
    assert a.memory.state_bytes == 4 * per_sequence
    assert a.memory.total_bytes == pytest.approx(
        a.memory.weights_bytes + a.memory.kv_cache_bytes + a.memory.state_bytes
        + a.memory.activations_bytes)


def test_hybrid_refuses_what_it_does_not_model():
    spec = load_model(QWEN3_NEXT)
    odd = replace(spec, linear=replace(spec.linear, key_heads=12))
    with pytest.raises(RooflineError, match="tp \\(8\\) must divide the 12 key and 32 value"):
        analyze(odd, "h100", decode(8, 1024), Parallel(tp=8))
    with pytest.raises(RooflineError, match="context parallelism of linear-attention layers"):
        analyze(spec, "h100", prefill(1, 8192), Parallel(cp=2))
