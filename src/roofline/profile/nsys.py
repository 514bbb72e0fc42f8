"""Read an Nsight Systems SQLite export (`nsys export --type sqlite`) into the same events the
Kineto reader gives, so one analysis (mapping, bounds, summary) serves both.

Tables read (Nsight Systems' export schema, docs.nvidia.com/nsight-systems "Exporter"):
CUPTI_ACTIVITY_KIND_KERNEL (start, end in ns, deviceId, streamId, correlationId,
demangledName / shortName -> StringIds), CUPTI_ACTIVITY_KIND_RUNTIME (correlationId, start,
globalTid), CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET (bytes, copyKind), NVTX_EVENTS (text or
textId, start, end, globalTid) and TARGET_INFO_GPU (id, name).

A kernel is linked to its op as in Kineto: the innermost NVTX range on the launching runtime
call's thread that contains the call. `torch.autograd.profiler.emit_nvtx(record_shapes=True)`
names those ranges 'aten::addmm, seq = 3, op_id = 7, sizes = [[64], [64, 128], [128, 64]]'
(torch/csrc/profiler/util.cpp, getNvtxStr): the op and its input shapes. The ranges carry
no dtypes: the op's dtype is read from its kernels' names ('bf16', '<float>', 'sgemm').

The file is opened read-only (`mode=ro` URI, `query_only`, `trusted_schema` off) and only
plain SELECTs on tables (never views or anything the file defines) are run; a query that
runs too long is interrupted. A file that is not such an export is one RooflineError.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any

from ..errors import RooflineError, brief
from ..measure.progress import Progress
from .events import CpuOp, Kernel, Step, Trace, launchers

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_QUERY_S = 120.0  # a query the file makes run longer than this is interrupted
# CUPTI_ACTIVITY_MEMCPY_KIND (cupti_activity.h) -> the Kineto name the mapping reads
COPY_KINDS = {1: "Memcpy HtoD (Pageable -> Device)", 2: "Memcpy DtoH (Device -> Pageable)",
              8: "Memcpy DtoD (Device -> Device)", 10: "Memcpy PtoP (Device -> Device)"}
# kernel-name fragments -> PyTorch's dtype name, most specific first
NAME_TYPES = (("e4m3", "c10::Float8_e4m3fn"), ("e5m2", "c10::Float8_e5m2"),
              ("bfloat16", "c10::BFloat16"), ("bf16", "c10::BFloat16"),
              ("half", "c10::Half"), ("fp16", "c10::Half"), ("f16", "c10::Half"),
              ("h884", "c10::Half"), ("h1688", "c10::Half"), ("h16816", "c10::Half"),
              ("double", "double"), ("dgemm", "double"), ("<float", "float"),
              ("float>", "float"), ("sgemm", "float"), ("tf32", "float"), ("fp32", "float"),
              ("f32", "float"), ("s1688", "float"), ("s16816", "float"))
_SIZES = re.compile(r"sizes = (\[[\[\]0-9, ]*\])")


def is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA trusted_schema = OFF")
    deadline = time.monotonic() + MAX_QUERY_S
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 100_000)
    return conn


def _tables(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Plain tables (not views) and their columns."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
             if isinstance(r[0], str)]
    out = {}
    for name in names:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            out[name] = {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{name}")')}
    return out


def _ns(value: Any, what: str) -> float:
    if type(value) is not int or not 0 <= value < 2**62:
        raise RooflineError(f"{what} must be a non-negative integer (ns), got {brief(value)}")
    return float(value)


def _int(value: Any) -> int:
    return value if type(value) is int else -1


def _dtype(name: str) -> str | None:
    low = name.lower()
    return next((t for frag, t in NAME_TYPES if frag in low), None)


def _op(text: str) -> tuple[str, tuple[tuple[int, ...] | None, ...]]:
    """An emit_nvtx range's op name and input shapes (none where not recorded)."""
    name = text.split(",", 1)[0].strip()
    match = _SIZES.search(text)
    if match is None:
        return name, ()
    try:
        sizes = json.loads(match.group(1))
    except ValueError:
        return name, ()
    if not isinstance(sizes, list):
        return name, ()
    dims: list[tuple[int, ...] | None] = []
    for d in sizes:
        ok = isinstance(d, list) and d and all(type(x) is int and 0 <= x < 2**48 for x in d)
        dims.append(tuple(d) if ok else None)
    return name, tuple(dims)


def _rows(conn: sqlite3.Connection, tables: dict[str, set[str]], table: str,
          columns: dict[str, str]) -> list[tuple[Any, ...]]:
    """SELECT the wanted columns (key: the column, value: SQL for a missing one) of a table."""
    if table not in tables:
        return []
    have = tables[table]
    picked = ", ".join(f'"{c}"' if c in have else alt for c, alt in columns.items())
    return conn.execute(f'SELECT {picked} FROM "{table}"').fetchall()


def read_nsys(path: str | Path) -> Trace:
    """Read an Nsight Systems SQLite export."""
    p = Path(path)
    if not p.is_file():
        raise RooflineError(f"{p}: cannot read: "
                            + ("not found" if not p.exists() else "not a regular file"))
    try:
        conn = _connect(p)
        try:  # progress on a terminal (Progress draws only there): a step per table read
            with Progress(4, f"reading {p.name}") as bar:
                return _read(p, conn, bar)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RooflineError(f"{p}: not a readable Nsight Systems export ({text})") from None
    except RooflineError as exc:
        raise RooflineError(f"{p}: {exc}") from None


