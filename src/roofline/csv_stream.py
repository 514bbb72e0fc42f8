"""A CSV output written chunk by chunk: a sweep of any size never holds all its rows.

Same text as `files.write_csv` over the whole columns; a file is written beside the target
and renamed over it at the end (an interrupted run leaves any old file intact); '-' streams
to stdout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from .errors import RooflineError
from .files import (
    STDOUT,
    _umask,
    csv_text,
    signals_held,
    temporary_beside,
    write_bytes,
    written_through,
)


class CsvStream:
    """`with CsvStream(path) as out: out.write(columns) ...`

    A device, FIFO or a name under /dev or /proc (`files.written_through`) is written
    through, chunk by chunk, and never replaced."""

    def __init__(self, path: str | Path) -> None:
        self.path, self.header = str(path), False
        self._fd, self._tmp = -1, ""
        self._through = self.path != STDOUT and written_through(self.path)
        self._target = Path(os.path.realpath(self.path))

    def _open(self) -> None:
        if self.path == STDOUT:
            return
        try:
            if self._through:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            else:  # made in __enter__, its name stored with the signals held: a signal
                with signals_held():  # landing as they are let go still reaches __exit__
                    self._fd, self._tmp = temporary_beside(self._target)
        except OSError as exc:
            raise RooflineError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def write(self, columns: Mapping[str, Any]) -> None:
        data = csv_text(columns, header=not self.header).encode("utf-8",
                                                                 errors="backslashreplace")
        self.header = True
        if self._fd < 0:
            write_bytes(STDOUT, data)
            return
        view = memoryview(data)
        try:
            while view:  # os.write may write less than asked
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            raise RooflineError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def __enter__(self) -> CsvStream:
        try:
            self._open()
        except BaseException:  # a signal delivered as the held ones are let go
            self.__exit__(BaseException, None, None)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd < 0:
            return
        os.close(self._fd)
        if self._through:
            return
        if exc_type is not None:
            os.unlink(self._tmp)
            return
        try:
            mode = self._target.stat().st_mode & 0o7777 if self._target.exists() else \
                0o666 & ~_umask()  # as files.write_bytes: an old file's mode, else the umask's
            os.chmod(self._tmp, mode)
            os.replace(self._tmp, self._target)
        except OSError as exc:
            os.unlink(self._tmp)
            raise RooflineError(f"cannot write {self.path}: {exc.strerror or exc}") from None
