"""Names from files and command lines are data: what each output needs to keep them inert."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """No raw control characters (escape sequences) or lone surrogates reach a terminal."""
    text = _SURROGATE.sub("\ufffd", str(text))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def xml_text(text: object) -> str:
    """Escaped for HTML / SVG text and attributes; characters XML forbids are replaced."""
    import html  # here: text output escapes nothing

    return html.escape(terminal_safe(str(text)), quote=True)


def xml_attr(text: str) -> str:
    """An attribute value whose line breaks survive XML parsers (they fold raw ones)."""
    return xml_text(text).replace("\n", "&#10;")


def markdown_cell(text: str) -> str:
    """Markdown renders inline HTML: escape it; `|` would end the cell, a newline the row."""
    import html

    return (html.escape(terminal_safe(str(text)), quote=False).replace("|", "\\|")
            .replace("\n", " ").replace("`", "\\`"))


def code_block(lines: list[str], info: str = "text") -> list[str]:
    """A fenced block no input line can close: the fence is longer than any backtick run."""
    body = [terminal_safe(line) for line in lines]
    longest = max((len(m) for line in body for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, *body, fence]


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula (=, +, -, @, tab, CR lead)."""
    text = terminal_safe(str(text))
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
