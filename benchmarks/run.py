"""Speed benchmarks as ratios. Run: python benchmarks/run.py  (after pip install -e ".[bench]")

Each case is timed against a reference measured in the same run on the same machine (CPU
time; each repeat runs the case and its reference back to back, and the ratio is the median
of the repeats' ratios) and passes when case / reference is within its target ratio; the
exit status is 1 when any case misses (or fails), so CI can gate on it. A reference whose
package is missing (llm-analysis) skips its case with a message. Timed here, never in the
unit tests.

    python benchmarks/run.py [--only TEXT] [--target-scale X]

`--only` keeps the cases whose name contains TEXT; `--target-scale` multiplies every target
(0 makes every target impossible: a check that the exit status reports a miss).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import decode_floor

from roofline.models import Parallel, analyze, decode
from roofline.sweep import sweep_model

Work = Callable[[], object]


@dataclass(frozen=True)
class Case:
    name: str
    target: float  # the most case / reference may be
    repeats: int
    work: Work
    reference: str  # what the work is compared with
    baseline: Work | None  # None: the reference is not installed (the case is skipped)


class Skip(Exception):
    """A case whose reference cannot run here."""


def cpu_time(fn: Work) -> float:
    """CPU time of one call (this process and its children)."""
    before = _cpu()
    fn()
    return _cpu() - before


def paired(work: Work, reference: Work, repeats: int) -> tuple[float, float, float]:
    """(median ratio, median time, median reference time) over `repeats` pairs, after a
    warm-up call of each. Each pair runs the work and its reference back to back, so a
    change in the machine's state (another process, memory pressure) hits both sides of a
    ratio alike instead of one side's whole series."""
    work(), reference()
    ours, refs = [], []
    for _ in range(repeats):
        ours.append(cpu_time(work))
        refs.append(cpu_time(reference))
    ratios = [a / b if b > 0 else float("inf") for a, b in zip(ours, refs, strict=True)]
    return statistics.median(ratios), statistics.median(ours), statistics.median(refs)


def _cpu() -> float:
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


# Byte-compiled, as the target says and as numpy's installed bytecode already is: a machine
# with PYTHONDONTWRITEBYTECODE would otherwise recompile roofline on every start. The cache
# goes to a temporary folder (PYTHONPYCACHEPREFIX), never into the tree.
_PYCACHE = tempfile.mkdtemp(prefix="roofline-bench-pycache-")
_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "PYTHONPYCACHEPREFIX": _PYCACHE}


def cli(*args: str) -> Work:
    return lambda: subprocess.run([sys.executable, "-m", "roofline", *args], check=True,
                                  capture_output=True, env=_ENV)


def bare_numpy() -> Work:
    return lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True,
                                  capture_output=True, env=_ENV)


def llm_analysis_infer() -> Work | None:
    """llm-analysis's scalar infer() for Llama-2-70B decode on H100, TP 4 (one new token at
    a context of `seq_len`), or None without the package."""
    import importlib.util

    if importlib.util.find_spec("llm_analysis") is None:
        return None
    calls = iter(range(1, 10**9))

    def run() -> object:  # imported on the first call: only when its case is selected
        import logging

        from llm_analysis.analysis import infer

        logging.disable(logging.CRITICAL)  # it logs every call
        b = next(calls) % 64 + 1  # a new configuration each call: nothing to cache
        return infer(model_name="upstage_Llama-2-70b-instruct-v2", gpu_name="h100-sxm-80gb",
                     dtype_name="w16a16e16", batch_size_per_gpu=b, tp_size=4, seq_len=4000,
                     num_tokens_to_generate=1, log_level="CRITICAL")
    return run


def our_analyze() -> Work:
    """One analyze() and the figures infer() also returns (its latency, throughput, FLOPs
    utilization and memory): the ones analyze() computes on first read count too."""
    calls = iter(range(1, 10**9))

    def run() -> object:
        a = analyze("llama-2-70b", "h100", decode(next(calls) % 64 + 1, 4000), Parallel(tp=4))
        return a.t_lower_s, a.tokens_per_s, a.mfu, a.bound, a.memory.total_bytes, a.flops
    return run


def our_forecast() -> Work:
    """analyze() and its expected step (roofline.expect.expected_step) with every interval:
    the forecast path, against analyze() alone (the bound path)."""
    from roofline.expect import expected_step

    calls = iter(range(1, 10**9))

    def run() -> object:
        a = analyze("llama-2-70b", "h100", decode(next(calls) % 64 + 1, 4000), Parallel(tp=4))
        return expected_step(a).figures()
    return run


