"""Peak FLOP/s per dtype: square matmuls large enough to saturate the units.

Each dtype is timed at a few sizes (the median of repeated samples at each); its peak is the
best median. FLOPs = 2·n³ (a multiply-add is 2 FLOPs), as in the roofline's own count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import dtype as lookup_dtype
from .backend import Backend, Unsupported
from .progress import Progress, quiet
from .timing import Settings, Timing, looped, measure


@dataclass(frozen=True)
class PeakResult:
    """The measured peak of one dtype and how it was obtained."""

    dtype: str
    flops_per_s: float
    n: int  # the matrix size that gave the peak
    timing: Timing
    method: str
    tried: tuple[tuple[int, float], ...] = field(default=())  # (n, FLOP/s) per size

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "flops_per_s": self.flops_per_s, "n": self.n,
                "timing": self.timing.to_dict(), "method": self.method,
                "tried": [{"n": n, "flops_per_s": f} for n, f in self.tried]}


def peak_sizes(device: str, quick: bool) -> tuple[int, ...]:
    """Matrix sizes to try: big enough to saturate, small enough to finish quickly."""
    if device == "cuda":
        return (8192,) if quick else (4096, 8192, 16384)
    return (512,) if quick else (1024, 2048)


def measure_peak(backend: Backend, dtype: str, sizes: Sequence[int],
                 settings: Settings | None = None, progress: Progress | None = None
                 ) -> PeakResult:
    """Peak FLOP/s of one dtype; raises Unsupported when the backend cannot run it."""
    dtype = lookup_dtype(dtype).name
    progress = progress or quiet()
    best: tuple[float, int, Timing] | None = None
    tried: list[tuple[int, float]] = []
    for n in sizes:
        fn = backend.matmul(n, n, n, dtype)
        timing = measure(looped(fn), backend.timer(), settings)
        del fn
        rate = 2.0 * n**3 / timing.median_s
        tried.append((n, rate))
        if best is None or rate > best[0]:
            best = (rate, n, timing)
        progress.step(f"{dtype} n={n}")
    assert best is not None, "at least one size"
    rate, n, timing = best
    method = (f"{backend.matmul_method(dtype)}; square matmuls n = "
              f"{', '.join(str(s) for s in sizes)}, best median of {len(timing.samples_s)} "
              f"samples (FLOPs = 2n³)")
    return PeakResult(dtype, rate, n, timing, method, tuple(tried))


def measure_peaks(backend: Backend, dtypes: Sequence[str] | None = None, quick: bool = False,
                  sizes: Sequence[int] | None = None, settings: Settings | None = None,
                  progress: Progress | None = None) -> tuple[list[PeakResult], dict[str, str]]:
    """Peaks for each dtype (default: all the backend measures); also the skipped dtypes,
    each with the reason."""
    dtypes = list(dtypes or backend.matmul_dtypes)
    sizes = tuple(sizes or peak_sizes(backend.device, quick))
    settings = settings or Settings.for_mode(quick)
    results, skipped = [], {}
    for dt in dtypes:
        try:
            results.append(measure_peak(backend, dt, sizes, settings, progress))
        except Unsupported as exc:
            skipped[dt] = str(exc)
            if progress:
                for _ in sizes:
                    progress.step(f"{dt} skipped")
    return results, skipped
