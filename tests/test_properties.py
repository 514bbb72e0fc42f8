"""Physical invariants on random inputs (hypothesis): whatever the shapes and the chip, a
bound obeys the physics. Each property fails on a real defect (a swapped max/sum, a formula
that shrinks with more work, a sweep that drifts from single runs, a NaN in JSON)."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import attention, elementwise, evaluate, list_chips, load_chip, matmul
from roofline.models import Parallel, analyze, decode, load_model, prefill, train
from roofline.sweep import sweep_model

FAST = settings(max_examples=25, deadline=None)  # each file stays well under 20 s
MODELS = ["llama-3-8b", "mixtral-8x7b", "qwen3-30b-a3b", "gemma-2-9b", "gpt2", "deepseek-v3"]


@cache
def _chip(chip_id):
    return load_chip(chip_id)


chips = st.sampled_from(list_chips()).map(_chip)
dims = st.integers(1, 2**16)


def _op(draw, chip):
    """A matmul, an attention or an elementwise op, in a dtype the chip has a peak for."""
    dtype = draw(st.sampled_from(sorted(set(chip.peaks) & {"bf16", "fp16", "fp8", "fp32"})))
    kind = draw(st.sampled_from(["matmul", "attention", "elementwise"]))
    if kind == "matmul":
        return matmul(draw(dims), draw(dims), draw(dims), dtype=dtype)
    if kind == "attention":
        heads, q_len = draw(st.sampled_from([8, 32, 64])), draw(st.integers(1, 4096))
        return attention(draw(st.integers(1, 64)), q_len, q_len + draw(st.integers(0, 2**17)),
                         heads, heads // draw(st.sampled_from([1, 8])), 128, impl="naive",
                         dtype=dtype)
    return elementwise(draw(st.integers(1, 2**30)), draw(st.sampled_from(
        ["generic", "rmsnorm", "softmax", "silu"])), dtype=dtype)


@st.composite
def costs(draw, ops=1):
    """(cost, ..., chip): `ops` random ops for one random catalog chip."""
    chip = draw(chips)
    return (*(_op(draw, chip) for _ in range(ops)), chip)


@FAST
@given(costs())
def test_lower_bound_never_exceeds_upper(case):
    cost, chip = case
    est = evaluate(cost, chip)
    times = [float(t) for t in est.time_s.values()]
    assert max(times) == pytest.approx(float(est.t_lower_s))
    assert float(est.t_lower_s) <= float(est.t_upper_s) <= len(times) * float(est.t_lower_s) \
        * (1 + 1e-12)


@FAST
@given(costs(), st.floats(1.0, 1e3))
def test_more_bandwidth_or_compute_is_never_slower(case, factor):
    cost, chip = case
    hbm = chip.memory[0]
    faster_memory = replace(chip, memory=(replace(hbm, bandwidth_Bps=hbm.bandwidth_Bps * factor),
                                          *chip.memory[1:]))
    faster_compute = replace(chip, peaks={k: replace(p, flops_per_s=p.flops_per_s * factor)
                                          for k, p in chip.peaks.items()})
    base = evaluate(cost, chip)
    for better in (faster_memory, faster_compute):
        est = evaluate(cost, better)
        assert float(est.t_lower_s) <= float(base.t_lower_s) * (1 + 1e-12)
        assert float(est.t_upper_s) <= float(base.t_upper_s) * (1 + 1e-12)


@FAST
@given(costs(ops=2))
def test_adding_work_is_never_faster(case):
    first, second, chip = case
    alone = evaluate(first, chip)
    both = evaluate(first + second, chip)
    assert float(both.t_lower_s) >= float(alone.t_lower_s) * (1 - 1e-12)
    assert float(both.t_upper_s) >= float(alone.t_upper_s) * (1 - 1e-12)


@FAST
@given(dims, dims, dims, st.sampled_from(["bf16", "fp8", "int4-g128"]))
def test_matmul_flops_linear_and_bytes_affine_in_batch(m, k, n, weights):
    c = matmul(np.array([m, 2 * m, 3 * m]), k, n, weight_dtype=weights)
    flops = np.asarray(c.total_flops, dtype=float)
    np.testing.assert_allclose(flops, flops[0] * np.array([1, 2, 3]), rtol=1e-12)
    hbm = np.asarray(c.bytes["hbm"], dtype=float)  # weights once, activations per row
    assert hbm[2] - hbm[1] == pytest.approx(hbm[1] - hbm[0], rel=1e-9)
    assert hbm[1] > hbm[0]


@FAST
@given(st.sampled_from(MODELS), st.sampled_from(["h100", "mi300x", "tpu-v5e", "b200"]))
def test_decode_time_grows_with_context_and_batch(model, hw):
    batch = np.array([1, 2, 8, 32, 128])[:, None]
    context = np.array([128, 1024, 8192, 32768])[None, :]
    t = np.asarray(analyze(model, hw, decode(batch, context)).t_lower_s, dtype=float)
    t = np.broadcast_to(t, (5, 4))
    assert np.all(np.diff(t, axis=0) >= -1e-15 * t[1:]), "a larger batch was faster"
    assert np.all(np.diff(t, axis=1) >= -1e-15 * t[:, 1:]), "a longer context was faster"


@FAST
@given(st.sampled_from(MODELS), st.sampled_from(["decode", "prefill", "train"]))
def test_more_tensor_parallelism_never_more_weight_bytes_per_chip(model, kind):
    phase = {"decode": decode(8, 2048), "prefill": prefill(2, 1024), "train": train(8, 1024)}
    heads = load_model(model).heads
    weights = []
    for tp in (t for t in (1, 2, 4, 8) if heads % t == 0):  # gpt2 has 12 heads
        a = analyze(model, "h100", phase[kind], Parallel(tp=tp))
        weights.append(float(a.memory.weights_bytes))
    assert all(b <= a * (1 + 1e-12) for a, b in pairwise(weights))
    assert weights[-1] < weights[0]


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["llama-3-8b", "mixtral-8x7b"]), st.sampled_from(["decode", "prefill"]),
       st.lists(st.sampled_from([1, 4, 16, 64]), min_size=1, max_size=3, unique=True),
       st.sampled_from([1, 2]), st.data())
def test_sweep_rows_equal_single_runs(model, kind, batches, tp, data):
    lengths = [512, 4096]
    result = sweep_model(model, ["h100", "mi300x"], kind, batches, lengths, tp=(tp,))
    i = data.draw(st.integers(0, len(result) - 1))
    row = result.row(i)
    phase = (decode if kind == "decode" else prefill)(row["batch"], row["length"])
    single = analyze(model, row["hardware"], phase, Parallel(tp=tp))
    assert row["t_lower_s"] == pytest.approx(float(single.t_lower_s), rel=1e-12)
    assert row["tokens_per_s"] == pytest.approx(float(single.tokens_per_s), rel=1e-12)
    assert row["memory_bytes"] == pytest.approx(float(single.memory.total_bytes), rel=1e-12)
    assert row["bound"] == single.bound and row["fits"] == bool(single.memory.fits)


def _strict_json(data):
    return json.dumps(data, allow_nan=False)  # raises on NaN / Infinity


@FAST
@given(costs())
def test_estimate_json_never_holds_nan_or_infinity(case):
    cost, chip = case
    _strict_json(evaluate(cost, chip).to_dict())
    _strict_json(evaluate(cost * 0, chip).to_dict())  # no work at all: ratios 0/0


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["decode", "prefill", "train"]),
       st.sampled_from(["h100", "tpu-v5e", "l40s"]))
def test_model_json_never_holds_nan_or_infinity(model, kind, hw):
    phase = {"decode": decode(4, 1024), "prefill": prefill(1, 512), "train": train(4, 512)}
    _strict_json(analyze(model, hw, phase[kind]).to_dict())
