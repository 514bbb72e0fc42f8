"""`roofline op ...`: one declaration per op (its flags, defaults from the chip, levers)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..argtypes import emit, typed
from ..dtypes import dtype_names
from ..errors import RooflineError
from ..evaluate import Estimate, evaluate
from ..hardware import Chip, load_chip, make_system
from ..levers import (
    ATTENTION_LEVERS,
    COLLECTIVE_LEVERS,
    DOT_LEVERS,
    ELEMENTWISE_LEVERS,
    GEMV_LEVERS,
    MATMUL_LEVERS,
    TILED_MATMUL_LEVERS,
    TP_LAYER_LEVERS,
    Lever,
    OpFunction,
    what_if,
)
from ..ops import ELEMENTWISE_KINDS, dot, elementwise, gemv, matmul
from ..ops.attention import IMPLEMENTATIONS, attention, flash_tiling, mla_attention
from ..ops.collectives import (
    ALGORITHMS,
    COLLECTIVES,
    busbw_factor,
    collective,
    crossover_from_times,
)
from ..ops.moe import batched_matmul, grouped_matmul
from ..ops.parallel import SHARDINGS, sharded_matmul
from ..ops.tiled_matmul import tiled_matmul, tiles_fit
from ..report import (
    estimate_text,
    extra_text,
    what_if_text,
)
from ..units import (
    parse_bytes,
    parse_count,
)
from ._base import _Parser


@dataclass(frozen=True)
class Arg:
    flag: str
    help: str
    kind: str = "count"  # count | bytes | float | str | flag | choice
    default: Any = None
    required: bool = False
    choices: Sequence[str] = ()
    name: str | None = None  # the op function's argument (default: from the flag)

    @property
    def dest(self) -> str:
        return self.name or self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class OpSpec:
    name: str
    help: str
    function: OpFunction
    args: list[Arg]
    levers: list[Lever] = field(default_factory=list)
    prepare: Callable[[dict[str, Any], Chip], dict[str, Any]] | None = None  # chip defaults
    report: Callable[[dict[str, Any], Estimate, Chip], dict[str, Any]] | None = None  # extras
    aliases: Sequence[str] = ()


def _dtype_args(*which: str) -> list[Arg]:
    names = ", ".join(dtype_names())
    table_ = {
        "dtype": Arg("--dtype", f"activation / input dtype ({names}, int4-g128, nvfp4, ...)",
                     "str", "bf16"),
        "weight": Arg("--weight-dtype", "weight dtype (default: --dtype)", "str"),
        "out": Arg("--out-dtype", "output dtype (default: --dtype)", "str"),
        "compute": Arg("--compute-dtype", "dtype whose peak applies (default: --dtype)", "str"),
        "kv": Arg("--kv-dtype", "KV cache dtype (default: --dtype)", "str"),
    }
    return [table_[w] for w in which]


def _flash_sram(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """FlashAttention's tiling defaults to the chip's per-SM SRAM (or a 128-row tile)."""
    if kwargs.get("impl", "flash") in ("flash", "mla") and kwargs.get("sram_bytes") is None \
            and kwargs.get("block_q") is None:
        kwargs.update(flash_tiling(chip))
    return kwargs


def _mla(**kwargs: Any) -> Any:
    return mla_attention(**kwargs)


def _attention(**kwargs: Any) -> Any:
    """`op attention`; --impl mla runs MLA: absorbed for a few new tokens (decode,
    speculative), expanded for a prompt."""
    if kwargs.get("impl") != "mla":
        return attention(**kwargs)
    for name in ("kv_heads", "head_dim", "v_head_dim", "window"):
        kwargs.pop(name, None)  # MLA's shapes come from its ranks (see `roofline op mla`)
    form = "absorbed" if kwargs["q_len"] <= 16 else "expanded"
    return mla_attention(**{**kwargs, "impl": None}, form=form)


def _tp_layer(**kwargs: Any) -> Any:
    from ..models import tp_layer  # the model graph: imported when used, not at CLI start

    # The layer's shape builds a model spec, so it is one value; batch and length may sweep.
    for name in ("hidden", "ffn", "heads", "kv_heads", "head_dim", "tp"):
        value = kwargs.get(name)
        if isinstance(value, np.ndarray):
            if np.unique(value).size > 1:
                flag = "--" + name.replace("_", "-")
                raise RooflineError(f"tp-layer: {flag} shapes the layer and cannot be swept "
                                    "(sweep --batch or --seq-len; one sweep per layer shape)")
            kwargs[name] = int(value.flat[0])
    return tp_layer(**kwargs)


def _placement(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """Groups larger than the chip's scale-up domain go hierarchical; NVLS needs the switch."""
    link = kwargs.get("link", "scale-up")
    system = make_system(chip)
    if kwargs.get("domain_size") is None and link == "scale-up" and "scale-up" in chip.links:
        kwargs["domain_size"] = system.chips_per_domain
    ranks = kwargs.get("ranks", kwargs.get("shards", kwargs.get("tp", 1)))
    if "link_share" not in kwargs and link == "scale-up":  # a torus ring uses some ports
        inside = kwargs.get("domain_size") or ranks
        kwargs["link_share"] = system.link_share(link, np.minimum(ranks, inside))
    if kwargs.get("algo") == "nvls" and not chip.link(link).in_switch_reduction:
        raise RooflineError(f"--algo nvls needs in-switch reduction (NVLink SHARP), which "
                            f"{chip.id!r}'s {link} link does not have (use ring or tree)")
    return kwargs


