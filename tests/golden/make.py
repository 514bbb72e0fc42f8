"""The committed golden: a fixed, representative set of the library's numbers.

Regenerate (after a change that is meant to move numbers, then review the diff):

    python tests/golden/make.py

It writes tests/golden/analyses.json; tests/test_golden.py recomputes every entry and
compares it exactly (floats by repr: the same code on the same inputs gives the same bits;
a change anywhere in a fast path shows as the first differing entries).

What it holds: `analyze()` of ~30 (model, chip, phase, parallel, precision) configurations
(dense, GQA, MLA, MoE, hybrid linear attention; prefill, decode, train; TP/PP/DP/EP;
fp8/int4) with the step's times, bound, memory and per-op rows; the `--explain` text of a
few steps and ops; the collectives' "auto" picks and times over sizes x ranks x chips; and
the expected step time with its 80% interval for a few steps.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

PATH = Path(__file__).with_name("analyses.json")

# (name, model, chip, (phase kind, batch, length[, recompute]), Parallel(**), Precision(**))
ANALYSES: list[tuple[str, str, str, tuple[Any, ...], dict[str, Any], dict[str, Any]]] = [
    # dense, multi-head attention
    ("gpt3-decode-tp8", "gpt3-175b", "h100", ("decode", 32, 2048), {"tp": 8}, {}),
    ("llama2-7b-prefill", "llama-2-7b", "a100", ("prefill", 4, 1024), {}, {}),
    ("llama2-7b-train-dp8", "llama-2-7b", "h100", ("train", 64, 4096), {"dp": 8}, {}),
    ("mpt-30b-decode-int4", "mpt-30b", "l40s", ("decode", 16, 4096), {},
     {"weights": "int4"}),
    # dense GQA
    ("llama3-8b-decode", "llama-3-8b", "h100", ("decode", 1, 1024), {}, {}),
    ("llama3-8b-decode-b64-fp8kv", "llama-3-8b", "h100", ("decode", 64, 8192), {},
     {"kv_cache": "fp8"}),
    ("llama3-8b-prefill-mi300x", "llama-3-8b", "mi300x", ("prefill", 8, 4096), {}, {}),
    ("llama3-70b-decode-tp4-fp8", "llama-3-70b", "h100", ("decode", 64, 8192), {"tp": 4},
     {"weights": "fp8", "kv_cache": "fp8"}),
    ("llama3-70b-prefill-tp8", "llama-3-70b", "h100", ("prefill", 1, 8192), {"tp": 8}, {}),
    ("llama3-70b-train-tp8-pp4", "llama-3-70b", "h100", ("train", 64, 4096),
     {"tp": 8, "pp": 4, "microbatches": 16}, {}),
    ("llama3-70b-train-fp8-b200", "llama-3-70b", "b200", ("train", 32, 8192),
     {"tp": 8, "dp": 4}, {"matmul": "fp8"}),
    ("llama3-70b-decode-int4-tp2", "llama-3-70b", "a100", ("decode", 8, 4096), {"tp": 2},
     {"weights": "int4"}),
    ("llama3.1-405b-decode-tp8-pp2", "llama-3.1-405b", "h100", ("decode", 16, 16384),
     {"tp": 8, "pp": 2}, {"weights": "fp8"}),
    ("llama3.1-405b-train-zero3", "llama-3.1-405b", "h100", ("train", 256, 8192),
     {"tp": 8, "pp": 8, "dp": 4, "microbatches": 32, "zero": 3}, {}),
    ("qwen2.5-72b-decode-mi300x", "qwen2.5-72b", "mi300x", ("decode", 128, 4096), {"tp": 2},
     {}),
    ("gemma3-27b-prefill", "gemma-3-27b", "h100", ("prefill", 2, 32768), {"tp": 2}, {}),
    ("gemma3-27b-train-recompute", "gemma-3-27b", "h100", ("train", 16, 4096, True),
     {"tp": 4, "dp": 2}, {}),
    # MoE
    ("mixtral-decode-tp2", "mixtral-8x7b", "h100", ("decode", 32, 4096), {"tp": 2}, {}),
    ("mixtral-prefill-ep4", "mixtral-8x7b", "h100", ("prefill", 8, 2048), {"tp": 1, "dp": 4,
                                                                            "ep": 4}, {}),
    ("mixtral-train-ep8", "mixtral-8x7b", "a100", ("train", 64, 4096), {"dp": 8, "ep": 8},
     {}),
    ("qwen3-30b-a3b-decode-fp8", "qwen3-30b-a3b", "h200", ("decode", 64, 4096), {},
     {"weights": "fp8"}),
    ("qwen3-235b-decode-ep8", "qwen3-235b-a22b", "h100", ("decode", 256, 4096),
     {"tp": 1, "dp": 8, "ep": 8}, {"weights": "fp8"}),
    ("gpt-oss-120b-decode", "gpt-oss-120b", "h100", ("decode", 32, 8192), {},
     {"weights": "fp8"}),
    ("llama4-scout-prefill", "llama-4-scout", "h100", ("prefill", 4, 8192), {"tp": 4}, {}),
    # MLA + MoE
    ("deepseek-v3-decode-ep16", "deepseek-v3", "h100", ("decode", 512, 4096),
     {"tp": 1, "dp": 16, "ep": 16}, {"weights": "fp8", "kv_cache": "fp8"}),
    ("deepseek-v3-prefill-tp8", "deepseek-v3", "h200", ("prefill", 4, 8192), {"tp": 8},
     {"weights": "fp8"}),
    ("deepseek-v3-train-pp-ep", "deepseek-v3", "h100", ("train", 4096, 4096),
     {"tp": 1, "pp": 16, "dp": 128, "ep": 64, "microbatches": 32}, {"matmul": "fp8"}),
    ("kimi-k2-decode-ep32", "kimi-k2", "b200", ("decode", 256, 8192),
     {"tp": 1, "dp": 32, "ep": 32}, {"weights": "fp8"}),
    # hybrid linear attention + MoE
    ("qwen3-next-decode", "qwen3-next-80b-a3b", "h100", ("decode", 64, 32768), {"tp": 2},
     {}),
    ("qwen3-next-prefill-int4", "qwen3-next-80b-a3b", "a100", ("prefill", 2, 16384),
     {"tp": 4}, {"weights": "int4"}),
    ("qwen3-next-train", "qwen3-next-80b-a3b", "h100", ("train", 32, 4096),
     {"tp": 2, "dp": 4, "ep": 4}, {}),
]

EXPLAINED = ("llama3-8b-decode", "deepseek-v3-decode-ep16", "qwen3-next-prefill-int4")
EXPECTED = ("llama3-8b-decode", "llama3-70b-decode-tp4-fp8", "llama3-70b-train-tp8-pp4",
            "deepseek-v3-decode-ep16", "mixtral-prefill-ep4")

COLLECTIVE_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast")
COLLECTIVE_SIZES = (4.0 * 2**10, 256.0 * 2**10, 4.0 * 2**20, 64.0 * 2**20, 1.0 * 2**30)
COLLECTIVE_RANKS = (2, 4, 8, 16, 64)
COLLECTIVE_CHIPS = ("h100", "b200", "mi300x", "tpu-v5p")


def number(x: Any) -> Any:
    """A JSON-safe scalar: floats as themselves (json writes repr), NaN/inf by name."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (str, np.str_)):
        return str(x)
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else repr(v)


