"""Command line: a thin layer over the public API.

Bad input prints one line on stderr and exits 2; `--json` prints one JSON object.
Keep imports light: this module must not pull in matplotlib, torch, jax or pandas.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from . import __version__
from .cost import Cost
from .dtypes import dtype_names
from .errors import RooflineError
from .evaluate import evaluate
from .hardware import list_chips, load_chip
from .ops import ELEMENTWISE_KINDS, dot, elementwise, gemv, matmul
from .report import chip_dict, chip_text, estimate_text, jsonable, table
from .units import format_bytes, format_si, parse_count


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints two)
        self.exit(2, f"roofline: error: {message} (try '{self.prog} --help')\n")


def _count(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return parse_count(text, what)
        except RooflineError as exc:  # argparse already names the option
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{what}: ")) from None

    return parse


def _emit(data: dict[str, Any], as_json: bool, text: str) -> None:
    print(json.dumps(jsonable(data), indent=2) if as_json else text)


def _cmd_hw_list(args: argparse.Namespace) -> None:
    chips = [load_chip(c) for c in list_chips()]
    rows = [[c.id, c.name, format_si(c.peaks["bf16"].flops_per_s, "FLOP/s") if "bf16" in
             c.peaks else "-", format_bytes(c.memory[0].capacity_bytes or 0),
             format_si(c.memory[0].bandwidth_Bps, "B/s"), ", ".join(c.aliases)]
            for c in chips]
    data = {"chips": [{"id": c.id, "name": c.name, "vendor": c.vendor, "aliases": list(c.aliases)}
                      for c in chips]}
    _emit(data, args.json, table(["id", "name", "bf16 dense", "memory", "bandwidth",
                                  "aliases"], rows))


def _cmd_hw_show(args: argparse.Namespace) -> None:
    chip = load_chip(args.chip)
    _emit(chip_dict(chip), args.json, chip_text(chip))


def _run_op(args: argparse.Namespace, cost: Cost) -> None:
    est = evaluate(cost, args.hw)
    data = est.to_dict()
    data["derivation"] = cost.explain()
    _emit(data, args.json, estimate_text(est, explain=args.explain))


def _dtypes(args: argparse.Namespace) -> dict[str, Any]:
    return {"dtype": args.dtype, "out_dtype": args.out_dtype, "compute_dtype": args.compute_dtype}


def _cmd_matmul(args: argparse.Namespace) -> None:
    _run_op(args, matmul(args.m, args.k, args.n, weight_dtype=args.weight_dtype, **_dtypes(args)))


def _cmd_gemv(args: argparse.Namespace) -> None:
    _run_op(args, gemv(args.k, args.n, weight_dtype=args.weight_dtype, **_dtypes(args)))


def _cmd_dot(args: argparse.Namespace) -> None:
    _run_op(args, dot(args.n, args.dtype))


def _cmd_elementwise(args: argparse.Namespace) -> None:
    _run_op(args, elementwise(args.n, args.kind, ops_per_element=args.ops_per_element,
                              inputs=args.inputs, **_dtypes(args)))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="roofline", description="Roofline bounds for ML work on accelerators.")
    p.add_argument("--version", action="version", version=f"roofline {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    hw = sub.add_parser("hw", help="the hardware catalog")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, parser_class=_Parser)
    hw_list = hw_sub.add_parser("list", help="list the built-in chips")
    hw_list.add_argument("--json", action="store_true", help="print one JSON object")
    hw_list.set_defaults(func=_cmd_hw_list)
    hw_show = hw_sub.add_parser("show", help="peaks, memory levels, links, ridge points, sources")
    hw_show.add_argument("chip", help="catalog id, alias, or path to a chip .toml file")
    hw_show.add_argument("--json", action="store_true", help="print one JSON object")
    hw_show.set_defaults(func=_cmd_hw_show)

    op = sub.add_parser("op", help="bound one op on one chip")
    op_sub = op.add_subparsers(dest="op", required=True, parser_class=_Parser)
    dts = ", ".join(dtype_names())

    def op_parser(name: str, help_text: str, func: Callable[[argparse.Namespace], None],
                  dtypes: Sequence[str]) -> argparse.ArgumentParser:
        q = op_sub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
        q.add_argument("--dtype", default="bf16", help=f"input/activation dtype ({dts})")
        if "weight" in dtypes:
            q.add_argument("--weight-dtype", help="weight dtype (default: --dtype)")
        if "out" in dtypes:
            q.add_argument("--out-dtype", help="output dtype (default: --dtype)")
            q.add_argument("--compute-dtype", help="dtype whose peak applies (default: --dtype)")
        q.add_argument("--json", action="store_true", help="print one JSON object")
        q.add_argument("--explain", action="store_true", help="print the derivation")
        q.set_defaults(func=func)
        return q

    q = op_parser("matmul", "X[M,K] x W[K,N] -> Y[M,N]", _cmd_matmul, ["weight", "out"])
    q.add_argument("--m", required=True, type=_count("--m"), help="rows of X (tokens)")
    q.add_argument("--k", required=True, type=_count("--k"), help="contraction dimension")
    q.add_argument("--n", required=True, type=_count("--n"), help="columns of W")
    q = op_parser("gemv", "one token through W[K,N] (matmul with M = 1)", _cmd_gemv,
                  ["weight", "out"])
    q.add_argument("--k", required=True, type=_count("--k"), help="input features")
    q.add_argument("--n", required=True, type=_count("--n"), help="output features")
    q = op_parser("dot", "dot product of two length-N vectors", _cmd_dot, [])
    q.add_argument("--n", required=True, type=_count("--n"), help="vector length")
    q = op_parser("elementwise", "norm / softmax / activation / add over N elements",
                  _cmd_elementwise, ["out"])
    q.add_argument("--n", required=True, type=_count("--n"), help="number of elements")
    q.add_argument("--kind", default="generic", choices=list(ELEMENTWISE_KINDS),
                   help="preset operation count and inputs per element")
    q.add_argument("--ops-per-element", type=float, help="override the preset's ops per element")
    q.add_argument("--inputs", type=_count("--inputs"), help="override the number of inputs")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except RooflineError as exc:
        print(f"roofline: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `roofline hw list | head`
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
