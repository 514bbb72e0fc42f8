"""The expected time of attention kernels: split-KV decode tiles and the softmax that the
tensor-core GEMMs hide only in part (expect.physics, expect.op)."""

from __future__ import annotations

import numpy as np
import pytest

from roofline import load_chip
from roofline.evaluate import COMPUTE, SFU, VECTOR
from roofline.expect import expected
from roofline.expect.physics import attention_waves, split_kv_utilization, tile_utilization
from roofline.expect.table import DEFAULTS
from roofline.ops.attention import attention
from roofline.ops.mla import mla_attention


def test_split_kv_fills_the_machine_by_hand():
    # 32 (batch x head) query blocks on 256 CUs: 8 splits of >= 256 keys each fill one wave
    assert split_kv_utilization(32, 100_000, 256) == 1.0
    # 300 keys allow 2 splits: 64 tiles on 256 units
    assert split_kv_utilization(32, 300, 256) == pytest.approx(64 / 256)
    # 24 blocks on 132 SMs: 5 splits (120 tiles, one wave) beat 6 (144 tiles, two waves)
    assert split_kv_utilization(24, 1e6, 132) == pytest.approx(120 / 132)
    # many blocks: no split needed, the plain waves
    assert split_kv_utilization(1000, 1e6, 132) == pytest.approx(1000 / (8 * 132))
    # vectorized over a sweep
    assert np.shape(split_kv_utilization(np.array([1.0, 32.0]), np.array([1e3, 1e6]), 256)) \
        == (2,)


def test_decode_attention_splits_its_keys_and_prefill_does_not():
    chip = load_chip("mi355x")  # 256 CUs
    long_mla = mla_attention(1, 1, 10_000_000, heads=16, kv_lora_rank=512, qk_rope_dim=64,
                             qk_nope_dim=128, v_head_dim=128, form="absorbed")
    assert tile_utilization(long_mla, chip) == 1.0  # was 16 / 256 without splits
    assert tile_utilization(attention(1, 1, 300, 32, 8, 128, impl="decode"), chip) == 0.25
    prefill = attention(1, 1024, 1024, 8, 8, 128, block_q=128)  # 8 heads x 8 query blocks
    assert tile_utilization(prefill, chip) == pytest.approx(64 / 256)


def test_the_softmax_stays_partly_exposed_by_hand():
    chip = load_chip("h100")
    cost = attention(4, 4096, 4096, 32, 32, 64, block_q=128, causal=False)
    e = expected(cost, chip)
    times = e.derated.time_s
    softmax = max(times.get(SFU, 0.0), times.get(VECTOR, 0.0))
    share = DEFAULTS["softmax_exposed"].value
    # 4 x 32 heads x 32 query blocks = 4096 tiles: 32 waves on 132 SMs, each a pipeline fill
    tiles = DEFAULTS["attention_tile_s"].value * 32
    assert e.t_s == pytest.approx(e.derated.t_lower_s + e.overhead_s
                                  + share * min(times[COMPUTE], softmax) + tiles, rel=1e-12)
    assert "softmax_exposed" in e.sources
    # head dim 64 exposes relatively more softmax than 128: its GEMMs are half as long
    def exposed_share(d: int) -> float:
        one = expected(attention(4, 4096, 4096, 32, 32, d, block_q=128, causal=False), chip)
        return float(one.t_s / (one.derated.t_lower_s + one.overhead_s))
    assert exposed_share(64) > exposed_share(128) > 1.0


def test_vllm_on_mi300x_has_its_own_fitted_factor():
    from roofline.expect.table import figures, lookup_framework

    key, fig = lookup_framework(figures(load_chip("mi300x")), "decode", "vllm")
    assert key == "framework.decode.vllm" and fig.value == 0.52 and "MI300X" in fig.fitted
    _, default = lookup_framework(figures(load_chip("h100")), "decode", "vllm")
    assert default.value == 0.60  # the other platforms' (refitted on 25 fit-half rows)


