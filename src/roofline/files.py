"""Reading the data files we accept (chip TOML, calibration TOML, model config JSON) and
writing the outputs we make.

Data is parsed, never executed: TOML and JSON only, no eval, no pickle. A file must be a
regular file of sane size, nesting and text; every refusal is one RooflineError naming the
file. Outputs are written atomically (a temporary file beside the target, fsync, rename), so
a full disk leaves the old file as it was; the path `-` means standard output.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout, suppress
from pathlib import Path
from typing import Any, TextIO

from .errors import UNPRINTABLE, RooflineError

MAX_FILE_BYTES = 64 * 2**20  # configs and chip files are kilobytes; /dev/zero is endless
MAX_DEPTH = 64  # real configs nest 3 levels; deeper is an attack on a recursive reader
STDOUT = "-"  # an output path that means standard output
STDOUT_ALIASES = ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")  # written as STDOUT
# the options, on any command, that name an output file (checked all at once before work)
OUTPUT_OPTIONS = ("csv", "markdown", "html", "output", "plot", "out", "calibration_out")
_stdout: list[TextIO] = []  # the real stdout while stdout_reserved() holds it


# --- reading ----------------------------------------------------------------------------------


def _read_text(p: Path, what: str) -> str:
    """A regular file's text: not a directory, device or FIFO, at most MAX_FILE_BYTES."""
    try:
        if not p.exists():  # exists() itself raises for e.g. a name too long
            raise RooflineError(f"{p}: cannot read: {what} not found")
        if not p.is_file():  # a device (/dev/zero) would be read forever, a FIFO blocks
            kind = "a directory" if p.is_dir() else "not a regular file"
            raise RooflineError(f"{p}: cannot read: {kind} (give a {what})")
        with p.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise RooflineError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise RooflineError(f"{p}: larger than {MAX_FILE_BYTES // 2**20} MiB: not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RooflineError(f"{p}: not UTF-8 text (byte {exc.start}): not a {what}") from None


_UNSAFE_IN_NAME = re.compile(f"{UNPRINTABLE.pattern}|[\t\n\r]")


def check_text(text: str, where: str, name: bool = False) -> str:
    """`text` unchanged if it is safe to print; a `name` (an id, a label) is also one line."""
    bad = (_UNSAFE_IN_NAME if name else UNPRINTABLE).search(text)
    if bad:
        what = "a lone surrogate" if "\ud800" <= bad.group() <= "\udfff" else \
            "a control character"
        raise RooflineError(f"{where}: {text[:bad.start()][-20:]!r} is followed by {what} "
                            f"({bad.group()!r}); only printable text is allowed")
    return text


def _check_tree(data: Any, p: Path) -> None:
    """Refuse nesting deeper than MAX_DEPTH and unprintable text anywhere (check_text).
    Iterative: no recursion limit to hit."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise RooflineError(f"{p}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for key, value in node.items():
                field = f"{where}.{key}" if where else str(key)
                check_text(str(key), f"{p}: key {field!r}")
                stack.append((value, depth + 1, field))
        elif isinstance(node, list):
            stack += [(v, depth + 1, f"{where}[{i}]") for i, v in enumerate(node)]
        elif isinstance(node, str):
            check_text(node, f"{p}: field {where!r}" if where else str(p))


def _parse(p: Path, what: str, fmt: str, parse: Callable[[str], Any],
           syntax: type[Exception]) -> Any:
    """Parse the file's text; every way a hostile file can break the parser is one error."""
    text = _read_text(p, what)
    try:
        data = parse(text)
    except syntax as exc:
        raise RooflineError(f"{p}: not valid {fmt}: {exc}") from None
    except RecursionError:  # a nesting bomb, deeper than the parser's own recursion
        raise RooflineError(f"{p}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer beyond Python's 4300-digit conversion limit
        raise RooflineError(f"{p}: not a usable {what}: {str(exc).split(':')[0]}") from None
    _check_tree(data, p)
    return data


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    import tomllib  # here: `import roofline` and `roofline --help` read no file

    data: dict[str, Any] = _parse(Path(path), what, "TOML", tomllib.loads,
                                  tomllib.TOMLDecodeError)
    return data


def read_json(path: str | Path, what: str = "JSON file") -> Any:
    import json

    # NaN and 1e999 parse: each reader checks its own numbers
    return _parse(Path(path), what, "JSON", json.loads, json.JSONDecodeError)


# --- writing ----------------------------------------------------------------------------------


def check_destinations(paths: Iterable[str | Path | None],
                       inputs: Mapping[str, str] | None = None) -> None:
    """Refuse, before anything is written, any output that could not be written: a missing
    or read-only directory, a directory or read-only file in the way, one file named for
    two outputs, two outputs sent to stdout, or a file the command reads (`inputs`: path ->
    the option naming it; a model directory's config.json too)."""
    read: dict[str, str] = {}
    for given, option in (inputs or {}).items():
        for p in (Path(given), Path(given) / "config.json"):
            if p.is_file():
                read[os.path.realpath(p)] = option
    seen: set[str] = set()
    for path in paths:
        if path is None:
            continue
        text = str(path)
        key = text if text == STDOUT else os.path.realpath(text)
        if key in seen:
            raise RooflineError("only one output can go to stdout ('-')" if text == STDOUT
                                else f"{text}: named for two outputs (give each its own file)")
        if key in read:
            raise RooflineError(f"{text}: the command reads it ({read[key]}); writing an "
                                "output there would overwrite it (give the output its own "
                                "file)")
        seen.add(key)
        if text != STDOUT:
            _check_writable(Path(text))


def _check_writable(p: Path) -> None:
    try:
        parent = p.resolve().parent
        if p.is_dir():
            raise RooflineError(f"cannot write {p}: it is a directory")
        if not parent.is_dir():
            raise RooflineError(f"cannot write {p}: no directory {parent}")
        if p.exists() and not os.access(p, os.W_OK):
            raise RooflineError(f"cannot write {p}: the file is read-only")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise RooflineError(f"cannot write {p}: directory {parent} is not writable")
    except OSError as exc:  # a name too long, a loop of links
        raise RooflineError(f"cannot write {p}: {exc.strerror or exc}") from None


@contextmanager
def stdout_reserved() -> Iterator[None]:
    """Stdout carries the one output named '-': whatever else is printed meanwhile (the
    summary, "wrote ..." lines) goes to stderr, so a pipe gets only the file."""
    _stdout.append(sys.stdout)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _stdout.pop()


def wrote(*paths: str | Path | None, json: bool = False) -> None:
    """Say where each output went: `wrote PATH` on stdout (stderr under --json, so the JSON
    stays parseable); nothing for an output sent to stdout ('-') or not asked for."""
    for path in paths:
        if path is not None and str(path) != STDOUT:
            print(f"wrote {path}", file=sys.stderr if json else sys.stdout)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write an output file atomically ('-': stdout); a failure is one RooflineError naming
    the file and leaves any old file intact."""
    if str(path) == STDOUT:
        stream = _stdout[-1] if _stdout else sys.stdout
        stream.flush()
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(data.decode("utf-8", errors="replace"))
        return
    try:
        if written_through(path):
            with open(path, "ab") as f:
                f.write(data)
            return
        _replace(Path(os.path.realpath(path)), data)  # a symlink stays a link
    except OSError as exc:
        raise RooflineError(f"cannot write {path}: {exc.strerror or exc}") from None


def written_through(path: str | Path) -> bool:
    """Whether an output is written through its path rather than replaced by a renamed
    file: a device, FIFO or socket (/dev/null, /dev/full: a rename would put a regular file
    in place of the device), or any name under /dev or /proc (/dev/stdout redirected to a
    file: a rename would detach that file from the shell's redirection). Appended, never
    truncated: what the shell opened stays as it opened it."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    target = Path(os.path.realpath(path))
    return target.exists() and not target.is_file()


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold the terminating signals (delivered when the block ends): a temporary file and
    the name it is cleaned up by are made together, or not at all."""
    import signal

    held = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    if not hasattr(signal, "pthread_sigmask"):  # (Windows: no signal masks)
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def temporary_beside(target: Path) -> tuple[int, str]:
    """A new temporary file beside `target` (its descriptor and name). Call it inside
    `signals_held()` and store the name there: a held signal lands as the block ends, so the
    caller's clean-up must already know the name (stored after the block, it may not)."""
    import tempfile  # on a write only (it imports random, shutil, bz2, lzma)

    return tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")


def _replace(target: Path, data: bytes) -> None:
    """Write a temporary file beside the target, fsync it, rename it over the target."""
    check_destinations([target])
    mode = target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask()
    fd, tmp = -1, ""
    try:
        with signals_held():  # the name is stored before a held signal can land
            fd, tmp = temporary_beside(target)
        view = memoryview(data)
        while view:  # os.write may write less than asked
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with suppress(OSError):
                os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path: str | Path, text: str) -> None:
    """Write a text output (UTF-8) atomically; '-' writes it to stdout."""
    # a name from a path with undecodable bytes holds a surrogate: keep it visible, not fatal
    write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def write_csv(path: str | Path, columns: Mapping[str, Any]) -> None:
    """Columns (equal-length arrays or lists) as a CSV file with a header row."""
    write_text(path, csv_text(columns))


def csv_text(columns: Mapping[str, Any], header: bool = True, newline: str = "\r\n") -> str:
    """The one CSV writer (files, streamed sweeps, report tables): a text cell a spreadsheet
    would run as a formula gets a leading apostrophe (render.safe.csv_cell); numbers stay
    numbers."""
    import csv

    from .render.safe import csv_cell

    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator=newline)
    if header:
        writer.writerow([csv_cell(str(key)) for key in columns])
    writer.writerows(csv_rows(columns))
    return buf.getvalue()


def csv_rows(columns: Mapping[str, Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of equal-length columns; arrays as Python values (the same text, and
    Python's float repr is ~30% cheaper than numpy's scalar str); text cells guarded."""
    return zip(*(_guarded(c) for c in columns.values()), strict=True)


def _guarded(column: Any) -> list[Any]:
    """A column's values, each text one that reads as a formula (or holds a control
    character) made inert; looked at once per distinct value (a sweep repeats its chips)."""
    from .render.safe import csv_cell

    values = column.tolist() if hasattr(column, "tolist") else list(column)
    kind = getattr(getattr(column, "dtype", None), "kind", "O")
    if kind in "biuf":  # numbers: nothing to guard
        return values
    if kind == "U":
        import numpy as np

        texts = np.unique(column).tolist()
    else:
        texts = {v for v in values if isinstance(v, str)}
    unsafe = {t: csv_cell(t) for t in texts if isinstance(t, str) and csv_cell(t) != t}
    return [unsafe.get(v, v) if isinstance(v, str) else v for v in values] if unsafe \
        else values
