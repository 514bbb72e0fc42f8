"""Where point labels go on a chart so that none overlaps another label or a point.

Greedy: each label tries spots around its point, nearest first; a name that fits nowhere
falls back to the point's number (the chart's table lists every number with its name), and
a number that fits nowhere is left off (the point keeps its tooltip). A label set further
out than beside its point gets a leader line to it, and no leader crosses a label. Box
sizes are estimated generously (11 px text) so that real glyphs stay inside them, or
measured by the caller (`measure`: text -> width, height).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

CHAR_W, TEXT_H, GAP, MARKER_R = 7.0, 13.0, 9.0, 7.0

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 (y grows downwards)


@dataclass(frozen=True)
class Label:
    text: str
    x: float  # text anchor
    y: float  # baseline
    anchor: str  # "start", "middle" or "end"
    box: Box
    leader: tuple[float, float, float, float] | None = None  # point -> box edge

Segment = tuple[float, float, float, float]
Measure = Callable[[str], tuple[float, float]]


def estimate_size(text: str) -> tuple[float, float]:
    return CHAR_W * len(text) + 2, TEXT_H + 1


def _box(size: tuple[float, float], x: float, y: float, anchor: str) -> Box:
    w, h = size
    x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    return (x0, y + 3 - h, x0 + w, y + 3)


def _crosses(seg: Segment, b: Box) -> bool:
    """Whether a segment passes through a box (sampled finely enough for labels)."""
    x0, y0, x1, y1 = seg
    for k in range(41):
        t = k / 40
        x, y = x0 + (x1 - x0) * t, y0 + (y1 - y0) * t
        if b[0] < x < b[2] and b[1] < y < b[3]:
            return True
    return False


def _leader(px: float, py: float, b: Box) -> Segment:
    """From the marker's edge to the nearest point of the label's box."""
    qx, qy = min(max(px, b[0]), b[2]), min(max(py, b[1]), b[3])
    d = max(((qx - px) ** 2 + (qy - py) ** 2) ** 0.5, 1e-9)
    return (px + (qx - px) / d * MARKER_R, py + (qy - py) / d * MARKER_R, qx, qy)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _candidates(text: str, px: float, py: float, measure: Measure) -> list[Label]:
    size = measure(text)
    h = size[1]
    near: list[tuple[float, float, str]] = [
        (px + GAP, py + 4, "start"), (px - GAP, py + 4, "end"),
        (px, py - GAP - 2, "middle"), (px, py + GAP + h - 2, "middle")]
    far: list[tuple[float, float, str]] = []
    for step in (1.5, 2.5, 3.5, 4.5, 6, 8, 10):  # then further out, with a leader line
        dy, dx = step * h, GAP + step * 6
        far += [(px + dx, py + 4 - dy, "start"), (px + dx, py + 4 + dy, "start"),
                (px - dx, py + 4 - dy, "end"), (px - dx, py + 4 + dy, "end"),
                (px, py - GAP - 2 - dy, "middle"), (px, py + GAP + h - 2 + dy, "middle")]
    out = [Label(text, x, y, a, _box(size, x, y, a)) for x, y, a in near]
    for x, y, a in far:
        b = _box(size, x, y, a)
        out.append(Label(text, x, y, a, b, _leader(px, py, b)))
    return out


def place_labels(points: Sequence[tuple[float, float]], names: Sequence[str], area: Box,
                 keep_out: Sequence[Box] = (), measure: Measure = estimate_size,
                 numbers: Sequence[str] | None = None) -> list[Label | None]:
    """One label (the name, else its number: `numbers` or 1-based, else None) per point,
    in order."""
    markers = [(x - MARKER_R, y - MARKER_R, x + MARKER_R, y + MARKER_R) for x, y in points]
    taken: list[Box] = [*markers, *keep_out]
    labels: list[Box] = []
    leaders: list[Segment] = []
    out: list[Label | None] = []
    for i, ((px, py), name) in enumerate(zip(points, names, strict=True)):
        chosen = None
        number = numbers[i] if numbers is not None else str(i + 1)
        for text in (name, number):
            for cand in _candidates(text, px, py, measure):
                b = cand.box
                inside = area[0] <= b[0] and b[2] <= area[2] and area[1] <= b[1] and b[3] <= area[3]
                if not inside or any(_overlaps(b, t) for t in taken) \
                        or any(_crosses(seg, b) for seg in leaders):
                    continue
                if cand.leader and any(_crosses(cand.leader, t) for t in labels):
                    continue
                chosen = cand
                break
            if chosen:
                break
        if chosen:
            taken.append(chosen.box)
            labels.append(chosen.box)
            if chosen.leader:
                leaders.append(chosen.leader)
        out.append(chosen)
    return out


def distinct(names: Sequence[str]) -> list[str]:
    """Names made unique for one chart: a repeated name gets ' (2)', ' (3)', ..."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return out
