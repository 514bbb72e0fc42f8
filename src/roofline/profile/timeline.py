"""Time on a GPU's timeline: busy time as the union of activity intervals (streams overlap),
and how much of one set of intervals no other set covers (exposed communication)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Intervals = np.ndarray  # shape (n, 2): disjoint, sorted [start, end) rows


def merged(starts: Sequence[float], ends: Sequence[float]) -> Intervals:
    """The union of [start, end) intervals as disjoint sorted intervals."""
    s = np.asarray(starts, dtype=float)
    e = np.asarray(ends, dtype=float)
    if not s.size:
        return np.empty((0, 2))
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    # a new interval begins where a start lies beyond every end before it
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return np.stack([s[first], e[last]], axis=1)


def length(intervals: Intervals) -> float:
    return float((intervals[:, 1] - intervals[:, 0]).sum()) if intervals.size else 0.0


def overlap(a: Intervals, b: Intervals) -> float:
    """Total time two disjoint sorted interval sets share."""
    i = j = 0
    shared = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if hi > lo:
            shared += hi - lo
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return float(shared)
