"""`roofline op ...`: options generated from each op's declared parameters (roofline.ops);
no op knowledge here. `op_estimate` parses one `--op '...'` spec of `plot` / `report`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..argtypes import Range, add_chip_options, chip_from, emit, ranged, typed
from ..errors import RooflineError
from ..evaluate import Estimate, evaluate
from ..hardware import Chip
from ..ops.params import OpDecl, Param
from ..ops.registry import OPS as REGISTRY
from ..ops.registry import op_decl, resolve_op
from ..units import parse_bytes, parse_count, parse_number
from ._base import LazySubparsers, _Parser
from .expect import add_expect_option

OPS = list(REGISTRY.values())  # every declared op, in the order `roofline op --help` lists

_CONVERT = {"count": parse_count, "bytes": parse_bytes}


def add_param(parser: argparse.ArgumentParser, p: Param) -> None:
    """One declared parameter as an option, with its declared default (None where the op
    layer decides: `resolve_op` fills in what follows another value or the chip)."""
    if p.kind == "bool":  # --causal / --no-causal; absent: None, the declared default stands
        parser.add_argument(p.option, dest=p.name, action=argparse.BooleanOptionalAction,
                            help=p.help_text)
        return
    extra: dict[str, Any] = {"choices": list(p.choices)} if p.kind == "choice" else {}
    convert = ranged(p.option, Range(*p.bounds), parse_number) if p.kind == "float" else \
        typed(_CONVERT[p.kind], p.option) if p.kind in _CONVERT else str
    parser.add_argument(p.option, dest=p.name, type=convert, default=p.default,
                        required=p.required, help=p.help_text, **extra)


def given(decl: OpDecl, args: argparse.Namespace) -> dict[str, Any]:
    """The parameters given on the command line (None: left out)."""
    return {p.name: getattr(args, p.name) for p in decl.params}


def op_parser(decl: OpDecl, prog: str) -> _Parser:
    """A parser for one op's parameters alone (an `--op` spec of plot and report)."""
    parser = _Parser(prog=prog, description=decl.help)
    for p in decl.params:
        add_param(parser, p)
    return parser


def op_estimate(argv: Sequence[str], chip: Chip) -> Estimate:
    """Evaluate an op given as `roofline op` words (['matmul', '--m', '128', ...]) on a chip,
    parsed by that op's own generated parser (bad options: one line, exit 2)."""
    decl = op_decl(argv[0])
    args = op_parser(decl, f"roofline op {decl.name}").parse_args(list(argv[1:]))
    values = given(decl, args)
    empty = next((p for p in decl.params if isinstance(values[p.name], str)
                  and not values[p.name].strip()), None)
    if empty is not None:
        raise RooflineError(f"{empty.option}: empty value (leave the option out for its "
                            "default)")
    return evaluate(decl.function(**resolve_op(decl, chip, **values)), chip)


def _cmd_op(args: argparse.Namespace) -> None:
    decl: OpDecl = args.decl
    chip = chip_from(args)
    kwargs = resolve_op(decl, chip, **given(decl, args))
    cost = decl.function(**kwargs)
    est = evaluate(cost, chip)
    data = est.to_dict()
    # the inputs as resolved; a collective's "auto" as what it picked per size
    shown = {k: v for k, v in kwargs.items() if k != "chip"}
    if shown.get("algo") == "auto" and cost.algorithm is not None:
        shown["algo"] = cost.algorithm
    data["inputs"] = {"op": decl.name, **shown}
    data["derivation"] = cost.explain()
    text = ""  # for people: not built (nor its renderers imported) for --json
    if not args.json:
        from ..render.estimate import estimate_text

        text = estimate_text(est, explain=args.explain, chip=chip)
    if args.calibrated:  # the plain bound stays; the calibrated estimate is added and labelled
        from ..measure.calibration import calibrate, calibrated_text, load_calibration

        record = calibrate(est, load_calibration(args.calibrated), chip=chip)
        data["calibrated"] = record.to_dict()
        text += "\n\n" + calibrated_text(record)
    extra: dict[str, Any] = {}
    if decl.extras:
        extra = decl.extras(kwargs, est)
        data.update(extra)
        if not args.json:
            from ..render.estimate import extra_text

            text += "\n" + extra_text(extra)
    if args.expect:  # beside the bound, never in place of it
        from .expect import op_expected

        data["expected"], more = op_expected(cost, chip, args, extra)
        text += "\n\n" + more
    if args.explain:
        from ..levers import levers_for, what_if
        from ..render.estimate import what_if_text

        levers = levers_for(decl.name)
        if levers:
            rows = what_if(decl.function, kwargs, chip, levers, est)
            data["what_if"] = [vars(r) for r in rows]
            text += "\n\n" + what_if_text(est, rows)
    emit(data, args.json, text)


def register(sub: Any) -> None:
    op = sub.add_parser("op", help="bound one op on one chip")
    op_sub = op.add_subparsers(dest="op", required=True, parser_class=_Parser,
                               action=LazySubparsers)
    for decl in OPS:  # each op's options are built when it is the one chosen
        op_sub.add_lazy(decl.name, decl.help, partial(_add_op, decl=decl), decl.aliases)


def _add_op(sub: Any, decl: OpDecl) -> None:
    q = sub.add_parser(decl.name, help=decl.help, description=decl.help,
                       aliases=list(decl.aliases))
    add_chip_options(q)
    for p in decl.params:
        add_param(q, p)
    q.add_argument("--json", action="store_true", help="print one JSON object (the "
                   "estimate, its inputs as resolved and the derivation)")
    q.add_argument("--explain", action="store_true",
                   help="print the derivation and what would move the op")
    q.add_argument("--calibrated", metavar="FILE", help="also give an estimate calibrated "
                   "with measured efficiencies (from roofline measure ... "
                   "--calibration-out)")
    add_expect_option(q, kernel=True)
    q.set_defaults(func=_cmd_op, decl=decl)
