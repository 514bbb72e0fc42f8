"""argparse types and output helpers shared by every command (main CLI, plot, measure,
trace): a bad value becomes argparse's one-line error naming the option."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import RooflineError
from .units import parse_bytes, parse_count, parse_duration

if TYPE_CHECKING:
    from .hardware import Chip


def typed(parse: Callable[[str, str], Any], flag: str) -> Callable[[str], Any]:
    """Wrap a units parser as an argparse type for option `flag`."""

    def convert(text: str) -> Any:
        try:
            return parse(text, flag)
        except RooflineError as exc:  # argparse already names the option
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag}: ")) from None

    return convert


def count_arg(flag: str) -> Callable[[str], int]:
    return typed(parse_count, flag)


def bytes_arg(flag: str) -> Callable[[str], float]:
    return typed(parse_bytes, flag)


def duration_arg(flag: str) -> Callable[[str], float]:
    return typed(parse_duration, flag)


def add_chip_options(parser: argparse.ArgumentParser, default: str | None = "h100") -> None:
    """--hw and --clock-mhz: the chip, and the clock it runs at (parts that throttle)."""
    shown = f" (default {default})" if default else ""
    parser.add_argument("--hw", default=default,
                        help=f"chip id, alias or .toml file{shown}")
    parser.add_argument("--clock-mhz", type=typed(_positive, "--clock-mhz"), default=None,
                        help="sustained or capped clock in MHz: every compute peak scales by "
                        "this over the clock the chip's peaks are quoted at (e.g. an H800 or "
                        "an A100 at 330 W)")


def _positive(text: str, flag: str) -> float:
    from .units import parse_number

    value = float(parse_number(text, flag))
    if not value > 0:
        raise RooflineError(f"{flag}: must be positive, got {text!r}")
    return value


def chip_from(args: argparse.Namespace) -> Chip:
    """The chip that --hw and --clock-mhz describe."""
    from .hardware import load_chip

    chip = load_chip(args.hw)
    clock = getattr(args, "clock_mhz", None)
    return chip.at_clock(clock) if clock else chip


def emit(data: dict[str, Any], as_json: bool, text: str) -> None:
    """Print one JSON object (programs) or the text (people)."""
    from .serialize import jsonable

    print(json.dumps(jsonable(data), indent=2) if as_json else text)
