"""Score the expected time against every published measurement, per kind.

    python benchmarks/validation/check.py          # the table (README)
    python benchmarks/validation/check.py --rows   # every row
    python benchmarks/validation/check.py --fit    # per kind and chip: the median measured /
                                                   # bound on the fit half (the figures fitted)
    python benchmarks/validation/check.py --intervals  # write the forecast's 80% bands
                                                   # (src/roofline/expect/intervals.json)

Per kind: rows, median |measured/expected − 1| over all rows, over the fit half and over the
held-out half, how often the forecast's 80% interval held on the held-out half, and the
largest measured/bound (a bound a measurement beats is a bug: it must
stay <= 1.03). Measured/expected is measured speed over expected speed. The halves are a fixed
split by a hash of the row id (`held_out`): the fitted figures were fitted on the fit half
only, so the held-out error is what a new measurement should expect.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases

BOUND_LIMIT = 1.03


def held_out(row_id: str) -> bool:
    """The fixed split: a row is held out when the first byte of sha256(id) is odd."""
    return hashlib.sha256(row_id.encode()).digest()[0] % 2 == 1


def error(r: cases.Scored) -> float:
    return abs(r.expected - 1.0)


def median(values: Iterable[float]) -> float:
    v = list(values)
    return statistics.median(v) if v else float("nan")


def summary(scored: list[cases.Scored]
            ) -> list[tuple[str, int, float, float, float, float, float]]:
    """Per kind (then 'all'): rows, median error (all, fit half, held out), the held-out
    coverage of the 80% interval, max measured/bound."""
    kinds = list(dict.fromkeys(r.kind for r in scored))
    bands = intervals(scored)
    out = []
    for kind in [*kinds, "all"]:
        rs = [r for r in scored if kind in ("all", r.kind)]
        out.append((kind, len(rs), median(map(error, rs)),
                    median(error(r) for r in rs if not held_out(r.id)),
                    median(error(r) for r in rs if held_out(r.id)),
                    bands[kind]["held_out_coverage"] if kind in bands else
                    coverage([r for r in rs if held_out(r.id)], bands),
                    max(r.bound for r in rs)))
    return out


def table(scored: list[cases.Scored]) -> str:
    lines = ["| kind | rows | median \\|measured/expected − 1\\| | fit half | held-out half "
             "| 80% interval held (held-out) | max measured/bound |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {k} | {n} | {100 * e:.1f}% | {100 * f:.1f}% | {100 * h:.1f}% | "
              f"{100 * c:.0f}% | {b:.2f} |" for k, n, e, f, h, c, b in summary(scored)]
    return "\n".join(lines)


# --- the forecast's 80% interval (roofline.expect.interval) ----------------------------------

FEWEST = 9  # rows a kind needs for its own band: ranks 1 and 9 of 9 bound the 10th-90th


def log_ratio(r: cases.Scored) -> float:
    """log(measured time / expected time): r.expected is measured over expected speed."""
    return -math.log(r.expected)


def band(ratios: list[float]) -> tuple[float, float] | None:
    """The split-conformal 10th and 90th percentile of log ratios: the ⌊0.1(n+1)⌋-th and
    ⌈0.9(n+1)⌉-th smallest (None: too few rows for both ranks)."""
    ordered, n = sorted(ratios), len(ratios)
    lo, hi = math.floor(0.1 * (n + 1)), math.ceil(0.9 * (n + 1))
    return (ordered[lo - 1], ordered[hi - 1]) if lo >= 1 and hi <= n else None


def coverage(rows: list[cases.Scored], bands: dict[str, dict[str, float]]) -> float:
    """The share of `rows` whose measured time falls inside their kind's band."""
    inside, counted = 0, 0
    for r in rows:
        b = bands.get(r.kind, bands.get("all"))
        if b is not None:  # (too few rows for any band: not counted)
            counted += 1
            inside += math.log(b["p10_ratio"]) <= log_ratio(r) <= math.log(b["p90_ratio"])
    return inside / counted if counted else float("nan")


def intervals(scored: list[cases.Scored]) -> dict[str, dict[str, float]]:
    """Per kind with enough fit-half rows (and 'all'): the band as ratios of measured /
    expected time, its fit-half rows and its coverage of the kind's held-out half."""
    out: dict[str, dict[str, float]] = {}
    kinds = [*dict.fromkeys(r.kind for r in scored), "all"]
    for kind in kinds:
        rs = [r for r in scored if kind in ("all", r.kind)]
        b = band([log_ratio(r) for r in rs if not held_out(r.id)])
        if b is None:
            continue
        held = [r for r in rs if held_out(r.id)]
        inside = [b[0] <= log_ratio(r) <= b[1] for r in held]
        out[kind] = {"p10_ratio": math.exp(b[0]), "p90_ratio": math.exp(b[1]),
                     "rows": sum(not held_out(r.id) for r in rs),
                     "held_out_coverage": sum(inside) / len(inside) if inside else float("nan")}
    return out


def write_intervals(scored: list[cases.Scored]) -> Path:
    path = Path(__file__).resolve().parents[2] / "src/roofline/expect/intervals.json"
    data = {"about": "80% bands of the expected time: measured / expected time, split-conformal "
                     "10th and 90th percentile over the fit half of benchmarks/validation; "
                     "written by `python benchmarks/validation/check.py --intervals`",
            "kinds": {k: {key: round(v, 6) for key, v in b.items()}
                      for k, b in intervals(scored).items()}}
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--fit", action="store_true", help="median measured/bound of the fit "
                        "half per kind and chip")
    parser.add_argument("--intervals", action="store_true", help="write the 80%% bands of the "
                        "expected time (src/roofline/expect/intervals.json)")
    args = parser.parse_args(argv)
    scored, skipped = cases.scored()
    if args.intervals:
        print(f"wrote {write_intervals(scored)}")
    if args.rows:
        for r in sorted(scored, key=lambda r: (r.kind, r.id)):
            half = "held-out" if held_out(r.id) else "fit"
            print(f"{r.kind:14} {r.id:55} {r.chip:16} {half:8} bound {r.bound:.3f} "
                  f"expected {r.expected:.3f}")
    if args.fit:
        groups: dict[tuple[str, str], list[float]] = {}
        for r in scored:
            if not held_out(r.id):
                groups.setdefault((r.kind, r.chip), []).append(r.bound)
        for (kind, chip), ratios in sorted(groups.items()):
            print(f"{kind:14} {chip:16} n={len(ratios):3} median measured/bound "
                  f"{median(ratios):.3f}")
    print(table(scored))
    print(f"\n{len(scored)} rows scored, {len(skipped)} skipped (chip, model or size not "
          "in the catalog or not published)")
    beaten = beating(scored)
    print(*beaten, sep="\n")  # last, where a failing run's reader looks
    return 1 if beaten else 0


def beating(scored: list[cases.Scored]) -> list[str]:
    """Why the check fails: each row whose measurement beats its bound past BOUND_LIMIT."""
    bad = sorted((r for r in scored if not r.bound <= BOUND_LIMIT), key=lambda r: -r.bound)
    if not bad:
        return []
    return [f"FAILED: {len(bad)} row(s) beat their bound (measured/bound above the limit "
            f"{BOUND_LIMIT}; a bound a measurement beats is a bug):",
            *(f"  {r.id} ({r.kind}, {r.chip}): measured/bound {r.bound:.3f} > {BOUND_LIMIT}"
              for r in bad)]


if __name__ == "__main__":
    raise SystemExit(main())
