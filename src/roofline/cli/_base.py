"""The argument parser every command shares (errors are one line and exit code 2), and
subcommands that are built only when chosen."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

Build = Callable[[argparse._SubParsersAction], None]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints two)
        self.exit(2, f"roofline: error: {message} (try '{self.prog} --help')\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """--help and --version on standard output: a failed write (a full disk) raises, as
        any command's output does (argparse's own print drops the OSError and exits 0)."""
        stdout: TextIO = sys.stdout
        if message and file is stdout:
            stdout.write(message)
            stdout.flush()
        else:
            super()._print_message(message, file)


class LazySubparsers(argparse._SubParsersAction):
    """Subcommands known by name and help alone until argparse reaches one: `add_lazy`
    records how to build a command, and only the chosen one is built (its module imported,
    its options added), so `roofline --help` or `roofline op matmul` pay for no other
    command. `expand` builds them all (help walks, tests): the same tree as built eagerly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, Build] = {}

    def add_lazy(self, name: str, help: str, build: Build, aliases: Iterable[str] = ()) -> None:
        """`build(sub)` calls `sub.add_parser(name, help=help, aliases=...)` and adds the
        options (any other command it adds to `sub` is built too)."""
        aliases = list(aliases)
        # a placeholder until chosen: the listing (`--help`, invalid-choice errors) needs
        # only the name, the aliases and the help line
        self.add_parser(name, help=help, aliases=aliases, add_help=False)
        for n in (name, *aliases):
            self._pending[n] = build

    def build(self, name: str) -> None:
        """Build the command `name` (a name or alias) if it is still a placeholder."""
        make = self._pending.get(name)
        if make is None:
            return
        scratch = argparse._SubParsersAction([], prog=self._prog_prefix,
                                             parser_class=self._parser_class)
        make(scratch)
        if name not in scratch._name_parser_map:
            raise LookupError(f"{self._prog_prefix} {name}: its module added no such command")
        for n, parser in scratch._name_parser_map.items():
            if n in self._pending:
                self._name_parser_map[n] = parser
                del self._pending[n]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        self.build(values[0])
        super().__call__(parser, namespace, values, option_string)


def expand(parser: argparse.ArgumentParser) -> None:
    """Build every lazy subcommand under `parser`, all the way down."""
    for action in parser._actions:
        if isinstance(action, LazySubparsers):
            for name in list(action._pending):
                action.build(name)
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for sub in action.choices.values():  # aliases share their command's parser
                if id(sub) not in seen:
                    seen.add(id(sub))
                    expand(sub)
