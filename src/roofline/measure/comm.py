"""Collectives under torchrun: time all-reduce / all-gather / reduce-scatter / all-to-all over
message sizes, report algbw and busbw as nccl-tests does, and fit alpha and beta.

Sizes follow nccl-tests (and `roofline.ops.collectives`): the full per-rank buffer for
all-reduce, the gathered output for all-gather, the input for reduce-scatter, each rank's
whole send buffer for all-to-all. algbw = size / time; busbw = algbw · factor (2(n−1)/n
for all-reduce, (n−1)/n for the others). A point's time is the median over trials of the
slowest rank's mean time per operation.

The fit uses the roofline's own model: per rank, t = steps·alpha + link_bytes / beta with
the ring schedule's steps and per-direction bytes (`collective(kind, size, ranks)`), so
the fitted (alpha, beta) drop straight into a chip file's [link.*] table. It is a weighted
least-squares fit on relative error, so small messages (alpha) count as much as large ones
(beta). Runs on gloo (CPU) or NCCL (GPU); torch is imported only here.
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ParameterError, RooflineError, unknown
from ..ops.collectives import DEFAULT_ALGO, busbw_factor, collective
from ._torch import require_torch, torch_dtype
from .progress import Progress, quiet
from .timing import Timing

COMM_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all")
TORCHRUN_HINT = "torchrun --nproc-per-node N -m roofline measure comm ..."


@dataclass(frozen=True)
class CommPoint:
    kind: str
    nbytes: float  # nccl-tests' size
    ranks: int
    timing: Timing  # seconds per operation (slowest rank), one sample per trial

    @property
    def time_s(self) -> float:
        return self.timing.median_s

    @property
    def algbw_Bps(self) -> float:
        return self.nbytes / self.time_s

    @property
    def busbw_Bps(self) -> float:
        return self.algbw_Bps * float(busbw_factor(self.kind, self.ranks))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bytes": self.nbytes, "ranks": self.ranks,
                "time_s": self.time_s, "algbw_Bps": self.algbw_Bps,
                "busbw_Bps": self.busbw_Bps, "timing": self.timing.to_dict()}


@dataclass(frozen=True)
class LinkFit:
    """t = steps·alpha + bytes/beta, fitted: alpha per message step, beta per direction."""

    alpha_s: float
    beta_Bps: float
    points: int
    rms_rel_error: float
    kinds: tuple[str, ...]
    algo: str = "ring"

    def predict(self, kind: str, nbytes: Any, ranks: int) -> Any:
        steps, moved = model_terms(kind, nbytes, ranks, self.algo)
        return steps * self.alpha_s + moved / self.beta_Bps

    def to_dict(self) -> dict[str, Any]:
        return {"alpha_s": self.alpha_s, "beta_Bps": self.beta_Bps, "points": self.points,
                "rms_rel_error": self.rms_rel_error, "kinds": list(self.kinds),
                "algo": self.algo}


def model_terms(kind: str, nbytes: Any, ranks: int, algo: str = "ring") -> tuple[Any, Any]:
    """(message steps, bytes per direction) per rank in the roofline's collective model."""
    # torch's all_to_all_single is NCCL's direct all-to-all, whatever the others' algorithm
    cost = collective(kind, nbytes, ranks, algo=DEFAULT_ALGO.get(kind, algo))
    return (np.asarray(cost.link_steps["scale-up"], dtype=float),
            np.asarray(cost.link_bytes["scale-up"], dtype=float))