def test_a_split_kv_decode_runs_a_merge_kernel_too():
    from roofline.expect.physics import kernel_launches

    chip = load_chip("h200")  # 132 SMs
    # one sequence over 8 KV heads: 8 CTAs split their 8k keys, then a merge kernel
    one = attention(1, 1, 8192, 64, 8, 128, impl="decode")
    assert kernel_launches(one, chip) == 2.0
    # 64 sequences x 8 KV heads = 512 CTAs fill the SMs: no split, one kernel
    assert kernel_launches(attention(64, 1, 8192, 64, 8, 128, impl="decode"), chip) == 1.0
    # too few keys to split (one 256-key chunk), a prefill, a backward: one kernel
    assert kernel_launches(attention(1, 1, 256, 64, 8, 128, impl="decode"), chip) == 1.0
    assert kernel_launches(attention(1, 4096, 4096, 64, 8, 128, block_q=128), chip) == 1.0
    # FA3's kvcache decode runs its scheduler kernel first (prepare_varlen_num_blocks): one
    # more launch for a decode, none for its prefill
    assert kernel_launches(one, chip, "fa3") == 3.0
    assert kernel_launches(attention(64, 1, 8192, 64, 8, 128, impl="decode"), chip, "fa3") == 2.0
    assert kernel_launches(attention(1, 4096, 4096, 64, 8, 128, block_q=128), chip, "fa3") == 1.0
    # per point over a sweep of batches
    swept = attention(np.array([1.0, 64.0]), 1, 8192, 64, 8, 128, impl="decode")
    assert list(kernel_launches(swept, chip)) == [2.0, 1.0]
    # the expected time charges both launches, and stays above the bound
    e = expected(one, chip)
    assert e.overhead_s == pytest.approx(2 * DEFAULTS["launch_s"].value)
    assert e.t_s >= e.bound.t_lower_s
    assert expected(one, chip, cuda_graphs=True).overhead_s == pytest.approx(
        2 * DEFAULTS["graph_launch_s"].value)


def test_each_wave_of_prefill_tiles_pays_its_pipeline_fill_by_hand():
    chip = load_chip("h100")  # 132 SMs
    # 2 x 16 heads x ceil(1000 / 128) = 8 query blocks: 256 tiles, two waves
    assert attention_waves(attention(2, 1000, 1000, 16, 16, 128, block_q=128), chip) == 2.0
    # decode (one query block, the split-KV path): none; a TPU's two TensorCores run no CTAs
    assert attention_waves(attention(64, 1, 8192, 64, 8, 128, impl="decode"), chip) == 0.0
    assert attention_waves(attention(2, 1000, 1000, 16, 16, 128, block_q=128),
                           load_chip("tpu-v5p")) == 0.0
    # the backward's tiles are key blocks: 2 x 16 heads x ceil(3000 / 128) = 24 -> 768 tiles,
    # 6 waves, each at the backward's own fill
    from roofline.ops.attention_backward import attention_backward

    bwd = attention_backward(2, 1000, 3000, 16, 16, 128, block_kv=128)
    assert attention_waves(bwd, chip) == 6.0
    e = expected(bwd, chip)
    assert "attention_bwd_tile_s" in e.sources and e.t_s >= e.bound.t_lower_s
    # over a sweep of lengths, per point
    sweep = attention(1, np.array([512.0, 16384.0]), np.array([512.0, 16384.0]), 132, 132, 64,
                      block_q=128)
    assert np.allclose(attention_waves(sweep, chip), [4.0, 128.0])
    # a short sequence loses a larger share of its time to it than a long one
    def share(n: int) -> float:
        e = expected(attention(32, n, n, 16, 16, 128, block_q=128, causal=False), chip)
        fill = DEFAULTS["attention_tile_s"].value * attention_waves(e.bound.cost, chip)
        return float(fill / e.t_s)
    assert share(512) > share(16384) > 0.0
