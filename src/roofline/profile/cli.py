"""`roofline profile TRACE`: a run's PyTorch profiler trace placed kernel by kernel on the
roofline (no torch needed: the trace is read as JSON)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..argtypes import count_arg
from ..files import write_text, wrote
from ..serialize import jsonable


def _cmd_profile(args: argparse.Namespace) -> None:
    from ..render import csv
    from .analyze import profile
    from .render import kernel_table, profile_page, profile_text

    result = profile(args.trace, hw=args.hw, on=args.on, step=args.step, rank=args.rank)
    if args.csv:
        write_text(args.csv, csv.render(kernel_table(result)))
    if args.html:
        write_text(args.html, profile_page(result))
    if args.json:
        print(json.dumps(jsonable(result.to_dict()), indent=2))
    else:
        print(profile_text(result, args.top))
    wrote(args.csv, args.html, json=args.json)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "profile", help="place a PyTorch profiler trace's kernels on their roofline bounds",
        description="Reads a PyTorch profiler (Kineto) trace (.json or .json.gz; record with "
        "record_shapes=True), maps each GPU kernel to its op and shapes, and shows measured "
        "time beside the roofline bound and the expected time, per kernel, per op class and "
        "for the step.")
    p.add_argument("trace", help="trace file (.json / .json.gz), or a directory of per-rank "
                   "traces with --rank")
    p.add_argument("--hw", help="chip id, alias or .toml file (default: the trace's device)")
    p.add_argument("--on", help="also bound the same work on this chip")
    p.add_argument("--step", type=count_arg("--step"),
                   help="only ProfilerStep#N (default: the whole trace)")
    p.add_argument("--rank", type=count_arg("--rank"), help="the rank's trace in a directory")
    p.add_argument("--top", type=count_arg("--top"), default=10, help="gaps to show")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--csv", metavar="FILE", help="write the per-kernel table as CSV")
    p.add_argument("--html", metavar="FILE", help="write an offline HTML page")
    p.set_defaults(func=_cmd_profile)