def fit_alpha_beta(kinds: Sequence[str], nbytes: Sequence[float], ranks: int,
                   times_s: Sequence[float], algo: str = "ring") -> LinkFit:
    """Least squares on relative error: minimise sum(((alpha·s + b/beta) − t) / t)²."""
    t = np.asarray(times_s, dtype=float)
    if len(t) < 2 or len(set(nbytes)) < 2:
        raise RooflineError("the alpha-beta fit needs at least two message sizes")
    if np.any(~np.isfinite(t)) or np.any(t <= 0):
        raise RooflineError("the alpha-beta fit needs positive, finite times")
    steps = np.empty_like(t)
    moved = np.empty_like(t)
    for i, (kind, size) in enumerate(zip(kinds, nbytes, strict=True)):
        steps[i], moved[i] = (float(x) for x in model_terms(kind, size, ranks, algo))
    a = np.column_stack([steps / t, moved / t])
    (alpha, inv_beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency too small to resolve: fit the bandwidth alone
        alpha = 0.0
        x = moved / t
        inv_beta = float(x.sum() / (x * x).sum())
    if inv_beta <= 0:
        raise RooflineError("cannot fit a bandwidth: the times do not grow with message size "
                            "(sweep larger messages)")
    pred = steps * alpha + moved * inv_beta
    rms = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return LinkFit(float(alpha), 1.0 / float(inv_beta), len(t), rms,
                   tuple(dict.fromkeys(kinds)), algo)


def fit_points(points: Sequence[CommPoint], kinds: Sequence[str] | None = None,
               algo: str = "ring") -> LinkFit:
    chosen = [p for p in points if kinds is None or p.kind in kinds]
    if not chosen:
        raise RooflineError("no measured collective to fit")
    ranks = {p.ranks for p in chosen}
    if len(ranks) != 1:
        raise RooflineError("fit one group size at a time")
    return fit_alpha_beta([p.kind for p in chosen], [p.nbytes for p in chosen], ranks.pop(),
                          [p.time_s for p in chosen], algo)


@dataclass(frozen=True)
class CommSweep:
    backend: str  # gloo | nccl
    ranks: int
    device: str
    date: str
    dtype: str
    points: tuple[CommPoint, ...]
    skipped: dict[str, str] = field(default_factory=dict)

    def fit(self, kinds: Sequence[str] | None = None) -> LinkFit:
        return fit_points(self.points, kinds)

    def fits_by_kind(self) -> dict[str, LinkFit | str]:
        out: dict[str, LinkFit | str] = {}
        for kind in dict.fromkeys(p.kind for p in self.points):
            try:
                out[kind] = self.fit([kind])
            except RooflineError as exc:
                out[kind] = str(exc)
        return out

    def to_dict(self) -> dict[str, Any]:
        fits = {k: v.to_dict() if isinstance(v, LinkFit) else {"error": v}
                for k, v in self.fits_by_kind().items()}
        try:
            combined: dict[str, Any] = self.fit().to_dict()
        except RooflineError as exc:
            combined = {"error": str(exc)}
        return {"backend": self.backend, "ranks": self.ranks, "device": self.device,
                "date": self.date, "dtype": self.dtype,
                "points": [p.to_dict() for p in self.points], "skipped": self.skipped,
                "fit": combined, "fit_by_kind": fits}


def link_table(sweep: CommSweep, fit: LinkFit, link: str = "scale-up") -> dict[str, Any]:
    """A [link.<name>] table for a chip file, labelled as measured."""
    sizes = sorted({p.nbytes for p in sweep.points})
    method = (f"measured {sweep.date} on {sweep.device}: roofline measure comm, "
              f"{sweep.backend}, {sweep.ranks} ranks, {', '.join(fit.kinds)} over "
              f"{len(sizes)} sizes {sizes[0]:.0f}-{sizes[-1]:.0f} B; {fit.algo}-schedule "
              f"alpha-beta fit (weighted least squares, rms error "
              f"{100 * fit.rms_rel_error:.0f}%)")
    table: dict[str, Any] = {
        "name": f"{sweep.backend} collectives (measured)",
        "bandwidth_Bps": fit.beta_Bps,
        "latency_s": max(fit.alpha_s, 1e-9),  # the schema needs alpha > 0
        "source": f"{method}: beta = per-direction bandwidth",
        "latency_source": f"{method}: alpha per message step"
        + ("; alpha fitted as 0, written as 1 ns" if fit.alpha_s <= 0 else ""),
    }
    if link == "scale-up":
        table["domain_size"] = sweep.ranks
    return table


def link_toml(sweep: CommSweep, fit: LinkFit, link: str = "scale-up") -> str:
    """A file holding one [link.*] table; `measure peaks --link FILE` puts it in a chip file."""
    from .chipfile import _table

    lines = [f"# Link profile written by roofline measure comm ({sweep.date}).",
             *_table(f"[link.{link}]", link_table(sweep, fit, link))]
    return "\n".join(lines)


def comm_sizes(min_bytes: float, max_bytes: float, factor: float = 4.0) -> list[float]:
    """Message sizes from min to max, multiplying by `factor` (nccl-tests' -b -e -f)."""
    if not (math.isfinite(factor) and factor > 1):  # NaN and inf pass a plain `<= 1` test
        raise ParameterError("factor", f": the size step must be a finite number above 1, "
                             f"got {factor!r}")
    if not (0 < min_bytes <= max_bytes and math.isfinite(max_bytes)):
        raise RooflineError("message sizes: need 0 < min <= max, both finite")
    n = math.floor(math.log(max_bytes / min_bytes, factor) + 1e-9) + 1
    return [min_bytes * factor**i for i in range(n)]


# --- the distributed part (inside a torchrun worker) -------------------------------------------


@dataclass
class Group:
    """An initialised process group: torch, torch.distributed, rank, size, tensor device."""

    torch: Any
    dist: Any
    rank: int
    world: int
    device: str
    backend: str

    def close(self) -> None:
        self.dist.destroy_process_group()


def init_group(backend: str | None = None) -> Group:
    """Join the group torchrun set up (RANK, WORLD_SIZE, MASTER_ADDR, ... in the env)."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        raise RooflineError(f"measure comm runs under torchrun, one process per rank: "
                            f"{TORCHRUN_HINT}")
    torch = require_torch("measure comm")
    dist = importlib.import_module("torch.distributed")
    name = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if name not in ("gloo", "nccl"):
        raise RooflineError(f"unknown backend {name!r} (allowed: gloo, nccl)")
    device = "cpu"
    if name == "nccl":
        if not torch.cuda.is_available():
            raise ParameterError("backend", "nccl needs CUDA GPUs (use gloo)")
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group(backend=name)
    return Group(torch, dist, dist.get_rank(), dist.get_world_size(), device, name)


def _operation(g: Group, kind: str, nbytes: float, dtype: str) -> tuple[Callable[[], Any], float]:
    """The collective as a call on preallocated buffers, and its size as actually run."""
    torch, dist = g.torch, g.dist
    tdt = torch_dtype(torch, dtype)
    elem = torch.empty((), dtype=tdt).element_size()
    count = max(g.world, int(nbytes // elem) // g.world * g.world)  # whole shards per rank

    def zeros(n: int) -> Any:
        return torch.zeros(n, dtype=tdt, device=g.device)

    if kind == "all-reduce":
        buf = zeros(count)
        return (lambda: dist.all_reduce(buf)), count * elem
    if kind == "all-gather":  # *_single is the newer name (torch 2.13) of *_into_tensor
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        out, inp = zeros(count), zeros(count // g.world)
        return (lambda: gather(out, inp)), count * elem
    if kind == "reduce-scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        inp, out = zeros(count), zeros(count // g.world)
        return (lambda: scatter(out, inp)), count * elem
    if kind == "all-to-all":
        inp, out = zeros(count), zeros(count)
        return (lambda: dist.all_to_all_single(out, inp)), count * elem
    raise unknown("collective", kind, COMM_KINDS)


def _time(g: Group, op: Callable[[], Any], min_sample_s: float, trials: int,
          warmup: int) -> Timing:
    torch, dist = g.torch, g.dist
    sync: Callable[[], Any] = torch.cuda.synchronize if g.device != "cpu" else (lambda: None)

    def slowest(value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=g.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def trial(iters: int) -> float:
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            op()
        sync()
        return slowest((time.perf_counter() - t0) / iters)

    for _ in range(warmup):
        op()
    one = trial(1)  # every rank gets the same value, so every rank picks the same iters
    iters = max(1, min(10_000, math.ceil(min_sample_s / max(one, 1e-9))))
    return Timing(tuple(trial(iters) for _ in range(max(trials, 1))), iters)


def run_comm_sweep(g: Group, sizes: Sequence[float], kinds: Sequence[str] = COMM_KINDS,
                   dtype: str = "fp32", min_sample_s: float = 5e-3, trials: int = 5,
                   warmup: int = 3, progress: Progress | None = None
                   ) -> tuple[list[CommPoint], dict[str, str]]:
    """Time every kind at every size on every rank (collectively); skip unsupported kinds."""
    progress = progress or quiet()
    points, skipped = [], {}
    for kind in kinds:
        for size in sizes:
            try:
                op, actual = _operation(g, kind, size, dtype)
                op()  # an unsupported collective fails here, on every rank alike
            except (RuntimeError, ValueError, NotImplementedError) as exc:
                if isinstance(exc, RooflineError):
                    raise
                skipped[kind] = f"{g.backend} cannot run {kind}: {str(exc).splitlines()[0]}"
                break
            points.append(CommPoint(kind, float(actual), g.world,
                                    _time(g, op, min_sample_s, trials, warmup)))
            progress.step(f"{kind} {actual:.0f} B")
    return points, skipped
