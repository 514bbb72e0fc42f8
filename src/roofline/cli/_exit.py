"""How a command ends when it cannot finish: a terminating signal or an output that cannot
be written gives one line on stderr and an exit status, never a traceback, and every `with`
on the way out runs (a streamed CSV's temporary file is removed)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

_STOPPING = ("SIGTERM", "SIGHUP")  # SIGINT raises KeyboardInterrupt already


class Stopped(BaseException):
    """A terminating signal, raised where the program was (not an Exception: nothing may
    catch it on the way out but main)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    for name in _STOPPING:  # a second signal must not cut the clean-up short
        with suppress(AttributeError, ValueError):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    raise Stopped(signum)


@contextmanager
def signals_raise() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Stopped while the command runs; the old handlers come back
    after (main also runs inside other programs: the tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for name in _STOPPING:
        sig = getattr(signal, name, None)
        if sig is not None:
            old[sig] = signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def stopped(signum: int) -> int:
    """One line, and the shell's status for a signal: 128 + its number."""
    name = signal.Signals(signum).name
    print(f"roofline: stopped by {name}", file=sys.stderr)
    return 128 + signum


def output_failed(exc: OSError) -> int:
    """Standard output (or a file) could not be written: one line, exit 2."""
    print(f"roofline: error: cannot write standard output: {exc.strerror or exc}", file=sys.stderr)
    drop_stdout()
    return 2


def drop_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for a full disk or a closed pipe
    would fail again at exit, with Python's own 'Exception ignored' lines."""
    with suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
