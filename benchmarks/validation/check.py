"""Score the expected time against every published measurement, per kind.

    python benchmarks/validation/check.py          # the table (README)
    python benchmarks/validation/check.py --rows   # every row
    python benchmarks/validation/check.py --fit    # per kind and chip: the median measured /
                                                   # bound on the fit half (the figures fitted)

Per kind: rows, median |measured/expected − 1| over all rows, over the fit half and over the
held-out half, and the largest measured/bound (a bound a measurement beats is a bug: it must
stay <= 1.03). Measured/expected is measured speed over expected speed. The halves are a fixed
split by a hash of the row id (`held_out`): the fitted figures were fitted on the fit half
only, so the held-out error is what a new measurement should expect.
"""

from __future__ import annotations

import argparse
import hashlib
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


def summary(scored: list[cases.Scored]) -> list[tuple[str, int, float, float, float, float]]:
    """Per kind (then 'all'): rows, median error (all, fit half, held out), max measured/bound."""
    kinds = list(dict.fromkeys(r.kind for r in scored))
    out = []
    for kind in [*kinds, "all"]:
        rs = [r for r in scored if kind in ("all", r.kind)]
        out.append((kind, len(rs), median(map(error, rs)),
                    median(error(r) for r in rs if not held_out(r.id)),
                    median(error(r) for r in rs if held_out(r.id)),
                    max(r.bound for r in rs)))
    return out


def table(scored: list[cases.Scored]) -> str:
    lines = ["| kind | rows | median \\|measured/expected − 1\\| | fit half | held-out half "
             "| max measured/bound |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {k} | {n} | {100 * e:.1f}% | {100 * f:.1f}% | {100 * h:.1f}% | {b:.2f} |"
              for k, n, e, f, h, b in summary(scored)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--fit", action="store_true", help="median measured/bound of the fit "
                        "half per kind and chip")
    args = parser.parse_args(argv)
    scored, skipped = cases.scored()
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
