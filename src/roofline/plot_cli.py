"""Command line for charts and reports: `roofline plot roofline|sweep|breakdown` and
`roofline report`. `register(subparsers)` adds both commands to the main parser.

Ops come from `--op 'matmul --m 128 --k 8192 --n 8192'` (the words after `roofline op`) or
from `--from FILE`, the JSON that `roofline op ... --json` prints. matplotlib is imported
only when a chart is drawn, never when this module is imported.
"""

from __future__ import annotations

import argparse
import math
import shlex
from typing import Any

from .argtypes import count_arg
from .errors import RooflineError
from .evaluate import Estimate
from .files import check_text, write_text
from .hardware import Chip, load_chip
from .plot import FORMATS, SWEEP_METRICS, check_format
from .render.geometry import CHART_RANGE, Measured, OpPoint, check_chip, load_points


def _measured(text: str) -> Measured:
    """NAME,INTENSITY,FLOPS -> (name, FLOP/byte, FLOP/s); the name may contain commas."""
    parts = text.rsplit(",", 2)
    try:
        name, x, y = parts[0].strip(), float(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        name, x, y = "", math.nan, math.nan
    lo, hi = CHART_RANGE  # a measured point is for the chart
    _label(name)  # a control character would break the SVG and the terminal
    if not name or not (lo <= x <= hi and lo <= y <= hi):
        raise argparse.ArgumentTypeError(
            f"expected NAME,INTENSITY,FLOPS with numbers from {lo:g} to {hi:g} (e.g. "
            f"'my gemm,124,6.1e14'), got {text!r}")
    return name, x, y


def _label(text: str) -> str:
    """A title or name from the command line: one line of printable text."""
    try:
        return check_text(text, "label", name=True)
    except RooflineError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("label: ")) from None


