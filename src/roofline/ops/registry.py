"""Every op by name, with its declared parameters; `run_op` evaluates one the way
`roofline op NAME` does (same defaults, chip-dependent ones included).

>>> from roofline.ops import run_op
>>> est = run_op("matmul", "h100", m=128, k=8192, n=8192)
>>> round(est.intensity["hbm"], 1), est.bound
(124.1, 'hbm')
>>> resolve_op("attention", "h100", q_len=4096, heads=32)["sram_bytes"]  # H100's SMEM per SM
233472.0
"""

from __future__ import annotations

from typing import Any

from ..cost import Cost
from ..errors import RooflineError, unknown
from ..evaluate import Estimate, evaluate
from ..hardware import Chip, load_chip
from .attention_decls import ATTENTION, MLA
from .collective_decls import COLLECTIVE_OPS
from .decls import DOT, ELEMENTWISE, GEMV, LINEAR_ATTENTION, MATMUL
from .moe import BATCHED_MATMUL, GROUPED_MATMUL
from .parallel import SHARDED_MATMUL, TP_LAYER
from .params import OpDecl
from .tiled_matmul import TILED_MATMUL

OPS: dict[str, OpDecl] = {d.name: d for d in (
    MATMUL, GEMV, DOT, ELEMENTWISE, TILED_MATMUL, BATCHED_MATMUL, GROUPED_MATMUL,
    SHARDED_MATMUL, TP_LAYER, ATTENTION, MLA, LINEAR_ATTENTION, *COLLECTIVE_OPS)}

_BY_ALIAS = {alias: d for d in OPS.values() for alias in d.aliases}


def op_decl(name: str | OpDecl) -> OpDecl:
    """An op's declaration by name or alias ('allreduce' or 'all-reduce')."""
    if isinstance(name, OpDecl):
        return name
    found = OPS.get(name) or _BY_ALIAS.get(name)
    if found is None:
        raise unknown("op", name, [*OPS, *_BY_ALIAS])
    return found


def resolve_op(op: str | OpDecl, hw: Chip | str, **given: Any) -> dict[str, Any]:
    """The op function's keyword arguments: what was given (None: not given), then declared
    defaults, values that follow another parameter, and defaults from the chip. These are the
    inputs `roofline op ... --json` echoes."""
    decl, chip = op_decl(op), load_chip(hw)
    params = {p.name: p for p in decl.params}
    for key in given:
        if key not in params:
            raise unknown(f"parameter of op {decl.name!r}", key, params)
    kwargs: dict[str, Any] = {}
    for p in decl.params:
        value = given.get(p.name)
        if value is None:
            value = p.default
        if value is None and p.required:
            raise RooflineError(f"op {decl.name!r}: {p.name} is required ({p.help})")
        if value is not None:
            kwargs[p.name] = value
    for p in decl.params:
        if p.follows and p.name not in kwargs:
            kwargs[p.name] = kwargs[p.follows]
    if decl.prepare:
        kwargs = decl.prepare(kwargs, chip)
    order = {name: i for i, name in enumerate(params)}  # declared order; chip extras last
    return dict(sorted(kwargs.items(), key=lambda kv: order.get(kv[0], len(order))))


def op_cost(op: str | OpDecl, hw: Chip | str, **given: Any) -> Cost:
    """The op's Cost with every default applied (chip-dependent ones too)."""
    decl = op_decl(op)
    return decl.function(**resolve_op(decl, hw, **given))


def run_op(op: str | OpDecl, hw: Chip | str, **given: Any) -> Estimate:
    """Evaluate an op by name on a chip, as `roofline op NAME` does."""
    chip = load_chip(hw)
    return evaluate(op_cost(op, chip, **given), chip)
