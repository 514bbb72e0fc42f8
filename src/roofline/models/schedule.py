"""How a step's ops overlap: the schedule-aware lower bound.

Three times of a step (see `analysis.STEP_TIMES`):
- floor: every resource of the whole step overlapped (the evaluator on the step's total);
- lower bound: what the configured schedule can overlap is overlapped, the rest in series;
- no-overlap sum: nothing overlapped.

The schedule (defaults follow Megatron-Core, torchtitan and DeepSpeed):
- compute ops run one after another on the critical path, each at its own roof;
- TP collectives sit between the GEMMs they connect: in series, unless `tp_overlap`
  (comm-GEMM overlap / async TP); EP all-to-alls likewise unless `ep_overlap`
  (two-micro-batch overlap, DualPipe / DeepEP);
- hidden behind compute: data-parallel gradient reductions (bucketed during the backward of
  earlier layers; the last bucket, one layer's share, is exposed), FSDP / ZeRO parameter
  gathers (prefetched during the previous layer; the first layer's gather is exposed),
  pipeline hand-offs, and context-parallel K/V exchange (ring attention: one of the cp
  exchanges of each layer is exposed);
- a pipeline of m micro-batches over p stages adds a bubble of (p − 1) micro-batch slots
  (GPipe, 1F1B), (p − 1)/v with v virtual stages per rank (interleaved 1F1B), none for
  zero-bubble schedules (ZB-V; the bound stays a bound) while m >= p; with m < p the slots
  no schedule can fill stay (`idle_slots`);
- hidden communication still needs its links: every link carries all its traffic within the
  step, so the step is at least the busiest link's total time; when that exceeds the critical
  path, the difference is the "communication not hidden" line.
`overlap=False` puts every collective in series (the old serial sum).

Where the user names no schedule, a training step's headline bound is the best any published
schedule reaches (`best_schedule`: it must hold for every implementation) and the common
schedule's figure (`COMMON`: 1F1B, TP and EP collectives in series) is shown beside it.

The lower bound is max(critical path + exposed communication, busiest link, floor).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from ..cost import LINKS
from ..derivation import Num, add_all, any_true, maximum, times_n, where
from ..errors import ParameterError, RooflineError
from ..evaluate import LATENCY, Estimate
from ..records import record
from .step import Parallel

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zero-bubble")
NOT_HIDDEN = "communication not hidden"  # the step's line for a link busier than its path
SERIAL_UNLESS_FLAGGED = {"tp": "tp_overlap", "ep": "ep_overlap"}
HIDDEN = ("dp", "fsdp", "pp", "cp")  # collectives the standard schedules overlap


@record(frozen=True)
class Schedule:
    """What overlaps with what in a step."""

    pipeline: str = "1f1b"  # gpipe | 1f1b | interleaved | zero-bubble
    vpp: int = 1  # virtual pipeline stages per rank (interleaved only)
    tp_overlap: bool = False
    ep_overlap: bool = False
    overlap: bool = True  # False: every collective in series

    def bubble_slots(self, pp: int) -> float:
        """Idle micro-batch slots of the pipeline."""
        if pp == 1 or self.pipeline == "zero-bubble":
            return 0.0
        if self.pipeline == "interleaved":
            return (pp - 1) / self.vpp
        return float(pp - 1)

    def idle_slots(self, pp: int, microbatches: int, phase: str = "train") -> float:
        """Idle micro-batch slots of the slowest stage per step. A training step fills and
        drains the pipeline: the schedule's bubble. A steady stream of decode steps keeps it
        full: a micro-batch re-enters the first stage pp slots after it left it, so a step
        takes max(m, pp) slots (vLLM / SGLang run pp micro-batches of the running batch in
        flight; charging a fill and drain per token made a decode step with m = pp slower
        than one with m = 1). A prefill's prompts split into chunks that follow one another
        through the stages (SGLang's chunked pipeline parallelism), which fill the pipeline
        as finely as the chunks are small: none (a serialised pass made one 128K-1M-token
        prompt on 8 H20 stages 2.5-3.2x slower than SGLang ran it)."""
        if phase == "decode":
            return float(max(pp - microbatches, 0))
        if phase == "prefill":
            return 0.0
        if self.pipeline == "zero-bubble" and microbatches < pp:
            return unfillable_slots(pp, microbatches)
        return self.bubble_slots(pp)

    def in_flight(self, pp: int, microbatches: int) -> float:
        """Micro-batches whose activations the first stage holds at once: GPipe all m; 1F1B
        (and ZB-H1) min(p, m); interleaved 1F1B (1 + (p - 1)/(p·v)) times that (Megatron)."""
        m = microbatches
        if self.pipeline == "gpipe":
            return float(m)
        held = float(min(pp, m))
        if self.pipeline == "interleaved" and pp > 1:
            held *= 1 + (pp - 1) / (pp * self.vpp)
        return held

    def describe(self, streams: tuple[str, ...] = ("tp", "ep", "dp", "fsdp", "pp", "cp")
                 ) -> str:
        """The overlaps assumed for the collectives a step has (`streams`), in words."""
        words = {"dp": "data-parallel gradient sync (but its last bucket)",
                 "fsdp": "FSDP / ZeRO weight gathers (but the first layer's)",
                 "pp": "pipeline hand-offs", "cp": "context-parallel K/V exchange (but 1/cp "
                 "of it)", "tp": "TP collectives", "ep": "EP all-to-alls"}
        present = [s for s in words if s in streams]
        if not present:
            return "no collectives"
        if not self.overlap:
            return "no overlap: every collective in series with compute"
        hidden = [words[s] for s in present if self.hidden(s)]
        serial = [words[s] for s in present if not self.hidden(s)]
        parts = ([f"overlapped with compute: {', '.join(hidden)}"] if hidden else []) + (
            [f"in series: {', '.join(serial)}"] if serial else [])
        return "; ".join(parts)

    def hidden(self, stream: str) -> bool:
        """Whether a collective of this parallel group overlaps with compute."""
        if not self.overlap or not stream:
            return False
        flag = SERIAL_UNLESS_FLAGGED.get(stream)
        return bool(getattr(self, flag)) if flag else stream in HIDDEN


def unfillable_slots(pp: int, microbatches: int) -> float:
    """Idle micro-batch slots of a training step that no schedule can fill when fewer
    micro-batches than stages: the last micro-batch's chain. A slot is a micro-batch's
    forward F, input-gradient B and weight-gradient W on one stage, a third each (the
    backward's two GEMMs per forward GEMM; recomputation adds a forward to B, which only
    lengthens the chain). The last micro-batch leaves the first stage after the m - 1 before
    it, passes p forwards and p input gradients in order, then its first stage's W:
    (m - 1 + 2p + 1)/3 slots, so (2p + m)/3 - m = 2(p - m)/3 idle (none once m >= p, as
    zero-bubble schedules claim: Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024)."""
    return 2.0 * max(pp - microbatches, 0) / 3.0


COMMON = Schedule()  # 1F1B, TP and EP collectives in series: the common schedule
# what the training frameworks run where none is named, which the forecast (roofline.expect)
# times and was fitted under (benchmarks/validation: training rows without an interleaved
# layout): 1F1B with every overlap Megatron-LM / NeMo offer (--tp-comm-overlap, EP overlap)
RUN = Schedule(tp_overlap=True, ep_overlap=True)


def best_schedule(par: Parallel) -> Schedule:
    """The fastest any published schedule runs a training layout: a zero-bubble pipeline
    (ZB-V; DualPipe's bubble (p/2 - 1)(F&B + B - 3W), DeepSeek-V3 report arXiv:2412.19437
    Table 2, is no smaller with F = B = W), EP all-to-alls hidden behind compute (DualPipe,
    §3.2.1; DeepEP's hook-based overlap) and TP collectives overlapped with their GEMMs
    (Transformer Engine userbuffers, Megatron-LM --tp-comm-overlap; PyTorch async TP)."""
    return Schedule("zero-bubble" if par.pp > 1 else "1f1b", tp_overlap=True,
                    ep_overlap=True)


def resolve_schedule(schedule: Schedule | None, par: Parallel, phase: str
                     ) -> tuple[Schedule, bool]:
    """(the schedule a step is bounded under, whether the user named it): none named, a
    training step takes `best_schedule`, inference the common one."""
    if schedule is not None:
        return check_schedule(schedule, par), True
    return (best_schedule(par) if phase == "train" else COMMON), False


def check_schedule(schedule: Schedule, par: Parallel) -> Schedule:
    """One-line errors for a schedule that does not fit the parallelism."""
    if schedule.pipeline not in SCHEDULES:
        raise RooflineError(f"pipeline schedule {schedule.pipeline!r}: allowed "
                            f"{', '.join(SCHEDULES)}")
    if schedule.vpp < 1:
        raise ParameterError("vpp", f"must be at least 1, got {schedule.vpp}")
    if schedule.vpp > 1 and schedule.pipeline != "interleaved":
        raise ParameterError("pipeline", f"{schedule.pipeline}: virtual stages (vpp "
                             f"{schedule.vpp}) need interleaved")
    if schedule.pipeline == "interleaved" and par.pp > 1 and par.microbatches % par.pp:
        raise RooflineError(f"interleaved 1F1B needs micro-batches ({par.microbatches}) in "
                            f"multiples of pp ({par.pp}), as Megatron-LM does")
    return schedule


class Op(Protocol):
    """One op row of the step as the schedule sees it (models/graph.OpCost, or a Row)."""

    @property
    def stream(self) -> str: ...  # "" for compute; else its collective's parallel group

    @property
    def count(self) -> float: ...  # occurrences per micro-batch (per step when per_step)

    @property
    def per_step(self) -> bool: ...


@record(frozen=True)
class Row:
    """An op row with only what the schedule reads (an Op)."""

    stream: str
    count: float
    per_step: bool


@record(eq=False)  # a step record: not frozen (roofline.models)
class StepTimes:
    """A step's lower bound and what each row adds to its critical path."""

    t_lower_s: Num
    critical_s: list[Num]  # per row: what it adds to the lower bound (all occurrences)
    not_hidden_s: Num  # the busiest link's excess over the critical path (0 if none)
    not_hidden_link: str  # that link
    exposed_comm_s: Num  # communication on the critical path (series + exposed parts)
    hidden_comm_s: Num  # communication that overlaps compute
    bubble_fraction: float  # idle slots / micro-batches


# a step's resources the critical path does not already cover: the links and their latency
COMMUNICATION = frozenset((*LINKS, LATENCY))


def _split(est: Estimate) -> tuple[Num, Num, dict[str, Num]]:
    """(local time, communication time, communication per link) of one occurrence: compute
    units and memory overlap; a collective's link times and latency add (alpha-beta)."""
    per_link: dict[str, Num] = {r: t for r, t in est.time_s.items() if r in LINKS}
    local = [t for r, t in est.time_s.items() if r not in LINKS and r != LATENCY]
    if per_link:  # the latency rides on the op's first link
        first = next(iter(per_link))
        per_link[first] = per_link[first] + est.time_s.get(LATENCY, 0.0)
    comm = sum(per_link.values(), 0.0)
    # pairwise: np.maximum.reduce would stack the times, which fails when their shapes differ
    # (a (batch, 1) time beside a (batch, length) one) instead of broadcasting them
    return (functools.reduce(maximum, local) if local else 0.0), comm, per_link


def step_times(rows: Sequence[Op], ests: Sequence[Estimate], schedule: Schedule,
               microbatches: int, pp: int, layers_per_stage: float, cp: int, floor_s: Num,
               phase: str = "train") -> StepTimes:
    """The schedule-aware lower bound of a step whose rows run on the slowest stage.
    `floor_s`: the floor of the step's communication (its links and latency, each
    overlapped); the compute units and memory levels the critical path covers already.
    `phase`: its kind, which sets the pipeline's idle slots (Schedule.idle_slots). `ests`:
    one occurrence of each row's op, evaluated."""
    m = microbatches
    idle = schedule.idle_slots(pp, m, phase)
    slots = m + idle
    critical: list[Num] = []
    exposed: list[Num] = []  # communication on the critical path
    hidden: list[Num] = []  # communication that overlaps compute
    links: dict[str, list[Num]] = {}
    hides: dict[str, bool] = {}  # per stream: Schedule.hidden, asked once
    for row, est in zip(rows, ests, strict=True):
        per_step = row.per_step
        repeat = row.count * (1 if per_step else slots)  # with the bubble's slots
        if COMMUNICATION.isdisjoint(est.time_s):  # compute and memory: the op's own bound,
            local = est.t_lower_s  # on the path whatever its stream (nothing to expose)
            critical.append(local if repeat == 1 else repeat * local)  # times_n
            continue
        local, comm, per_link = _split(est)
        n = row.count * (1 if per_step else m)  # occurrences per step
        for link, t in per_link.items():
            links.setdefault(link, []).append(times_n(n, t))
        stream = row.stream
        hidden_here = hides.get(stream)
        if hidden_here is None:
            hidden_here = hides[stream] = schedule.hidden(stream)
        if not hidden_here:
            on_path = local + comm if per_link else local
            critical.append(on_path if repeat == 1 else repeat * on_path)  # times_n
            exposed.append(comm if repeat == 1 else repeat * comm)
            continue
        # hidden: only the part no compute can cover is exposed
        share = 1.0 / cp if stream == "cp" else (
            0.0 if stream in ("tp", "ep", "pp") else 1.0 / max(layers_per_stage, 1.0))
        part = n * comm * share
        critical.append(repeat * local + part)
        exposed.append(part)
        hidden.append(n * comm - part)
    path = add_all(critical)
    exposed_total, hidden_total = add_all(exposed), add_all(hidden)
    busiest_link, busiest = "", 0.0
    for link, parts in links.items():
        t = add_all(parts)
        if any_true(t > busiest):
            busiest_link = link
        busiest = maximum(busiest, t)
    # the links' totals (and the floor) add the same op times as the path in another order:
    # a difference within rounding is no "communication not hidden"
    limit = maximum(busiest, floor_s)
    over = path < limit * (1 - 1e-12)
    bound, not_hidden = path, 0.0  # the common case: the critical path covers every link
    if any_true(over):
        bound = where(over, limit, path)
        not_hidden = bound - path  # what the critical path leaves uncovered
    return StepTimes(bound, critical, not_hidden, busiest_link or "links",
                     exposed_total + not_hidden, maximum(hidden_total - not_hidden, 0.0),
                     idle / m)
