"""`roofline model` and `roofline mfu`: whole transformers."""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import replace
from typing import Any

from ..argtypes import (
    SHARE,
    add_chip_options,
    bytes_arg,
    chip_from,
    count_arg,
    duration_arg,
    emit,
    ranged,
    typed,
)
from ..errors import RooflineError
from ..models.schedule import SCHEDULES
from ..ops.attention import IMPLEMENTATIONS
from ..render.model import mfu_text, model_text, model_what_if_text
from ..render.text import table
from ..units import MAX_COUNT
from .expect import add_expect_option, step_expected


def _cmd_model(args: argparse.Namespace) -> None:
    from ..models import list_models, load_model
    from ..models.params import param_counts

    if args.model == "list":
        from ..units import format_params

        _refuse_step_options(args, "model list", ("json",))
        rows, data = [], []
        for name in list_models():
            spec = load_model(name)
            counts = param_counts(spec)
            rows.append([name, spec.model_type, format_params(counts.total),
                         format_params(counts.active) if counts.active < counts.total else "-",
                         str(spec.layers), str(spec.hidden)])
            data.append({"id": name, "model_type": spec.model_type, "params": counts.total,
                         "active_params": counts.active, "source": spec.source})
        emit({"models": data}, args.json, table(["id", "type", "params", "active", "layers",
                                                  "hidden"], rows))
        return
    if args.model == "export" or args.export_id is not None:
        _refuse_step_options(args, "model export", ())
        _cmd_model_export(args)
        return
    _model_step(args)


def _refuse_step_options(args: argparse.Namespace, command: str,
                         allowed: tuple[str, ...]) -> None:
    """`model list` / `model export` take none of a step's options: refused, not ignored."""
    if command == "model list" and args.export_id is not None:
        raise RooflineError(f"model list takes no name, got {args.export_id!r}")
    given = [dest for dest, default in args.step_defaults.items()
             if dest not in allowed and getattr(args, dest, default) != default]
    if given:
        flags = ", ".join("--" + d.replace("_", "-") for d in given)
        raise RooflineError(f"{command} takes {'only --json' if allowed else 'no options'}; "
                            f"got {flags}")


def _cmd_model_export(args: argparse.Namespace) -> None:
    """`roofline model export ID`: the config.json of a catalog model (or of a config file,
    validated), to start your own from."""
    from pathlib import Path

    from ..models import list_models, load_model
    from ..models.catalog import CATALOG_DIR

    if args.model != "export" or args.export_id is None:
        raise RooflineError("a second name is only for 'roofline model export ID' (ID: a "
                            "catalog id or config.json path)")
    name = args.export_id.strip()
    load_model(name)  # validated first: unknown ids get the did-you-mean message
    if name.lower() in list_models():
        path = CATALOG_DIR / f"{name.lower()}.json"
    else:
        path = Path(name) / "config.json" if Path(name).is_dir() else Path(name)
        if not path.is_file():
            raise RooflineError(f"model export: {name} is neither a catalog id nor a "
                                "config.json on disk (a Hub config is one already)")
    sys.stdout.write(path.read_text(encoding="utf-8"))


def _model_step(args: argparse.Namespace) -> None:
    from ..files import check_destinations, write_text, wrote

    check_destinations([args.csv, args.markdown, args.html])  # all, before writing any
    result = model_analysis(args)
    # the JSON record only when it is printed: text output does not read it
    data, text = result.to_dict() if args.json else {}, model_text(result, explain=args.explain)
    changes = []
    if args.explain or args.html or args.markdown:  # what would move it: on the page too
        from ..levers import model_what_if
        from ..models.step import MemoryBudget

        # the step's own chip (at its clock), memory budget and schedule
        changes = model_what_if(args.model, chip_from(args), result.phase, result.parallel,
                                result.precision, args.impl,
                                MemoryBudget(args.mem_util, args.reserve or 0.0),
                                result.schedule)
    more = ""
    if args.expect or args.calibrated or args.engine:  # beside the bound, never instead
        data["expected"], more = step_expected(result, chip_from(args), args)
    if args.csv or args.markdown or args.html:
        from ..render import pages
    if args.csv:
        write_text(args.csv, pages.model_csv(result))
    if args.markdown:
        write_text(args.markdown, pages.model_markdown(result, changes, more))
    if args.html:
        write_text(args.html, pages.model_html(result, args.hw, changes,
                                               expected=more))
    if args.explain:
        data["what_if"] = [vars(r) for r in changes]
        text += "\n\n" + model_what_if_text(changes)
    if more:
        text += "\n\n" + more
    emit(data, args.json, text)
    wrote(args.csv, args.markdown, args.html, json=args.json)