def _collective_report(kind: str) -> Callable[[dict[str, Any], Estimate, Chip],
                                              dict[str, Any]]:
    def report(kwargs: dict[str, Any], est: Estimate, chip: Chip) -> dict[str, Any]:
        nbytes, ranks = kwargs["nbytes"], kwargs["ranks"]
        t = float(est.t_lower_s)
        algbw = nbytes / t if t > 0 else None  # one rank: nothing moves, no bandwidth to quote
        out = {"algbw_Bps": algbw,
               "busbw_Bps": None if algbw is None else algbw * float(busbw_factor(kind, ranks)),
               "latency_crossover_bytes": None}
        if algbw is not None:
            out["latency_crossover_bytes"] = crossover_from_times(nbytes, est.time_s,
                                                                  est.cost.link_bytes)
        return out

    return report


def _collective_fn(kind: str) -> OpFunction:
    def run(**kwargs: Any) -> Any:
        return collective(kind, **kwargs)

    return run


COLLECTIVE_ARGS = [
    Arg("--bytes", "message size as nccl-tests counts it (e.g. 64MiB, 1GB)", "bytes",
        required=True, name="nbytes"),
    Arg("--ranks", "ranks in the group", required=True),
    Arg("--link", "link the group sits on (a group larger than the scale-up domain also "
        "uses scale-out)", "choice", "scale-up", choices=("scale-up", "scale-out")),
    Arg("--algo", "algorithm", "choice", "ring", choices=ALGORITHMS),
    Arg("--domain-size", "ranks per scale-up domain (default: the chip's)"),
]


PLACEMENT_ARGS = COLLECTIVE_ARGS[2:]


COLLECTIVE_OPS = [
    OpSpec(kind.replace("-", ""), f"{kind} of --bytes over --ranks ranks (alpha-beta model)",
           _collective_fn(kind), COLLECTIVE_ARGS, COLLECTIVE_LEVERS, _placement,
           _collective_report(kind), aliases=(kind,))
    for kind in COLLECTIVES
]


ATTENTION_ARGS = [
    Arg("--batch", "sequences", default=1), Arg("--q-len", "query tokens per sequence",
                                                required=True),
    Arg("--kv-len", "keys per sequence (context incl. the queries; default --q-len)"),
]


