"""`roofline hw list|show|compare|export`: the chip catalog."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..argtypes import emit
from ..errors import RooflineError
from ..hardware import list_chips, load_chip
from ..render import text
from ..render.chip import chip_comparison, chip_dict, chip_text
from ..units import (
    format_bytes,
    format_si,
)
from ._base import _Parser


def _cmd_hw_list(args: argparse.Namespace) -> None:
    chips = [load_chip(c) for c in list_chips()]
    rows = [[c.id, c.name, format_si(c.peaks["bf16"].flops_per_s, "FLOP/s") if "bf16" in
             c.peaks else "-", format_bytes(c.memory[0].capacity_bytes or 0),
             format_si(c.memory[0].bandwidth_Bps, "B/s"), ", ".join(c.aliases)]
            for c in chips]
    data = {"chips": [{"id": c.id, "name": c.name, "vendor": c.vendor, "aliases": list(c.aliases)}
                      for c in chips]}
    emit(data, args.json, text.table(["id", "name", "bf16 dense", "memory", "bandwidth",
                                       "aliases"], rows))


def _cmd_hw_show(args: argparse.Namespace) -> None:
    chip = load_chip(args.chip)
    emit(chip_dict(chip), args.json, chip_text(chip))


def _cmd_hw_compare(args: argparse.Namespace) -> None:
    from ..sweep import parse_list

    chips = [load_chip(name) for name in parse_list(args.chips, "chips")]
    comparison, data = chip_comparison(chips)
    emit(data, args.json, text.render(comparison) + f"\n(ratios are to {chips[0].id}; peaks are "
         "dense, link bandwidth per direction; `roofline hw show ID` gives every source)")


def _cmd_hw_export(args: argparse.Namespace) -> None:
    """The chip's whole TOML file (validated), to start your own from."""
    from pathlib import Path

    chip = load_chip(args.chip)
    if "@" in chip.id:  # the file is the part's at its own clock, not this one
        raise RooflineError(f"{chip.id} is {chip.id.split('@')[0]} at another clock: export "
                            f"{chip.id.split('@')[0]} and run with --clock-mhz "
                            f"{chip.peak_clock_mhz:g}")
    sys.stdout.write(Path(chip.origin).read_text(encoding="utf-8"))


def register(sub: Any) -> None:
    hw = sub.add_parser("hw", help="the hardware catalog")
    hw_sub = hw.add_subparsers(dest="hw_command", required=True, parser_class=_Parser)
    hw_list = hw_sub.add_parser("list", help="list the built-in chips")
    hw_list.add_argument("--json", action="store_true", help="print one JSON object")
    hw_list.set_defaults(func=_cmd_hw_list)
    hw_show = hw_sub.add_parser("show", help="peaks, memory levels, links, ridge points, sources")
    hw_show.add_argument("chip", help="catalog id, alias, or path to a chip .toml file")
    hw_show.add_argument("--json", action="store_true", help="print one JSON object")
    hw_show.set_defaults(func=_cmd_hw_show)
    hw_compare = hw_sub.add_parser("compare", help="chips side by side, with ratios to the "
                                   "first")
    hw_compare.add_argument("chips", help="comma-separated ids, aliases or .toml files, "
                            "e.g. h100,h200,b200")
    hw_compare.add_argument("--json", action="store_true", help="print one JSON object")
    hw_compare.set_defaults(func=_cmd_hw_compare)
    hw_export = hw_sub.add_parser("export", help="print a chip's complete TOML file, to start "
                                  "your own from (--hw FILE reads it back)")
    hw_export.add_argument("chip", help="catalog id, alias, or path to a chip .toml file")
    hw_export.set_defaults(func=_cmd_hw_export)