def model_analysis(args: argparse.Namespace) -> Any:
    """The ModelAnalysis that `add_model_args` options describe (shared with `plot model`)."""
    from ..models import Parallel, analyze, decode, load_model, model_precision, prefill
    from ..models import train as train_phase

    check_phase_options(args)
    if args.phase == "decode":
        phase = decode(args.batch, _or(args.context, 4096), _or(args.k, 1))
    elif args.phase == "prefill":
        phase = prefill(args.batch, _or(args.prompt_len, 2048))
    else:
        phase = train_phase(args.batch, _or(args.seq_len, 2048), args.recompute)
    par = Parallel(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep, cp=args.cp,
                   microbatches=args.microbatches, fsdp=args.fsdp, zero=args.zero or 0)
    spec = load_model(args.model)
    # weights not given: the checkpoint's own dtype (quantization_config), else --dtype
    prec = model_precision(spec, args.weight_dtype, args.dtype, args.kv_dtype,
                           args.quantize_embeddings)
    from ..models.schedule import Schedule
    from ..models.step import MemoryBudget

    if args.matmul_dtype:
        prec = replace(prec, matmul=args.matmul_dtype)
    named = (args.pp_schedule is not None or args.vpp != 1 or args.tp_overlap
             or args.ep_overlap or args.no_overlap)
    # none named: training takes the best published schedule, 1F1B's figure beside it
    schedule = Schedule(args.pp_schedule or "1f1b", args.vpp, args.tp_overlap,
                        args.ep_overlap, not args.no_overlap) if named else None
    budget = MemoryBudget(args.mem_util, args.reserve or 0.0)
    result = analyze(spec, chip_from(args), phase, par, prec, impl=args.impl,
                     budget=budget, schedule=schedule)
    for warning in result.warnings:  # once, on stderr; the output keeps it as a note
        print(f"roofline: warning: {warning}", file=sys.stderr)
    return result


# Options that describe only one phase: given with another phase they would be silently
# ignored (e.g. `--phase train --context 4096` analysing 2048-token sequences), so refuse them.
# (--microbatches outside training needs a pipeline: the analysis itself refuses it.)
_PHASE_OPTIONS = {"prompt_len": ("--prompt-len", "prefill"), "context": ("--context", "decode"),
                  "k": ("--k", "decode"), "seq_len": ("--seq-len", "train"),
                  "recompute": ("--recompute", "train"), "fsdp": ("--fsdp", "train"),
                  "zero": ("--zero", "train"), "matmul_dtype": ("--matmul-dtype", "train")}
_LENGTH_OPTION = {"prefill": "--prompt-len", "decode": "--context", "train": "--seq-len"}


