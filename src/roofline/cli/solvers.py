"""`roofline critical-batch`, `critical-dim`, `quant-table`: the solvers."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from ..argtypes import count_arg, emit
from ..errors import RooflineError
from ..hardware import half_dtype, load_chip, make_system
from ..ops.collectives import (
    busbw_factor,
)
from ..ops.params import dtype_params
from ..quant import quant_table
from ..render.text import table
from ..solve import (
    critical_batch,
    critical_batch_term,
    critical_shard_dim_term,
    decode_critical_batch,
)
from ..units import (
    format_si,
)
from .ops import add_param


def _cmd_critical_batch(args: argparse.Namespace) -> None:
    chip = load_chip(args.hw)
    args.dtype = args.dtype or half_dtype(chip)  # not given: the chip's 16-bit float
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
    share = make_system(chip).link_share(args.link, args.shards)  # torus: the ring's ports
    # link bytes per byte of partial sums, scaled up where the group uses part of the link
    factor = float(busbw_factor(kind, args.shards)) / share
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


def _cmd_quant_table(args: argparse.Namespace) -> None:
    chip = load_chip(args.hw)
    rows = quant_table(chip, args.k, args.n)
    body = [[r.scheme, r.notation, f"{r.bytes_per_param:.4g}",
             format_si(r.peak_flops_per_s, "FLOP/s") + f" [{r.compute_dtype}]",
             f"{float(r.critical_batch):.4g}" if math.isfinite(float(r.critical_batch))
             else "never"] for r in rows]
    text = (f"quantization schemes on {chip.id} (critical batch in tokens, "
            f"{'large K, N' if args.k is None else f'K = {args.k}, N = {args.n}'}):\n"
            + table(["scheme", "notation", "bytes/param", "peak used", "critical batch"], body))
    if args.explain:  # each row's M*, as critical-batch --explain shows it
        text += "\n" + "\n".join(
            f"  {r.scheme}: " + critical_batch_term(
                chip, args.k, args.n, r.activation_dtype, r.weight_dtype, r.out_dtype,
                r.compute_dtype).render() for r in rows)
    emit({"hardware": chip.id, "rows": [vars(r) for r in rows]}, args.json, text)


def _solver_parser(sub: Any, name: str, help_text: str,
                   func: Callable[[argparse.Namespace], None]) -> argparse.ArgumentParser:
    q = sub.add_parser(name, help=help_text, description=help_text)
    q.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    q.add_argument("--k", type=count_arg("--k"), help="weight rows (default: large)")
    q.add_argument("--n", type=count_arg("--n"), help="weight columns (default: large)")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.add_argument("--explain", action="store_true", help="print the derivation")
    q.set_defaults(func=func)
    return q


def register(sub: Any) -> None:
    cb = _solver_parser(sub, "critical-batch", "tokens at which a matmul turns compute-bound",
                        _cmd_critical_batch)
    for param in dtype_params("dtype", "weight", "out", "compute"):
        add_param(cb, param)
    cb.set_defaults(dtype=None)  # the chip's 16-bit float (bf16; fp16 on V100)
    cb.add_argument("--q-len", type=count_arg("--q-len"), default=1,
                    help="tokens per decoding sequence (speculative decoding: k)")
    cd = sub.add_parser("critical-dim", help="per-chip shard of a contraction-sharded matmul "
                        "above which it is compute-bound, not communication-bound")
    cd.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    cd.add_argument("--link", default="scale-up", choices=["scale-up", "scale-out"])
    cd.add_argument("--dtype", default="bf16", help="compute dtype (partial sums travel in it, "
                    "at least 16-bit: fp8 GEMMs accumulate wider)")
    cd.add_argument("--shards", type=count_arg("--shards"), default=2,
                    help="chips sharing the contraction (default 2, as in Scaling Book ch.1 §2.5)")
    cd.add_argument("--reduce", default="all-reduce", choices=["all-reduce", "reduce-scatter"])
    cd.add_argument("--json", action="store_true", help="print one JSON object")
    cd.add_argument("--explain", action="store_true", help="print the derivation")
    cd.set_defaults(func=_cmd_critical_dim)
    _solver_parser(sub, "quant-table", "bytes per parameter, peak and critical batch per "
                   "quantization scheme", _cmd_quant_table)
