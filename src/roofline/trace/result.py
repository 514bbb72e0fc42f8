"""A recorded trace placed on a chip: per-op and per-kind bounds, flags, fusion headroom."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..evaluate import evaluate
from ..hardware import Chip, load_chip
from ..serialize import jsonable


@dataclass
class TracedOp:
    index: int
    op: str  # aten op name, e.g. "aten.mm.default"
    kind: str  # its packet, e.g. "mm"
    dtype: str  # roofline dtype of the first floating-point tensor it touches
    shapes: list[tuple[int, ...]]  # input tensor shapes
    out_shapes: list[tuple[int, ...]]
    flops: float
    flops_source: str  # torch | roofline | none | unknown
    bytes_read: float
    bytes_written: float
    time_s: float | None = None
    reads: list[tuple[int, int]] = field(default_factory=list)  # (storage key, bytes)
    writes: list[tuple[int, int]] = field(default_factory=list)
    note: str = ""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    def cost(self) -> Cost:
        peak = lookup_dtype(self.dtype).peak
        counted = {peak: self.flops} if self.flops else {}
        # our pointwise / reduction counts run on the vector units; the counter's matmuls and
        # attention on the tensor cores
        vector = self.flops_source == "roofline" and "attention" not in self.kind
        return Cost(flops={} if vector else counted, vector_flops=counted if vector else {},
                    bytes={"hbm": self.bytes}, name=self.kind)


@dataclass(frozen=True)
class TraceRow:
    """One op (or all ops of one kind) on a chip; achieved figures when timed."""

    name: str
    count: int
    flops: float
    bytes: float
    intensity: float
    t_lower_s: float
    bound: str
    time_s: float | None
    achieved_flops_per_s: float | None
    achieved_bytes_per_s: float | None
    efficiency: float | None  # t_lower / measured time: how close to the roof it ran
    flagged: bool


@dataclass(frozen=True)
class Fusion:
    """What perfect fusion of the traced region would remove: every intermediate tensor
    produced and consumed inside it stays on chip (its write and its reads vanish)."""

    intermediates: int
    bytes_removed: float
    bytes_before: float
    t_lower_before_s: float  # the ops one by one, each at its own roof
    t_lower_fused_s: float  # one fused kernel: all FLOPs, only the unavoidable bytes
    bound_fused: str


class Trace:
    def __init__(self, ops: list[TracedOp], outputs: set[int]) -> None:
        self.ops = [op for op in ops if op.flops or op.bytes]  # views move nothing
        self.outputs = outputs

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def bytes(self) -> float:
        return sum(op.bytes for op in self.ops)

    @property
    def flagged(self) -> list[TracedOp]:
        """Ops that do arithmetic the counter has no formula for (counted as zero)."""
        return [op for op in self.ops if op.flops_source == "unknown"]

    def records(self, hw: Chip | str | None = None) -> list[dict[str, Any]]:
        """One dict per traced op; with `hw`, its bound on that chip beside it."""
        keys = ("index", "op", "kind", "dtype", "flops", "flops_source", "bytes_read",
                "bytes_written", "time_s")
        out = [{k: getattr(op, k) for k in keys} for op in self.ops]
        if hw is not None:
            for record, row in zip(out, self.rows(hw), strict=True):
                record.update(t_lower_s=row.t_lower_s, bound=row.bound,
                              efficiency=row.efficiency)
        return out

    def to_frame(self, hw: Chip | str | None = None) -> Any:
        """The traced ops as a pandas DataFrame (with `hw`, each op's bound on that chip)."""
        from ..render.frames import frame

        return frame(self.records(hw))

    def _repr_html_(self) -> str:
        from ..render.frames import human, records_html

        keys = ("op", "dtype", "flops", "bytes_read", "bytes_written", "time_s")
        rows = [[human(r[k], k) for k in keys] for r in self.records()[:40]]
        return records_html(f"trace: {len(self.ops)} ops, {human(self.flops)} FLOPs, "
                            f"{human(self.bytes, 'bytes')} moved", keys, rows,
                            "to_frame(hw) adds each op's bound on a chip")

    def rows(self, hw: Chip | str) -> list[TraceRow]:
        chip = load_chip(hw)
        return [self._row(op.kind, [op], chip) for op in self.ops]

    def by_kind(self, hw: Chip | str) -> list[TraceRow]:
        chip = load_chip(hw)
        groups: dict[str, list[TracedOp]] = {}
        for op in self.ops:
            groups.setdefault(op.kind, []).append(op)
        rows = [self._row(kind, ops, chip) for kind, ops in groups.items()]
        return sorted(rows, key=lambda r: -r.t_lower_s)

    @staticmethod
    def _row(name: str, ops: list[TracedOp], chip: Chip) -> TraceRow:
        ests = [evaluate(op.cost(), chip) for op in ops]
        flops = sum(op.flops for op in ops)
        moved = sum(op.bytes for op in ops)
        lower = sum(float(e.t_lower_s) for e in ests)
        times: dict[str, float] = {}
        for e in ests:
            times[str(e.bound)] = times.get(str(e.bound), 0.0) + float(e.t_lower_s)
        measured = sum(op.time_s for op in ops if op.time_s is not None) \
            if all(op.time_s is not None for op in ops) else None
        return TraceRow(
            name, len(ops), flops, moved, flops / moved if moved else float("inf"), lower,
            max(times, key=lambda k: times[k]), measured,
            flops / measured if measured else None, moved / measured if measured else None,
            lower / measured if measured else None,
            any(op.flops_source == "unknown" for op in ops))

    def fusion(self, hw: Chip | str) -> Fusion:
        chip = load_chip(hw)
        # memory is reused once a tensor dies, so a tensor is (its writer, its address)
        last_writer = {key: op.index for op in self.ops for key, _ in op.writes}
        returned = {(last_writer[k], k) for k in self.outputs if k in last_writer}
        producer: dict[int, int] = {}  # address -> index of the op that last wrote it
        intermediate: set[tuple[int, int]] = set()  # (producer op, address) read in the region
        removed = 0.0
        for op in self.ops:
            for key, size in op.reads:
                if key in producer and (producer[key], key) not in returned:
                    removed += size
                    intermediate.add((producer[key], key))
            for key, _ in op.writes:
                producer[key] = op.index
        writes = {(op.index, key): size for op in self.ops for key, size in op.writes}
        removed += sum(writes.get(k, 0) for k in intermediate)
        before = sum(float(evaluate(op.cost(), chip).t_lower_s) for op in self.ops)
        flops: dict[str, float] = {}
        for op in self.ops:
            if op.flops:
                peak = lookup_dtype(op.dtype).peak
                flops[peak] = flops.get(peak, 0.0) + op.flops
        fused = evaluate(Cost(flops=flops, bytes={"hbm": max(self.bytes - removed, 0.0)}), chip)
        return Fusion(len(intermediate), removed, self.bytes, before, float(fused.t_lower_s),
                      str(fused.bound))

    def to_dict(self, hw: Chip | str) -> dict[str, Any]:
        chip = load_chip(hw)
        return dict(jsonable({
            "hardware": chip.id, "flops": self.flops, "bytes": self.bytes,
            "t_lower_s": sum(r.t_lower_s for r in self.rows(chip)),
            "ops": [vars(r) | {"op": op.op, "shapes": op.shapes, "flops_source": op.flops_source,
                               "note": op.note}
                    for r, op in zip(self.rows(chip), self.ops, strict=True)],
            "by_kind": [vars(r) for r in self.by_kind(chip)],
            "flagged": [op.op for op in self.flagged],
            "fusion": vars(self.fusion(chip)),
        }))
