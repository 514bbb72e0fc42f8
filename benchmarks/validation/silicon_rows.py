"""NVIDIA's published serving measurements (AIConfigurator's silicon_sample.csv) as fixed
deployments: the rows, their layouts read as AIConfigurator reads them, and the skip reasons.

Source: github.com/ai-dynamo/aiconfigurator (Apache-2.0), commit
095f58a51c4ca8e61b66ec108d86f223f8d559ce, aic-core/src/aiconfigurator_core/systems/
silicon_sample.csv (5,221 rows). silicon.csv here is that file trimmed to the columns used
(`python benchmarks/validation/silicon.py --trim PATH` rewrites it from a copy of the source).

Layout semantics (AIConfigurator's tools/accuracy_regression_testing/predict_silicon_sample.py
passes these fields to `cli_estimate` as they stand): a worker is tp·pp·attention_dp GPUs, with
tp·attention_dp = moe_tp·moe_ep; `batch_size` is per attention-DP rank; the benchmark's
concurrency is `silicon_concurrency=` in `silicon_data_source`. Disaggregated rows need the
prefill / decode batch and worker counts (that script refuses a row without them, as we do).
Known defects of the file, mapped here by the row id where the fields disagree with it:
- rows whose id says `tpX_epY` but whose tp_size (or attention_dp_size) holds X·Y: the worker
  is X GPUs (TensorRT-LLM's tp X with moe_ep Y inside it): tp or attention DP X, moe_ep Y;
- moe_tp x moe_ep with both above 1 is read as stated (roofline's moe_tp); moe_tp over
  attention DP without EP is not modelled and is read as ep = tp x attention DP (the same
  expert bytes per GPU);
- aggregated GB200 rows with tp_size > 8 (DeepSeek-R1 "tp12" ... "tp72"): a GPU count, not a
  layout (TP 12 does not divide 128 heads; the real split over attention DP / EP is unstated):
  skipped.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSV = HERE / "silicon.csv"
SOURCE = ("github.com/ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce:"
          "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv")

STAGE = ("tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
KEEP = ("id", "backend", "backend_version", "model_path", "system", "mode", "isl", "osl",
        "gemm_quant_mode", "moe_quant_mode", *STAGE, "pp_size", "batch_size",
        *(f"{s}_{k}" for s in ("prefill", "decode")
          for k in (*STAGE, "pp_size", "batch_size", "num_workers")))

# checkpoint -> catalog id (explicit: a wrong guess must not pass silently). DeepSeek-V3.1,
# MiniMax-M2.5, Qwen3.5-397B, Kimi-K2.5 (a multimodal K2) and GLM-5 are not in the catalog.
MODELS = {"deepseek-ai/DeepSeek-R1": "deepseek-r1", "nvidia/DeepSeek-R1-NVFP4": "deepseek-r1",
          "deepseek-ai/DeepSeek-V3": "deepseek-v3", "openai/gpt-oss-120b": "gpt-oss-120b",
          "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
          "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
          "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
          "Qwen/Qwen3-32B": "qwen3-32b", "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
          "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b"}
CHIPS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200",
         "b300_sxm": "b300", "gb200": "gb200", "gb300": "gb300"}
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
DTYPES = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4", "int4_wo": "int4"}


@dataclass(frozen=True)
class Layout:
    """One worker: attention tp x dp (attention data parallelism), experts over ep ranks
    (1: tensor-parallel experts). `approx`: why the row's expert split is not exactly it."""

    tp: int
    dp: int
    ep: int
    approx: str = ""
    moe_tp: int = 0  # experts split over moe_tp ranks inside EP (0: implied by ep)

    @property
    def gpus(self) -> int:
        return self.tp * self.dp


@dataclass(frozen=True)
class Case:
    id: str
    engine: str  # roofline's engine name (tensorrt-llm, vllm, sglang)
    system: str  # the CSV's system (h100_sxm, ...)
    chip: str  # catalog chip id
    model: str  # catalog model id
    isl: int
    osl: int
    weights: str  # the narrowest of the GEMM and MoE quant modes (bf16 where unstated)
    concurrency: int  # the benchmark's clients, whole deployment
    clients: int  # clients per worker (aggregated: at most batch_size x attention DP)
    disagg: bool
    layout: Layout  # aggregated: the worker; disaggregated: a decode worker
    prefill: Layout | None = None
    prefill_workers: int = 0
    decode_workers: int = 1
    ttft_ms: float = float("nan")
    tpot_ms: float = float("nan")


def trim(src: Path, dst: Path = CSV) -> int:
    """Write the columns used (plus the concurrency and the measurements, 5 significant
    digits) of the rows of catalog models with their worker counts; the others are counted
    by reason in the header (`trimmed`). Returns the rows written."""
    with src.open(newline="") as f:
        source = list(csv.DictReader(f))
    dropped: Counter[str] = Counter()
    kept = []
    for r in source:
        why = _untrimmed(r)
        if why:
            dropped[why] += 1
            continue
        m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"])
        kept.append([r[k] for k in KEEP] + [m.group(1) if m else "", *(
            f"{float(r[k]):.5g}" if r[k] else "" for k in ("silicon_ttft_ms", "silicon_tpot_ms"))])
    with dst.open("w", newline="") as f:
        f.write(f"# {SOURCE} (Apache-2.0): {len(source)} rows, trimmed by "
                "benchmarks/validation/silicon.py --trim\n")
        f.writelines(f"# skipped: {n} {why}\n" for why, n in dropped.most_common())
        w = csv.writer(f, lineterminator="\n")
        w.writerow([*KEEP, "concurrency", "ttft_ms", "tpot_ms"])
        w.writerows(kept)
    return len(kept)