def _strings(conn: sqlite3.Connection, tables: dict[str, set[str]]) -> dict[int, str]:
    rows = _rows(conn, tables, "StringIds", {"id": "NULL", "value": "NULL"})
    return {i: v for i, v in rows if type(i) is int and isinstance(v, str)}


def _read(p: Path, conn: sqlite3.Connection, bar: Progress) -> Trace:
    tables = _tables(conn)
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        raise RooflineError("not an Nsight Systems export with CUDA kernels (no "
                            "CUPTI_ACTIVITY_KIND_KERNEL table: trace CUDA and NVTX, then "
                            "export the report as SQLite)")
    strings = _strings(conn, tables)
    bar.step("kernels")
    gpu: list[tuple[str, str, float, float, int, int, int, float | None]] = []
    for start, end, dev, stream, corr, demangled, short in _rows(
            conn, tables, "CUPTI_ACTIVITY_KIND_KERNEL",
            {"start": "NULL", "end": "NULL", "deviceId": "0", "streamId": "0",
             "correlationId": "-1", "demangledName": "NULL", "shortName": "NULL"}):
        name = strings.get(demangled) if type(demangled) is int else None
        name = name or (strings.get(short) if type(short) is int else None) or "kernel"
        gpu.append(("kernel", name, *_span(start, end, name), _int(dev), _int(stream),
                    _int(corr), None))
    for table, category in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        for start, end, dev, stream, corr, nbytes, kind in _rows(
                conn, tables, table, {"start": "NULL", "end": "NULL", "deviceId": "0",
                                      "streamId": "0", "correlationId": "-1", "bytes": "NULL",
                                      "copyKind": "0"}):
            name = "Memset (Device)" if category == "memset" else \
                COPY_KINDS.get(_int(kind), "Memcpy (other)")
            size = float(nbytes) if type(nbytes) is int and 0 <= nbytes < 2**60 else None
            gpu.append((category, name, *_span(start, end, name), _int(dev), _int(stream),
                        _int(corr), size))
    bar.step("copies and fills")
    runtime = {corr: ("runtime", corr, _ns(start, "a runtime call's start"), 0, tid)
               for corr, start, tid in _rows(conn, tables, "CUPTI_ACTIVITY_KIND_RUNTIME",
                                             {"correlationId": "NULL", "start": "NULL",
                                              "globalTid": "NULL"})
               if type(corr) is int and type(start) is int}
    bar.step("runtime calls")
    text_col = "textId" in tables.get("NVTX_EVENTS", set())
    ranges, steps_ns = [], []
    for text, text_id, start, end, tid in _rows(
            conn, tables, "NVTX_EVENTS", {"text": "NULL", "textId": "NULL", "start": "NULL",
                                          "end": "NULL", "globalTid": "NULL"}):
        if not isinstance(text, str):
            text = strings.get(text_id) if text_col and type(text_id) is int else None
        if text is None or type(start) is not int or type(end) is not int or end < start:
            continue  # a mark, or a range never closed
        name, dims = _op(text)
        if name.startswith("ProfilerStep#"):
            steps_ns.append((name, float(start), float(end)))
        else:
            ranges.append(("cpu", name, float(start), float(end - start), 0, tid, dims))
    bar.step("NVTX ranges")
    return _events(p, conn, tables, gpu, runtime, ranges, steps_ns)


def _span(start: Any, end: Any, name: str) -> tuple[float, float]:
    s, e = _ns(start, f"{name[:60]!r}: start"), _ns(end, f"{name[:60]!r}: end")
    if e < s:
        raise RooflineError(f"{name[:60]!r}: ends ({brief(end)}) before it starts")
    return s, e - s


def _events(p: Path, conn: sqlite3.Connection, tables: dict[str, set[str]],
            gpu: list[Any], runtime: dict[int, Any], ranges: list[Any],
            steps_ns: list[Any]) -> Trace:
    ranges.sort(key=lambda r: r[2])
    launcher = launchers(ranges, runtime)
    names: dict[int, list[str]] = {}  # op index -> its kernels' names (for the dtype)
    for e in gpu:
        if e[0] == "kernel" and (i := launcher.get(e[6])) is not None:
            names.setdefault(i, []).append(e[1])
    ops: dict[int, CpuOp] = {}
    for i, kernel_names in names.items():
        r = ranges[i]
        dt = next((t for n in kernel_names if (t := _dtype(n)) is not None), None)
        ops[i] = CpuOp(i, r[1], r[6], tuple(dt for _ in r[6]) if dt else ())
    base = min((e[2] for e in gpu), default=0.0)
    kernels = []
    for category, name, start, dur, dev, stream, corr, nbytes in gpu:
        launch = runtime.get(corr)
        i = launcher.get(corr)
        kernels.append(Kernel(name, category, (start - base) * 1e-9, dur * 1e-9, stream, dev,
                              ((launch[2] if launch else start) - base) * 1e-9,
                              ops.get(i) if i is not None and category == "kernel" else None,
                              None, nbytes))
    kernels.sort(key=lambda k: k.start_s)
    steps = sorted((Step(n, (s - base) * 1e-9, (e - base) * 1e-9) for n, s, e in steps_ns),
                   key=lambda s: s.start_s)
    return Trace(str(p), _device(conn, tables, {k.device for k in kernels}), None, None,
                 kernels, steps, len(ranges))


def _device(conn: sqlite3.Connection, tables: dict[str, set[str]], devices: set[int]
            ) -> str | None:
    rows = [(i, n) for i, n in _rows(conn, tables, "TARGET_INFO_GPU",
                                     {"id": "NULL", "name": "NULL"}) if isinstance(n, str)]
    first = min(devices) if devices else None
    return next((n for i, n in rows if i == first), rows[0][1] if rows else None)
