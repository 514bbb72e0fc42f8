"""argparse types and output helpers shared by every command (main CLI, plot, measure,
trace): a bad value becomes argparse's one-line error naming the option."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import RooflineError
from .records import record
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


@record(frozen=True)
class Range:
    """An option's documented floor and ceiling (`above`: the floor itself excluded)."""

    lo: float
    hi: float
    unit: str = ""
    above: bool = False

    def __str__(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{'above ' if self.above else ''}{self.lo:g} to {self.hi:g}{unit}"

    def holds(self, value: float) -> bool:
        return (self.lo < value if self.above else self.lo <= value) and value <= self.hi


# the physical inputs of the command line, each with its sane range (in --help and errors)
CLOCK_MHZ = Range(1, 10_000, "MHz")
FRACTION = Range(0, 1)
SHARE = Range(1e-3, 1)  # a usable share of something: below 0.1% is no deployment
RATE = Range(1e-6, 1e9, "requests/s")
SPEC_K = Range(1, 64, "draft tokens")
PRICE = Range(1e-6, 1e6, "USD per chip-hour")
SIZE_FACTOR = Range(1, 1024, above=True)
IMBALANCE = Range(1, 64)  # the hottest of up to 64 ranks holds at most all the load
_PLAIN = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")  # ASCII digits only, no '_'


def plain_number(text: str, what: str) -> float:
    """A plain decimal number ('0.9', '2.5', '1e-3'): no suffix, sign, '_' or non-ASCII
    digit (Python's float() takes '1_0', '١' and 'inf'; a flag must not)."""
    if not _PLAIN.fullmatch(str(text).strip()):
        raise RooflineError(f"{what}: expected a plain number such as 0.9 or 2.5, got {text!r}")
    value = float(str(text).strip())
    if not math.isfinite(value):
        raise RooflineError(f"{what}: must be finite, got {text!r}")
    return value


def ranged(flag: str, bounds: Range, parse: Callable[[str, str], float] = plain_number
           ) -> Callable[[str], Any]:
    """An argparse type for `flag`: `parse` reads the value, `bounds` holds it."""

    def read(text: str, what: str) -> float:
        value = parse(text, what)
        if not bounds.holds(value):
            raise RooflineError(f"{what}: must be {bounds}, got {text!r}")
        return value

    return typed(read, flag)


def spec_k_arg(text: str) -> int:
    return int(ranged("--spec-k", SPEC_K, parse_count)(text))


def add_chip_options(parser: argparse.ArgumentParser, default: str | None = "h100") -> None:
    """--hw and --clock-mhz: the chip, and the clock it runs at (parts that throttle)."""
    shown = f" (default {default})" if default else ""
    parser.add_argument("--hw", default=default,
                        help=f"chip id, alias or .toml file{shown}")
    parser.add_argument("--clock-mhz", type=ranged("--clock-mhz", CLOCK_MHZ), default=None,
                        help="sustained or capped clock in MHz: every compute peak scales by "
                        "this over the clock the chip's peaks are quoted at (e.g. an H800 or "
                        f"an A100 at 330 W; {CLOCK_MHZ})")


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
