"""A large Kineto trace for the profile benchmark, made by replicating a real one.

The recsys step in tests/data/profile is repeated with its timestamps shifted by the step's
span and its correlation ids offset, until the JSON text reaches the size asked for. For
the benchmark only: the tests use the real traces as they are.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "profile" / \
    "a100_40gb_recsys_rank3_step1010.json.gz"


def write_big_trace(path: Path, target_bytes: int) -> int:
    """Write a trace of about `target_bytes` of JSON to `path`; returns its size."""
    with gzip.open(SOURCE, "rt") as f:
        data = json.load(f)
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    meta = [e for e in data["traceEvents"] if e.get("ph") != "X"]
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] + e.get("dur", 0) for e in events) - t0 + 1000
    one = len(json.dumps(events, separators=(",", ":")))
    copies = max(1, target_bytes // one)
    with path.open("w") as out:
        out.write(json.dumps({k: v for k, v in data.items() if k != "traceEvents"})[:-1])
        out.write(', "traceEvents": [')
        out.write(",".join(json.dumps(e) for e in meta))
        for i in range(copies):
            shift, offset = i * span, i * 10_000_000
            chunk = []
            for e in events:
                e2 = {**e, "ts": e["ts"] + shift}
                args = e.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e2["args"] = {**args, "correlation": args["correlation"] + offset}
                chunk.append(json.dumps(e2, separators=(",", ":")))
            out.write("," + ",".join(chunk))
        out.write("]}")
    return path.stat().st_size
