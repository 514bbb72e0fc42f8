"""The argument parser every command shares: errors are one line and exit code 2."""

from __future__ import annotations

import argparse
from typing import NoReturn


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints two)
        self.exit(2, f"roofline: error: {message} (try '{self.prog} --help')\n")