def _phase(kind: str, batch: float, length: float, recompute: bool = False) -> Any:
    from roofline.models import decode, prefill, train

    if kind == "train":
        return train(float(batch), float(length), recompute=recompute)
    return {"decode": decode, "prefill": prefill}[kind](float(batch), float(length))


def analysis(name: str) -> Any:
    from roofline.models import Parallel, Precision, analyze

    _, model, chip, phase, par, prec = next(c for c in ANALYSES if c[0] == name)
    return analyze(model, chip, _phase(*phase), Parallel(**par), Precision(**prec))


def analysis_entries(name: str) -> Iterator[tuple[str, Any]]:
    a = analysis(name)
    for field in ("t_floor_s", "t_lower_s", "t_upper_s", "bound", "mfu", "hfu", "flops",
                  "model_flops", "tokens_per_s", "exposed_comm_s", "hidden_comm_s",
                  "bubble_fraction"):
        yield f"{name}/{field}", number(getattr(a, field))
    mem = a.memory
    for field in ("weights_bytes", "kv_cache_bytes", "activations_bytes", "optimizer_bytes",
                  "state_bytes", "total_bytes", "max_batch"):
        yield f"{name}/memory/{field}", number(getattr(mem, field))
    for i, op in enumerate(a.ops):
        yield (f"{name}/ops/{i:02d}",
               [op.group, op.name, number(op.count), number(op.flops), number(op.hbm_bytes),
                number(op.link_bytes), number(op.t_lower_s), number(op.t_upper_s),
                number(op.bound)])


