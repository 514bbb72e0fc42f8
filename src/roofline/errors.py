"""The one error type for bad input, with a did-you-mean helper."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

# Text that must not reach a terminal, a CSV cell or an SVG raw: C0/C1 control characters
# (escape sequences), bidi overrides (text that reads differently than it is stored), lone
# surrogates (valid in a JSON escape, not in any encoding).
UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f"
                         "\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class RooflineError(ValueError):
    """Bad input: the message names what was wrong and what is allowed."""


class ParameterError(RooflineError):
    """Bad value of one parameter, named as the library spells it (`util`, `tp`); the CLI
    shows its own flag in its place (cli/flags.py)."""

    def __init__(self, parameter: str, problem: str, where: str = "",
                 mentions: tuple[str, ...] = ()) -> None:
        # `mentions`: other parameters the problem names, each written `{name}` in it
        self.parameter, self.problem, self.where = parameter, problem, where
        self.mentions = mentions
        super().__init__(self.naming(parameter))

    def naming(self, name: str, rename: Callable[[str], str] = str) -> str:
        """The message with the parameter called `name` (the CLI's flag) and each parameter
        it mentions called `rename(parameter)`."""
        problem = self.problem.format_map({m: rename(m) for m in self.mentions}) \
            if self.mentions else self.problem
        sep = "" if problem.startswith(":") else " "
        return f"{self.where}{name}{sep}{problem}"


def unknown(kind: str, name: str, allowed: Iterable[str]) -> RooflineError:
    """An error for an unknown name, suggesting the closest allowed ones."""
    import difflib  # only on an error: not at every start

    choices = sorted(set(allowed))
    close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(choices) if len(choices) <= 30 else ", ".join(choices[:30]) + ", ..."
    return RooflineError(f"unknown {kind} {name!r}{hint} (allowed: {listing})")


def brief(value: object) -> str:
    """A value for an error message, without printing a 400-digit integer in full."""
    text = str(value)
    if len(text) <= 24:
        return text
    if isinstance(value, int) and not isinstance(value, bool):
        sign = "negative " if value < 0 else ""
        return f"a {len(text.lstrip('-'))}-digit {sign}integer"
    return text[:21] + "..."


def one_line(message: str) -> str:
    """An error message as one printable line: control characters and line breaks (from a
    file name, say) are shown escaped, never sent to the terminal."""
    return re.sub(f"{UNPRINTABLE.pattern}|[\n\r]", lambda m: repr(m.group())[1:-1], message)
