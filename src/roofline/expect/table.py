"""The figures of the expected-time model for a chip: the chip file's [efficiency] tables over
generic defaults, a local `measure` calibration over both.

Every figure is an `Efficiency` with its source; the generic defaults are fitted (they say to
what: the fit half of benchmarks/validation, `python benchmarks/validation/check.py --fit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..hardware.model import Chip, Efficiency

if TYPE_CHECKING:
    from ..measure.calibration import Calibration

_FIT = "fit half of benchmarks/validation (check.py --fit): median measured/bound of "

# For a chip whose file gives no figure of a kind (a chip without published measurements).
DEFAULTS: dict[str, Efficiency] = {
    "matmul": Efficiency(0.72, "fitted", _FIT + "the gemm rows, every chip and dtype"),
    "attention": Efficiency(0.60, "fitted", _FIT + "the attention_fwd rows of the arch's "
                            "default kernel (FA3 / cuDNN / FA4)"),
    "attention_bwd": Efficiency(0.55, "fitted", _FIT + "the attention_bwd rows"),
    "hbm": Efficiency(0.85, "fitted", _FIT + "the hbm rows"),
    "scale-up": Efficiency(0.75, "fitted", _FIT + "the large (>= 256 MiB) collective rows"),
    "scale-out": Efficiency(0.75, "fitted", _FIT + "the multi-node collective rows"),
    "launch_s": Efficiency(4e-6, "fitted", _FIT + "the short-sequence attention and small "
                           "GEMM rows (launch, prologue, epilogue, tail)"),
    "graph_launch_s": Efficiency(1e-6, "fitted", _FIT + "the batch-1 decode rows of serving "
                                 "engines (CUDA graphs)"),
    "framework": Efficiency(0.75, "fitted", _FIT + "the train, decode and serving rows"),
    "framework.decode": Efficiency(0.70, "fitted", _FIT + "the decode rows (batch 1-256 "
                                   "decode steps of serving engines)"),
    "scale-up.nvls": Efficiency(0.60, "fitted", _FIT + "the NVLS all-reduce rows (H200, "
                                "B200); NCCL's own tuning derates NVLS too (tuning.cc: 0.85 "
                                "Hopper, 0.74 Blackwell)"),
    "collective_call_s.direct": Efficiency(5e-6, "fitted", _FIT + "the DeepEP dispatch / "
                                           "combine rows (its own kernels, no NCCL call)"),
    "collective_call_s": Efficiency(20e-6, "fitted", _FIT + "the small-message collective "
                                    "rows (NCCL / RCCL software latency)"),
}


def figures(chip: Chip, calibration: Calibration | None = None) -> dict[str, Efficiency]:
    """Every figure the model may use on `chip`: defaults < chip file < calibration."""
    out = {**DEFAULTS, **chip.efficiency}
    if calibration is not None:
        what = f"measured: {calibration.description}"
        for dt, eff in calibration.compute.items():
            out[f"matmul.{dt}"] = Efficiency(eff, what)
        for key, eff in calibration.resources.items():
            if key in ("hbm", "scale-up", "scale-out"):
                out[key] = Efficiency(eff, what)
    return out


def lookup(figs: Mapping[str, Efficiency], kind: str, variant: str | None = None
           ) -> tuple[str, Efficiency]:
    """The most specific figure: `kind.variant`, else `kind` (a default always exists)."""
    if variant and f"{kind}.{variant}" in figs:
        return f"{kind}.{variant}", figs[f"{kind}.{variant}"]
    return kind, figs[kind]