def check_phase_options(args: argparse.Namespace) -> None:
    """Refuse a phase's option given with another phase (one-line error, exit 2)."""
    for dest, (flag, phase) in _PHASE_OPTIONS.items():
        if getattr(args, dest, None) not in (None, False) and args.phase != phase:
            length = (f" (--phase {args.phase} sets its length with "
                      f"{_LENGTH_OPTION[args.phase]})" if flag in _LENGTH_OPTION.values()
                      else "")
            raise RooflineError(f"{flag} applies to --phase {phase}, not --phase {args.phase}"
                                + length)
    # options that contradict one another: refused, not one of them silently ignored
    if getattr(args, "no_overlap", False):
        both = [f for f, d in (("--tp-overlap", "tp_overlap"), ("--ep-overlap", "ep_overlap"))
                if getattr(args, d, False)]
        if both:
            raise RooflineError(f"--no-overlap puts every collective in series; it "
                                f"contradicts {' and '.join(both)}")
    if getattr(args, "fsdp", False) and getattr(args, "zero", None) not in (None, 3):
        raise RooflineError(f"--fsdp is ZeRO stage 3; it contradicts --zero {args.zero}")
    given = getattr(args, "pp_schedule", None) or "1f1b"
    if given != "1f1b" and given in SCHEDULES and getattr(args, "pp", 1) == 1:
        raise RooflineError(f"--pp-schedule {args.pp_schedule} schedules a pipeline: it needs "
                            "--pp > 1")


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def add_model_args(mp: argparse.ArgumentParser) -> None:
    """The options that describe one model step (roofline model, roofline plot model)."""
    count = count_arg("value")
    add_chip_options(mp)
    mp.add_argument("--phase", default="decode", choices=["prefill", "decode", "train"])
    mp.add_argument("--batch", type=count, default=1,
                    help="sequences per step, all data-parallel replicas together")
    mp.add_argument("--prompt-len", type=count, help="prefill: prompt tokens (default 2048)")
    mp.add_argument("--seq-len", type=count, help="train: sequence length (default 2048)")
    mp.add_argument("--context", type=count,
                    help="decode: tokens already in the KV cache (default 4096)")
    mp.add_argument("--k", type=count,
                    help="decode: new tokens per step, speculative decoding (default 1)")
    for name, text in [("tp", "tensor"), ("pp", "pipeline"), ("dp", "data"), ("ep", "expert"),
                       ("cp", "context")]:
        mp.add_argument(f"--{name}", type=count, default=1, help=f"{text} parallel")
    mp.add_argument("--microbatches", type=count, default=1,
                    help="pipeline micro-batches (training also accumulates them)")
    mp.add_argument("--pp-schedule", default=None,
                    help="pipeline schedule gpipe | 1f1b | interleaved | zero-bubble: bubble "
                    "(pp - 1)/m for gpipe and 1f1b, (pp - 1)/(vpp·m) interleaved, "
                    "zero-bubble none while m >= pp. Default (no schedule option): training "
                    "is bounded under the best published schedule (zero-bubble, TP and EP "
                    "collectives overlapped), 1F1B's figure beside it; inference 1f1b")
    mp.add_argument("--vpp", type=count, default=1,
                    help="virtual pipeline stages per rank (interleaved only)")
    mp.add_argument("--zero", type=int, choices=[0, 1, 2, 3], default=None,
                    help="training: ZeRO stage over dp (1 optimizer state, 2 + gradients, "
                    "3 + weights = --fsdp); Megatron's distributed optimizer is 1")
    mp.add_argument("--fsdp", action="store_true",
                    help="training: shard weights, gradients and optimizer state over dp "
                    "(ZeRO-3)")
    mp.add_argument("--tp-overlap", action="store_true",
                    help="TP collectives overlap their GEMMs (comm-GEMM overlap, async TP); "
                    "default: in series")
    mp.add_argument("--ep-overlap", action="store_true",
                    help="EP all-to-alls overlap compute (two-micro-batch overlap, DualPipe); "
                    "default: in series")
    mp.add_argument("--no-overlap", action="store_true",
                    help="every collective in series with compute (the serial step)")
    mp.add_argument("--mem-util", type=ranged("--mem-util", SHARE), default=1.0,
                    help="fraction of the device memory a deployment may use, as vLLM's "
                    f"gpu_memory_utilization (default 1: all the device exposes; {SHARE})")
    mp.add_argument("--reserve", type=bytes_arg("--reserve"), default=None,
                    help="memory kept for the runtime and workspace, e.g. 2GiB (default 0)")
    mp.add_argument("--recompute", action="store_true", help="training: full recomputation")
    mp.add_argument("--dtype", default="bf16", help="activation / compute dtype")
    mp.add_argument("--weight-dtype", help="the layers' weights (e.g. int4-g128, nvfp4, fp8; "
                    "default: the config's quantization_config dtype, else --dtype)")
    mp.add_argument("--quantize-embeddings", action="store_true",
                    help="the embedding and LM head in --weight-dtype too (default: they stay "
                    "in --dtype, as AWQ / GPTQ / ModelOpt checkpoints keep them)")
    mp.add_argument("--kv-dtype", help="KV cache dtype (default --dtype)")
    mp.add_argument("--matmul-dtype", help="training: the weight GEMMs' compute dtype (e.g. "
                    "fp8, as torchtitan Float8 / Transformer Engine; attention and elementwise "
                    "stay in --dtype)")
    mp.add_argument("--impl", default="flash", choices=IMPLEMENTATIONS, help="attention kernel")


