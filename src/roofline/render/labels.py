"""Where point labels go on a chart so that none overlaps another label or a point.

Greedy: each label tries spots around its point, nearest first; a name that fits nowhere
falls back to the point's number (the chart's table lists every number with its name), and
a number that fits nowhere is left off (the point keeps its tooltip). Box sizes are
estimated generously (11 px text) so that real glyphs stay inside them.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def _box(text: str, x: float, y: float, anchor: str) -> Box:
    w = CHAR_W * len(text) + 2
    x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    return (x0, y - TEXT_H + 2, x0 + w, y + 3)


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _candidates(text: str, px: float, py: float) -> list[Label]:
    spots: list[tuple[float, float, str]] = [
        (px + GAP, py + 4, "start"), (px - GAP, py + 4, "end"),
        (px, py - GAP - 2, "middle"), (px, py + GAP + TEXT_H - 2, "middle")]
    for step in (1, 2, 3, 4):  # then further out, above and below on either side
        dy = step * TEXT_H
        spots += [(px + GAP, py + 4 - dy, "start"), (px + GAP, py + 4 + dy, "start"),
                  (px - GAP, py + 4 - dy, "end"), (px - GAP, py + 4 + dy, "end")]
    return [Label(text, x, y, a, _box(text, x, y, a)) for x, y, a in spots]


def place_labels(points: Sequence[tuple[float, float]], names: Sequence[str], area: Box,
                 keep_out: Sequence[Box] = ()) -> list[Label | None]:
    """One label (the name, else the 1-based number, else None) per point, in order."""
    markers = [(x - MARKER_R, y - MARKER_R, x + MARKER_R, y + MARKER_R) for x, y in points]
    taken: list[Box] = [*markers, *keep_out]
    out: list[Label | None] = []
    for i, ((px, py), name) in enumerate(zip(points, names, strict=True)):
        chosen = None
        for text in (name, str(i + 1)):
            for cand in _candidates(text, px, py):
                b = cand.box
                inside = area[0] <= b[0] and b[2] <= area[2] and area[1] <= b[1] and b[3] <= area[3]
                if inside and not any(_overlaps(b, t) for t in taken):
                    chosen = cand
                    break
            if chosen:
                break
        if chosen:
            taken.append(chosen.box)
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
