"""The one error type for bad input, with a did-you-mean helper."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class RooflineError(ValueError):
    """Bad input: the message names what was wrong and what is allowed."""


def unknown(kind: str, name: str, allowed: Iterable[str]) -> RooflineError:
    """An error for an unknown name, suggesting the closest allowed ones."""
    choices = sorted(set(allowed))
    close = difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listing = ", ".join(choices) if len(choices) <= 30 else ", ".join(choices[:30]) + ", ..."
    return RooflineError(f"unknown {kind} {name!r}{hint} (allowed: {listing})")


def brief(value: object) -> str:
    """A value for an error message, without printing a 400-digit integer in full."""
    text = str(value)
    return text if len(text) <= 24 else f"a {len(text)}-digit integer"
