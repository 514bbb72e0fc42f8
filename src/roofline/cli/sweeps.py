"""`roofline sweep model|op`: grids of configurations in one vectorized pass."""

from __future__ import annotations

import argparse
import re
import sys
from functools import partial
from typing import Any

from ..argtypes import count_arg, emit, typed
from ..errors import RooflineError
from ..files import write_csv, wrote
from ..ops.params import OpDecl
from ..render.sweep import sweep_text
from ..render.text import table
from ..units import (
    parse_bytes,
    parse_duration,
    parse_number,
)
from ._base import LazySubparsers, _Parser
from .expect import add_expect_option, engine
from .models import check_phase_options
from .ops import OPS


def _cmd_sweep_model(args: argparse.Namespace) -> None:
    from ..sweep import Frontier, ModelSweep, parse_axis, parse_list

    check_phase_options(args)
    length = {"decode": args.context or "1k,8k,32k", "prefill": args.prompt_len or "1k,8k",
              "train": args.seq_len or "4k"}
    sweep = ModelSweep(
        args.model, parse_list(args.hw, "--hw"), args.phase,
        parse_axis(args.batch_per_replica or args.batch, "--batch-per-replica"
                   if args.batch_per_replica else "--batch"),
        parse_axis(length[args.phase], "--context/--prompt-len/--seq-len"),
        tp=_ints(args.tp, "--tp"), pp=_ints(args.pp, "--pp"), dp=_ints(args.dp, "--dp"),
        ep=_ints(args.ep, "--ep"),
        weight_dtypes=parse_list(args.weight_dtype, "--weight-dtype") if args.weight_dtype
        else None,
        kv_dtypes=parse_list(args.kv_dtype or args.dtype, "--kv-dtype"), dtype=args.dtype,
        k=args.k or 1,
        microbatches=args.microbatches, batch_per_replica=args.batch_per_replica is not None,
        engine=engine(args), expect=args.expect)
    limit = args.max_latency
    if args.plot or (args.json and args.all):  # these read every point: keep them
        from ..sweep import _check_points

        _check_points(sweep.points)
        result = sweep.collect()
        frontier = result.frontier(limit, args.expect)
        if args.csv:
            write_csv(args.csv, dict(result.columns))
        if args.plot:
            from ..plot import plot_model_sweep, save_figure

            save_figure(plot_model_sweep(result), args.plot)
    else:  # streamed: any number of points in the memory of one chunk
        frontier = _streamed(sweep, Frontier(limit, args.expect), args.csv)
    if args.expect:
        frontier["expected_sources"] = dict(sweep.expected_sources)
        frontier["engine"] = sweep.engine
    if sweep.skipped:  # configurations of the grid the model cannot run: said, not dropped
        frontier["skipped"] = list(sweep.skipped)
        for why in sweep.skipped:
            print(f"roofline: note: skipped {why}", file=sys.stderr)
    if args.json:
        data = {"frontier": frontier}
        if args.all:
            data["points"] = {k: v.tolist() for k, v in result.columns.items()}
        emit(data, True, "")
        wrote(args.csv, args.plot, json=True)
        return
    print(sweep_text(sweep, frontier, limit))
    wrote(args.csv, args.plot)


