"""A one-line progress bar on stderr for long measurements (no dependency).

It draws only when the stream is a terminal (or when forced), so logs and tests stay clean.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

WIDTH = 24


class Progress:
    """`with Progress(total, "peaks") as p: ... p.step("fp32 n=2048")`."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        self.total, self.label, self.count = max(total, 1), label, 0
        self.stream = sys.stderr if stream is None else stream
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = is_tty if enabled is None else enabled
        self._drawn = 0

    def step(self, what: str = "") -> None:
        """One unit of work is done; `what` names the next (or the finished) one."""
        self.count = min(self.count + 1, self.total)
        if not self.enabled:
            return
        filled = WIDTH * self.count // self.total
        line = (f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] "
                f"{self.count}/{self.total} {what}")[:120]
        self.stream.write("\r" + line.ljust(self._drawn))
        self.stream.flush()
        self._drawn = len(line)

    def close(self) -> None:
        """Clear the line so the results print on a clean one."""
        if self.enabled and self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()
        self._drawn = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def quiet() -> Progress:
    """A progress bar that never draws."""
    return Progress(1, "", enabled=False)
