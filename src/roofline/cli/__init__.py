"""Command line: a thin layer over the public API, one module per command group.

Bad input prints one line on stderr and exits 2; `--json` prints one JSON object.
Start-up imports only what the chosen command needs: the top level knows each command by
name and help line (COMMANDS) and builds the chosen one's options, importing its module,
when argparse reaches it (LazySubparsers); `roofline op` does the same for each op. The CLI
must never pull in matplotlib, torch, jax or pandas at start-up.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from importlib import import_module
from typing import TYPE_CHECKING, Any, cast

from .. import __version__
from ..errors import RooflineError, one_line
from ..files import OUTPUT_OPTIONS, STDOUT, STDOUT_ALIASES, check_destinations, stdout_reserved
from ._base import LazySubparsers, _Parser, expand
from ._exit import Stopped, drop_stdout, output_failed, signals_raise, stopped

if TYPE_CHECKING:
    from .models import add_model_args, model_analysis
    from .ops import OPS, op_estimate

__all__ = ["COMMANDS", "OPS", "add_model_args", "build_parser", "main", "model_analysis",
           "op_estimate"]

# Every command, in the order `roofline --help` lists them: the module whose register(sub)
# adds it, and its help line (tests/test_cli_imports.py checks both against the modules).
COMMANDS: dict[str, tuple[str, str]] = {
    "hw": ("roofline.cli.hardware", "the hardware catalog"),
    "op": ("roofline.cli.ops", "bound one op on one chip"),
    "critical-batch": ("roofline.cli.solvers", "tokens at which a matmul turns compute-bound"),
    "critical-dim": ("roofline.cli.solvers", "per-chip shard of a contraction-sharded matmul "
                     "above which it is compute-bound, not communication-bound"),
    "quant-table": ("roofline.cli.solvers", "bytes per parameter, peak and critical batch per "
                    "quantization scheme"),
    "model": ("roofline.cli.models", "bound a transformer's prefill / decode / training step"),
    "mfu": ("roofline.cli.models", "MFU / HFU of a measured training step"),
    "sweep": ("roofline.cli.sweeps", "a grid of configurations in one vectorized pass"),
    "serve": ("roofline.cli.serve", "plan a deployment: chips, parallelism, dtypes under "
              "TTFT/TPOT targets"),
    "plot": ("roofline.plot_cli", "charts as PNG / SVG / PDF (needs matplotlib: pip install "
             "'roofline[plot]')"),
    "report": ("roofline.plot_cli", "a standalone HTML report (and Markdown / CSV tables)"),
    "measure": ("roofline.measure.cli", "measure this machine: peaks, bandwidth, real kernels "
                "against their bound, collectives"),
    "trace": ("roofline.trace.cli", "run a PyTorch function and place its ops on the "
              "roofline"),
    "profile": ("roofline.profile.cli", "place a PyTorch profiler trace's kernels on their "
                "roofline bounds"),
}

# names this package exports from modules it does not import at start-up
_LAZY = {"OPS": ".ops", "op_estimate": ".ops", "add_model_args": ".models",
         "model_analysis": ".models"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register(module: str) -> Any:
    def build(sub: Any) -> None:  # the module's import (measure, trace: torch stays lazy)
        import_module(module).register(sub)

    return build


def _lazy_parser() -> argparse.ArgumentParser:
    """The command line with every command a placeholder until chosen (what main parses)."""
    p = _Parser(prog="roofline", description="Roofline bounds for ML work on accelerators.")
    p.add_argument("--version", action="version", version=f"roofline {__version__}")
    sub = cast(LazySubparsers, p.add_subparsers(dest="command", required=True,
                                                parser_class=_Parser, action=LazySubparsers))
    for name, (module, help_text) in COMMANDS.items():
        sub.add_lazy(name, help_text, _register(module))
    return p


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree, every command and op built (help walks, tests)."""
    p = _lazy_parser()
    expand(p)
    return p


def _inputs(args: argparse.Namespace, given: Sequence[str]) -> dict[str, str]:
    """The files a command may read (every other option or argument naming one on disk, each
    of a repeatable option's), path -> the option as given: no output may overwrite them."""
    found: dict[str, str] = {}
    for name, value in vars(args).items():
        if name in OUTPUT_OPTIONS:
            continue
        # a repeatable option (`--from A --from B`) reads each of its files
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, str) and one != STDOUT and os.path.exists(one):
                found.setdefault(one, _flag_given(one, name, given))
    return found


def _flag_given(value: str, name: str, given: Sequence[str]) -> str:
    """The option as typed that took `value` (`--from` for dest op_json), else `name` (an
    argument)."""
    for i, token in enumerate(given):
        if token.startswith("--"):
            flag, _, inline = token.partition("=")
            if inline == value or (not inline and i + 1 < len(given) and given[i + 1] == value):
                return flag
    return name


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command: its exit status (a signal: 128 + its number, one line)."""
    if argv is None:  # the process's own command line: it ends when the command does
        # What is loaded by now (numpy, the core) lives until then: the garbage collector's
        # full passes, which later imports trigger, skip it from here (`roofline model`:
        # 698M -> 669M instructions, docs/speed.md); a caller passing argv keeps its
        # collector as it was
        gc.freeze()
    with signals_raise():
        try:
            return _main(argv)
        except KeyboardInterrupt:
            return stopped(signal.SIGINT)
        except Stopped as exc:
            return stopped(exc.signum)


def _main(argv: Sequence[str] | None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a name with undecodable bytes must not crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:  # --help and --version write here
        args = _lazy_parser().parse_args(argv)
    except BrokenPipeError:
        drop_stdout()
        return 0
    except OSError as exc:
        return output_failed(exc)
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
        for name in OUTPUT_OPTIONS:  # stdout by another name: the summary goes to stderr
            if getattr(args, name, None) in STDOUT_ALIASES:
                setattr(args, name, STDOUT)
        outputs = [getattr(args, name, None) for name in OUTPUT_OPTIONS]
        check_destinations(outputs, _inputs(args, sys.argv[1:] if argv is None else argv))
        import numpy as np  # every command computes with it; --help and bad options exit above

        # an overflow to inf is refused where the Cost is made (one line); numpy's own
        # warnings would only add lines before it
        with stdout_reserved() if STDOUT in outputs else nullcontext(), \
                np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            code = args.func(args)  # a command may end with a status of its own (serve: 3)
        sys.stdout.flush()  # a full disk shows here, not in Python's clean-up at exit
    except RooflineError as exc:
        from .flags import cli_message  # a parameter named as the flag the user typed

        print(f"roofline: error: {one_line(cli_message(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `roofline hw list | head`
        drop_stdout()
        return 0
    except OSError as exc:  # stdout on a full disk (`> /dev/full`); files fail as RooflineError
        return output_failed(exc)
    return code or 0
