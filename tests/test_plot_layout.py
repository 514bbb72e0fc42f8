"""The matplotlib charts' layout, checked through the renderer's text extents after a draw:
point labels beside their points (or joined by a leader line) and never over one another,
`plot model`'s title inside the figure, `plot breakdown`'s legend over no bar or value."""

import pytest

pytest.importorskip("matplotlib")

from matplotlib.text import Text

from roofline import evaluate, load_chip, matmul
from roofline.plot import plot_breakdown, plot_model, plot_roofline

H100 = load_chip("h100")


def _drawn(fig):  # at the dpi the file gets (save_figure: 150)
    fig.set_dpi(150)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _gap(box, x, y) -> float:
    dx = max(box.x0 - x, x - box.x1, 0)
    dy = max(box.y0 - y, y - box.y1, 0)
    return (dx * dx + dy * dy) ** 0.5


def crowd():
    """What `measure ops --plot` draws (its default CPU sweep, as if measured on an H100):
    the seed matmul batches and eight elementwise ops, some at one intensity."""
    bw, peak = 3.35e12, 67e12
    out = []
    for b in (1, 32, 256, 1024, 4096):
        x = 2 * b * 4096 * 4096 / (4 * (2 * b * 4096 + 4096 * 4096))
        out.append((f"seed 2.9 B={b} D=F=4096", x, 0.7 * min(peak, x * bw)))
    for kind, flops in (("add", 1), ("mul", 1), ("relu", 1), ("silu", 4), ("gelu", 8),
                        ("softmax", 5), ("rmsnorm", 4), ("layernorm", 7)):
        x = flops / 8
        out.append((f"{kind} n=16777216", x, 0.8 * x * bw))
    return out


@pytest.mark.parametrize("estimates", [[], [evaluate(matmul(128, 8192, 8192), H100),
                                            evaluate(matmul(64, 8192, 8192), H100)]])
def test_roofline_labels_sit_by_their_points_and_never_overlap(estimates):
    ax = plot_roofline(H100, estimates, crowd())
    fig = ax.figure
    renderer = _drawn(fig)
    notes = [t for t in ax.texts if str(t.get_gid()).startswith("label:")]
    assert len(notes) >= 6  # most of the crowd keeps its name
    # the text's own extent (an Annotation's adds its leader line)
    boxes = [Text.get_window_extent(n, renderer) for n in notes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlap(a, b), (a, b)
    frame = ax.get_window_extent(renderer)
    captions = [t.get_window_extent(renderer) for t in ax.texts
                if str(t.get_gid()).startswith("text:")]
    legend = ax.get_legend().get_window_extent(renderer)
    for note, box in zip(notes, boxes, strict=True):
        x, y = ax.transData.transform(note.xy)
        if note.arrow_patch is None:  # beside its point: within 21 px (150 dpi)
            assert _gap(box, x, y) <= 21, (note.get_text(), box, x, y)
        else:  # apart: the leader runs from the point to the label
            path = note.arrow_patch.get_path().vertices
            assert len(path) >= 2
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
        assert not _overlap(box, legend) and not any(_overlap(box, c) for c in captions)


def test_model_figure_keeps_its_title_inside():
    from roofline.models import analyze, decode

    a = analyze("llama-3.1-405b", "h100", decode(64, 8192))
    fig = plot_model(a, title=None)
    renderer = _drawn(fig)
    full = fig.bbox
    for ax in fig.axes:
        title = ax.title.get_window_extent(renderer)
        assert full.x0 <= title.x0 and title.x1 <= full.x1, (ax.title.get_text(), title, full)
        assert title.y1 <= full.y1
        legend = ax.get_legend().get_window_extent(renderer)
        assert full.x0 <= legend.x0 and legend.x1 <= full.x1, (legend, full)
    bars = fig.axes[0]
    frame = bars.get_window_extent(renderer)
    assert frame.width > full.width / 3  # the bars keep their room
    assert all(t.get_window_extent(renderer).x1 <= frame.x1 for t in bars.texts)


def test_breakdown_legend_covers_no_bar_nor_value():
    rows = [("gemv", 1e-4, "hbm"), ("all-reduce", 2e-3, "scale-up"),
            ("matmul", 4e-3, "compute")]  # as given: the longest bar at the bottom
    ax = plot_breakdown(rows)
    renderer = _drawn(ax.figure)
    legend = ax.get_legend().get_window_extent(renderer)
    values = [t.get_window_extent(renderer) for t in ax.texts]
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert len(values) == len(bars) == len(rows)
    assert not any(_overlap(legend, v) for v in values)
    assert not any(_overlap(legend, b) for b in bars)
