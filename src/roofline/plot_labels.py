"""Point labels on a matplotlib chart, placed by the same rule as the HTML chart's
(`render.labels`), but on the text's real extents: the figure is laid out first, each label
is measured by the renderer, and a label set apart from its point gets a leader line. No
label overlaps another, a point, the legend or the chart's own captions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .render.labels import Box, place_labels

HA = {"start": "left", "middle": "center", "end": "right"}


def _down(bbox: Any, height: float) -> Box:
    """A display box (y up) as a y-down box, as `place_labels` takes it."""
    return (bbox.x0, height - bbox.y1, bbox.x1, height - bbox.y0)


def label_points(ax: Any, labelled: Sequence[tuple[str, float, float, str]],
                 markers: Sequence[tuple[float, float]] = (),
                 keep_out: Sequence[Any] = ()) -> list[Any]:
    """Annotate (text, x, y, gid) points of `ax` in data coordinates; `markers` are other
    drawn points to keep clear of, `keep_out` artists (legend, captions) too. Returns the
    annotations (None where a label has no room: the point stays unlabelled)."""
    from matplotlib.text import Text

    fig = ax.figure
    fig.draw_without_rendering()  # the layout, the legend's place: final before measuring
    renderer = fig._get_renderer()  # any canvas (a bare Figure's too), as draw() gets it
    height = fig.bbox.height

    def measure(text: str) -> tuple[float, float]:
        t = Text(0, 0, text, fontsize="small", figure=fig)
        b = t.get_window_extent(renderer)
        return b.width + 2, b.height + 2

    def screen(x: float, y: float) -> tuple[float, float]:
        px, py = ax.transData.transform((x, y))
        return float(px), float(height - py)

    xy = [screen(x, y) for _, x, y, _ in labelled]
    others = [screen(x, y) for x, y in markers]
    r = 5.0  # a marker's half-size in px, as a keep-out box
    boxes = [(px - r, py - r, px + r, py + r) for px, py in others]
    boxes += [_down(a.get_window_extent(renderer), height) for a in keep_out if a is not None]
    names = [text for text, *_ in labelled]
    placed = place_labels(xy, names, _down(ax.get_window_extent(renderer), height), boxes,
                          measure, numbers=names)
    out: list[Any] = []
    to_points = 72.0 / fig.dpi
    for (text, x, y, gid), (px, py), label in zip(labelled, xy, placed, strict=True):
        if label is None:
            out.append(None)
            continue
        arrow = None
        if label.leader:  # from the label's box edge nearest the point, to the marker's rim
            x0, y0, x1, y1 = label.box
            qx, qy = label.leader[2], label.leader[3]
            arrow = {"arrowstyle": "-", "lw": 0.6, "color": "0.35", "shrinkA": 0,
                     "shrinkB": 4, "relpos": ((qx - x0) / (x1 - x0), (y1 - qy) / (y1 - y0))}
        note = ax.annotate(text, (x, y), xytext=((label.x - px) * to_points,
                                                  (py - label.y) * to_points),
                           textcoords="offset points", ha=HA[label.anchor], va="baseline",
                           fontsize="small", gid=gid, arrowprops=arrow)
        note.set_in_layout(False)  # the layout is fixed: labels must not move the axes
        out.append(note)
    return out