def _cmd_mfu(args: argparse.Namespace) -> None:
    from ..hardware import half_dtype, load_chip
    from ..models.mfu import mfu

    chip = load_chip(args.hw)
    r = mfu(args.params, args.tokens_per_step, args.step_time_s, args.gpus, chip,
            args.dtype or half_dtype(chip), args.layers, args.hidden, args.seq_len,
            args.recompute, args.causal, model=args.model)
    if r.warning:  # once, on stderr (JSON also keeps it in "warning")
        print(f"roofline: warning: {r.warning}", file=sys.stderr)
    emit(vars(r), args.json, mfu_text(r))


# Parameter counts are decimal, as model names are (8B = 8e9, 125M = 125e6); token counts
# keep the binary k / M of ML code (parse_count).
_PARAMS_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtT]?)\s*$")
_PARAMS_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_params(text: str, what: str = "--params") -> float:
    """A parameter count: '8B' (8e9), '70B', '125M' (125e6), '405e9'."""
    m = _PARAMS_RE.match(str(text))
    value = float(m.group(1)) * _PARAMS_SUFFIX[m.group(2).lower()] if m else math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_COUNT):
        raise RooflineError(f"{what}: expected a positive number of parameters such as 8B, "
                            f"70B or 405e9 (B = 1e9, M = 1e6), got {text!r}")
    return value


def register(sub: Any) -> None:
    count = count_arg("value")
    mp = sub.add_parser("model", help="bound a transformer's prefill / decode / training step",
                        description="Bound one step of a model (catalog id, config.json, model "
                        "directory or Hub id) on one chip; `roofline model list` shows the "
                        "catalog.")
    mp.add_argument("model", help="catalog id, config.json path, model directory, Hub id, "
                    "'list', or 'export' (then ID)")
    mp.add_argument("export_id", nargs="?", metavar="ID", help="with 'export': the catalog id "
                    "or config.json whose config.json to print")
    add_model_args(mp)
    mp.add_argument("--json", action="store_true", help="print one JSON object")
    mp.add_argument("--explain", action="store_true", help="every op, not just every layer")
    mp.add_argument("--csv", help="write the per-op table to this CSV file")
    mp.add_argument("--markdown", help="write the per-op table to this Markdown file")
    mp.add_argument("--html", help="write the step as a standalone HTML report")
    add_expect_option(mp, calibrated=True, engine=True)
    mp.set_defaults(func=_cmd_model, step_defaults={  # what `model list` / `export` refuse
        a.dest: a.default for a in mp._actions if a.option_strings and a.dest != "help"})

    mf = sub.add_parser("mfu", help="MFU / HFU of a measured training step")
    mf.add_argument("--params", type=typed(parse_params, "--params"),
                    help="model parameters N, e.g. 8B, 70B, 405e9 (decimal: B = 1e9, "
                    "M = 1e6); for an MoE the active ones")
    mf.add_argument("--model", help="catalog id or config.json: fills --params (active, input "
                    "embedding left out), --layers, --hidden (attention width) and --seq-len "
                    "(its trained context); options given win")
    mf.add_argument("--tokens-per-step", type=count, required=True, dest="tokens_per_step",
                    help="tokens in one step, all replicas (e.g. 4M = 4·2**20)")
    mf.add_argument("--step-time-s", type=duration_arg("--step-time-s"), required=True,
                    dest="step_time_s", help="measured step time (seconds, or e.g. 850ms)")
    mf.add_argument("--gpus", type=count, required=True, help="chips in the job")
    mf.add_argument("--hw", default="h100", help="chip id, alias or .toml file (default h100)")
    mf.add_argument("--dtype", help="dtype whose dense peak applies (default: the chip's "
                    "16-bit float, bf16; fp16 on V100)")
    mf.add_argument("--layers", type=count, help="layers, for the attention term")
    mf.add_argument("--hidden", type=count, help="attention width heads·head_dim (the hidden "
                    "size for most models), for the attention term")
    mf.add_argument("--seq-len", type=count, dest="seq_len",
                    help="sequence length, for the attention term")
    mf.add_argument("--recompute", action="store_true", help="full activation recomputation")
    mf.add_argument("--causal", action="store_true", help="count causal attention as half the "
                    "score matrix (as `roofline model` does; default: full, as Megatron-LM)")
    mf.add_argument("--json", action="store_true", help="print one JSON object")
    mf.set_defaults(func=_cmd_mfu)
