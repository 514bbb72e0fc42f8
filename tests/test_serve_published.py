"""Published serving results (benchmarks/validation/systems.csv, kind serving, and decode rows
that are serving-engine runs) reproduced as fixed deployments: measured throughput never
above our bound, measured TTFT / TPOT / E2E never below it. Rows whose model or chip is not
in the catalog, or that lack what a deployment needs, are skipped with the reason."""

import csv
import functools
import math
import re
from pathlib import Path

import pytest

from roofline.dtypes import dtype
from roofline.errors import RooflineError
from roofline.hardware import load_chip
from roofline.models import list_models, load_model, model_precision
from roofline.serve import Load, Space, Workload, plan

ROWS = Path(__file__).resolve().parents[1] / "benchmarks" / "validation" / "systems.csv"
ENGINES = ("vllm", "sglang", "tensorrt")  # serving engines (not gpt-fast / torchao generate)
THROUGHPUT = {"output_tokens_per_s": "output_tokens_per_s",
              "output_tokens_per_s_per_gpu": "output_tokens_per_s_per_chip",
              "total_tokens_per_s": "total_tokens_per_s"}
LATENCY = {"ttft_ms": ("ttft_s", 1e-3), "tpot_ms": ("tpot_s", 1e-3),
           "e2e_latency_s": ("e2e_s", 1.0)}
# checkpoint name -> catalog id (an explicit table: a wrong guess must not pass silently)
MODELS = [(r"llama-3\.1-8b", "llama-3.1-8b"), (r"llama-3\.3-70b", "llama-3.3-70b"),
          (r"llama-3\.1-405b", "llama-3.1-405b"), (r"llama-2-70b", "llama-2-70b"),
          (r"deepseek-r1", "deepseek-r1"), (r"deepseek-v3(?!\.)", "deepseek-v3"),
          (r"gpt-oss-120b", "gpt-oss-120b"), (r"qwen3-235b-a22b", "qwen3-235b-a22b"),
          (r"kimi-k2", "kimi-k2")]


def _params(row):
    return dict(p.split("=", 1) for p in row["params"].split(";") if "=" in p)


def _dtype(text):
    """The narrowest dtype named (a mixed checkpoint's narrowest keeps the bound a bound)."""
    text = text.lower()
    for name in ("nvfp4", "mxfp4", "int4", "fp8", "float8", "int8", "fp16", "bf16"):
        if name in text:
            return {"float8": "fp8"}.get(name, name)
    return None


def _case(row):
    """(deployment, None) or (None, why it is skipped)."""
    p = _params(row)
    fw = p.get("framework", "").lower()
    if not fw.startswith(ENGINES):
        return None, f"{fw or 'no framework'}: not a serving engine run"
    model = next((cid for pat, cid in MODELS if re.search(pat, p.get("model", "").lower())),
                 None)
    if model is None or model not in list_models():
        return None, f"model {p.get('model')!r} is not in the catalog"
    try:
        chip = load_chip(row["chip"]).id
    except RooflineError:
        return None, f"chip {row['chip']!r} is not in the catalog"
    ins, outs = p.get("input_len", p.get("prompt_len")), p.get("output_len")
    if ins is None or outs is None:
        return None, "input or output length not stated"
    if row["metric"] not in THROUGHPUT and row["metric"] not in LATENCY and \
            row["metric"] != "tokens_per_s":
        return None, f"metric {row['metric']} is not a serving figure"
    pp, tp = int(p.get("pp", 1)), int(p.get("tp", 1))
    # unstated data parallelism: the row's chips (MoE: attention DP with experts over all)
    dp = int(p.get("attention_dp", p.get("dp", max(1, int(row["n_chips"]) // (tp * pp)))))
    spec = load_model(model)
    ep = int(p["ep"]) if p.get("ep", "").isdigit() else (tp * dp if spec.moe else 1)
    mtp = int(p.get("mtp", p.get("speculate_k", 0)) or 0)
    stated = _dtype(p.get("weight_dtype", "")) or _dtype(p.get("dtype", "")) or "bf16"
    # the engine loads the checkpoint: its own dtype where it is narrower (Kimi-K2 ships fp8)
    weights = min(stated, model_precision(spec).weights, key=lambda d: dtype(d).bits)
    load = p.get("concurrency", p.get("batch"))
    return dict(model=model, chip=chip, input_len=float(ins), output_len=float(outs), tp=tp,
                pp=pp, dp=dp, ep=ep, weights=weights,
                kv=_dtype(p.get("kv_dtype", "")) or "fp8", spec_k=mtp,
                concurrency=int(load) if load else None,
                disagg="disagg" in fw, metric=row["metric"], value=float(row["value"])), None


@functools.cache
def _bound(model, chip, input_len, output_len, tp, pp, dp, ep, weights, kv, spec_k,
           concurrency, disagg):
    w = Workload.from_lengths(input_len, output_len, spec_k=spec_k, accept=1.0 if spec_k else 0)
    space = Space(tp=(tp,), pp=(pp,), dp=(dp,), ep=(ep,), weight_dtypes=(weights,),
                  kv_dtypes=(kv,), chunks=(512, 2048, 8192, 32768), max_chips=4096,
                  modes=("disaggregated",) if disagg else ("aggregated",))
    return plan(model, [chip], w, space=space, load=Load(concurrency=concurrency))


def ratio(case):
    """measured / bound for a throughput, bound / measured for a latency: <= 1 is consistent."""
    key = {k: case[k] for k in ("model", "chip", "input_len", "output_len", "tp", "pp", "dp",
                                "ep", "weights", "kv", "spec_k", "concurrency", "disagg")}
    c = _bound(**key).columns
    ok = c["fits"] & c["feasible"]
    if not ok.any():
        return math.inf
    m, v = case["metric"], case["value"]
    if m in THROUGHPUT:
        col = c[THROUGHPUT[m]]
        if case["disagg"] and m == "output_tokens_per_s_per_gpu":  # the decode pool's GPUs
            col = c["output_tokens_per_s"] / c["decode_chips"]
        return v / col[ok].max()
    if m == "tokens_per_s":  # tokens/s of one user: 1 / TPOT
        return v * c["tpot_s"][ok].min()
    column, scale = LATENCY[m]
    return c[column][ok].min() / (v * scale)


def cases():
    rows = [r for r in csv.DictReader(ROWS.open()) if r["kind"] in ("serving", "decode")]
    return [(r["id"], *_case(r)) for r in rows]


CASES = cases()


def test_published_serving_results_never_beat_the_bound():
    checked = [(rid, ratio(case)) for rid, case, _ in CASES if case]
    assert len(checked) >= 30
    over = [(rid, round(x, 3)) for rid, x in checked if not x <= 1]
    assert not over, f"published results beyond the bound (a bug): {over}"


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
        assert 0.2 < ratio(case) <= 1
