"""A prefill's expected time: attention at its kernel's operand dtype (expect.op
attention_operands) and one prompt's chunks filling a pipeline (expect.step pipeline_fill)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from roofline import load_chip
from roofline.evaluate import evaluate
from roofline.expect import expected, expected_step
from roofline.expect.physics import attention_operands
from roofline.expect.step import pipeline_fill
from roofline.models import Parallel, Precision, analyze, prefill
from roofline.ops.attention import attention


def test_pipeline_fill_by_hand():
    # no chunking: the whole prompt passes the stages one after another
    assert pipeline_fill(1000, 1000, 4, 0.5) == pytest.approx(4.0)
    assert pipeline_fill(1000, 5000, 4, 0.9) == pytest.approx(4.0)  # a chunk > the prompt
    # token-wise ops only (a = 0): M equal chunks leave (pp - 1) of M slots: 1 + 3/4
    assert pipeline_fill(1000, 250, 4, 0.0) == pytest.approx(1.75)
    # attention only (a = 1): the last quarter holds 1 - (3/4)^2 = 7/16 of the score pairs
    assert pipeline_fill(1000, 250, 4, 1.0) == pytest.approx(1 + 3 * 7 / 16)
    # dynamic chunks hold the first chunk's time (x^2 = 1/16 of the pairs) unless the last
    # quarter-size chunk is longer: 1 - (15/16)^2 = 31/256 > 1/16
    assert pipeline_fill(1000, 250, 4, 1.0, dynamic=True) == pytest.approx(1 + 3 * 31 / 256)
    # one stage: nothing to fill
    assert pipeline_fill(1000, 100, 1, 0.7) == pytest.approx(1.0)
    # vectorized over prompts
    assert np.shape(pipeline_fill(np.array([1e3, 1e4]), 500, 8, 0.5)) == (2,)


def test_smaller_and_dynamic_chunks_fill_the_pipeline_better():
    prompts = 128_000.0
    fixed = [pipeline_fill(prompts, c, 8, 0.8) for c in (65_536, 32_768, 16_384, 8_192)]
    assert all(a > b for a, b in itertools.pairwise(fixed))
    assert pipeline_fill(prompts, 32_768, 8, 0.8, dynamic=True) < fixed[1]


def test_attention_runs_at_its_cache_dtype_where_wider():
    fp4_q = attention(1, 4096, 4096, 32, 8, 128, dtype="fp4", kv_dtype="fp8", block_q=128)
    assert set(attention_operands(fp4_q).flops) == {"fp8"}
    assert attention_operands(fp4_q).flops["fp8"] == fp4_q.flops["fp4"]
    fp8_q = attention(1, 4096, 4096, 32, 8, 128, dtype="fp8", kv_dtype="bf16", block_q=128)
    assert set(attention_operands(fp8_q).flops) == {"bf16"}
    # a narrower cache leaves the queries' dtype (never faster than the bound's)
    bf16_q = attention(1, 4096, 4096, 32, 8, 128, dtype="bf16", kv_dtype="fp8", block_q=128)
    assert attention_operands(bf16_q) is bf16_q
    chip = load_chip("h100")
    slow = expected(fp8_q, chip)
    assert slow.t_s >= evaluate(fp8_q, chip).t_lower_s
    same = attention(1, 4096, 4096, 32, 8, 128, dtype="bf16", block_q=128)
    assert slow.t_s == pytest.approx(expected(same, chip).t_s, rel=0.05)


def test_pipelined_prefill_forecast_stays_above_the_bound():
    a = analyze("llama-3-8b", "h100", prefill(1, 32_768), Parallel(pp=4),
                Precision(weights="bf16", activations="bf16"))
    full = expected_step(a, "h100")
    serial = expected_step(a, "h100", prefill_chunk=32_768)
    chunked = expected_step(a, "h100", prefill_chunk=4096, dynamic_chunks=True)
    assert serial.t_s == pytest.approx(4 * full.t_s)
    assert a.t_lower_s <= full.t_s < chunked.t_s < serial.t_s