OPS = [
    OpSpec("matmul", "X[M,K] x W[K,N] -> Y[M,N]", matmul, [
        Arg("--m", "rows of X (tokens)", required=True),
        Arg("--k", "contraction dimension", required=True),
        Arg("--n", "columns of W", required=True),
        *_dtype_args("dtype", "weight", "out", "compute")], MATMUL_LEVERS),
    OpSpec("gemv", "one token through W[K,N] (matmul with M = 1)", gemv, [
        Arg("--k", "input features", required=True),
        Arg("--n", "output features", required=True),
        *_dtype_args("dtype", "weight", "out", "compute")], GEMV_LEVERS),
    OpSpec("dot", "dot product of two length-N vectors", dot, [
        Arg("--n", "vector length", required=True), *_dtype_args("dtype")], DOT_LEVERS),
    OpSpec("elementwise", "norm / softmax / activation / add over N elements", elementwise, [
        Arg("--n", "number of elements", required=True),
        Arg("--kind", "preset operation count and inputs per element", "choice", "generic",
            choices=list(ELEMENTWISE_KINDS)),
        Arg("--ops-per-element", "override the preset's ops per element", "float"),
        Arg("--inputs", "override the number of inputs"),
        *_dtype_args("dtype", "out", "compute")], ELEMENTWISE_LEVERS),
    OpSpec("tiled-matmul", "matmul with (bm, bn, bk) block tiles in SRAM and (wm, wn) warp tiles",
           tiled_matmul, [
        Arg("--m", "rows of X (tokens)", required=True),
        Arg("--k", "contraction dimension", required=True),
        Arg("--n", "columns of W", required=True),
        Arg("--bm", "block tile rows", default=128), Arg("--bn", "block tile columns", default=128),
        Arg("--bk", "block tile depth", default=64),
        Arg("--wm", "warp tile rows", default=64), Arg("--wn", "warp tile columns", default=64),
        Arg("--level", "memory level the tiles are loaded from", "choice", "hbm",
            choices=("hbm", "l2")),
        *_dtype_args("dtype", "weight", "out", "compute")], TILED_MATMUL_LEVERS, tiles_fit),
    OpSpec("batched-matmul", "X[B,M,K] x W[B,K,N]: a separate weight per batch element",
           batched_matmul, [
        Arg("--batch", "batch elements (each with its own weight)", required=True),
        Arg("--m", "rows per batch element", default=1),
        Arg("--k", "contraction dimension", required=True),
        Arg("--n", "output features", required=True),
        *_dtype_args("dtype", "weight", "out", "compute")], GEMV_LEVERS),
    OpSpec("grouped-matmul", "MoE experts: T tokens routed to top-k of E [K,N] experts",
           grouped_matmul, [
        Arg("--tokens", "tokens entering the MoE layer", required=True),
        Arg("--k", "input features", required=True),
        Arg("--n", "output features per expert", required=True),
        Arg("--experts", "routed experts E", required=True),
        Arg("--top-k", "experts per token", required=True),
        *_dtype_args("dtype", "weight", "out", "compute")], MATMUL_LEVERS[1:]),
    OpSpec("sharded-matmul", "X[M,K] x W[K,N] sharded over chips: T_math vs T_comm per chip",
           sharded_matmul, [
        Arg("--m", "rows of X (tokens)", required=True),
        Arg("--k", "contraction dimension (full, before sharding)", required=True),
        Arg("--n", "columns of W (full)", required=True),
        Arg("--shards", "chips sharing the matmul", required=True),
        Arg("--shard", "which dimension is split", "choice", "contraction", choices=SHARDINGS),
        Arg("--reduce", "how partial sums combine (contraction sharding)", "choice",
            "all-reduce", choices=("all-reduce", "reduce-scatter")),
        Arg("--no-gather", "output sharding: leave Y sharded (no all-gather)", "flag"),
        *PLACEMENT_ARGS, *_dtype_args("dtype", "weight", "out", "compute")], MATMUL_LEVERS[1:],
        _placement),
    OpSpec("tp-layer", "one decoder layer (forward) with Megatron tensor parallelism",
           _tp_layer, [
        Arg("--batch", "sequences", default=1), Arg("--seq-len", "tokens per sequence",
                                                    required=True),
        Arg("--hidden", "model width", required=True), Arg("--ffn", "MLP width", required=True),
        Arg("--heads", "query heads", required=True),
        Arg("--kv-heads", "KV heads (default --heads)"),
        Arg("--head-dim", "head dimension (default hidden / heads)"),
        Arg("--tp", "tensor-parallel degree", default=1),
        Arg("--no-gated", "plain (non-gated) MLP", "flag"),
        Arg("--impl", "attention kernel", "choice", "flash", choices=IMPLEMENTATIONS),
        Arg("--sram-bytes", "flash SRAM budget M (default: the chip's per-SM SRAM)", "bytes"),
        Arg("--block-q", "flash query-block rows Br"),
        *PLACEMENT_ARGS, *_dtype_args("dtype")], TP_LAYER_LEVERS,
        lambda kw, chip: _placement(_flash_sram(kw, chip), chip)),
    OpSpec("attention", "attention: prefill, decode (--q-len 1) or speculative (--q-len k); "
           "--impl mla for DeepSeek's latent attention", _attention, [
        *ATTENTION_ARGS,
        Arg("--heads", "query heads", required=True),
        Arg("--kv-heads", "KV heads (GQA / MQA; default --heads)"),
        Arg("--head-dim", "head dimension", default=128),
        Arg("--v-head-dim", "value head dimension (default --head-dim)"),
        Arg("--causal", "causal attention (the default)", "flag"),
        Arg("--no-causal", "full (bidirectional) attention", "flag"),
        Arg("--window", "causal sliding window (keys)"),
        Arg("--impl", "kernel; mla: DeepSeek MLA with V3's ranks (op mla sets them)", "choice",
            "flash", choices=(*IMPLEMENTATIONS, "mla")),
        Arg("--sram-bytes", "flash SRAM budget M (default: the chip's per-SM SRAM)", "bytes"),
        Arg("--block-q", "flash query-block rows Br (overrides --sram-bytes)"),
        *_dtype_args("dtype", "kv", "out")], ATTENTION_LEVERS, _flash_sram),
    OpSpec("mla", "multi-head latent attention (DeepSeek-V2/V3)", _mla, [
        *ATTENTION_ARGS,
        Arg("--heads", "query heads", default=128),
        Arg("--kv-lora-rank", "latent KV rank r", default=512),
        Arg("--qk-rope-dim", "RoPE key dimension", default=64),
        Arg("--qk-nope-dim", "non-RoPE query/key head dimension", default=128),
        Arg("--v-head-dim", "value head dimension", default=128),
        Arg("--form", "absorbed (decode) or expanded (prefill)", "choice", "absorbed",
            choices=("absorbed", "expanded")),
        Arg("--no-causal", "full (bidirectional) attention", "flag"),
        Arg("--impl", "kernel (default: decode for absorbed, flash for expanded)", "choice",
            choices=IMPLEMENTATIONS),
        Arg("--sram-bytes", "flash SRAM budget M (default: the chip's per-SM SRAM)", "bytes"),
        Arg("--block-q", "flash query-block rows Br"),
        *_dtype_args("dtype", "kv", "out")], ATTENTION_LEVERS,
        lambda kw, chip: _flash_sram(kw, chip) if kw.get("impl") == "flash" or (
            kw.get("impl") is None and kw.get("form") == "expanded") else kw),
    *COLLECTIVE_OPS,
]


