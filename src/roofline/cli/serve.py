"""`roofline serve`: plan a deployment under TTFT / TPOT targets (serve package)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..argtypes import (
    FRACTION,
    IMBALANCE,
    PRICE,
    RATE,
    SHARE,
    SPEC_K,
    bytes_arg,
    count_arg,
    emit,
    plain_number,
    ranged,
    spec_k_arg,
    typed,
)
from ..errors import RooflineError
from ..expect.table import check_engine
from .sweeps import duration_with_unit

if TYPE_CHECKING:
    from ..serve.plan import ServePlan
    from ..serve.point import ServePoint


def _ints(text: str | None, what: str, default: tuple[int, ...]) -> tuple[int, ...]:
    from ..sweep import parse_axis

    return default if text is None else tuple(int(v) for v in parse_axis(text, what))


def _prices(text: str | None) -> dict[str, float]:
    """'h100=2.5,mi300x=2' (USD per chip-hour: a plain number, no size suffix) keyed by chip
    id; a chip priced twice is refused, not the last price kept."""
    from ..hardware import load_chip

    out: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise RooflineError(f"--price: write CHIP=USD_PER_HOUR, e.g. h100=2.5, got {item!r}")
        chip = load_chip(name.strip()).id
        if chip in out:
            raise RooflineError(f"--price: {chip} is priced twice; give each chip one price")
        out[chip] = plain_number(value.strip(), f"--price {name.strip()}")
        if not PRICE.holds(out[chip]):
            raise RooflineError(f"--price {name.strip()}: must be {PRICE}, got {value!r}")
    return out


def _modes(text: str) -> list[str]:
    """--mode: a list of modes; 'both' (as --help offers) is both of them."""
    from ..sweep import parse_list

    names = parse_list(text, "--mode")
    return ["aggregated", "disaggregated"] if names == ["both"] else names


def build_plan(args: argparse.Namespace) -> Any:
    from ..models.step import MemoryBudget
    from ..serve import Load, Space, Targets, Workload, plan, read_lengths
    from ..sweep import parse_axis, parse_list

    ins: Any
    outs: Any
    if args.lengths:
        if args.input_len is not None or args.output_len is not None:
            raise RooflineError("--lengths replaces --input-len and --output-len: give one")
        ins, outs = read_lengths(args.lengths)
    else:
        ins, outs = args.input_len or 2048, args.output_len or 256
    name = None if args.engine is None else check_engine(args.engine)
    if args.accept is not None and not args.spec_k:
        raise RooflineError("--accept needs --spec-k (the drafts per step)")
    w = Workload.from_lengths(ins, outs, args.prefix_hit, args.spec_k or 0, args.accept or 0.0)
    pins = any(v is not None for v in (args.prefill_tp, args.prefill_dp, args.prefill_ep,
                                       args.prefill_workers, args.decode_workers))
    modes = tuple(_modes(args.mode)) if args.mode else (
        ("aggregated", "disaggregated") if args.disagg else
        ("disaggregated",) if pins else ("aggregated",))
    space = Space(
        tp=_ints(args.tp, "--tp", (1, 2, 4, 8)), pp=_ints(args.pp, "--pp", (1,)),
        dp=_ints(args.dp, "--dp", ()) or None,
        ep=_ints(args.ep, "--ep", ()) or None,
        weight_dtypes=parse_list(args.weight_dtype, "--weight-dtype") if args.weight_dtype
        else None,
        kv_dtypes=tuple(parse_list(args.kv_dtype, "--kv-dtype")) if args.kv_dtype else None,
        dtype=args.dtype,
        batch=tuple(parse_axis(args.batch, "--batch")) if args.batch else None,
        chunks=tuple(parse_axis(args.chunk, "--chunk")) if args.chunk else None,
        modes=modes, max_chips=args.max_chips,
        moe_tp=_ints(args.moe_tp, "--moe-tp", ()) or None, gpus=args.gpus,
        prefill_tp=_ints(args.prefill_tp, "--prefill-tp", ()) or None,
        prefill_dp=_ints(args.prefill_dp, "--prefill-dp", ()) or None,
        prefill_ep=_ints(args.prefill_ep, "--prefill-ep", ()) or None,
        prefill_workers=args.prefill_workers, decode_workers=args.decode_workers,
        eplb=args.eplb)
    targets = Targets(args.ttft, args.tpot, args.ttft_p99, args.tpot_p99)
    return plan(args.model, parse_list(args.hw, "--hw"), w, targets, space,
                Load(args.rate, args.concurrency),
                None if args.mem_util is None and args.reserve is None else
                MemoryBudget(0.9 if args.mem_util is None else args.mem_util,
                             args.reserve or 0.0),
                _prices(args.price), expect=args.expect, framework=name)


def plan_data(p: ServePlan, every_point: bool = False) -> dict[str, Any]:
    """The plan as one dict, JSON-ready through serialize.jsonable: best per chip
    (annotated) and the frontiers as `ServePoint`s, the notes."""
    from dataclasses import asdict

    from ..render.serve_text import notes, tdp_source
    from ..serve import annotate

    best = {hw: annotate(p, r) for hw, r in p.best().items()}
    hws = list(dict.fromkeys(p.columns["hardware"].tolist()))
    data: dict[str, Any] = {
        "model": p.model, "targets": asdict(p.targets),
        # the lengths' sample (the tails') is left out: its means are the workload
        "workload": {k: v for k, v in asdict(p.workload).items() if k != "sample"},
        "load": asdict(p.load), "points": len(p), "feasible_points": int(p.ok.sum()),
        "best": best,
        "frontier_tpot": {hw: [p.point(i) for i in p.frontier("tpot_s", hw)] for hw in hws},
        "frontier_ttft": {hw: [p.point(i) for i in p.frontier("ttft_s", hw)] for hw in hws},
        "frontier": [p.point(i) for i in p.frontier("tpot_s")],  # every chip together
        "skipped": p.skipped, "expected": p.expected, "engine": p.engine, "gpus": p.gpus,
        "runtime": {hw: rt.to_dict() for hw, rt in p.runtimes.items()},
        "runtime_text": {hw: rt.describe() for hw, rt in p.runtimes.items()},
        "notes": notes(p.expected, p.tdp)}
    # per chip, the source of every catalog figure the plan divides by: the TDP behind
    # tokens_per_joule (its watts are each row's tdp_w), and with --expect the efficiencies
    data["sources"] = {hw: {"tdp_w": tdp_source(p.tdp[hw])} for hw in hws
                       if p.tdp.get(hw, {}).get("tdp_w")}
    if p.expected:  # the efficiencies a forecast applied, per chip, with their sources
        from ..expect.op import source
        from ..expect.table import figures
        from ..hardware import load_chip

        for hw in hws:
            data["sources"].setdefault(hw, {}).update(
                {k: source(f) for k, f in figures(load_chip(hw)).items()})
    if not best:  # nothing meets the targets: why, and what would fix it
        from ..serve.explain import infeasible

        data["infeasible"] = infeasible(p)
    if every_point:
        data["all_points"] = {k: v.tolist() for k, v in p.columns.items()}
    return data


NOTHING_MEETS = 3  # the exit status of a plan with no point meeting the targets (README)


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..files import write_csv, write_text, wrote
    from ..render.serve_text import serve_text

    p = build_plan(args)
    data = plan_data(p, args.all)
    if args.emit and data["best"]:
        data["launch"] = _launch(p, data["best"], args)
    if args.csv:  # each row says what its times are and where its TDP comes from
        import numpy as np

        from ..render.serve_text import tdp_source

        step_times = np.full(len(p), "expected" if p.expected else "lower bound")
        tdp = {hw: tdp_source(t) if t.get("tdp_w") else "" for hw, t in p.tdp.items()}
        sources = np.array([tdp.get(hw, "") for hw in p.columns["hardware"].tolist()])
        write_csv(args.csv, {**p.columns, "step_times": step_times, "tdp_source": sources})
    if args.plot:
        from ..plot import save_figure
        from ..serve.chart import plot_frontier

        save_figure(plot_frontier(p), args.plot)
    if args.html:
        from ..render.serve_page import serve_page

        write_text(args.html, serve_page(p))
    text = serve_text(data, args.verbose)
    if "launch" in data:
        text += "\n\nlaunch (" + args.emit + "):\n" + "\n".join(
            f"  {hw}:\n" + "\n".join(f"    {line}" for line in cmd.splitlines())
            for hw, cmd in data["launch"].items())
    emit(data, args.json, text)
    wrote(args.csv, args.html, args.plot, json=args.json)
    return 0 if data["best"] else NOTHING_MEETS


def _launch(p: ServePlan, best: dict[str, ServePoint], args: argparse.Namespace
            ) -> dict[str, str]:
    """Per chip kind, the best point as the `--emit` engine's launch command."""
    import math

    from ..hardware import load_chip
    from ..models import load_model, model_precision
    from ..serve.launch import command
    from ..serve.runtime import check_runs_on, hub_id

    spec = load_model(args.model)
    model_id = hub_id(spec.source, spec.name)
    name = "dynamo" if args.emit == "dynamo" else check_engine(args.emit)
    for hw in best:
        check_runs_on(name, load_chip(hw))
    max_len = math.ceil(p.workload.input_len + p.workload.output_len)
    backend = None if args.engine is None else check_engine(args.engine)
    def node(hw: str) -> int:  # GPUs per node: the scale-up domain (8 where unstated)
        link = load_chip(hw).links.get("scale-up")
        return min(link.domain_size or 8, 8) if link else 8

    return {hw: command(name, row, model_id, max_len, model_precision(spec).weights,
                        backend if name == "dynamo" else None,
                        math.ceil(p.workload.uncached_len), node(hw))
            for hw, row in best.items()}