def explain_entries(name: str) -> Iterator[tuple[str, Any]]:
    from roofline.evaluate import evaluate
    from roofline.render.estimate import estimate_text
    from roofline.render.model import model_text

    a = analysis(name)
    yield f"{name}/explain", model_text(a, explain=True).splitlines()
    op = max(a.ops, key=lambda o: float(o.t_lower_s))  # the step's largest op, explained
    yield (f"{name}/explain-op", estimate_text(evaluate(op.cost, a.hardware),
                                               explain=True).splitlines())


def expected_entries(name: str) -> Iterator[tuple[str, Any]]:
    from roofline.expect.step import expected_step

    e = expected_step(analysis(name))
    lo, hi = e.interval("t_s")
    yield f"{name}/expected", [number(e.t_s), number(lo), number(hi), number(e.launch_s)]


def collective_entries(chip_name: str) -> Iterator[tuple[str, Any]]:
    from roofline.evaluate import evaluate
    from roofline.hardware import load_chip
    from roofline.ops.collectives import choose_algorithm, collective

    chip = load_chip(chip_name)
    for kind in COLLECTIVE_KINDS:
        for ranks in COLLECTIVE_RANKS:
            domain = chip.links["scale-up"].domain_size if "scale-up" in chip.links else None
            for nbytes in COLLECTIVE_SIZES:
                algo = "auto" if kind != "all-to-all" else None
                cost = collective(kind, nbytes, ranks, algo=algo, chip=chip,
                                  domain_size=domain)
                est = evaluate(cost, chip)
                pick = choose_algorithm(kind, nbytes, ranks, chip, domain_size=domain) \
                    if kind != "all-to-all" else "direct"
                yield (f"collective/{chip_name}/{kind}/{ranks}/{int(nbytes)}",
                       [str(pick), str(cost.algorithm), number(est.t_lower_s),
                        number(est.t_upper_s), number(est.bound)])
    # each named algorithm, flat and hierarchical (16 ranks: two domains of 8 on 8-GPU boxes)
    for kind, algos in (("all-reduce", ("ring", "tree")), ("all-to-all", ("pairwise",)),
                        ("broadcast", ("ring", "tree"))):
        for algo in algos:
            for ranks in (3, 8, 16):
                cost = collective(kind, 64.0 * 2**20, ranks, algo=algo, chip=chip,
                                  domain_size=8)
                est = evaluate(cost, chip)
                yield (f"collective/{chip_name}/{kind}/{ranks}/{algo}",
                       [str(cost.algorithm), number(est.t_lower_s), number(est.bound)])
    # one vectorised sweep over sizes: the array path picks what the scalar one does
    sizes = np.asarray(COLLECTIVE_SIZES)
    picks = choose_algorithm("all-reduce", sizes, 8, chip)
    times = evaluate(collective("all-reduce", sizes, 8, chip=chip), chip).t_lower_s
    yield (f"collective/{chip_name}/all-reduce/8/sweep",
           [[str(p) for p in np.asarray(picks)], [number(t) for t in np.asarray(times)]])


SECTIONS: list[tuple[str, Callable[[str], Iterator[tuple[str, Any]]], tuple[str, ...]]] = [
    ("analysis", analysis_entries, tuple(c[0] for c in ANALYSES)),
    ("explain", explain_entries, EXPLAINED),
    ("expected", expected_entries, EXPECTED),
    ("collectives", collective_entries, COLLECTIVE_CHIPS),
]


def entries() -> dict[str, Any]:
    """Every golden entry, key -> JSON value (recomputed now)."""
    out: dict[str, Any] = {}
    for _, make, names in SECTIONS:
        for name in names:
            out.update(make(name))
    return out


def dumps(data: dict[str, Any]) -> str:
    """One entry a line (a regenerated golden diffs entry by entry)."""
    lines = (f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in data.items())
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write(path: Path = PATH) -> None:
    path.write_text(dumps(entries()), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PATH)
    print(f"wrote {PATH if len(sys.argv) == 1 else sys.argv[1]}")
