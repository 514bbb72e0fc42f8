"""Command line: a thin layer over the public API.

Bad input prints one line on stderr and exits 2; `--json` prints one JSON object.
Keep imports light: this module must not pull in matplotlib, torch, jax or pandas.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from . import __version__
from .argtypes import emit, typed
from .dtypes import dtype_names
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .hardware import Chip, list_chips, load_chip, make_system
from .levers import (
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
from .ops import ELEMENTWISE_KINDS, dot, elementwise, gemv, matmul
from .ops.attention import IMPLEMENTATIONS, attention, flash_tiling, mla_attention
from .ops.collectives import (
    ALGORITHMS,
    COLLECTIVES,
    busbw_factor,
    collective,
    latency_crossover_bytes,
)
from .ops.moe import batched_matmul, grouped_matmul
from .ops.parallel import SHARDINGS, sharded_matmul
from .ops.tiled_matmul import tiled_matmul
from .quant import quant_table
from .report import (
    chip_dict,
    chip_text,
    estimate_text,
    extra_text,
    mfu_text,
    model_text,
    model_what_if_text,
    sweep_text,
    table,
    what_if_text,
)
from .solve import (
    critical_batch,
    critical_batch_term,
    critical_shard_dim_term,
    decode_critical_batch,
)
from .units import (
    format_bytes,
    format_si,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_number,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints two)
        self.exit(2, f"roofline: error: {message} (try '{self.prog} --help')\n")


# --- hw ---------------------------------------------------------------------------------------


def _cmd_hw_list(args: argparse.Namespace) -> None:
    chips = [load_chip(c) for c in list_chips()]
    rows = [[c.id, c.name, format_si(c.peaks["bf16"].flops_per_s, "FLOP/s") if "bf16" in
             c.peaks else "-", format_bytes(c.memory[0].capacity_bytes or 0),
             format_si(c.memory[0].bandwidth_Bps, "B/s"), ", ".join(c.aliases)]
            for c in chips]
    data = {"chips": [{"id": c.id, "name": c.name, "vendor": c.vendor, "aliases": list(c.aliases)}
                      for c in chips]}
    emit(data, args.json, table(["id", "name", "bf16 dense", "memory", "bandwidth",
                                  "aliases"], rows))


def _cmd_hw_show(args: argparse.Namespace) -> None:
    chip = load_chip(args.chip)
    emit(chip_dict(chip), args.json, chip_text(chip))


# --- ops: one declaration per op --------------------------------------------------------------


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
    if kwargs.get("impl", "flash") == "flash" and kwargs.get("sram_bytes") is None \
            and kwargs.get("block_q") is None:
        kwargs.update(flash_tiling(chip))
    return kwargs


def _mla(**kwargs: Any) -> Any:
    return mla_attention(**kwargs)


def _tp_layer(**kwargs: Any) -> Any:
    from .models import tp_layer  # the model graph: imported when used, not at CLI start

    return tp_layer(**kwargs)


def _placement(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """Groups larger than the chip's scale-up domain go hierarchical; NVLS needs the switch."""
    link = kwargs.get("link", "scale-up")
    if kwargs.get("domain_size") is None and link == "scale-up" and "scale-up" in chip.links:
        kwargs["domain_size"] = make_system(chip).chips_per_domain
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
        links = list(est.cost.link_bytes)
        if len(links) == 1 and algbw is not None:  # one link: alpha·steps = bytes/W once
            link = chip.link(links[0])
            out["latency_crossover_bytes"] = latency_crossover_bytes(
                est.cost, nbytes, link.latency_s, link.bandwidth_Bps, links[0])
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
        *_dtype_args("dtype", "weight", "out", "compute")], TILED_MATMUL_LEVERS),
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
    OpSpec("attention", "attention: prefill, decode (--q-len 1) or speculative (--q-len k)",
           attention, [
        *ATTENTION_ARGS,
        Arg("--heads", "query heads", required=True),
        Arg("--kv-heads", "KV heads (GQA / MQA; default --heads)"),
        Arg("--head-dim", "head dimension", default=128),
        Arg("--v-head-dim", "value head dimension (default --head-dim)"),
        Arg("--no-causal", "full (bidirectional) attention", "flag"),
        Arg("--window", "causal sliding window (keys)"),
        Arg("--impl", "kernel", "choice", "flash", choices=IMPLEMENTATIONS),
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
    if arg.kind == "flag":
        parser.add_argument(arg.flag, dest=dest, action="store_true", help=arg.help)
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
        if dest.startswith("no_"):  # --no-causal, --no-gather, --no-gated
            kwargs[dest.removeprefix("no_")] = not value
        elif value is not None:
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
        from .measure.calibration import calibrate, calibrated_text, load_calibration

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


def _cmd_critical_batch(args: argparse.Namespace) -> None:
    chip = load_chip(args.hw)
    dtypes = {"dtype": args.dtype, "weight_dtype": args.weight_dtype,
              "out_dtype": args.out_dtype, "compute_dtype": args.compute_dtype}
    term = critical_batch_term(chip, args.k, args.n, **dtypes)
    tokens = float(critical_batch(chip, args.k, args.n, **dtypes))  # inf: never
    sequences = float(decode_critical_batch(chip, args.k, args.n, q_len=args.q_len, **dtypes))
    never = not math.isfinite(tokens)
    data = {"hardware": chip.id, "critical_batch": None if never else tokens,
            "compute_bound_reachable": not never,
            "decode_critical_sequences": None if never else sequences, "q_len": args.q_len,
            "derivation": [term.render()]}
    shape = ", ".join(f"{n} = {v}" for n, v in (("K", args.k), ("N", args.n)) if v) or \
        "large K, N"
    verdict = (["  never compute-bound: the activation traffic alone outweighs the work "
                "at this K, N"] if never else
               [f"  matmul turns compute-bound at M* = {tokens:.4g} tokens",
                f"  decode weight GEMMs at {sequences:.4g} sequences ({args.q_len} token(s) "
                "each); decode attention never does by batching"])
    text = "\n".join([
        f"critical batch on {chip.id} ({shape}; weights {args.weight_dtype or args.dtype}, "
        f"activations {args.dtype}):", *verdict,
        *([f"  {term.render()}"] if args.explain else [])])
    emit(data, args.json, text)


def _cmd_critical_dim(args: argparse.Namespace) -> None:
    if args.shards < 2:
        raise RooflineError("--shards: a sharded matmul needs at least 2 chips")
    chip = load_chip(args.hw)
    kind = args.reduce
    factor = float(busbw_factor(kind, args.shards))  # link bytes per byte of partial sums
    term = critical_shard_dim_term(chip, args.link, args.dtype, factor)
    per_chip = float(term.expr.value)
    data = {"hardware": chip.id, "link": args.link, "shards": args.shards, "reduce": kind,
            "critical_shard_dim": per_chip, "critical_total_dim": per_chip * args.shards,
            "derivation": [term.render()]}
    link = chip.link(args.link)
    text = "\n".join([
        f"critical per-chip contraction shard on {chip.id} over {args.link} "
        f"({link.technology}, {format_si(link.bandwidth_Bps, 'B/s')} per direction), "
        f"{args.shards} shards, {kind} of the partial sums:",
        f"  compute-bound when K / {args.shards} > {per_chip:.4g} "
        f"(K > {per_chip * args.shards:.4g}); the batch cancels out",
        *([f"  {term.render()}"] if args.explain else [])])
    emit(data, args.json, text)


def _cmd_model(args: argparse.Namespace) -> None:
    from .models import list_models, load_model
    from .models.params import param_counts

    if args.model == "list":
        rows, data = [], []
        for name in list_models():
            spec = load_model(name)
            counts = param_counts(spec)
            rows.append([name, spec.model_type, f"{counts.total / 1e9:.3g}B",
                         f"{counts.active / 1e9:.3g}B" if counts.active < counts.total else "-",
                         str(spec.layers), str(spec.hidden)])
            data.append({"id": name, "model_type": spec.model_type, "params": counts.total,
                         "active_params": counts.active, "source": spec.source})
        emit({"models": data}, args.json, table(["id", "type", "params", "active", "layers",
                                                  "hidden"], rows))
        return
    _model_step(args)


def _model_step(args: argparse.Namespace) -> None:
    from .levers import model_what_if

    result = model_analysis(args)
    data, text = result.to_dict(), model_text(result, explain=args.explain)
    if args.csv or args.markdown:
        _model_tables(result, args.csv, args.markdown)
    if args.explain:
        changes = model_what_if(args.model, load_chip(args.hw), result.phase, result.parallel,
                                result.precision, args.impl)
        data["what_if"] = [vars(r) for r in changes]
        text += "\n\n" + model_what_if_text(changes)
    emit(data, args.json, text)


def model_analysis(args: argparse.Namespace) -> Any:
    """The ModelAnalysis that `add_model_args` options describe (shared with `plot model`)."""
    from .models import Parallel, Precision, analyze, decode, prefill
    from .models import train as train_phase

    if args.phase == "decode":
        phase = decode(args.batch, args.context, args.k)
    elif args.phase == "prefill":
        phase = prefill(args.batch, args.prompt_len)
    else:
        phase = train_phase(args.batch, args.seq_len or args.prompt_len, args.recompute)
    par = Parallel(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, cp=args.cp,
                   microbatches=args.microbatches, fsdp=args.fsdp)
    prec = Precision(weights=args.weight_dtype or args.dtype, activations=args.dtype,
                     kv_cache=args.kv_dtype)
    return analyze(args.model, args.hw, phase, par, prec, impl=args.impl)


def add_model_args(mp: argparse.ArgumentParser) -> None:
    """The options that describe one model step (roofline model, roofline plot model)."""
    count = typed(parse_count, "value")
    mp.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    mp.add_argument("--phase", default="decode", choices=["prefill", "decode", "train"])
    mp.add_argument("--batch", type=count, default=1, help="sequences per step")
    mp.add_argument("--prompt-len", type=count, default=2048, help="prefill tokens")
    mp.add_argument("--seq-len", type=count, help="training sequence length")
    mp.add_argument("--context", type=count, default=4096,
                    help="decode: tokens already in the KV cache")
    mp.add_argument("--k", type=count, default=1,
                    help="decode: new tokens per step (speculative decoding)")
    for name, text in [("tp", "tensor"), ("pp", "pipeline"), ("dp", "data"), ("ep", "expert"),
                       ("cp", "context")]:
        mp.add_argument(f"--{name}", type=count, default=1, help=f"{text} parallel")
    mp.add_argument("--microbatches", type=count, default=1,
                    help="pipeline micro-batches (bubble (m + pp - 1)/m)")
    mp.add_argument("--fsdp", action="store_true", help="training: shard weights over dp")
    mp.add_argument("--recompute", action="store_true", help="training: full recomputation")
    mp.add_argument("--dtype", default="bf16", help="activation / compute dtype")
    mp.add_argument("--weight-dtype", help="weights (e.g. int4-g128, fp8; default --dtype)")
    mp.add_argument("--kv-dtype", help="KV cache dtype (default --dtype)")
    mp.add_argument("--impl", default="flash", choices=IMPLEMENTATIONS, help="attention kernel")


MODEL_OP_COLUMNS = ["group", "name", "count", "flops", "hbm_bytes", "link_bytes", "intensity",
                    "t_lower_s", "t_upper_s", "bound", "share"]


def _model_tables(result: Any, csv_path: str | None, md_path: str | None) -> None:
    """The per-op table of a model step as CSV (raw SI numbers) and / or Markdown."""
    rows = [[getattr(op, c) for c in MODEL_OP_COLUMNS] for op in result.ops]
    if csv_path:
        _write_csv(csv_path, {c: np.array([r[i] for r in rows], dtype=object)
                              for i, c in enumerate(MODEL_OP_COLUMNS)})
    if md_path:
        from .files import write_text
        from .html_report import markdown_table

        shown = [[str(v) if isinstance(v, str) else f"{float(v):.4g}" for v in r] for r in rows]
        write_text(md_path, markdown_table(MODEL_OP_COLUMNS, shown) + "\n")


def _cmd_mfu(args: argparse.Namespace) -> None:
    from .models.mfu import mfu

    r = mfu(args.params, args.tokens_per_step, args.step_time_s, args.gpus, args.hw,
            args.dtype, args.layers, args.hidden, args.seq_len, args.recompute, args.causal)
    if r.warning and not args.json:
        print(f"roofline: warning: {r.warning}", file=sys.stderr)
    emit(vars(r), args.json, mfu_text(r))


def _cmd_sweep_model(args: argparse.Namespace) -> None:
    from .sweep import parse_axis, parse_list, sweep_model

    length = {"decode": args.context, "prefill": args.prompt_len, "train": args.seq_len}
    result = sweep_model(
        args.model, parse_list(args.hw, "--hw"), args.phase, parse_axis(args.batch, "--batch"),
        parse_axis(length[args.phase], "--context/--prompt-len/--seq-len"),
        tp=_ints(args.tp, "--tp"), pp=_ints(args.pp, "--pp"), dp=_ints(args.dp, "--dp"),
        ep=_ints(args.ep, "--ep"),
        weight_dtypes=parse_list(args.weight_dtype or args.dtype, "--weight-dtype"),
        kv_dtypes=parse_list(args.kv_dtype or args.dtype, "--kv-dtype"), dtype=args.dtype, k=args.k,
        microbatches=args.microbatches)
    limit = args.max_latency
    frontier = result.frontier(limit)
    if args.csv:
        _write_csv(args.csv, result.columns)
    if args.plot:
        from .plot import plot_model_sweep, save_figure

        save_figure(plot_model_sweep(result), args.plot)
    if args.json:
        data = {"frontier": frontier}
        if args.all:
            data["points"] = {k: v.tolist() for k, v in result.columns.items()}
        emit(data, True, "")
        return
    print(sweep_text(result, frontier, limit))


def _cmd_sweep_op(args: argparse.Namespace) -> None:
    from .sweep import parse_axis, parse_list, sweep_op

    spec: OpSpec = args.spec
    numeric: dict[str, Any] = {}
    categorical: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for arg in spec.args:
        dest = arg.dest
        value = getattr(args, dest)
        if value is None:
            continue
        if arg.kind == "flag":
            fixed[dest.removeprefix("no_")] = not value
        elif arg.kind == "count":
            numeric[dest] = parse_axis(str(value), arg.flag)
        elif arg.kind == "bytes":
            numeric[dest] = parse_axis(str(value), arg.flag, parse_bytes, whole=False)
        elif arg.kind == "float":
            numeric[dest] = parse_axis(str(value), arg.flag, parse_number, whole=False)
        else:
            categorical[dest] = parse_list(value, arg.flag)

    def prepare(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
        kwargs = _with_defaults(kwargs)
        return spec.prepare(kwargs, chip) if spec.prepare else kwargs

    result = sweep_op(spec.function, parse_list(args.hw, "--hw"), numeric, categorical, fixed,
                      prepare)
    if args.csv:
        _write_csv(args.csv, result.columns)
    c = result.columns
    if args.json:
        emit({"points": {k: v.tolist() for k, v in c.items()},
               "bound_changes": result.bound_changes}, True, "")
        return
    shown = range(min(len(result), args.rows))
    cols = ["hardware", *categorical, *numeric, "t_lower_s", "attainable_flops_per_s", "bound"]
    body = [[_cell(c[k][i]) for k in cols] for i in shown]
    lines = [f"{len(result)} points of {spec.name}" + (f" (first {args.rows})"
                                                       if len(result) > args.rows else ""),
             table(cols, body)]
    if result.bound_changes:
        lines += ["", "where the bound changes along " + str(result.bound_changes[0]["axis"])
                  + ":"] + [f"  {ch['hardware']} {ch['from']} -> {ch['to']} at {ch['at']:g}"
                            for ch in result.bound_changes[:20]]
    print("\n".join(lines))


def _cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    return str(value)


def _ints(text: str, what: str) -> list[int]:
    from .sweep import parse_axis

    return [int(v) for v in parse_axis(text, what)]


def _write_csv(path: str, columns: dict[str, Any]) -> None:
    import csv

    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(list(columns))
            writer.writerows(zip(*(c.tolist() for c in columns.values()), strict=True))
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror}") from None


def _cmd_quant_table(args: argparse.Namespace) -> None:
    chip = load_chip(args.hw)
    rows = quant_table(chip, args.k, args.n)
    body = [[r.scheme, r.notation, f"{r.bytes_per_param:.4g}",
             format_si(r.peak_flops_per_s, "FLOP/s") + f" [{r.compute_dtype}]",
             f"{float(r.critical_batch):.4g}"] for r in rows]
    text = (f"quantization schemes on {chip.id} (critical batch in tokens, "
            f"{'large K, N' if args.k is None else f'K = {args.k}, N = {args.n}'}):\n"
            + table(["scheme", "notation", "bytes/param", "peak used", "critical batch"], body))
    emit({"hardware": chip.id, "rows": [vars(r) for r in rows]}, args.json, text)


def _solver_parser(sub: Any, name: str, help_text: str,
                   func: Callable[[argparse.Namespace], None]) -> argparse.ArgumentParser:
    q = sub.add_parser(name, help=help_text, description=help_text)
    q.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    q.add_argument("--k", type=typed(parse_count, "--k"), help="weight rows (default: large)")
    q.add_argument("--n", type=typed(parse_count, "--n"), help="weight columns (default: large)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.add_argument("--explain", action="store_true", help="print the derivation")
    q.set_defaults(func=func)
    return q


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

    cb = _solver_parser(sub, "critical-batch", "tokens at which a matmul turns compute-bound",
                        _cmd_critical_batch)
    for arg in _dtype_args("dtype", "weight", "out", "compute"):
        _add_arg(cb, arg)
    cb.add_argument("--q-len", type=typed(parse_count, "--q-len"), default=1,
                   help="tokens per decoding sequence (speculative decoding: k)")
    cd = sub.add_parser("critical-dim", help="per-chip shard of a contraction-sharded matmul "
                        "above which it is compute-bound, not communication-bound")
    cd.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    cd.add_argument("--link", default="scale-up", choices=["scale-up", "scale-out"])
    cd.add_argument("--dtype", default="bf16", help="compute dtype (partial sums travel in it)")
    cd.add_argument("--shards", type=typed(parse_count, "--shards"), default=2,
                    help="chips sharing the contraction (default 2, as in seed 001)")
    cd.add_argument("--reduce", default="all-reduce", choices=["all-reduce", "reduce-scatter"])
    cd.add_argument("--json", action="store_true", help="print one JSON object")
    cd.add_argument("--explain", action="store_true", help="print the derivation")
    cd.set_defaults(func=_cmd_critical_dim)
    mp = sub.add_parser("model", help="bound a transformer's prefill / decode / training step",
                        description="Bound one step of a model (catalog id, config.json, model "
                        "directory or Hub id) on one chip; `roofline model list` shows the "
                        "catalog.")
    mp.add_argument("model", help="catalog id, config.json path, model directory, Hub id, or "
                    "'list'")
    add_model_args(mp)
    count = typed(parse_count, "value")
    mp.add_argument("--json", action="store_true", help="print one JSON object")
    mp.add_argument("--explain", action="store_true", help="every op, not just every layer")
    mp.add_argument("--csv", help="write the per-op table to this CSV file")
    mp.add_argument("--markdown", help="write the per-op table to this Markdown file")
    mp.set_defaults(func=_cmd_model)

    sw = sub.add_parser("sweep", help="a grid of configurations in one vectorized pass")
    sw_sub = sw.add_subparsers(dest="sweep_kind", required=True, parser_class=_Parser)
    sm = sw_sub.add_parser("model", help="sweep a model over chips, batch, length, parallelism"
                           " and dtypes", description="Axes: lists '1,8,64' or '1k,8k' "
                           "(k = 1024 tokens), ranges 'start:stop:xF' / 'start:stop:+S'. "
                           "Points that do not fit are kept and marked.")
    sm.add_argument("model", help="catalog id or config.json")
    sm.add_argument("--hw", default="h100", help="comma-separated chips, e.g. h100,h200,mi300x")
    sm.add_argument("--phase", default="decode", choices=["prefill", "decode", "train"])
    sm.add_argument("--batch", default="1:256:x2", help="sequences per replica (axis)")
    sm.add_argument("--context", default="1k,8k,32k", help="decode context (axis)")
    sm.add_argument("--prompt-len", default="1k,8k", help="prefill prompt length (axis)")
    sm.add_argument("--seq-len", default="4k", help="training sequence length (axis)")
    sm.add_argument("--k", type=count, default=1, help="decode tokens per step")
    for name in ("tp", "pp", "dp", "ep"):
        sm.add_argument(f"--{name}", default="1", help=f"{name} degrees (list)")
    sm.add_argument("--microbatches", type=count, default=1)
    sm.add_argument("--dtype", default="bf16", help="activation dtype")
    sm.add_argument("--weight-dtype", help="weight dtypes (list; default --dtype)")
    sm.add_argument("--kv-dtype", help="KV cache dtypes (list; default --dtype)")
    sm.add_argument("--max-tpot", "--max-latency", type=typed(parse_duration, "--max-tpot"),
                    dest="max_latency", help="latency target for the frontier (e.g. 50ms)")
    sm.add_argument("--csv", help="write every point to this CSV file")
    sm.add_argument("--plot", help="chart tokens/s against batch (PNG / SVG / PDF)")
    sm.add_argument("--json", action="store_true", help="print the frontier as JSON")
    sm.add_argument("--all", action="store_true", help="with --json: every point too")
    sm.set_defaults(func=_cmd_sweep_model)

    so = sw_sub.add_parser("op", help="sweep one op's arguments (lists / ranges) and chips")
    so_sub = so.add_subparsers(dest="op", required=True, parser_class=_Parser)
    for spec in OPS:
        q = so_sub.add_parser(spec.name, help=spec.help, aliases=list(spec.aliases),
                              description=f"{spec.help}. Numeric arguments take lists or "
                              "ranges (1,8,64 / 1:4096:x2); text ones take comma lists.")
        q.add_argument("--hw", default="h100", help="comma-separated chips")
        for arg in spec.args:
            dest = arg.dest
            if arg.kind == "flag":
                q.add_argument(arg.flag, dest=dest, action="store_true", help=arg.help)
            else:  # every value is a string here: lists and ranges are parsed by the sweep
                q.add_argument(arg.flag, dest=dest, default=None if arg.default is None
                               else str(arg.default), required=arg.required, help=arg.help)
        q.add_argument("--csv", help="write every point to this CSV file")
        q.add_argument("--json", action="store_true", help="print every point as JSON")
        q.add_argument("--rows", type=count, default=40, help="rows to print")
        q.set_defaults(func=_cmd_sweep_op, spec=spec)

    mf = sub.add_parser("mfu", help="MFU / HFU of a measured training step")
    mf.add_argument("--params", type=float, required=True, help="model parameters (e.g. 70e9)")
    mf.add_argument("--tokens-per-step", type=float, required=True, dest="tokens_per_step")
    mf.add_argument("--step-time-s", type=float, required=True, dest="step_time_s")
    mf.add_argument("--gpus", type=count, required=True, help="chips in the job")
    mf.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    mf.add_argument("--dtype", default="bf16", help="dtype whose dense peak applies")
    mf.add_argument("--layers", type=count)
    mf.add_argument("--hidden", type=count)
    mf.add_argument("--seq-len", type=count, dest="seq_len")
    mf.add_argument("--recompute", action="store_true", help="full activation recomputation")
    mf.add_argument("--causal", action="store_true", help="count causal attention as half the "
                    "score matrix (as `roofline model` does; default: full, as Megatron-LM)")
    mf.add_argument("--json", action="store_true", help="print one JSON object")
    mf.set_defaults(func=_cmd_mfu)

    from .plot_cli import register as register_plots  # plots import matplotlib lazily

    register_plots(sub)
    from .measure.cli import register as register_measure  # torch is imported lazily
    from .trace.cli import register as register_trace

    register_measure(sub)
    register_trace(sub)
    _solver_parser(sub, "quant-table", "bytes per parameter, peak and critical batch per "
                   "quantization scheme", _cmd_quant_table)
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
