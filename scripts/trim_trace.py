"""Trim a Kineto trace to one ProfilerStep (the test data in tests/data/profile was made so).

    python scripts/trim_trace.py IN.json.gz OUT.json.gz --step N

Keeps the metadata ('M') events, the CPU ops, annotations and runtime calls that start inside
ProfilerStep#N's CPU span, and the GPU kernels / copies / fills those runtime calls launched
(same correlation); drops flow arrows (ac2g) and every other category. Event fields are kept
as they were; only events are removed.
"""

from __future__ import annotations

import argparse
import gzip
import json

KEEP_CPU = {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver"}
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}


def trim(data: dict, step: int) -> dict:
    events = data["traceEvents"]
    marks = [e for e in events if e.get("name") == f"ProfilerStep#{step}"]
    if not marks:
        raise SystemExit(f"no ProfilerStep#{step}")
    start, end = marks[0]["ts"], marks[0]["ts"] + marks[0]["dur"]
    cpu = [e for e in events if e.get("cat") in KEEP_CPU and start <= e.get("ts", -1) <= end]
    launched = {e["args"]["correlation"] for e in cpu
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get(
                    "args", {})}
    gpu = [e for e in events if e.get("cat") in GPU
           and e.get("args", {}).get("correlation") in launched]
    meta = [e for e in events if e.get("ph") == "M"]
    return {**data, "traceEvents": meta + cpu + gpu}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--step", type=int, required=True)
    a = p.parse_args()
    with gzip.open(a.src, "rt") as f:
        data = json.load(f)
    with gzip.open(a.dst, "wt") as f:
        json.dump(trim(data, a.step), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
