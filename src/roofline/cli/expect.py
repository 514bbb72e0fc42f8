"""`--expect` (and `--calibrated` for a step) shared by `op`, `model`, `sweep` and `serve`:
the expected time beside the bound (roofline.expect), never in place of it."""

from __future__ import annotations

import argparse
from typing import Any

from ..hardware import Chip

EXPECT_HELP = ("also give the expected time beside the bound: a forecast with efficiencies "
               "from published measurements (the chip file's [efficiency] tables; fitted "
               "defaults where it has none; --calibrated FILE overrides them)")


ENGINE_HELP = ("the serving / generation engine whose fitted factors the expected time takes "
               "(vllm, sglang, tensorrt-llm, gpt-fast, llama.cpp; implies --expect; echoed "
               "in the output and the JSON); default: the generic factors")


def add_expect_option(parser: argparse.ArgumentParser, calibrated: bool = False,
                      kernel: bool = False, engine: bool = False) -> None:
    parser.add_argument("--expect", action="store_true", help=EXPECT_HELP)
    if engine:
        parser.add_argument("--engine", metavar="NAME", help=ENGINE_HELP)
    if kernel:
        parser.add_argument("--kernel", metavar="NAME", help="with --expect: the kernel whose "
                            "measured fraction the expected time takes (attention: fa2, fa3, "
                            "cudnn, ...; linear attention: fla); default: the chip's own")
    if calibrated:
        parser.add_argument("--calibrated", metavar="FILE", help="a calibration from roofline "
                            "measure ... --calibration-out: its efficiencies override the "
                            "chip file's in the expected time (implies --expect)")


def calibration(args: argparse.Namespace) -> Any:
    path = getattr(args, "calibrated", None)
    if not path:
        return None
    from ..measure.calibration import load_calibration

    return load_calibration(path)


def op_expected(cost: Any, chip: Chip, args: argparse.Namespace, extra: dict[str, Any]
                ) -> tuple[dict[str, Any], str]:
    """The op's `expected` JSON object and its text (algbw / busbw scaled alike)."""
    from ..expect import expected
    from ..expect.op import dequant_family
    from ..render.estimate import expected_text

    kernel = getattr(args, "kernel", None)
    if kernel:  # a name no figure carries would fall back silently: say which exist
        from ..errors import RooflineError
        from ..expect.kernels import kernel_names
        from ..expect.table import figures

        named = kernel_names(figures(chip, calibration(args)),
                             ("attention", "attention_bwd", "linear_attention", "ssd"))
        if kernel not in named:
            raise RooflineError(f"--kernel: no figure for {kernel!r} on {chip.id} (it has: "
                                f"{', '.join(named) or 'none'})")
    e = expected(cost, chip, calibration(args), kernel=kernel,
                 dequant=dequant_family(getattr(args, "weight_dtype", None), cost))
    rates = {k: v for k, v in extra.items() if k in ("algbw_Bps", "busbw_Bps") and v}
    data = e.to_dict(rates)
    return data, expected_text(e, data, rates)


def engine(args: argparse.Namespace) -> str | None:
    """The engine `--engine` names (checked), or None; naming one implies --expect."""
    name = getattr(args, "engine", None)
    if name is None:
        return None
    from ..expect.table import check_engine

    args.expect = True
    return check_engine(name)


def step_expected(analysis: Any, chip: Chip, args: argparse.Namespace
                  ) -> tuple[dict[str, Any], str]:
    from ..expect import expected_step
    from ..render.model import expected_lines

    e = expected_step(analysis, chip, calibration(args), framework=engine(args))
    data = e.to_dict()
    return data, "\n".join(expected_lines(e, data))
