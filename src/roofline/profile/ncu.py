"""Nsight Compute CSV (`ncu --csv`, the default details page or `--page raw`): each kernel's
measured duration and, where collected, its DRAM bytes and FLOPs, placed on the roofline by
that measured work; beside a trace's profile, compared with our bound for the same kernel
name.

Both layouts are read. Details: one row per metric ("ID", "Kernel Name", ..., "Metric Name",
"Metric Unit", "Metric Value"; 'Duration' in the Speed Of Light section, or the raw names
asked for with --metrics). Raw: one row per kernel, a column per metric and a second row of
units. Metrics (Nsight Compute's names, docs.nvidia.com/nsight-compute "Metrics Reference";
the FLOP convention add + mul + 2 fma is NERSC's roofline methodology, e.g.
github:YipZLF/JaxProfiler jpr/run_roofline.sh): gpu__time_duration.sum, dram__bytes.sum (or
dram__bytes_read.sum + dram__bytes_write.sum), {sm,smsp}__sass_thread_inst_executed_op_
{d,f,h}{add,mul,fma}_pred_on.sum. Tensor-core work has no FLOP count in ncu's instruction
metrics (FLOPs per instruction differ by architecture): a GEMM's measured FLOPs leave it
out, so its point sits low and its measured-work bound is a floor.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError, brief
from ..evaluate import evaluate
from ..hardware import Chip

MAX_CSV_BYTES = 2**28
DURATION = ("gpu__time_duration.sum", "Duration")
DRAM = ("dram__bytes.sum",)
DRAM_PARTS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
PRECISIONS = {"d": "fp64", "f": "fp32", "h": "fp16"}
UNITS = {"": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
         "kibyte": 2**10, "mibyte": 2**20, "gibyte": 2**30, "nsecond": 1e-9, "usecond": 1e-6,
         "msecond": 1e-3, "second": 1.0, "inst": 1.0, "kinst": 1e3, "minst": 1e6,
         "ginst": 1e9, "(!) n/a": math.nan}


@dataclass(frozen=True)
class NcuKernel:
    id: str
    name: str
    duration_s: float
    dram_bytes: float | None
    flops: dict[str, float]  # per roofline dtype (fp64 / fp32 / fp16): CUDA-core FLOPs


@dataclass(frozen=True)
class NcuRow:
    """One kernel on the roofline by its measured work, with our bound where it maps."""

    id: str
    name: str
    measured_s: float
    dram_bytes: float | None
    flops: float | None
    intensity: float | None  # FLOPs per DRAM byte
    achieved_flops_per_s: float | None
    work_bound_s: float | None  # the measured bytes and FLOPs at the chip's roofs
    our_bound_s: float | None  # the trace's mapped op with this kernel name
    our_bytes: float | None
    our_flops: float | None


def _value(text: str, unit: str, what: str) -> float:
    scale = UNITS.get(unit.strip().lower())
    if scale is None:
        raise RooflineError(f"{what}: unit {brief(unit)!r} is not one ncu writes")
    try:
        value = float(text.replace(",", "")) * scale
    except ValueError:
        raise RooflineError(f"{what}: {brief(text)!r} is not a number") from None
    if math.isnan(value):
        return math.nan  # 'n/a': not collected
    if not math.isfinite(value) or value < 0:
        raise RooflineError(f"{what}: {brief(text)} must be finite and >= 0")
    return value


def _records(path: Path) -> tuple[list[str], list[list[str]]]:
    try:
        data = path.read_bytes()[: MAX_CSV_BYTES + 1]
    except OSError as exc:
        raise RooflineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_CSV_BYTES:
        raise RooflineError(f"{path}: more than {MAX_CSV_BYTES >> 20} MiB of ncu CSV")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RooflineError(f"{path}: not UTF-8 text: not an ncu CSV") from None
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise RooflineError(f"{path}: not an Nsight Compute CSV (no '\"ID\",...' header: "
                            "Nsight Compute's CSV output, raw or details page)")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as exc:
        raise RooflineError(f"{path}: not a readable CSV ({exc})") from None
    return rows[0], rows[1:]


def read_ncu(path: str | Path) -> list[NcuKernel]:
    """The kernels of an `ncu --csv` file (details or raw page)."""
    p = Path(path)
    header, body = _records(p)
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        raise RooflineError(f"{p}: not an Nsight Compute CSV (no 'Kernel Name' column)")
    metrics: dict[str, dict[str, float]] = {}  # kernel ID -> metric -> value
    names: dict[str, str] = {}
    try:
        if "Metric Name" in col and "Metric Value" in col:  # details: one row per metric
            unit_col = col.get("Metric Unit")
            for row in body:
                if len(row) != len(header):
                    continue
                kid, metric = row[col["ID"]], row[col["Metric Name"]]
                names[kid] = row[col["Kernel Name"]]
                if not _wanted(metric):
                    continue
                metrics.setdefault(kid, {})[metric] = _value(
                    row[col["Metric Value"]], row[unit_col] if unit_col is not None else "",
                    f"kernel {kid} {metric}")
        else:  # raw: a column per metric, then a row of units (its ID empty)
            units, rows = [""] * len(header), body
            if body and len(body[0]) == len(header) and not body[0][col["ID"]].strip():
                units, rows = body[0], body[1:]
            for row in rows:
                if len(row) != len(header):
                    continue
                kid = row[col["ID"]]
                names[kid] = row[col["Kernel Name"]]
                metrics[kid] = {m: _value(row[i], units[i], f"kernel {kid} {m}")
                                for m, i in col.items() if _wanted(m) and row[i].strip()}
    except RooflineError as exc:
        raise RooflineError(f"{p}: {exc}") from None
    kernels = [_kernel(kid, names[kid], m) for kid, m in metrics.items()]
    found = [k for k in kernels if k is not None]
    if not found:
        raise RooflineError(f"{p}: no kernel with a duration (gpu__time_duration.sum or the "
                            "Speed Of Light section's Duration)")
    return found


def _wanted(metric: str) -> bool:
    return metric in DURATION or metric in DRAM or metric in DRAM_PARTS \
        or "__sass_thread_inst_executed_op_" in metric


def _got(m: dict[str, float], key: str) -> float | None:
    v = m.get(key)
    return v if v is not None and not math.isnan(v) else None


def _kernel(kid: str, name: str, m: dict[str, float]) -> NcuKernel | None:
    duration = next((v for k in DURATION if (v := _got(m, k)) is not None), None)
    if duration is None:
        return None
    dram = _got(m, DRAM[0])
    parts = [_got(m, k) for k in DRAM_PARTS]
    if dram is None and all(v is not None for v in parts):
        dram = sum(v or 0.0 for v in parts)
    flops: dict[str, float] = {}
    for letter, dt in PRECISIONS.items():
        for unit in ("sm", "smsp"):
            counts = [_got(m, f"{unit}__sass_thread_inst_executed_op_{letter}{op}_pred_on.sum")
                      for op in ("add", "mul", "fma")]
            if any(c is not None for c in counts):
                add, mul, fma = (c or 0.0 for c in counts)
                flops[dt] = add + mul + 2 * fma
                break
    return NcuKernel(kid, name, duration, dram, flops)


def place(kernels: list[NcuKernel], chip: Chip, ours: dict[str, Any] | None = None
          ) -> list[NcuRow]:
    """Each kernel at its measured intensity and FLOP/s, its measured bytes and FLOPs bounded
    by the one evaluator on `chip`; `ours`: kernel name -> a profile's KernelRow."""
    rows = []
    for k in kernels:
        total = sum(k.flops.values()) if k.flops else None
        bound = None
        if k.dram_bytes is not None or k.flops:
            cost = Cost(bytes={"hbm": k.dram_bytes or 0.0}, name=k.name[:80],
                        vector_flops={lookup_dtype(dt).peak: v for dt, v in k.flops.items()
                                      if v} or None)
            bound = float(evaluate(cost, chip).t_lower_s)
        mine = (ours or {}).get(k.name)
        rows.append(NcuRow(
            k.id, k.name, k.duration_s, k.dram_bytes, total,
            total / k.dram_bytes if total and k.dram_bytes else None,
            total / k.duration_s if total and k.duration_s else None, bound,
            getattr(mine, "bound_s", None), getattr(mine, "bytes", None),
            getattr(mine, "flops", None)))
    return rows
