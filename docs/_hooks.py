"""MkDocs hooks: the command reference, one page per command, generated from the argparse
definitions at build time (no hand copies of --help to drift).

`python docs/_hooks.py` prints the generated pages' paths and sizes (a quick look without a
build)."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

REFERENCE = "reference"
_WIDTH = "100"


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """A parser's subcommands in definition order, aliases folded into their command."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    out.append((name, sub))
    return out


def _cell(text: str) -> str:
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("*", "\\*")


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    expanded: str = parser._get_formatter()._expand_help(action)  # %(default)s and the like
    return expanded


def _default(action: argparse.Action) -> str:
    value = action.default
    if value in (None, argparse.SUPPRESS, False) or isinstance(action, argparse._HelpAction):
        return ""
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        return ""
    if isinstance(value, list | tuple):
        value = ", ".join(str(v) for v in value)
    return f"`{value}`" if str(value) else ""


def _options_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| option | default | what it does |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or (
                    "{" + ",".join(map(str, action.choices)) + "}" if action.choices
                    else action.dest.upper())
                name += f" {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
        else:
            name = str(action.metavar or action.dest)
        text = _help(parser, action)
        if action.choices and not action.option_strings and "{" not in text:
            text += f" (one of: {', '.join(map(str, action.choices))})"
        rows.append(f"| `{_cell(name)}` | {_default(action)} | {_cell(text)} |")
    return rows if len(rows) > 2 else []


def _section(parser: argparse.ArgumentParser, level: int) -> list[str]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH  # argparse wraps usage at the terminal's width
    try:
        usage = parser.format_usage().strip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    lines = ["```text", usage, "```", ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    lines += _options_table(parser)
    if parser.epilog:
        lines += ["", "```text", parser.epilog.strip(), "```"]
    lines.append("")
    for _name, sub in _subparsers(parser):
        lines += [f"{'#' * level} `{sub.prog}`", ""]
        lines += _section(sub, level + 1)
    return lines


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", name.lower())


def pages() -> dict[str, str]:
    """Every generated page: `reference/index.md` and `reference/<command>.md`."""
    from roofline.cli import COMMANDS, build_parser

    root = build_parser()
    out: dict[str, str] = {}
    index = ["# Command reference", "",
             "Generated from the command line's own definitions at every docs build "
             "(`roofline COMMAND --help` prints the same).", "",
             "| command | what it answers |", "|---|---|"]
    for name, sub in _subparsers(root):
        help_line = COMMANDS[name][1] if name in COMMANDS else ""
        index.append(f"| [`roofline {name}`]({_slug(name)}.md) | {_cell(help_line)} |")
        body = [f"# `roofline {name}`", "", _cell(help_line[:1].upper() + help_line[1:]) + ".", ""]
        body += _section(sub, 2)
        out[f"{REFERENCE}/{_slug(name)}.md"] = "\n".join(body).rstrip() + "\n"
    out[f"{REFERENCE}/index.md"] = "\n".join(index) + "\n"
    return out


def on_config(config: Any) -> Any:
    """Expand the nav's `reference/index.md` entry into the index and one page per command."""
    from roofline.cli import COMMANDS

    entries: list[Any] = [{"Overview": f"{REFERENCE}/index.md"}]
    entries += [{f"roofline {name}": f"{REFERENCE}/{_slug(name)}.md"} for name in COMMANDS]
    nav = config["nav"] or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and list(item.values()) == [f"{REFERENCE}/index.md"]:
            nav[i] = {next(iter(item)): entries}
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


if __name__ == "__main__":
    for path, text in pages().items():
        print(f"{path}: {len(text.splitlines())} lines")
