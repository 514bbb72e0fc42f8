"""Speed benchmarks with targets. Run: python benchmarks/run.py  (after pip install -e .)

Prints one table: the median of repeated runs for each case, its target, and pass/fail; the
exit status is 1 when any case misses its target (or fails), so CI can gate on it.
Targets are for the 2-core machines this project runs on; timed here, not in unit tests.

    python benchmarks/run.py [--only TEXT] [--target-scale X]

`--only` keeps the cases whose name contains TEXT; `--target-scale` multiplies every target
(0 makes every target impossible: a check that the exit status reports a miss).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

import roofline as rl
from roofline.models import Parallel, analyze, decode, prefill
from roofline.sweep import sweep_model

Case = tuple[str, float, int, Callable[[], object]]  # name, target (s), repeats, work


def timed(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm caches (catalog files, imports)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def cli(*args: str) -> Callable[[], object]:
    return lambda: subprocess.run([sys.executable, "-m", "roofline", *args], check=True,
                                  capture_output=True)


def cases() -> list[Case]:
    batch = np.arange(1, 1001)[:, None]
    context = np.geomspace(128, 131072, 1000).round()[None, :]
    return [
        ("one op estimate (matmul on H100)", 1e-3, 200,
         lambda: rl.evaluate(rl.matmul(128, 8192, 8192), "h100")),
        ("whole model: Llama-3-70B decode, TP 4", 5e-3, 50,
         lambda: analyze("llama-3-70b", "h100", decode(64, 8192), Parallel(tp=4))),
        ("whole model: DeepSeek-V3 prefill, 64 chips", 5e-3, 50,
         lambda: analyze("deepseek-v3", "h100", prefill(8, 4096), Parallel(tp=8, dp=8, ep=64))),
        ("1,000,000-point sweep (batch x context)", 1.0, 5,
         lambda: sweep_model("llama-3-70b", ["h100"], "decode", batch[:, 0], context[0],
                             tp=[4])),
        ("CLI cold start: roofline --help", 0.5, 5, cli("--help")),
        ("CLI cold start: roofline op matmul --json", 0.5, 5,
         cli("op", "matmul", "--m", "128", "--k", "8192", "--n", "8192", "--json")),
    ]


def run(selected: Sequence[Case], scale: float = 1.0) -> int:
    """Time each case, print the table; the number of cases that missed (or failed)."""
    rows, failed = [], 0
    for name, target, repeats, fn in selected:
        target *= scale
        try:
            t = timed(fn, repeats)
        except Exception as exc:  # a broken case is a miss, reported, not a traceback
            failed += 1
            rows.append((name, "-", f"< {target * 1e3:g} ms", f"ERROR {type(exc).__name__}"))
            continue
        ok = t <= target
        failed += not ok
        rows.append((name, f"{t * 1e3:9.2f} ms", f"< {target * 1e3:g} ms", "ok" if ok else "SLOW"))
    width = max([len(r[0]) for r in rows] + [4])
    print(f"{'case'.ljust(width)}  {'median':>12}  {'target':>10}  result")
    for name, t, target, result in rows:
        print(f"{name.ljust(width)}  {t:>12}  {target:>10}  {result}")
    if failed:
        print(f"{failed} of {len(rows)} cases missed their target", file=sys.stderr)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    parser.add_argument("--target-scale", type=float, default=1.0, dest="scale",
                        help="multiply every target (0: every target impossible)")
    args = parser.parse_args(argv)
    selected = [c for c in cases() if args.only in c[0]]
    if not selected:
        parser.error(f"--only: no case contains {args.only!r}")
    return 1 if run(selected, args.scale) else 0


if __name__ == "__main__":
    sys.exit(main())
