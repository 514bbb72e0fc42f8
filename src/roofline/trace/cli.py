"""`roofline trace path/to/script.py[:function]`: run a function once under the tracer.

Tracing real code means running it: the script is imported from its path and the function
called with no arguments (it builds its own inputs). Only point it at code you trust.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..argtypes import count_arg
from ..errors import RooflineError
from ..files import stdout_reserved
from ..hardware import load_chip


def script_target(target: str) -> tuple[Path, str, bool]:
    """'path/to/script.py[:function]' -> (the script, the function's name, whether it was
    named), checked without running anything."""
    path_text, sep, name = target.rpartition(":")
    if not sep and target.endswith(".py"):
        path_text, name = target, "main"
    if not path_text.endswith(".py") or not name.isidentifier():
        raise RooflineError(f"expected path/to/script.py[:function], got {target!r}")
    path = Path(path_text)
    if not path.is_file():
        raise RooflineError(f"script not found: {path}")
    return path, name, bool(sep)


def load_function(target: str) -> Any:
    """'path/to/script.py:function' (or just 'path/to/script.py' for its main()) -> the
    function (the script is imported, i.e. run)."""
    path, name, sep = script_target(target)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise RooflineError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))  # the script's own imports resolve
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:  # a script that exits when imported (a CLI without a guard)
        raise RooflineError(f"importing {path} called sys.exit({exc.code!r}); guard its "
                            "command-line code with `if __name__ == '__main__':`") from None
    except Exception as exc:  # the user's script failed: say so in one line
        raise RooflineError(f"importing {path} failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.pop(0)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise RooflineError(f"{path} has no function {name!r}"
                            + (" (name one: script.py:function)" if not sep else ""))
    return fn


@contextmanager
def script_output_to_stderr() -> Iterator[None]:
    """While the traced script runs, what it prints goes to stderr: stdout carries only our
    report (`--json` must parse). Python's print through stdout_reserved, and file descriptor
    1 itself for what a subprocess or C code writes there."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (closed): nothing there to keep clean
        saved = -1
    if saved >= 0:
        os.dup2(2, 1)
    try:
        with stdout_reserved():
            yield
    finally:
        if saved >= 0:
            os.dup2(saved, 1)
            os.close(saved)


def _cmd_trace(args: argparse.Namespace) -> None:
    from ..render.text import table
    from ..serialize import jsonable
    from ..units import format_bytes, format_si, format_time
    from .torch_trace import _torch, trace

    chip = load_chip(args.hw)  # every option is checked before the script runs
    torch = _torch()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise RooflineError("--device cuda: this torch has no CUDA device (CPU-only build?)")
    script_target(args.target)
    print(f"roofline: importing and running {args.target} (only trace code you trust)",
          file=sys.stderr)
    previous = torch.get_default_device()
    # tensors the script creates, at import or in the function, land on the chosen device
    torch.set_default_device(args.device)
    try:
        with script_output_to_stderr():  # importing runs the script too
            fn = load_function(args.target)
            result = trace(fn, time_ops=args.time)
    except RooflineError:
        raise
    except SystemExit as exc:  # the script ended the process: nothing was traced to report
        raise RooflineError(f"{args.target} called sys.exit({exc.code!r}) while it ran; "
                            "trace a function that returns") from None
    except Exception as exc:  # the traced function failed (e.g. it needs arguments)
        raise RooflineError(f"running {args.target} failed: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    finally:
        torch.set_default_device(previous)
    if args.json:
        import json

        print(json.dumps(jsonable(result.to_dict(chip)), indent=2))
        return
    rows = result.by_kind(chip)[: args.top]
    timed = args.time
    flags = any(r.flagged for r in rows)  # the column shows only when a row needs it
    body = [[r.name, str(r.count), format_si(r.flops), format_bytes(r.bytes),
             f"{r.intensity:.3g}", format_time(r.t_lower_s), r.bound]
            + ([format_time(r.time_s or 0), f"{100 * (r.efficiency or 0):.1f}%"] if timed else [])
            + (["yes" if r.flagged else ""] if flags else [])
            for r in rows]
    head = ["op kind", "count", "FLOPs", "bytes", "FLOP/B", "t_lower", "bound"]
    head += (["measured", "of roof"] if timed else []) + (["flagged"] if flags else [])
    lines = [f"{len(result.ops)} ops traced; placed on {chip.id}", "", table(head, body)]
    fusion = result.fusion(chip)
    lines += ["", f"total: {format_si(result.flops)}FLOP, {format_bytes(result.bytes)} moved "
              "(each op its own kernel: the unfused traffic); ops one by one >= "
              f"{format_time(fusion.t_lower_before_s)}",
              f"fusion headroom: {fusion.intermediates} intermediate tensors, "
              f"{format_bytes(fusion.bytes_removed)} of traffic a perfect fusion keeps on "
              f"chip; one fused kernel >= {format_time(fusion.t_lower_fused_s)} "
              f"({fusion.bound_fused}-bound)"]
    if result.flagged:
        lines.append("flagged (arithmetic without a FLOP formula, counted as 0): "
                     + ", ".join(sorted({op.op for op in result.flagged})))
    print("\n".join(lines))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "trace", help="run a PyTorch function and place its ops on the roofline",
        description="Imports the script (running it) and calls the function once with no "
        "arguments under a TorchDispatchMode; only use it on code you trust.")
    p.add_argument("target", help="path/to/script.py:function (default function: main)")
    p.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="default device for the tensors the function creates")
    p.add_argument("--time", action="store_true", help="time every op (achieved vs roof)")
    p.add_argument("--top", type=count_arg("--top"), default=30, help="op kinds to show")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_trace)