def _add_sources(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hw", help="chip id, alias or .toml file (default: the chip of the "
                   "--from files, else h100)")
    p.add_argument("--op", action="append", default=[], metavar="'OP ARGS'",
                   help="an op as written after 'roofline op', quoted; repeatable "
                   "(e.g. --op 'matmul --m 128 --k 8192 --n 8192')")
    p.add_argument("--from", "--op-json", dest="op_json", action="append", default=[],
                   metavar="FILE", help="JSON printed by 'roofline op ... --json' (an object "
                   "or a list of them); repeatable")


def _add_measured(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measured", action="append", default=[], type=_measured,
                   metavar="NAME,INTENSITY,FLOPS",
                   help="a measured point: FLOP/byte on --level and achieved FLOP/s; repeatable")
    p.add_argument("--level", default="hbm",
                   help="memory level or link whose intensity the x axis shows (default hbm)")


def _run_op(text: str, chip: Chip) -> Estimate:
    """Evaluate one `--op` on the chip, parsed by that op's parser (generated from the op's
    declared parameters, as `roofline op NAME` is)."""
    from .cli.ops import op_estimate  # here, not at import: cli imports this module
    from .ops.registry import op_decl

    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise RooflineError(f"--op {text!r}: {exc}") from None
    if not argv:
        raise RooflineError("--op is empty; give an op and its options, e.g. "
                            "--op 'matmul --m 128 --k 8192 --n 8192'")
    op_decl(argv[0])  # an unknown op: did you mean ...
    if any(a == "--hw" or a.startswith("--hw=") for a in argv):
        raise RooflineError(f"--op {text!r}: give the chip once, with --hw, not inside --op")
    return op_estimate(argv, chip)  # bad options: one line, exit 2


def _gather(args: argparse.Namespace) -> tuple[Chip, list[Estimate | OpPoint]]:
    """The chip and the ops of --from files and --op options (the files' chip must match)."""
    files = [(path, r) for path in args.op_json for r in load_points(path)]
    if args.hw:
        chip = load_chip(args.hw)
    else:
        found = sorted({r.hardware for _, r in files})
        if len(found) > 1:
            raise RooflineError(f"the --from files are for different chips ({', '.join(found)});"
                                " give one chip's results, or pick one with --hw")
        chip = load_chip(found[0] if found else "h100")
    for path, r in files:
        check_chip(r, chip, f"{path}: ")
    items: list[Estimate | OpPoint] = [r for _, r in files]
    return chip, items + [_run_op(text, chip) for text in args.op]


def _written(path: str) -> None:
    print(f"wrote {path}")


def _cmd_plot_roofline(args: argparse.Namespace) -> None:
    from .plot import plot_roofline, save_figure

    check_format(args.output)  # before any work
    chip, items = _gather(args)
    ax = plot_roofline(chip, items, args.measured, dtypes=args.dtype or None,
                       levels=args.roof or None, level=args.level, title=args.title)
    save_figure(ax, args.output)
    _written(args.output)


def _cmd_plot_sweep(args: argparse.Namespace) -> None:
    from .plot import plot_matmul_sweep, save_figure

    check_format(args.output)
    ax = plot_matmul_sweep(args.hw, args.size or [4096, 1024], args.max_batch, args.dtype,
                           args.weight_dtype, args.metric)
    save_figure(ax, args.output)
    _written(args.output)


def _cmd_plot_model(args: argparse.Namespace) -> None:
    from .cli import model_analysis
    from .plot import plot_model, save_figure

    check_format(args.output)
    save_figure(plot_model(model_analysis(args), top=args.top), args.output)
    _written(args.output)


def _cmd_plot_breakdown(args: argparse.Namespace) -> None:
    from .plot import plot_breakdown, save_figure
    from .render.geometry import to_points

    check_format(args.output)
    chip, items = _gather(args)
    results = to_points(items)
    if not results:
        raise RooflineError("plot breakdown: give at least one --op or --from FILE")
    ax = plot_breakdown([(r.name, r.t_lower_s, r.bound) for r in results],
                        title=f"time lower bound per op on {chip.name}")
    save_figure(ax, args.output)
    _written(args.output)


def _cmd_report(args: argparse.Namespace) -> None:
    from .render.pages import estimates_csv, html_report, markdown_report

    chip, items = _gather(args)
    if not items:
        raise RooflineError("report: give at least one --op or --from FILE")
    chip.bandwidth_Bps(args.level)  # an unknown level or link fails here, in every format
    title = args.title or f"roofline report: {chip.name}"
    if args.html:
        write_text(args.html, html_report(chip, items, title, args.measured, args.level))
        _written(args.html)
    if args.markdown:
        write_text(args.markdown, markdown_report(chip, items, title, args.measured, args.level))
        _written(args.markdown)
    if args.csv:
        write_text(args.csv, estimates_csv(items))
        _written(args.csv)
    if not (args.html or args.markdown or args.csv):  # nothing to write: show the tables
        print(markdown_report(chip, items, title, args.measured, args.level))


def register(subparsers: Any) -> None:
    """Add `plot` (roofline, sweep, breakdown) and `report` to the CLI's subparsers."""
    formats = ", ".join(f".{f}" for f in FORMATS)
    plot = subparsers.add_parser(
        "plot", help="charts as PNG / SVG / PDF (needs matplotlib: pip install "
        "'roofline[plot]')")
    kinds = plot.add_subparsers(dest="plot_command", required=True, parser_class=type(plot))

    rf = kinds.add_parser("roofline", help="the chip's stack of roofs with ops as points",
                          description="Compute roofs per dtype, a slanted roof per memory "
                          "level and link, ridge points, and ops at (intensity, attainable).")
    _add_sources(rf)
    _add_measured(rf)
    rf.add_argument("--dtype", action="append", default=[],
                    help="compute roof to draw; repeatable (default: the ops' dtypes, or bf16)")
    rf.add_argument("--roof", action="append", default=[],
                    help="memory level or link roof to draw; repeatable (default: all)")
    rf.add_argument("--title", type=_label, help="chart title")
    rf.add_argument("-o", "--output", required=True, help=f"output file ({formats})")
    rf.set_defaults(func=_cmd_plot_roofline)

    sw = kinds.add_parser("sweep", help="a square matmul against batch 1..N, one line per size",
                          description="Scaling Book ch.1 §2.7 Problem 3: roofline plot sweep "
                          "--hw v5e --weight-dtype int8 -o sweep.png")
    sw.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    sw.add_argument("--size", action="append", type=count_arg("--size"),
                    help="D = F of a [D, F] weight; repeatable (default 4096 and 1024)")
    sw.add_argument("--max-batch", type=count_arg("--max-batch"), default=512,
                    dest="max_batch",
                    help="sweep the batch from 1 to this (default 512)")
    sw.add_argument("--dtype", default="bf16", help="activation and compute dtype")
    sw.add_argument("--weight-dtype", dest="weight_dtype", help="weight dtype (default --dtype)")
    sw.add_argument("--metric", default="flops", choices=list(SWEEP_METRICS),
                    help="attainable FLOP/s, time lower bound, or tokens/s")
    sw.add_argument("-o", "--output", required=True, help=f"output file ({formats})")
    sw.set_defaults(func=_cmd_plot_sweep)

    md = kinds.add_parser("model", help="a model step: time per op by bound, memory vs HBM",
                          description="Takes the options of `roofline model`.")
    from .cli import add_model_args  # cli is loaded: it is what calls register()

    md.add_argument("model", help="catalog id, config.json, model directory or Hub id")
    add_model_args(md)
    md.add_argument("--top", type=count_arg("--top"), default=20,
                    help="ops to show (default 20)")
    md.add_argument("-o", "--output", required=True, help=f"output file ({formats})")
    md.set_defaults(func=_cmd_plot_model)

    bd = kinds.add_parser("breakdown", help="time per op as bars coloured by bound")
    _add_sources(bd)
    bd.add_argument("-o", "--output", required=True, help=f"output file ({formats})")
    bd.set_defaults(func=_cmd_plot_breakdown)

    rp = subparsers.add_parser(
        "report", help="a standalone HTML report (and Markdown / CSV tables)",
        description="One self-contained HTML file (interactive roofline, tables, hardware "
        "sources, derivations); no output option prints the Markdown.")
    _add_sources(rp)
    _add_measured(rp)
    rp.add_argument("--title", type=_label, help="report title")
    rp.add_argument("--html", metavar="FILE", help="write the HTML report here")
    rp.add_argument("--markdown", metavar="FILE", help="write the Markdown report here")
    rp.add_argument("--csv", metavar="FILE", help="write the ops table as CSV here")
    rp.set_defaults(func=_cmd_report)
