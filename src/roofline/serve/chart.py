"""`roofline serve --plot`: the throughput-per-chip frontiers against TPOT and TTFT, one
line per chip kind, the targets drawn as vertical lines (matplotlib, imported here only)."""

from __future__ import annotations

from typing import Any

from .plan import ServePlan


def plot_frontier(p: ServePlan) -> Any:
    from matplotlib.ticker import NullFormatter

    from ..plot import _plain, new_axes

    left = new_axes((11.0, 4.8))
    fig = left.figure
    fig.clear()
    axes = fig.subplots(1, 2)
    c = p.columns
    for ax, key, target, label in ((axes[0], "tpot_s", p.targets.tpot_s, "TPOT"),
                                   (axes[1], "ttft_s", p.targets.ttft_s, "TTFT")):
        for hw in dict.fromkeys(c["hardware"].tolist()):
            idx = p.frontier(key, hw)
            if idx:
                ax.step(c[key][idx], c["output_tokens_per_s_per_chip"][idx], where="post",
                        marker="o", markersize=3, label=_plain(hw))
        if target is not None:
            ax.axvline(target, color="#c00", linestyle="--", label=f"{label} target")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels collide on short spans
        if p.expected:
            ax.set_xlabel(f"{label} (s, expected)")
            ax.set_ylabel("output tokens/s per chip (expected)")
        else:
            ax.set_xlabel(f"{label} (s, " + ("lower bound)" if key == "tpot_s" else
                                             "prefill bound + M/D/1 wait)"))
            ax.set_ylabel("output tokens/s per chip (upper bound)")
        ax.set_title(_plain(f"{p.model}: Pareto frontier vs {label}"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return fig
