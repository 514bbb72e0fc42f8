"""Repeated timing with warm-up: the median of several samples, each long enough to time.

A sample runs the work `calls` times back to back; `calls` grows until one sample lasts at
least `min_sample_s`, so microsecond kernels are timed over many calls and a clock's
resolution or a launch's overhead does not dominate. The calibrating runs double as
warm-up. Reported per call: median, min, max, and the spread (max − min) / median.

Timers: wall clock (CPU work, or any work followed by a device synchronisation) and CUDA
events (GPU work, timed on the GPU's own clock). Threaded runs start all workers at a
barrier and stop the clock when the last one finishes.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Run = Callable[[int], None]  # run(calls): do the work `calls` times


@dataclass(frozen=True)
class Settings:
    """How hard to measure: timed samples, warm-up calls, the shortest sample."""

    repeats: int = 5
    warmup: int = 2
    min_sample_s: float = 10e-3
    max_calls: int = 1 << 20

    @classmethod
    def for_mode(cls, quick: bool) -> Settings:
        return cls(repeats=3, warmup=1, min_sample_s=2e-3) if quick else cls()


@dataclass(frozen=True)
class Timing:
    """Seconds per call, one value per timed sample."""

    samples_s: tuple[float, ...]
    calls: int  # calls per sample

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    @property
    def spread(self) -> float:
        """(max − min) / median: the relative noise of the measurement."""
        return (self.max_s - self.min_s) / self.median_s if self.median_s > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"median_s": self.median_s, "min_s": self.min_s, "max_s": self.max_s,
                "spread": self.spread, "samples": len(self.samples_s), "calls": self.calls}


class Timer(Protocol):
    def start(self) -> None: ...

    def stop(self) -> float:
        """Seconds since start(), once the work issued since then has finished."""
        ...


class WallTimer:
    """Wall clock; `sync` (e.g. torch.cuda.synchronize) runs before reading it."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 sync: Callable[[], Any] | None = None) -> None:
        self.clock, self.sync = clock, sync
        self._t0 = 0.0

    def start(self) -> None:
        if self.sync:
            self.sync()
        self._t0 = self.clock()

    def stop(self) -> float:
        if self.sync:
            self.sync()
        return self.clock() - self._t0


class CudaEventTimer:
    """CUDA events on the current stream: GPU time, without host launch jitter."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self._start: Any = None
        self._end: Any = None

    def start(self) -> None:
        self._start = self.torch.cuda.Event(enable_timing=True)
        self._end = self.torch.cuda.Event(enable_timing=True)
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return float(self._start.elapsed_time(self._end)) / 1e3  # ms -> s


def looped(fn: Callable[[], Any]) -> Run:
    """run(calls) for one callable."""
    def run(calls: int) -> None:
        for _ in range(calls):
            fn()
    return run


def threaded(fns: Sequence[Callable[[], Any]]) -> Run:
    """run(calls): every callable on its own thread, `calls` times each, started together.

    numpy releases the GIL inside its loops, so threads on disjoint chunks of an array
    stream in parallel, like STREAM's OpenMP threads.
    """
    if len(fns) == 1:
        return looped(fns[0])

    def run(calls: int) -> None:
        barrier = threading.Barrier(len(fns) + 1)
        errors: list[BaseException] = []

        def work(fn: Callable[[], Any]) -> None:
            barrier.wait()
            try:
                for _ in range(calls):
                    fn()
            except BaseException as exc:  # re-raised on the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(fn,), daemon=True) for fn in fns]
        for t in threads:
            t.start()
        barrier.wait()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
    return run


def measure(run: Run, timer: Timer | None = None, settings: Settings | None = None) -> Timing:
    """Warm up, find how many calls make a sample of `min_sample_s`, then time `repeats`."""
    s = settings or Settings()
    timer = timer or WallTimer()

    def sample(calls: int) -> float:
        timer.start()
        run(calls)
        return timer.stop()

    if s.warmup:
        run(s.warmup)
    calls = 1
    while True:
        elapsed = sample(calls)
        if elapsed >= s.min_sample_s or calls >= s.max_calls:
            break
        grow = s.min_sample_s / elapsed * 1.2 if elapsed > 0 else 16.0
        calls = min(s.max_calls, max(calls * 2, math.ceil(calls * grow)))
    samples = tuple(sample(calls) / calls for _ in range(max(s.repeats, 1)))
    return Timing(samples, calls)