def _add_arg(parser: argparse.ArgumentParser, arg: Arg) -> None:
    dest = arg.dest
    if arg.kind == "flag":  # absent: None, so the op's own default stands
        parser.add_argument(arg.flag, dest=dest, action="store_const", const=True,
                            help=arg.help)
        return
    converters: dict[str, Any] = {"count": typed(parse_count, arg.flag),
                                  "bytes": typed(parse_bytes, arg.flag),
                                  "float": float, "str": str, "choice": str}
    extra: dict[str, Any] = {"choices": list(arg.choices)} if arg.kind == "choice" else {}
    parser.add_argument(arg.flag, dest=dest, type=converters[arg.kind], default=arg.default,
                        required=arg.required, help=arg.help, **extra)


def _op_kwargs(spec: OpSpec, args: argparse.Namespace) -> dict[str, Any]:
    kwargs = {}
    for arg in spec.args:
        dest = arg.dest
        value = getattr(args, dest)
        if value is None:
            continue
        if dest.startswith("no_"):  # --no-causal, --no-gather, --no-gated
            kwargs[dest.removeprefix("no_")] = False
        else:
            kwargs[dest] = value
    return _with_defaults(kwargs)


def _with_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Defaults that depend on other arguments: attention's keys default to its queries."""
    if "q_len" in kwargs and "kv_len" not in kwargs:
        kwargs["kv_len"] = kwargs["q_len"]
    return kwargs


