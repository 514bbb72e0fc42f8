"""`roofline measure peaks | ops | comm`: the command-line layer over roofline.measure.

`register(subparsers)` adds the `measure` command to the main parser; `main(argv)` runs it
on its own (`python -m roofline.measure ...`, e.g. under torchrun), through the main CLI.
torch is imported only inside the commands that need it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..argtypes import SIZE_FACTOR, bytes_arg, count_arg, emit, ranged
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..files import write_text
from ..hardware import Chip, load_chip
from ..hardware.catalog import ID_RULE, SAFE_ID
from .backend import BACKENDS, DEVICES, STREAM_KERNELS
from .comm import COMM_KINDS
from .progress import Progress

FAMILIES = ("matmul", "elementwise", "attention")


def _today() -> str:
    return datetime.date.today().isoformat()


def _list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad or not items:
        raise RooflineError(f"{what}: unknown {bad[0]!r} (allowed: {', '.join(allowed)})"
                            if bad else f"{what}: give at least one of {', '.join(allowed)}")
    return items


def _dtypes(text: str) -> list[str]:
    return [lookup_dtype(t.strip()).name for t in text.split(",") if t.strip()]


def _threads(text: str) -> int:
    """--threads: a count, at most 8 per core (more only wait for each other, and thousands
    fail to start after the measurement has begun)."""
    n: int = count_arg("--threads")(text)
    most = 8 * (os.cpu_count() or 1)
    if n > most:
        raise argparse.ArgumentTypeError(f"at most {most} (8 per core of this machine's "
                                         f"{os.cpu_count() or 1}), got {n}")
    return n


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", choices=DEVICES, help="where to measure "
                   "(default cpu)")
    p.add_argument("--backend", choices=BACKENDS, help="numpy (CPU default) or torch (CUDA "
                   "default; on the CPU it runs the CUDA code paths)")
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    p.add_argument("--json", action="store_true", help="print one JSON object")


# --- peaks ------------------------------------------------------------------------------------


def _cmd_peaks(args: argparse.Namespace) -> None:
    from .backend import get_backend
    from .bandwidth import MIN_WORKING_SET, default_max_bytes, measure_bandwidth, sweep_sizes
    from .calibration import calibration_from_peaks, write_calibration
    from .checks import device_mismatch, measure_reliably, warn
    from .chipfile import MeasuredMachine, read_links, write_chip
    from .peaks import measure_peaks, peak_sizes
    from .text import peaks_text

    compare = load_chip(args.hw) if args.hw else None
    if args.calibration_out and compare is None:
        raise RooflineError("--calibration-out needs --hw (the chip the efficiencies are "
                            "relative to)")
    if args.id is not None and not SAFE_ID.fullmatch(args.id):
        raise RooflineError(f"--id: must be {ID_RULE}, got {args.id!r}")
    if args.out and args.no_bandwidth:
        raise RooflineError("--out needs the bandwidth sweep (drop --no-bandwidth): a chip "
                            "file must have main memory")
    links = read_links(args.link) if args.link else None
    backend = get_backend(args.device, args.backend)
    dtypes = _dtypes(args.dtypes) if args.dtypes else list(backend.matmul_dtypes)
    kernels = _list(args.kernels, STREAM_KERNELS, "--kernels")
    sizes = peak_sizes(backend.device, args.quick)
    top = args.max_bytes or default_max_bytes(backend.info)
    ws = [] if args.no_bandwidth else sweep_sizes(MIN_WORKING_SET, max(top, MIN_WORKING_SET),
                                                 1 if args.quick else 2)
    if compare is not None and (why := device_mismatch(backend.info, compare)):
        warn(why)

    def run() -> MeasuredMachine:
        with Progress(len(dtypes) * len(sizes) + len(ws) * len(kernels), "measure peaks"
                      ) as bar:
            peaks, skipped = measure_peaks(backend, dtypes, args.quick, sizes, progress=bar)
            sweep = None if args.no_bandwidth else measure_bandwidth(
                backend, kernels, ws, args.quick, args.threads, progress=bar)
        return MeasuredMachine(backend.info, _today(), tuple(peaks), sweep, args.quick,
                               skipped)

    machine = measure_reliably(run)
    sweep = machine.bandwidth
    data: dict[str, Any] = {"device": backend.info.to_dict(), "date": machine.date,
                            "peaks": [p.to_dict() for p in machine.peaks],
                            "skipped": dict(machine.skipped),
                            "bandwidth": sweep.to_dict() if sweep else None,
                            "unreliable": list(machine.unreliable)}
    text = peaks_text(machine, compare)
    if args.out:
        chip = write_chip(machine, args.out, args.id, links)
        data["chip_file"] = str(args.out)
        text += (f"\n\nwrote chip file {args.out} (id {chip.id!r}, labelled as measured): "
                 f"use --hw {args.out}")
    if args.calibration_out and compare is not None:
        cal = calibration_from_peaks(machine, compare)
        write_calibration(cal, args.calibration_out)
        data["calibration"] = cal.efficiencies()
        text += f"\nwrote calibration {args.calibration_out} (against {compare.id!r})"
    emit(data, args.json, text)


# --- ops --------------------------------------------------------------------------------------


def _cmd_ops(args: argparse.Namespace) -> None:
    from .backend import get_backend
    from .calibration import calibration_from_ops, write_calibration
    from .checks import device_mismatch, warn
    from .ops import default_cases, run_ops
    from .text import ops_text
    from .timing import Settings

    chip: Chip = load_chip(args.hw)
    if args.plot:
        from ..plot import check_format

        check_format(args.plot)  # before the sweep, not after
    families = _list(args.only, FAMILIES, "--only") if args.only else list(FAMILIES)
    backend = get_backend(args.device, args.backend)
    if why := device_mismatch(backend.info, chip):
        warn(why)
    cases = [c for c in default_cases(backend, chip, args.quick) if c.family in families]
    with Progress(len(cases), "measure ops") as bar:
        sweep = run_ops(backend, chip, cases, _today(), Settings.for_mode(args.quick), bar,
                        args.quick)
    data = sweep.to_dict()
    text = ops_text(sweep)
    if args.calibration_out:
        cal = calibration_from_ops(sweep)
        write_calibration(cal, args.calibration_out)
        data["calibration"] = cal.efficiencies()
        text += f"\n\nwrote calibration {args.calibration_out}: " + ", ".join(
            f"{k} {100 * v:.0f}%" for k, v in cal.efficiencies().items())
    if args.plot:
        _plot_ops(sweep, chip, args.plot)
        text += f"\nwrote {args.plot}: the achieved points on {chip.id}'s roofline"
    emit(data, args.json, text)


def _plot_ops(sweep: Any, chip: Chip, path: str) -> None:
    """The measured points (intensity on hbm, achieved FLOP/s) on the chip's roofline."""
    from ..plot import plot_roofline, save_figure

    points = [p for p in sweep.points if "hbm" in p.estimate.intensity]
    dtypes = [dt for dt in dict.fromkeys(p.dtype for p in points) if dt in chip.peaks]
    measured = [(p.label, float(p.estimate.intensity["hbm"]), p.achieved_flops_per_s)
                for p in points]
    ax = plot_roofline(chip, measured=measured, dtypes=dtypes or None,
                       title=f"{chip.name}: measured on {sweep.device.description}")
    save_figure(ax, path)


