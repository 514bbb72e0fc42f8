"""Read a PyTorch profiler (Kineto) chrome trace: GPU kernels, copies and fills, the CPU op
that launched each one (with its input shapes when recorded), NCCL arguments, steps.

The file is JSON (optionally gzip) parsed with the standard library only: nothing in it is
executed. Events are slimmed as they are parsed (`json.loads`' object_hook): the ones a
profile needs become small records and every other event is dropped at once, so a large
trace never holds its parsed events twice. Every number kept is checked (finite,
non-negative where it must be); a file that is not a trace is one RooflineError naming it.

A kernel is linked to its launching CPU op through the runtime call that launched it (same
`correlation`): the innermost `cpu_op` on the runtime call's thread whose span contains it.
Time containment works for every Kineto version (old traces' `External id` on a kernel is
its correlation, newer ones' is the op's).
"""

from __future__ import annotations

import gzip
import json
import math
import sys
import zlib
from pathlib import Path
from typing import Any

from ..errors import RooflineError, brief
from ..measure.progress import Progress
from .events import Comm, CpuOp, Kernel, Step, Trace, comm_args, launchers

KinetoTrace = Trace  # the name this module gave it first

MAX_TRACE_BYTES = 2**30  # uncompressed; a 100 MB trace is a long one (memory stays < 2 GB)
_CHUNK = 2**24
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}  # HIP traces use cuda_runtime too
_CPU = "cpu_op"


def _number(value: Any, what: str, event: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise RooflineError(f"event {event!r}: {what} must be a finite number, got "
                            f"{brief(value)}")
    if not -1e18 < value < 1e18:  # microseconds: 30,000 years; beyond is not a clock
        raise RooflineError(f"event {event!r}: {what} {brief(value)} is out of range")
    return float(value)


def _duration(event: dict[str, Any], name: str) -> float:
    dur = _number(event.get("dur", 0), "'dur'", name)
    if dur < 0:
        raise RooflineError(f"event {name!r}: 'dur' must be >= 0, got {brief(dur)}")
    return dur


def _int(value: Any, default: int = -1) -> int:
    """An id that may be written as a number or a string ('0x0' on ROCm); else `default`."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return default
    return default


def _id(value: Any) -> int | str | None:
    """A process or thread id as a dictionary key (a hostile list or dict is no id)."""
    return value if type(value) in (int, str) else None


def _dims(args: dict[str, Any]) -> tuple[tuple[tuple[int, ...] | None, ...], tuple[str, ...]]:
    """'Input Dims' and 'Input type' as shapes (None: not a tensor) and type names."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list):
        return (), ()
    shapes: list[tuple[int, ...] | None] = []
    for d in dims:
        ok = isinstance(d, list) and d and all(type(x) is int and 0 <= x < 2**48 for x in d)
        shapes.append(tuple(d) if ok else None)
    names = tuple(t if isinstance(t, str) else "" for t in types) \
        if isinstance(types, list) else ()
    return tuple(shapes), names


class _Slimmer:
    """The object_hook: events a profile needs become tuples, the rest None."""

    def __init__(self) -> None:
        self.cpu_ops = 0

    def __call__(self, obj: dict[str, Any]) -> Any:
        cat = obj.get("cat")
        if "ph" not in obj or not isinstance(cat, str):
            # an args dict, deviceProperties, the top level, or an event without a category
            return None if "ph" in obj else obj
        cat = cat.lower()
        name = obj.get("name")
        if obj.get("ph") != "X" or not isinstance(name, str):
            return None
        name = sys.intern(name)  # a step repeats its kernels' (long, templated) names
        args = obj.get("args")
        args = args if isinstance(args, dict) else {}
        if cat in GPU_CATEGORIES:
            start = _number(obj.get("ts"), "'ts'", name)
            return ("gpu", GPU_CATEGORIES[cat], name, start, _duration(obj, name),
                    _int(args.get("stream", obj.get("tid"))),
                    _int(args.get("device", obj.get("pid"))),
                    _int(args.get("correlation")), comm_args(args), _bytes(args))
        if cat in _RUNTIME:
            corr = _int(args.get("correlation"))
            if corr < 0:
                return None
            return ("runtime", corr, _number(obj.get("ts"), "'ts'", name), _id(obj.get("pid")),
                    _id(obj.get("tid")))
        if cat == _CPU or (cat == "user_annotation" and name.startswith("ProfilerStep#")):
            self.cpu_ops += cat == _CPU
            start = _number(obj.get("ts"), "'ts'", name)
            dims, types = _dims(args)
            return ("cpu" if cat == _CPU else "step", name, start, _duration(obj, name),
                    _id(obj.get("pid")), _id(obj.get("tid")), dims, types, comm_args(args))
        return None


def _bytes(args: dict[str, Any]) -> float | None:
    value = args.get("bytes")
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) and 0 <= value < 2**60:
        return float(value)
    return None