def _streamed(sweep: Any, reduce: Any, csv: str | None) -> dict[str, Any]:
    """Each chunk to the frontier reduction and the CSV, with a progress bar on a terminal
    for long runs."""
    from contextlib import nullcontext

    from ..csv_stream import CsvStream
    from ..measure.progress import Progress
    chunks = max(1, -(-sweep.points // sweep.chunk_points))
    with (CsvStream(csv) if csv else nullcontext()) as out, \
            Progress(chunks, "sweep", enabled=None if chunks > 4 else False) as bar:
        for chunk in sweep:
            reduce.add(chunk)
            if out is not None:
                out.write(chunk.columns)
            bar.step(f"{reduce.points:,} of {sweep.points:,} points")
    return dict(reduce.result(sweep.bound_changes))


def _cmd_sweep_op(args: argparse.Namespace) -> None:
    import numpy as np

    from ..sweep import parse_axis, parse_list, sweep_op

    decl: OpDecl = args.decl
    numeric: dict[str, Any] = {}
    categorical: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for p in decl.params:
        value = getattr(args, p.name)
        if value is None and p.kind != "bool" and p.default is not None:
            value = str(p.default)  # a declared default is a one-value axis (an output column)
        if value is None:
            continue
        if p.kind == "bool":
            fixed[p.name] = value
        elif p.kind in _AXIS:
            number, whole = _AXIS[p.kind]
            numeric[p.name] = parse_axis(str(value), p.option, number, whole=whole)
            lo, hi = p.bounds  # a float axis keeps its documented range, as `op` does
            if p.kind == "float" and not np.all((numeric[p.name] >= lo) &
                                                (numeric[p.name] <= hi)):
                raise RooflineError(f"{p.option}: every value must be {lo:g} to {hi:g}, got "
                                    f"{value}")
        else:
            categorical[p.name] = parse_list(value, p.option)

    result = sweep_op(decl, parse_list(args.hw, "--hw"), numeric, categorical, fixed,
                      expect=args.expect)
    if args.csv:
        write_csv(args.csv, dict(result.columns))
    c = result.columns
    if args.json:
        emit({"points": {k: v.tolist() for k, v in c.items()},
               "bound_changes": result.bound_changes}, True, "")
        wrote(args.csv, json=True)
        return
    shown = range(min(len(result), args.rows))
    cols = ["hardware", *categorical, *numeric, "t_lower_s",
            *(["expected_t_s"] if args.expect else []), "attainable_flops_per_s",
            *(["expected_flops_per_s"] if args.expect else []),
            *(["busbw_Bps", "expected_busbw_Bps"] if "expected_busbw_Bps" in c else []), "bound"]
    body = [[_cell(c[k][i], k) for k in cols] for i in shown]
    lines = [f"{len(result)} points of {decl.name}" + (f" (first {args.rows})"
                                                       if len(result) > args.rows else ""),
             table(cols, body)]
    if args.expect:
        from ..render.sweep import expected_note

        lines.append(expected_note(result.expected_sources))
    if result.bound_changes:
        lines += ["", "where the bound changes along " + str(result.bound_changes[0]["axis"])
                  + ":"] + [f"  {ch['hardware']} {ch['from']} -> {ch['to']} at {ch['at']:g}"
                            for ch in result.bound_changes[:20]]
    print("\n".join(lines))
    wrote(args.csv)


_AXIS = {"count": (parse_number, True), "bytes": (parse_bytes, False),
         "float": (parse_number, False)}  # a kind's axis: how one value reads, whole or not


def duration_with_unit(text: str, what: str) -> float:
    """A duration that says its unit ('50ms', '0.2s'): a bare '50' could mean 50 ms or 50 s,
    so it is refused rather than read as seconds."""
    if not re.search(r"[a-zA-Zµ]\s*$", str(text)):
        raise RooflineError(f"{what}: {str(text).strip()!r} has no unit; write e.g. "
                            f"{str(text).strip()}ms or {str(text).strip()}s")
    return parse_duration(text, what)


def _cell(value: Any, column: str = "") -> str:
    """A sweep value for people, in engineering units by its column's name (the CSV and
    JSON keep full precision)."""
    from ..render.frames import human

    return human(value, column)


def _ints(text: str, what: str) -> list[int]:
    from ..sweep import parse_axis

    return [int(v) for v in parse_axis(text, what)]


def register(sub: Any) -> None:
    count = count_arg("value")
    sw = sub.add_parser("sweep", help="a grid of configurations in one vectorized pass")
    sw_sub = sw.add_subparsers(dest="sweep_kind", required=True, parser_class=_Parser)
    sm = sw_sub.add_parser("model", help="sweep a model over chips, batch, length, parallelism"
                           " and dtypes", description="Axes: lists '1,8,64' or '1k,8k' "
                           "(k = 1024 tokens), ranges 'start:stop:xF' / 'start:stop:+S'. "
                           "Points that do not fit are kept and marked.")
    sm.add_argument("model", help="catalog id or config.json")
    sm.add_argument("--hw", default="h100", help="comma-separated chips, e.g. h100,h200,mi300x")
    sm.add_argument("--phase", default="decode", choices=["prefill", "decode", "train"])
    batch = sm.add_mutually_exclusive_group()
    batch.add_argument("--batch", default="1:256:x2",
                       help="sequences in the step, all data-parallel replicas together, as in "
                       "`roofline model` (axis; a dp skips the values it does not divide)")
    batch.add_argument("--batch-per-replica",
                       help="sequences per data-parallel replica instead (axis; the output's "
                       "batch is the total, this x dp)")
    sm.add_argument("--context", help="decode context (axis; default 1k,8k,32k)")
    sm.add_argument("--prompt-len", help="prefill prompt length (axis; default 1k,8k)")
    sm.add_argument("--seq-len", help="training sequence length (axis; default 4k)")
    sm.add_argument("--k", type=count, help="decode tokens per step (default 1)")
    for name in ("tp", "pp", "dp", "ep"):
        sm.add_argument(f"--{name}", default="1", help=f"{name} degrees (list)")
    sm.add_argument("--microbatches", type=count, default=1)
    sm.add_argument("--dtype", default="bf16", help="activation dtype")
    sm.add_argument("--weight-dtype", help="weight dtypes (list; default the checkpoint's, "
                    "else --dtype)")
    sm.add_argument("--kv-dtype", help="KV cache dtypes (list; default --dtype)")
    sm.add_argument("--max-tpot", "--max-latency", type=typed(duration_with_unit, "--max-tpot"),
                    dest="max_latency", help="latency target for the frontier (e.g. 50ms; "
                    "with --expect, on the expected time)")
    sm.add_argument("--csv", help="write every point to this CSV file")
    sm.add_argument("--plot", help="chart tokens/s against batch (PNG / SVG / PDF)")
    sm.add_argument("--json", action="store_true", help="print the frontier as JSON")
    sm.add_argument("--all", action="store_true", help="with --json: every point too")
    add_expect_option(sm, engine=True)
    sm.set_defaults(func=_cmd_sweep_model)

    so = sw_sub.add_parser("op", help="sweep one op's arguments (lists / ranges) and chips")
    so_sub = so.add_subparsers(dest="op", required=True, parser_class=_Parser,
                               action=LazySubparsers)
    for decl in OPS:  # each op's options are built when it is the one chosen
        so_sub.add_lazy(decl.name, decl.help, partial(_add_sweep_op, decl=decl), decl.aliases)


def _add_sweep_op(sub: Any, decl: OpDecl) -> None:
    count = count_arg("value")
    q = sub.add_parser(decl.name, help=decl.help, aliases=list(decl.aliases),
                       description=f"{decl.help}. Numeric arguments take lists or "
                       "ranges (1,8,64 / 1:4096:x2); text ones take comma lists.")
    q.add_argument("--hw", default="h100", help="comma-separated chips")
    for p in decl.params:
        if p.kind == "bool":
            q.add_argument(p.option, dest=p.name, action=argparse.BooleanOptionalAction,
                           help=p.help_text)
        else:  # every value is a string here: lists and ranges are parsed by the sweep
            q.add_argument(p.option, dest=p.name, required=p.required, help=p.help_text)
    q.add_argument("--csv", help="write every point to this CSV file")
    q.add_argument("--json", action="store_true", help="print every point as JSON")
    q.add_argument("--rows", type=count, default=40, help="rows to print")
    add_expect_option(q)
    q.set_defaults(func=_cmd_sweep_op, decl=decl)