# --- comm -------------------------------------------------------------------------------------


def _cmd_comm(args: argparse.Namespace) -> None:
    from .calibration import calibration_from_link, write_calibration
    from .checks import device_mismatch, warn
    from .comm import CommSweep, comm_sizes, init_group, link_toml, run_comm_sweep
    from .device import cpu_info, cuda_info
    from .text import comm_text

    compare = load_chip(args.hw) if args.hw else None
    if args.calibration_out and compare is None:
        raise RooflineError("--calibration-out needs --hw (the chip whose link is calibrated)")
    kinds = _list(args.kinds, COMM_KINDS, "--kinds")
    lo = args.min_bytes or 1024.0
    hi = args.max_bytes or (2.0**20 if args.quick else 2.0**26)
    sizes = comm_sizes(lo, hi, args.factor)
    g = init_group(args.comm_backend)
    try:
        if g.device == "cpu":
            info = cpu_info()
            device = f"{info.description}, {g.world} processes"
        else:
            info = cuda_info(g.torch, g.torch.cuda.current_device())
            device = f"{info.name} x {g.world}"
        if compare is not None and g.rank == 0 and (why := device_mismatch(info, compare)):
            warn(why)
        bar = Progress(len(sizes) * len(kinds), "measure comm", enabled=None if g.rank == 0
                       else False)
        with bar:
            points, skipped = run_comm_sweep(
                g, sizes, kinds, args.dtype, 2e-3 if args.quick else 20e-3,
                3 if args.quick else 7, progress=bar)
    finally:
        g.close()
    if g.rank != 0:
        return
    sweep = CommSweep(g.backend, g.world, device, _today(), args.dtype, tuple(points), skipped)
    fits: dict[str, Any] = {}
    try:
        fits["all measured"] = sweep.fit()
    except RooflineError as exc:
        fits["all measured"] = str(exc)
    fits.update(sweep.fits_by_kind())
    data = sweep.to_dict()
    text = comm_text(sweep, fits)
    if (args.out or args.calibration_out) and isinstance(fits["all measured"], str):
        emit(data, args.json, text)  # keep the measurements, then say what failed
        raise RooflineError(f"no link profile written: {fits['all measured']}")
    if args.out:
        write_text(args.out, link_toml(sweep, fits["all measured"], args.link) + "\n")
        text += f"\n\nwrote link profile {args.out} ([link.{args.link}]): add it to a chip " \
                f"file with `roofline measure peaks --link {args.out} --out chip.toml`"
    if args.calibration_out and compare is not None:
        cal = calibration_from_link(fits["all measured"], compare, args.link, device,
                                    sweep.date)
        write_calibration(cal, args.calibration_out)
        data["calibration"] = cal.efficiencies()
        text += f"\nwrote calibration {args.calibration_out} (against {compare.id!r})"
    emit(data, args.json, text)