_BIG: list[Path] = []  # the 100 MB trace, written on first use (only when its case runs)


def _big_trace() -> str:
    if not _BIG:
        from big_trace import write_big_trace

        path = Path(tempfile.mkdtemp(prefix="roofline-bench-")) / "big_trace.json"
        write_big_trace(path, 100_000_000)
        _BIG.append(path)
    return str(_BIG[0])


def profile_big() -> Work:
    """`roofline profile` of a 100 MB Kineto trace (issue 32: < 30 s and < 2 GB; 14 s and
    260 MB measured on the 2-core dev box), against json.load of the same file: the least
    any reader of it must do."""
    return lambda: subprocess.run([sys.executable, "-m", "roofline", "profile", _big_trace(),
                                   "--json"], check=True, capture_output=True, env=_ENV)


def json_load_big() -> Work:
    return lambda: subprocess.run([sys.executable, "-c", "import json, sys; "
                                   "json.load(open(sys.argv[1]))", _big_trace()],
                                  check=True, capture_output=True, env=_ENV)


def cases() -> list[Case]:
    batch = np.arange(1, 1001, dtype=float)
    context = np.geomspace(128, 131072, 1000).round()
    return [
        Case("whole model: Llama-2-70B decode, TP 4 (per call)", 1.0, 200, our_analyze(),
             "llm-analysis infer()", llm_analysis_infer()),
        Case("forecast: analyze + expected_step, Llama-2-70B decode TP 4", 2.0, 200,
             our_forecast(), "analyze() alone", our_analyze()),
        Case("1,000,000-point sweep model (batch x context)", 5.0, 9,
             lambda: sweep_model("llama-3-70b", ["h100"], "decode", batch, context, tp=[4]),
             "closed-form numpy floor", lambda: decode_floor(batch, context)),
        Case("CLI start: roofline --help", 1.5, 5, cli("--help"),
             'python -c "import numpy"', bare_numpy()),
        Case("roofline profile: 100 MB Kineto trace", 5.0, 1, profile_big(),
             "json.load of the same file", json_load_big()),
        Case("CLI start: roofline op matmul --json", 1.5, 5,
             cli("op", "matmul", "--m", "128", "--k", "8192", "--n", "8192", "--json"),
             'python -c "import numpy"', bare_numpy()),
        Case("CLI start to finish: roofline model llama-3-70b decode, TP 4", 1.5, 5,
             cli("model", "llama-3-70b", "--hw", "h100", "--phase", "decode", "--batch", "16",
                 "--context", "4096", "--tp", "4"),
             'python -c "import numpy"', bare_numpy()),
    ]


def run(selected: Sequence[Case], scale: float = 1.0) -> int:
    """Time each case and its reference, print the table; the number of cases that missed
    (or failed)."""
    rows, failed = [], 0
    for case in selected:
        target = case.target * scale
        if case.baseline is None:
            print(f"skipped {case.name!r}: {case.reference} is not installed "
                  "(pip install -e '.[bench]')", file=sys.stderr)
            continue
        try:
            ratio, ours, ref = paired(case.work, case.baseline, case.repeats)
        except Exception as exc:  # a broken case is a miss, reported, not a traceback
            failed += 1
            rows.append((case.name, "-", f"<= {target:g}x", case.reference, "-",
                         f"ERROR {type(exc).__name__}"))
            continue
        ok = ratio <= target
        failed += not ok
        rows.append((case.name, f"{ratio:.2f}x", f"<= {target:g}x", case.reference,
                     f"{ours * 1e3:.3g} ms vs {ref * 1e3:.3g} ms", "ok" if ok else "SLOW"))
    head = ("case", "ratio", "target", "reference", "CPU time", "result")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if failed:
        print(f"{failed} of {len(rows)} cases missed their target", file=sys.stderr)
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    parser.add_argument("--target-scale", type=float, default=1.0, dest="scale",
                        help="multiply every target (0: every target impossible)")
    args = parser.parse_args(argv)
    selected = [c for c in cases() if args.only in c.name]
    if not selected:
        parser.error(f"--only: no case contains {args.only!r}")
    return 1 if run(selected, args.scale) else 0


if __name__ == "__main__":
    sys.exit(main())