def register(sub: Any) -> None:
    count = count_arg("value")
    s = sub.add_parser(
        "serve", help="plan a deployment: chips, parallelism, dtypes under TTFT/TPOT targets",
        description="Continuous batching (chunked prefill) or disaggregated prefill/decode "
        "pools, bounded step by step with the model analysis. Searched options take lists "
        "(--tp 1,2,4,8); one value pins them. --rate or --concurrency fixes the load.")
    s.add_argument("model", help="catalog id or config.json")
    s.add_argument("--hw", default="h100", help="comma-separated chips, e.g. h100,h200,mi300x")
    s.add_argument("--input-len", type=count_arg("--input-len"),
                   help="prompt tokens per request (default 2048)")
    s.add_argument("--output-len", type=count_arg("--output-len"),
                   help="output tokens per request (default 256)")
    s.add_argument("--lengths", help="CSV of requests (columns input_len, output_len) "
                   "instead of --input-len / --output-len")
    s.add_argument("--ttft", type=typed(duration_with_unit, "--ttft"),
                   help="time-to-first-token target, e.g. 2s")
    s.add_argument("--tpot", type=typed(duration_with_unit, "--tpot"),
                   help="time-per-output-token target, e.g. 50ms")
    s.add_argument("--ttft-p99", type=typed(duration_with_unit, "--ttft-p99"),
                   help="target on the 99th percentile TTFT over requests, e.g. 5s")
    s.add_argument("--tpot-p99", type=typed(duration_with_unit, "--tpot-p99"),
                   help="target on the 99th percentile TPOT over requests, e.g. 80ms")
    load = s.add_mutually_exclusive_group()
    load.add_argument("--rate", type=ranged("--rate", RATE),
                      help="requests/s to the whole deployment (open loop, Poisson); sizes "
                      f"the chips ({RATE})")
    load.add_argument("--concurrency", type=count,
                      help="clients in a closed loop (as vllm bench serve --max-concurrency)")
    s.add_argument("--max-chips", type=count, default=64, help="most chips per instance")
    s.add_argument("--disagg", action="store_true",
                   help="also plan disaggregated prefill and decode pools")
    s.add_argument("--mode", help="aggregated, disaggregated or both (a list of the two is "
                   "both too); overrides --disagg")
    s.add_argument("--chunk", help="chunked-prefill prompt tokens per iteration per replica "
                   "(list; default 512,2048,8192); a prefill pool's tokens per pass")
    s.add_argument("--batch", "--decode-batch", dest="batch", help="running sequences per "
                   "instance (a disaggregated plan's decode worker), all its dp replicas "
                   "together, as in `roofline model` (list; default: searched up to the KV "
                   "capacity)")
    for name in ("tp", "dp", "ep"):
        s.add_argument(f"--{name}", f"--decode-{name}", dest=name,
                       help=f"{name} degrees (list; a disaggregated plan's decode workers')")
    s.add_argument("--pp", help="pp degrees (list)")
    s.add_argument("--moe-tp", help="expert tensor parallelism (list): each routed expert split "
                   "over moe_tp ranks, moe_tp x ep = tp x dp (ep derived where not given); "
                   "default: tp without EP, whole experts with it")
    s.add_argument("--eplb", type=ranged("--eplb", IMBALANCE), default=None,
                   help="expert load imbalance: the hottest EP rank's routed tokens over the "
                   "mean (EPLB's max/mean; vLLM's EPLB logs its inverse as balancedness), "
                   "applied to the expected expert GEMM time only, never the bound "
                   f"({IMBALANCE}; default: 1, or where attention-DP replicas feed the EP "
                   "group TensorRT-LLM's measured unbalanced 2.56, "
                   "serve.iteration.UNBALANCED_EXPERTS)")
    s.add_argument("--gpus", type=count, help="GPUs of the whole deployment: whole instances "
                   "fill it (aggregated), or every split into whole decode and prefill workers "
                   "is searched (disaggregated); default: one instance's capacity")
    for name in ("tp", "dp", "ep"):
        s.add_argument(f"--prefill-{name}", help=f"a disaggregated plan's prefill workers' "
                       f"{name} (list; default: as --{name}); sets --mode disaggregated")
    s.add_argument("--prefill-workers", type=count, help="pin the prefill workers (with "
                   "--decode-workers, or --gpus for the rest)")
    s.add_argument("--decode-workers", type=count, help="pin the decode workers (with "
                   "--prefill-workers, or --gpus for the rest)")
    s.add_argument("--weight-dtype", help="weight dtypes (list; default the checkpoint's "
                   "own)")
    s.add_argument("--kv-dtype", help="KV cache dtypes (list; default the model's activation "
                   "dtype, as the engines' 'auto')")
    s.add_argument("--dtype", help="compute dtype (default: fp8/fp4 weights compute in "
                   "their dtype, others in bf16)")
    s.add_argument("--prefix-hit", type=ranged("--prefix-hit", FRACTION), default=0.0,
                   help="fraction of prompt tokens served from the prefix cache (0 to below "
                   "1)")
    s.add_argument("--spec-k", type=spec_k_arg,
                   help=f"speculative decoding: draft tokens per step ({SPEC_K})")
    s.add_argument("--accept", type=ranged("--accept", FRACTION),
                   help=f"per-draft acceptance rate (with --spec-k; {FRACTION})")
    s.add_argument("--price", help=f"USD per chip-hour, e.g. h100=2.5,mi300x=2 ({PRICE})")
    s.add_argument("--mem-util", type=ranged("--mem-util", SHARE),
                   help="fraction of device memory usable (as vLLM's gpu_memory_utilization;"
                   f" {SHARE}; default: the engine's, 0.9 with none named)")
    s.add_argument("--reserve", type=bytes_arg("--reserve"),
                   help="bytes per chip kept for the runtime, e.g. 2GiB (default 0)")
    s.add_argument("--json", action="store_true", help="print the plan as JSON")
    s.add_argument("--expect", action="store_true",
                   help="plan with expected step times (a forecast with sourced efficiencies, "
                   "roofline.expect) instead of the bounds")
    s.add_argument("--engine", metavar="NAME", help="the serving engine (vllm, sglang, "
                   "tensorrt-llm): its default memory fraction, running-sequence cap and "
                   "prefill chunk (cited per version; see the output's runtime line), and with "
                   "--expect its fitted factors; default: generic defaults, said in the "
                   "output")
    s.add_argument("--emit", metavar="ENGINE", help="print the best plan per chip as the "
                   "engine's launch command(s) (vllm, sglang, tensorrt-llm; the flag names of "
                   "the version the output's runtime line cites; one per replica or worker), "
                   "or dynamo: NVIDIA Dynamo's frontend and workers running --engine (vllm or "
                   "sglang; default vllm), aggregated or disaggregated")
    s.add_argument("--all", action="store_true", help="with --json: every point too")
    s.add_argument("--verbose", "-v", action="store_true",
                   help="text: every chip's frontiers against TPOT and TTFT, every lever, "
                   "and the notes on what each figure means")
    s.add_argument("--csv", help="write every operating point to this CSV file")
    s.add_argument("--plot", help="draw the frontiers with the targets (PNG / SVG / PDF)")
    s.add_argument("--html", help="write an interactive, offline page")
    s.set_defaults(func=_cmd_serve)