def _untrimmed(r: dict[str, str]) -> str:
    """Why a source row is left out of silicon.csv ("" when kept)."""
    if r["model_path"] not in MODELS:
        return f"model {r['model_path']} not in the catalog"
    if r["mode"] == "disagg" and not (r["prefill_num_workers"] and r["decode_num_workers"]):
        return ("disaggregated: worker counts not stated (AIConfigurator's "
                "predict_silicon_sample.py refuses these too)")
    return ""


def trimmed(path: Path = CSV) -> Counter[str]:
    """The source rows left out of silicon.csv, counted by reason (its header)."""
    out: Counter[str] = Counter()
    with path.open() as f:
        for line in f:
            m = re.match(r"# skipped: (\d+) (.*)", line)
            if m:
                out[m.group(2)] += int(m.group(1))
    return out


def rows(path: Path = CSV) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _int(text: str) -> int:
    return int(text) if text else 0


def layout(r: dict[str, str], stage: str, moe: bool) -> Layout:
    """A worker's layout from the row's fields (`stage`: "", "prefill_" or "decode_"),
    corrected by the id where it says tpX_epY and the fields hold X·Y."""
    tp, adp, mtp, mep = (_int(r[stage + k]) for k in STAGE)
    adp = max(adp, 1)
    m = re.search(r"_tp(\d+)(?:_0)?_ep(\d+)(?:_0)?_", r["id"])
    if m and stage == "" and int(m.group(2)) > 1:
        x, y = int(m.group(1)), int(m.group(2))
        if tp * adp == x * y != x:
            tp, adp, mtp, mep = (1, x, x // y, y) if adp > 1 else (x, 1, x // y, y)
    if not moe:
        return Layout(tp, adp, 1)
    mtp, mep = max(mtp, 1), max(mep, 1)
    if mep == 1 and adp == 1:  # experts tensor-parallel over the tp ranks
        return Layout(tp, adp, 1)
    if mep > 1 and mtp > 1 and mtp * mep == tp * adp:  # expert TP inside EP, as stated
        return Layout(tp, adp, mep, moe_tp=mtp)
    why = "" if mtp == 1 and mep == tp * adp else \
        f"moe_tp {mtp} x moe_ep {mep} read as ep {tp * adp} (same expert bytes per GPU)"
    return Layout(tp, adp, tp * adp, why)


def case(r: dict[str, str]) -> tuple[Case | None, str]:
    """(the deployment, "") or (None, why the row is skipped)."""
    from roofline.models import load_model

    model = MODELS.get(r["model_path"])
    if model is None:
        return None, f"model {r['model_path']} not in the catalog"
    if not r["concurrency"]:
        return None, "concurrency not stated"
    if not (r["ttft_ms"] and r["tpot_ms"]):
        return None, "TTFT or TPOT not measured"
    disagg = r["mode"] == "disagg"
    if not disagg and r["system"] == "gb200" and _int(r["tp_size"]) > 8:
        return None, "GB200 tp_size is a GPU count (12-72), not a layout"
    if max(_int(r[k]) for k in ("pp_size", "prefill_pp_size", "decode_pp_size")) > 1:
        return None, "pipeline parallel"
    moe = load_model(model).moe is not None
    modes = [DTYPES[q] for q in (r["gemm_quant_mode"], r["moe_quant_mode"]) if q]
    weights = min(modes, key=lambda d: {"nvfp4": 4, "int4": 4, "fp8": 8}[d]) if modes \
        else "bf16"
    base = dict(id=r["id"], engine=ENGINES[r["backend"]], system=r["system"],
                chip=CHIPS[r["system"]], model=model, isl=int(r["isl"]), osl=int(r["osl"]),
                weights=weights, concurrency=int(r["concurrency"]), disagg=disagg,
                ttft_ms=float(r["ttft_ms"]), tpot_ms=float(r["tpot_ms"]))
    if not disagg:
        lay = layout(r, "", moe)
        # batch_size (per attention-DP rank) below the concurrency: the clients span
        # replicas (Qwen3-32B 15000x500 c416 batch 13: 416 sequences of 15.5k tokens cannot
        # be held by 2 GPUs); the per-worker figure is the conservative reading
        per = _int(r["batch_size"]) * lay.dp or base["concurrency"]
        return Case(layout=lay, clients=min(base["concurrency"], per),  # type: ignore[arg-type]
                    **base), ""
    pb = _int(r["prefill_batch_size"])
    if pb != 1:
        return None, f"disaggregated: prefill batch {pb} (1 prompt per pass modelled)"
    workers = _int(r["decode_num_workers"])
    return Case(layout=layout(r, "decode_", moe),  # type: ignore[arg-type]
                clients=max(1, round(base["concurrency"] / workers)),
                prefill=layout(r, "prefill_", moe),
                prefill_workers=_int(r["prefill_num_workers"]),
                decode_workers=_int(r["decode_num_workers"]), **base), ""