# --- wiring -----------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    """Add `measure peaks | ops | comm` to the main CLI's subparsers."""
    m = subparsers.add_parser("measure", help="measure this machine: peaks, bandwidth, "
                              "real kernels against their bound, collectives",
                              description="Measure this machine and real kernels on it.")
    sub = m.add_subparsers(dest="measure_command", required=True, parser_class=type(m))

    p = sub.add_parser("peaks", help="peak FLOP/s per dtype and bandwidth per memory level; "
                       "--out writes an empirical chip file")
    _device_args(p)
    p.add_argument("--dtypes", help="comma-separated dtypes (default: all the device runs)")
    p.add_argument("--kernels", default=",".join(STREAM_KERNELS),
                   help="streaming kernels (default read,copy,triad)")
    p.add_argument("--max-bytes", type=bytes_arg("--max-bytes"), dest="max_bytes",
                   help="largest working set (default 8x the last cache, at least 64 MiB)")
    p.add_argument("--threads", type=_threads, help="CPU threads for the streaming kernels "
                   "(default: the faster of 1 and one per core, per point; at most 8 per core)")
    p.add_argument("--no-bandwidth", action="store_true", dest="no_bandwidth",
                   help="peaks only (no chip file can be written)")
    p.add_argument("--out", help="write an empirical chip file (catalog schema) here")
    p.add_argument("--id", help="chip id in the file (default measured-<device name>)")
    p.add_argument("--link", help="a link profile from `measure comm --out` to include")
    p.add_argument("--hw", help="compare with this chip (id, alias or .toml)")
    p.add_argument("--calibration-out", dest="calibration_out",
                   help="write measured / --hw efficiencies as a calibration file")
    p.set_defaults(func=_cmd_peaks)

    o = sub.add_parser("ops", help="predicted bound vs achieved time for real matmuls, "
                       "elementwise ops and attention")
    _device_args(o)
    o.add_argument("--hw", required=True, help="the chip to predict with (id, alias or .toml,"
                   " e.g. the file from `measure peaks --out`)")
    o.add_argument("--only", help=f"comma-separated families ({', '.join(FAMILIES)})")
    o.add_argument("--calibration-out", dest="calibration_out",
                   help="write the measured efficiencies as a calibration file")
    o.add_argument("--plot", help="draw the achieved points on the roofline (.png/.svg/.pdf; "
                   "needs matplotlib)")
    o.set_defaults(func=_cmd_ops)

    c = sub.add_parser("comm", help="collectives under torchrun: algbw, busbw, alpha-beta "
                       "fit (torchrun --nproc-per-node N -m roofline measure comm)")
    c.add_argument("--backend", dest="comm_backend", choices=("gloo", "nccl"),
                   help="default: nccl with CUDA, else gloo")
    c.add_argument("--kinds", default=",".join(COMM_KINDS), help="comma-separated "
                   f"collectives (default {','.join(COMM_KINDS)})")
    c.add_argument("--min-bytes", type=bytes_arg("--min-bytes"), dest="min_bytes",
                   help="smallest message (default 1KiB)")
    c.add_argument("--max-bytes", type=bytes_arg("--max-bytes"), dest="max_bytes",
                   help="largest message (default 64MiB; --quick 1MiB)")
    c.add_argument("--factor", type=ranged("--factor", SIZE_FACTOR), default=4.0,
                   help=f"size step factor (default 4; {SIZE_FACTOR})")
    c.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"),
                   help="element type (default fp32)")
    c.add_argument("--link", default="scale-up", choices=("scale-up", "scale-out"),
                   help="which link the profile describes (default scale-up)")
    c.add_argument("--out", help="write the fitted link profile ([link.*] TOML) here")
    c.add_argument("--hw", help="compare with this chip's link (for --calibration-out)")
    c.add_argument("--calibration-out", dest="calibration_out",
                   help="write fitted / --hw link efficiencies as a calibration file")
    c.add_argument("--quick", action="store_true", help="1 KiB to 1 MiB, fewer repeats")
    c.add_argument("--json", action="store_true", help="print one JSON object (rank 0)")
    c.set_defaults(func=_cmd_comm)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `measure ...` (argv without the leading 'measure' is accepted too) through the main
    CLI, so parsing and error handling (one line, exit 2) are the same as `roofline measure`."""
    from ..cli import main as cli_main

    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] != ["measure"]:
        args_list.insert(0, "measure")
    return cli_main(args_list)
