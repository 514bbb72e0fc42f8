"""Is a measurement trustworthy, and of the device it claims to be?

A run is suspect when repeats of one figure disagree by more than half (spread =
(max − min) / median > 50%: other work shared the machine) or when the memory levels are not
monotone (an inner level, closer to the units, slower than an outer one: a window was read
while something else streamed). Such a run is measured once more; if the second run is
still suspect its results — and the chip file written from them — are marked unreliable.
Comparing a measured device with another device's chip file (`measure peaks --hw h100` on a
CPU) is allowed but said out loud: the efficiencies then compare two machines.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import sys
from collections.abc import Callable

from ..hardware import Chip
from ..units import format_si
from .chipfile import MeasuredMachine
from .device import DeviceInfo

SPREAD_LIMIT = 0.5  # (max − min) / median of one figure's repeats


def warn(message: str) -> None:
    """One warning line on stderr (results stay on stdout)."""
    print(f"roofline: warning: {message}", file=sys.stderr)


def run_problems(machine: MeasuredMachine) -> list[str]:
    """What makes a `measure peaks` run suspect (empty: nothing)."""
    problems = [f"{p.dtype} peak repeats spread {100 * p.timing.spread:.0f}%"
                for p in machine.peaks if p.timing.spread > SPREAD_LIMIT]
    levels = machine.bandwidth.levels if machine.bandwidth else ()
    problems += [f"{lv.name} bandwidth repeats spread {100 * lv.spread:.0f}%"
                 for lv in levels if lv.spread > SPREAD_LIMIT]  # NaN (plateaus): no repeats
    for outer, inner in itertools.pairwise(levels):  # outermost (hbm) first
        if inner.bandwidth_Bps < outer.bandwidth_Bps:
            problems.append(f"{inner.name} ({format_si(inner.bandwidth_Bps, 'B/s')}) slower "
                            f"than {outer.name} ({format_si(outer.bandwidth_Bps, 'B/s')}), "
                            "which lies further out")
    return problems


def measure_reliably(run: Callable[[], MeasuredMachine],
                     warn: Callable[[str], None] = warn) -> MeasuredMachine:
    """Run once; if suspect, warn and run again; if still suspect, warn and mark it."""
    machine = run()
    problems = run_problems(machine)
    if not problems:
        return machine
    warn(f"noisy or inconsistent measurement ({'; '.join(problems)}): measuring again")
    machine = run()
    problems = run_problems(machine)
    if problems:
        warn(f"still noisy or inconsistent after a retry ({'; '.join(problems)}): the results"
             " are marked unreliable (measure on a quiet machine)")
        machine = dataclasses.replace(machine, unreliable=tuple(problems))
    return machine


def device_mismatch(device: DeviceInfo, chip: Chip) -> str:
    """Why `chip` is not the device being measured ('' when it plausibly is)."""
    if chip.form_factor.startswith("measured"):  # a file from `measure peaks --out`
        same = chip.name.startswith(device.name)
    else:  # a catalog SKU: its model name (h100, mi300x, ...) appears in the device's name
        names = {chip.id, chip.id.split("-")[0], *chip.aliases}
        text = device.name.lower().replace(" ", "-")
        same = device.kind != "cpu" and any(  # a whole word: h200 is not gh200
            len(n) >= 3 and re.search(rf"(?<![a-z0-9]){re.escape(n)}", text) for n in names)
    if same:
        return ""
    return (f"measuring {device.description} against chip {chip.id!r} ({chip.name}), a "
            "different device: the percentages compare two machines")
