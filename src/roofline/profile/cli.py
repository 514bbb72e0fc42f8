"""`roofline profile TRACE`: a run's PyTorch profiler trace placed kernel by kernel on the
roofline (no torch needed: the trace is read as JSON)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..argtypes import count_arg
from ..files import write_text, wrote
from ..serialize import jsonable


def _cmd_ncu(args: argparse.Namespace, path: str, result: Any = None) -> list[Any]:
    """The ncu CSV's kernels placed on the roofline (beside a trace's profile, if given)."""
    from ..errors import ParameterError
    from ..hardware import load_chip
    from .ncu import place, read_ncu

    if result is None and args.hw is None:
        raise ParameterError("hw", "is needed: an ncu CSV alone does not name the chip")
    chip = load_chip(args.hw if args.hw is not None else result.hardware)
    ours = {r.name: r for r in result.rows if r.mapped and r.kernels == 1} if result else {}
    return place(read_ncu(path), chip, ours)


def _cmd_profile(args: argparse.Namespace) -> None:
    from ..render import csv
    from ..render.text import render as text_render
    from .analyze import profile
    from .render import kernel_table, ncu_table, profile_page, profile_text

    if str(args.trace).lower().endswith(".csv"):  # an Nsight Compute CSV alone
        rows = _cmd_ncu(args, args.trace)
        if args.csv:
            write_text(args.csv, csv.render(ncu_table(rows)))
        print(json.dumps(jsonable([r.__dict__ for r in rows]), indent=2) if args.json
              else text_render(ncu_table(rows)))
        wrote(args.csv, json=args.json)
        return
    result = profile(args.trace, hw=args.hw, on=args.on, step=args.step, rank=args.rank)
    ncu = _cmd_ncu(args, args.ncu, result) if args.ncu else None
    if args.csv:
        write_text(args.csv, csv.render(kernel_table(result)))
    if args.html:
        write_text(args.html, profile_page(result))
    if args.json:
        data = result.to_dict()
        if ncu is not None:
            data["ncu"] = [r.__dict__ for r in ncu]
        print(json.dumps(jsonable(data), indent=2))
    else:
        print(profile_text(result, args.top))
        if ncu is not None:
            print("\n" + text_render(ncu_table(ncu)))
    wrote(args.csv, args.html, json=args.json)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "profile", help="place a PyTorch profiler trace's kernels on their roofline bounds",
        description="Reads a PyTorch profiler (Kineto) trace (.json or .json.gz; record with "
        "record_shapes=True) or an Nsight Systems SQLite export (emit_nvtx(record_shapes=True) "
        "ranges give the ops), maps each GPU kernel to its op and shapes, and shows measured "
        "time beside the roofline bound and the expected time, per kernel, per op class and "
        "for the step.")
    p.add_argument("trace", help="trace file (Kineto .json / .json.gz, Nsight Systems "
                   ".sqlite export, or an Nsight Compute .csv with --hw), or a directory of "
                   "per-rank traces with --rank")
    p.add_argument("--hw", help="chip id, alias or .toml file (default: the trace's device)")
    p.add_argument("--on", help="also bound the same work on this chip")
    p.add_argument("--step", type=count_arg("--step"),
                   help="only ProfilerStep#N (default: the whole trace)")
    p.add_argument("--rank", type=count_arg("--rank"),
                   help="the rank's trace in a directory (its recorded rank, else its name)")
    p.add_argument("--ncu", metavar="CSV", help="also place an Nsight Compute CSV's kernels "
                   "(ncu --csv [--page raw]) on the roofline beside our bounds")
    p.add_argument("--top", type=count_arg("--top"), default=10, help="gaps to show")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", metavar="FILE", help="write the per-kernel table as CSV")
    p.add_argument("--html", metavar="FILE", help="write an offline HTML page")
    p.set_defaults(func=_cmd_profile)