def _text(path: Path, bar: Progress) -> str:
    """The file's text, gunzipped when it is gzip, at most MAX_TRACE_BYTES uncompressed."""
    try:
        if not path.is_file():
            raise RooflineError(f"{path}: cannot read: "
                                + ("not found" if not path.exists() else "not a regular file"))
        chunks, total = [], 0
        with path.open("rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            f: Any = gzip.GzipFile(fileobj=raw) if gz else raw
            done = 0
            while chunk := f.read(_CHUNK):
                total += len(chunk)
                if total > MAX_TRACE_BYTES:
                    raise RooflineError(f"{path}: more than {MAX_TRACE_BYTES // 2**30} GiB of "
                                        "trace text: profile a few steps (schedule active=1-3)")
                chunks.append(chunk)
                while done < raw.tell() // _CHUNK:  # compressed bytes read so far
                    done += 1
                    bar.step(f"{total / 1e6:.0f} MB")
    except (OSError, EOFError, zlib.error) as exc:  # a truncated or corrupt gzip stream
        raise RooflineError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                            ) from None
    data = b"".join(chunks)
    del chunks
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RooflineError(f"{path}: not UTF-8 text (byte {exc.start}): not a trace") from None


def _parse(path: Path, text: str) -> tuple[dict[str, Any], _Slimmer]:
    slim = _Slimmer()
    try:
        data = json.loads(text, object_hook=slim)
    except json.JSONDecodeError as exc:
        raise RooflineError(f"{path}: not a JSON trace (line {exc.lineno}, column {exc.colno}: "
                            f"{exc.msg}; truncated?)") from None
    except RecursionError:
        raise RooflineError(f"{path}: nested too deeply to be a trace") from None
    except ValueError as exc:  # an integer with too many digits
        raise RooflineError(f"{path}: not a trace: {str(exc).splitlines()[0]}") from None
    except RooflineError as exc:
        raise RooflineError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise RooflineError(f"{path}: not a Kineto / chrome trace (expected a JSON object "
                            "with a 'traceEvents' list)")
    return data, slim


def _device_name(data: dict[str, Any], device: int | None) -> str | None:
    props = data.get("deviceProperties")
    if not isinstance(props, list):
        return None
    named = [p for p in props if isinstance(p, dict) and isinstance(p.get("name"), str)]
    for p in named:
        if device is not None and p.get("id") == device:
            return str(p["name"])
    return str(named[0]["name"]) if named else None


def read_kineto(path: str | Path) -> KinetoTrace:
    """Read one rank's trace (`.json` or `.json.gz`)."""
    p = Path(path)
    # progress on a terminal (Progress draws only there): a step per 16 MB read, then parsing
    size = p.stat().st_size if p.is_file() else 0
    with Progress(size // _CHUNK + 1, f"reading {p.name}") as bar:
        text = _text(p, bar)
        bar.step("parsing JSON")
        data, slim = _parse(p, text)
        del text
    events = [e for e in data["traceEvents"] if e is not None and type(e) is tuple]
    gpu = [e for e in events if e[0] == "gpu"]
    runtime = {e[1]: e for e in events if e[0] == "runtime"}
    cpu = [e for e in events if e[0] == "cpu"]
    # times from the first GPU activity: absolute microsecond clocks (~1e15) in seconds would
    # keep too few digits for a kernel's microseconds
    base = min((e[3] for e in gpu), default=0.0)
    steps = sorted((Step(e[1], (e[2] - base) * 1e-6, (e[2] + e[3] - base) * 1e-6)
                    for e in events if e[0] == "step"), key=lambda s: s.start_s)
    del events
    launcher = launchers(cpu, runtime)
    ops: dict[int, CpuOp] = {}
    kernels = []
    for e in gpu:
        _, category, name, start, dur, stream, device, corr, comm, nbytes = e
        launch = runtime.get(corr)
        op_index = launcher.get(corr)
        op = None
        if op_index is not None:
            op = ops.get(op_index)
            if op is None:
                c = cpu[op_index]
                op = ops[op_index] = CpuOp(op_index, c[1], c[6], c[7], c[8])
        comm = comm or (op.comm if op is not None else None)
        kernels.append(Kernel(name, category, (start - base) * 1e-6, dur * 1e-6, stream, device,
                              ((launch[2] if launch else start) - base) * 1e-6, op,
                              comm if isinstance(comm, Comm) else None, nbytes))
    kernels.sort(key=lambda k: k.start_s)
    devices = {k.device for k in kernels}
    dist = data.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else {}
    rank, world = dist.get("rank"), dist.get("world_size")
    return KinetoTrace(str(p), _device_name(data, min(devices) if devices else None),
                       rank if type(rank) is int else None,
                       world if type(world) is int else None, kernels, steps, slim.cpu_ops)
