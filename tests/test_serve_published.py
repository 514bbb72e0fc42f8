"""Published serving results (benchmarks/validation/systems.csv, kind serving, and decode and
prefill rows that are serving-engine runs) reproduced as fixed deployments: measured
throughput never above our bound, measured TTFT / TPOT / E2E never below it. Prefill-only
runs (output_len 1: one forward pass over a static batch of prompts) are bounded by that
pass. Rows whose model or chip is not in the catalog, or that lack what a deployment needs,
are skipped with the reason. The rows and the bound are benchmarks/validation/cases.py's
(`cases.serving_case`, `cases.serving_ratio`, `cases.prefill_case`), the one path check.py
scores the expected time on too."""

import math

import cases  # benchmarks/validation (tests/conftest.py): the rows and the bound, one path
import pytest

# (row id, deployment, "") or (row id, None, why it is skipped)
CASES = [(r.id, *cases.serving_case(r))
         for r in cases.rows(("serving", "decode", "prefill"), cases.SYSTEMS_CSV)]
# prefill-only runs (the serving path leaves them to cases.prefill_case)
PREFILL = [cases.prefill_case(r) for r in cases.rows(("prefill",), cases.SYSTEMS_CSV)
           if cases.serving_case(r)[1].startswith("prefill only")]


def test_published_serving_results_never_beat_the_bound():
    checked = [(rid, cases.serving_ratio(case)) for rid, case, _ in CASES if case]
    assert len(checked) >= 30
    over = [(rid, round(x, 3)) for rid, x in checked if not x <= 1]
    assert not over, f"published results beyond the bound (a bug): {over}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in PREFILL if not c.skip])
def test_published_prefill_passes_never_beat_the_bound(case):
    assert case.ratio <= 1, f"{case.id}: bound / measured TTFT {case.ratio:.3f} (a bug)"


def test_prefill_rows_are_checked():
    # TTFT of serving runs (the serving path) and prefill-only passes (cases.prefill_case)
    prefill_ids = {r.id for r in cases.rows(("prefill",), cases.SYSTEMS_CSV)}
    served = [rid for rid, case, _ in CASES if case and rid in prefill_ids]
    assert len([c for c in PREFILL if not c.skip]) >= 10 and len(served) >= 3
    assert all(c.skip or math.isfinite(c.ratio) for c in PREFILL)
    a100 = next(c for c in PREFILL if c.id == "trt05-llama2-70b-a100-b1-2048-ttft")
    assert 0.2 < a100.ratio <= 1


def test_every_skip_says_why():
    skipped = [(rid, why) for rid, case, why in CASES if case is None]
    assert skipped and all(why for _, why in skipped)
    assert any("not in the catalog" in why for _, why in skipped)


@pytest.mark.parametrize("rid", ["trt-llama31-8b-h100-2048-128", "trt05-h100-gptj-b64-ttft"])
def test_known_rows_are_checked_or_skipped_as_expected(rid):
    case, why = next((c, w) for r, c, w in CASES if r == rid)
    if rid.startswith("trt05-h100-gptj"):
        assert case is None and "gpt-j-6b" in why
    else:
        assert 0.2 < cases.serving_ratio(case) <= 1


def test_inferencemax_rows_take_the_recorded_expert_parallel_size():
    """An InferenceMAX record names its EP size (`ep=1`: experts sharded by TP, the engines'
    default): gpt-oss at TP 8 on B200 reads ep 1; a row that states nothing spreads an MoE's
    experts over all its chips."""
    found = {rid: case for rid, case, _ in CASES if case}
    assert found["imax-b200-vllm-gptoss-fp4-1k1k-c4-intvty"]["ep"] == 1
    assert found["trt-qwen3-235b-h200-tp8-128-128"]["ep"] == 8


def test_unpublished_draft_acceptance_is_deepseeks_in_the_forecast_only():
    """MTP rows: the bound takes every draft accepted; the expected time DeepSeek-V3's 85%
    per draft, so fewer tokens per step and a slower forecast (3 drafts: 1 + .85 + .85^2 +
    .85^3 = 3.19 tokens a step, not 4)."""
    from roofline.serve import spec_tokens_per_step

    assert cases.MTP_ACCEPT == 0.85
    assert spec_tokens_per_step(3, cases.MTP_ACCEPT) == pytest.approx(3.186625)
    case = next(c for rid, c, _ in CASES if rid == "imax-gb200-dynamo-trt-dsr1-fp4-1k1k-c4-"
                "intvty-mtp")
    key = {k: case[k] for k in ("model", "chip", "input_len", "output_len", "tp", "pp", "dp",
                                "ep", "weights", "kv", "spec_k", "concurrency", "disagg")}
    tpot = {a: cases.serve_plan(**key, expect=True, accept=a).columns["tpot_s"].min()
            for a in (1.0, cases.MTP_ACCEPT)}
    assert tpot[cases.MTP_ACCEPT] > tpot[1.0]
def test_unstated_expert_parallelism_follows_the_engines_default():
    # vLLM shards each expert over TP unless --enable-expert-parallel: ep 1 where the row
    # states none; an EP it states is kept; SGLang rows keep EP = TP (see cases.py)
    found = {rid: case for rid, case, _ in CASES if case}
    vllm = found["imax-h100-sxm-vllm-gptoss-fp4-1k1k-c4-intvty"]
    assert vllm["framework"] == "vllm" and vllm["tp"] == 8 and vllm["ep"] == 1
    stated = found["vllm-dsr1-gb300-mixed-2k1k"]
    assert stated["ep"] == 2
    sglang = found["sglcb-dsr1-c1-610in421out-tpot"]
    assert sglang["framework"] == "sglang" and sglang["ep"] == sglang["tp"] * sglang["dp"] == 8
    assert found["gpustack-vllm-qwen3-8b-h100-c1-tpot"]["ep"] == 1  # dense: no experts