def _prepared_kwargs(args: argparse.Namespace, chip: Chip) -> dict[str, Any]:
    spec: OpSpec = args.spec
    kwargs = _op_kwargs(spec, args)
    return spec.prepare(kwargs, chip) if spec.prepare else kwargs


def op_estimate(argv: Sequence[str], chip: Chip) -> Estimate:
    """Evaluate an op given as `roofline op` arguments (e.g. ['matmul', '--m', '128', ...])
    on a chip: the plot and report commands take ops this way."""
    from . import build_parser  # the package builds the whole parser (this module is part)

    args = build_parser().parse_args(["op", *argv])
    return evaluate(args.spec.function(**_prepared_kwargs(args, chip)), chip)


def _cmd_op(args: argparse.Namespace) -> None:
    spec: OpSpec = args.spec
    chip = load_chip(args.hw)
    kwargs = _prepared_kwargs(args, chip)
    cost = spec.function(**kwargs)
    est = evaluate(cost, chip)
    data = est.to_dict()
    data["derivation"] = cost.explain()
    text = estimate_text(est, explain=args.explain, chip=chip)
    if args.calibrated:  # the plain bound stays; the calibrated estimate is added and labelled
        from ..measure.calibration import calibrate, calibrated_text, load_calibration

        record = calibrate(est, load_calibration(args.calibrated), chip=chip)
        data["calibrated"] = record.to_dict()
        text += "\n\n" + calibrated_text(record)
    if spec.report:
        extra = spec.report(kwargs, est, chip)
        data.update(extra)
        text += "\n" + extra_text(extra)
    if args.explain and spec.levers:
        rows = what_if(spec.function, kwargs, chip, spec.levers, est)
        data["what_if"] = [vars(r) for r in rows]
        text += "\n\n" + what_if_text(est, rows)
    emit(data, args.json, text)


def register(sub: Any) -> None:
    op = sub.add_parser("op", help="bound one op on one chip")
    op_sub = op.add_subparsers(dest="op", required=True, parser_class=_Parser)
    for spec in OPS:
        q = op_sub.add_parser(spec.name, help=spec.help, description=spec.help,
                              aliases=list(spec.aliases))
        q.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
        for arg in spec.args:
            _add_arg(q, arg)
        q.add_argument("--json", action="store_true", help="print one JSON object")
        q.add_argument("--explain", action="store_true",
                       help="print the derivation and what would move the op")
        q.add_argument("--calibrated", metavar="FILE", help="also give an estimate calibrated "
                       "with measured efficiencies (from roofline measure ... "
                       "--calibration-out)")
        q.set_defaults(func=_cmd_op, spec=spec)
