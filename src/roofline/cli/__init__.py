"""Command line: a thin layer over the public API, one module per command group.

Bad input prints one line on stderr and exits 2; `--json` prints one JSON object.
Keep imports light: the CLI must not pull in matplotlib, torch, jax or pandas at start-up.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from contextlib import nullcontext

from .. import __version__
from ..errors import RooflineError, one_line
from ..files import OUTPUT_OPTIONS, STDOUT, check_destinations, stdout_reserved
from . import hardware, models, ops, serve, solvers, sweeps
from ._base import _Parser
from .models import add_model_args, model_analysis
from .ops import OPS, op_estimate

__all__ = ["OPS", "add_model_args", "build_parser", "main", "model_analysis", "op_estimate"]


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="roofline", description="Roofline bounds for ML work on accelerators.")
    p.add_argument("--version", action="version", version=f"roofline {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for group in (hardware, ops, solvers, models, sweeps, serve):
        group.register(sub)
    from ..measure.cli import register as register_measure  # torch is imported lazily
    from ..plot_cli import register as register_plots  # matplotlib is imported lazily
    from ..trace.cli import register as register_trace

    register_plots(sub)
    register_measure(sub)
    register_trace(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a name with undecodable bytes must not crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # an empty value would otherwise read as "not given" and fall back to a default
        empty = next((k for k, v in vars(args).items() if isinstance(v, str) and not v.strip()),
                     None)
        if empty:
            flag = "--" + empty.replace("_", "-")
            given = sys.argv[1:] if argv is None else list(argv)
            raise RooflineError(f"{flag}: empty value (leave the option out for its default)"
                                if flag in given else f"{empty}: empty value")
        # every output checked before any work or any write: a bad second path must not
        # leave the first one already overwritten
        outputs = [getattr(args, name, None) for name in OUTPUT_OPTIONS]
        check_destinations(outputs)
        with stdout_reserved() if STDOUT in outputs else nullcontext():
            args.func(args)
    except RooflineError as exc:
        print(f"roofline: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `roofline hw list | head`
        return 0
    return 0
