"""How much of a chip's dense peak a GEMM keeps when its board power, not its clock, is the
limit.

The peaks are quoted at the boost clock. A dense GEMM keeps every tensor core busy, and a
board whose power limit cannot feed them at that clock lowers it. The more dense FLOP/s a
chip's peak promises per watt of board power, the further below its boost clock a GEMM
runs: on the same GH100 die, GH200's 900 W module reaches 83.6% / 77.6% of the bf16 / fp8
peak where the 700 W H100 SXM reaches 80.3% / 70.9% (stas00/ml-engineering, compute/
accelerator/README.md MAMF tables; reference hw_specs.md §6.1), and the fp8 peak, twice the
FLOP/s on the same board, keeps the smaller share on both.

The model: up to `FULL_CLOCK_FLOPS_PER_W` of dense peak per watt, the board holds the
peak's clock; beyond it, the clock falls as the cube root of the power shortfall: dynamic
power is C·V²·f and DVFS scales the voltage with the clock (V ∝ f), so P ∝ f³ and the clock
a fixed power allows is f_peak · (P_board / P_needed)^(1/3)
(https://en.wikipedia.org/wiki/Dynamic_frequency_scaling; https://en.wikipedia.org/wiki/
Processor_power_dissipation). The power a dense GEMM needs at the peak clock is taken
proportional to its peak FLOP/s (a board-level energy per FLOP of the dtype), so

    fraction = KERNEL_FRACTION · min(1, FULL_CLOCK_FLOPS_PER_W · tdp_w / peak)^(1/3)

`KERNEL_FRACTION` is what the GEMM kernels reach at the full clock. Both constants are
fitted (below). A chip file's own `[efficiency.matmul.<dtype>]` (a measured figure for that
very chip) wins over this; a chip without `tdp_w` takes the generic default.
"""

from __future__ import annotations

import numpy as np

from ..errors import RooflineError
from ..hardware.model import Chip, Efficiency

# Fitted together on the fit half of benchmarks/validation (check.py --rows; the gemm rows
# of chips without their own figure for the dtype): the pair that puts the most rows within
# 25% of their measurement (82.2% against 81.2% at the generic 0.72; median error 11.1% ->
# 8.5%), the tie among (1.3e12, 0.86) ... (1.7e12, 0.80) broken by the mean |log error|
FULL_CLOCK_FLOPS_PER_W = 1.6e12  # dense FLOP/s per watt of board power a board holds at peak
KERNEL_FRACTION = 0.80  # a GEMM's fraction of the peak at the peak's clock
CLOCK_EXPONENT = 1.0 / 3.0  # P ∝ f·V², V ∝ f: the clock goes as the power's cube root

_WHY = ("a power-limited clock: {kernel} x min(1, {per_w:.2g} FLOP/s/W x {tdp:g} W / "
        "{peak:.4g} FLOP/s)^(1/3) (expect/power.py: the clock a dense GEMM keeps on the "
        "board's power), its constants fitted to the fit half of benchmarks/validation's "
        "gemm rows")


def power_fraction(peak_flops_per_s: float, tdp_w: float) -> float:
    """The fraction of a dense peak a GEMM keeps on a board of `tdp_w` watts (module docs).

    >>> round(power_fraction(1000e12, 1000.0), 3)  # 1 TFLOP/s per W: the full clock
    0.8
    >>> round(power_fraction(1978.9e12, 700.0), 3)  # H100 SXM fp8: 2.83 TFLOP/s per W
    0.662
    """
    if peak_flops_per_s <= 0 or tdp_w <= 0:
        raise RooflineError(f"peak ({peak_flops_per_s}) and tdp_w ({tdp_w}) must be > 0")
    headroom = min(1.0, FULL_CLOCK_FLOPS_PER_W * tdp_w / peak_flops_per_s)
    return float(KERNEL_FRACTION * np.power(headroom, CLOCK_EXPONENT))


def power_figures(chip: Chip) -> dict[str, Efficiency]:
    """`matmul.<peak>` for each tensor peak of a chip that gives its board power (none
    without `tdp_w`)."""
    if not chip.tdp_w:
        return {}
    return {f"matmul.{name}": Efficiency(
        power_fraction(peak.flops_per_s, chip.tdp_w), "fitted",
        _WHY.format(kernel=KERNEL_FRACTION, per_w=FULL_CLOCK_FLOPS_PER_W, tdp=chip.tdp_w,
                    peak=peak.flops_per_s))
        for name, peak in chip.peaks.items() if peak.flops_per_s > 0}
