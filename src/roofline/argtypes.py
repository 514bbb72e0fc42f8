"""argparse types and output helpers shared by every command (main CLI, plot, measure,
trace): a bad value becomes argparse's one-line error naming the option."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .errors import RooflineError
from .units import parse_bytes, parse_count, parse_duration


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


def emit(data: dict[str, Any], as_json: bool, text: str) -> None:
    """Print one JSON object (programs) or the text (people)."""
    from .report import jsonable

    print(json.dumps(jsonable(data), indent=2) if as_json else text)
