"""Measure real hardware and real kernels: the empirical roofline of the machine you are on.

- `measure_peaks` / `measure_bandwidth`: peak FLOP/s per dtype (matmuls) and bandwidth per
  memory level (streaming kernels over working sets from 16 KiB past the last cache);
  `write_chip` turns them into an empirical chip file that `--hw` accepts.
- `run_ops`: real matmuls (a batch sweep X[B, D]·W[D, D], B = 1 ... 4096, and more),
  elementwise ops and SDPA attention, each timed next to its roofline bound.
- `run_comm_sweep`: collectives under torchrun (gloo / NCCL), algbw and busbw, and an
  alpha-beta fit (`fit_alpha_beta`) into a link profile.
- `calibrate(est, load_calibration(path))`: the estimate's Cost evaluated on its chip derated
  to measured efficiencies (`Chip.derated`), labelled with what it was calibrated on;
  `calibrated_text` renders it.

numpy does the CPU work; torch (optional, imported only when used) does CUDA, SDPA and
torch.distributed. `get_backend("cpu")` or `get_backend("cuda")` picks the machine.

>>> from roofline.measure import fit_alpha_beta
>>> from roofline.measure.comm import model_terms
>>> sizes = [2.0**k for k in range(10, 27, 4)]
>>> times = [float(s * 10e-6 + b / 20e9) for s, b in
...          (model_terms("all-reduce", n, 8) for n in sizes)]
>>> fit = fit_alpha_beta(["all-reduce"] * len(sizes), sizes, 8, times)
>>> round(fit.alpha_s * 1e6, 3), round(fit.beta_Bps / 1e9, 3)
(10.0, 20.0)
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real imports, for type checkers; at run time they load on first use
    from .backend import Backend, Unsupported, get_backend
    from .bandwidth import BandwidthSweep, MeasuredLevel, measure_bandwidth
    from .calibration import (
        CalibratedEstimate,
        Calibration,
        calibrate,
        calibrated_text,
        calibration_from_link,
        calibration_from_ops,
        calibration_from_peaks,
        load_calibration,
        write_calibration,
    )
    from .chipfile import MeasuredMachine, chip_toml, write_chip
    from .comm import CommPoint, CommSweep, LinkFit, fit_alpha_beta, run_comm_sweep
    from .ops import OpCase, OpSweep, TimedOp, default_cases, run_ops
    from .peaks import PeakResult, measure_peaks
    from .timing import Settings, Timing

# Importing `roofline.measure.cli` (every `roofline` command does) must stay cheap, so the
# package loads a submodule only when one of its names is first used.
_WHERE = {
    "Backend": "backend",
    "BandwidthSweep": "bandwidth",
    "CalibratedEstimate": "calibration",
    "Calibration": "calibration",
    "CommPoint": "comm",
    "CommSweep": "comm",
    "LinkFit": "comm",
    "MeasuredLevel": "bandwidth",
    "MeasuredMachine": "chipfile",
    "OpCase": "ops",
    "TimedOp": "ops",
    "OpSweep": "ops",
    "PeakResult": "peaks",
    "Settings": "timing",
    "Timing": "timing",
    "Unsupported": "backend",
    "calibrate": "calibration",
    "calibrated_text": "calibration",
    "calibration_from_link": "calibration",
    "calibration_from_ops": "calibration",
    "calibration_from_peaks": "calibration",
    "chip_toml": "chipfile",
    "default_cases": "ops",
    "fit_alpha_beta": "comm",
    "get_backend": "backend",
    "load_calibration": "calibration",
    "measure_bandwidth": "bandwidth",
    "measure_peaks": "peaks",
    "run_comm_sweep": "comm",
    "run_ops": "ops",
    "write_calibration": "calibration",
    "write_chip": "chipfile",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Backend",
    "BandwidthSweep",
    "CalibratedEstimate",
    "Calibration",
    "CommPoint",
    "CommSweep",
    "LinkFit",
    "MeasuredLevel",
    "MeasuredMachine",
    "OpCase",
    "OpSweep",
    "PeakResult",
    "Settings",
    "TimedOp",
    "Timing",
    "Unsupported",
    "calibrate",
    "calibrated_text",
    "calibration_from_link",
    "calibration_from_ops",
    "calibration_from_peaks",
    "chip_toml",
    "default_cases",
    "fit_alpha_beta",
    "get_backend",
    "load_calibration",
    "measure_bandwidth",
    "measure_peaks",
    "run_comm_sweep",
    "run_ops",
    "write_calibration",
    "write_chip",
]
