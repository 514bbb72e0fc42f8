"""Map a traced kernel to the op it ran, with shapes, as a Cost (or say why it cannot).

The kernel's launching aten op and its recorded input shapes and types decide: GEMMs
(mm, addmm, bmm, baddbmm, matmul, linear) through the matmul ops; SDPA / flash attention
through the attention ops; pointwise ops, reductions and norms with the trace module's
per-element operation counts (torch_trace.POINTWISE / REDUCTION, one convention); NCCL
kernels through the collective op from their recorded arguments; device copies and fills
from their bytes.

Every Cost here is a lower bound on what the kernel must do, because a bound a kernel beats
is a bug: where the trace leaves a choice open, the cheaper one is taken and named —
fp32 GEMMs at the TF32 tensor-core peak where the chip has one (cuBLAS / cuDNN may use it),
attention with a causal mask (half the score pairs) unless the call says otherwise, a
broadcast operand read once, a reduction's output not counted, and up to the L2's
capacity of a kernel's bytes already in L2 (`through_l2`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..hardware import Chip
from ..ops.attention import attention
from ..ops.attention_backward import attention_backward
from ..ops.collectives import collective
from ..ops.matmul import matmul
from ..ops.moe import batched_matmul
from ..trace.torch_attention import ATTENTION_BACKWARD_OPS, ATTENTION_OPS
from ..trace.torch_trace import ALLOCATIONS, FACTORIES, POINTWISE, REDUCTION, VIEWS
from .events import Comm, CpuOp, Kernel

# PyTorch's tensor type names (profiler 'Input type') -> roofline dtypes
TORCH_TYPES = {"float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
               "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "signed char": "int8",
               "unsigned char": "int8", "bool": "int8", "int": "fp32", "long int": "fp64",
               "short int": "fp16"}
# NCCL / c10d dtype names in collective args
COMM_TYPES = {"Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16",
              "Byte": "int8", "Char": "int8", "Int": "fp32", "Long": "fp64", "Bool": "int8",
              "Float8_e4m3fn": "fp8", "Float8_e5m2": "fp8"}
COLLECTIVE_NAMES = {"allreduce": "all-reduce", "all_reduce": "all-reduce",
                    "allgather": "all-gather", "all_gather": "all-gather",
                    "_allgather_base": "all-gather", "allgather_into_tensor_coalesced":
                    "all-gather", "all_gather_into_tensor": "all-gather",
                    "reduce_scatter": "reduce-scatter", "_reduce_scatter_base": "reduce-scatter",
                    "reduce_scatter_tensor": "reduce-scatter", "all_to_all": "all-to-all",
                    "alltoall": "all-to-all", "alltoall_base": "all-to-all",
                    "all_to_allv": "all-to-all", "broadcast": "broadcast", "send": "send-recv",
                    "recv": "send-recv"}
GEMMS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation"}
COMPARISONS = {"eq", "ne", "lt", "gt", "le", "ge"}
# arguments (tensors and scalars, as 'Input Dims' lists them) of the functional overload;
# one more is an out= tensor, which is written, not read
ARITY = {"add": 3, "sub": 3, "mul": 2, "div": 2, "addcmul": 4, "addcdiv": 4, "lerp": 3,
         "where": 3, "clamp": 3, "maximum": 2, "minimum": 2, "pow": 2, "masked_fill": 3,
         **{c: 2 for c in COMPARISONS}}
# reductions and norms whose output is as large as their input (written once)
SAME_SHAPE = {"_softmax", "softmax", "_log_softmax", "log_softmax", "native_layer_norm",
              "layer_norm", "_fused_rms_norm", "rms_norm", "cumsum"}
OP_CLASSES = ("gemm", "attention", "elementwise", "reduction/norm", "collective", "copy",
              "fill")

Build = Callable[[Chip], Cost]


@dataclass(frozen=True)
class Work:
    """What a kernel (or the kernels of one op) did: a Cost built for any chip."""

    op_class: str  # one of OP_CLASSES
    label: str  # 'mm 1024x1705x512 fp32'
    build: Build
    levers_op: str = ""  # the registered op whose levers apply (roofline.levers)
    kwargs: dict[str, Any] = field(default_factory=dict)  # its arguments (levers)
    note: str = ""
    link_bytes: float | None = None  # a collective's buffer bytes


@dataclass(frozen=True)
class Unmapped:
    reason: str


def _dtype(types: tuple[str, ...], i: int = 0) -> str | None:
    return TORCH_TYPES.get(types[i]) if i < len(types) else None


def compute_dtype(dt: str, chip: Chip) -> tuple[str, str]:
    """(the dtype whose tensor-core peak bounds a GEMM of `dt` inputs on `chip`, a note): fp32
    at TF32 where the chip has it; a dtype the chip has no peak for at its fastest 16-bit or
    wider peak (an emulated path is not faster than that)."""
    if dt == "fp32" and "tf32" in chip.peaks:
        return "tf32", "fp32 at the TF32 tensor-core peak (cuBLAS / cuDNN may use TF32)"
    if lookup_dtype(dt).peak in chip.peaks:
        return dt, ""
    wide = [d for d in ("fp16", "bf16", "tf32", "fp32", "fp64") if d in chip.peaks]
    best = max(wide, key=lambda d: chip.peaks[d].flops_per_s) if wide else dt
    return best, f"{dt}: {chip.id} has no {dt} peak; bounded at its {best} peak"


def through_l2(cost: Cost, chip: Chip) -> Cost:
    """The Cost with up to the L2's capacity of its bytes already there (a kernel in a step
    reads what the one before it just wrote, and its writes land in L2): only the rest must
    cross HBM, and every byte passes L2. A bound that ignored this would be beaten by real
    kernels whose operands fit in L2."""
    if "hbm" not in cost.bytes or not any(m.name == "l2" for m in chip.memory):
        return cost
    capacity = chip.level("l2").capacity_bytes or 0.0
    moved = float(cost.bytes["hbm"])
    return replace(cost, bytes={**cost.bytes, "hbm": max(moved - capacity, 0.0),
                                "l2": moved + float(cost.bytes.get("l2", 0.0))})


def _numel(shape: tuple[int, ...] | None) -> int:
    return math.prod(shape) if shape else 0


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    out = []
    for axis in range(ndim):
        sizes = {s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0}
        out.append(max(sizes))
    return tuple(out)


def _gemm(kind: str, dims: tuple[tuple[int, ...] | None, ...], dt: str) -> Work | Unmapped:
    tensors = [d for d in dims if d is not None]
    if kind in ("addmm", "_addmm_activation"):
        tensors = tensors[1:3]  # (bias, a, b)
    elif kind == "baddbmm":
        tensors = tensors[1:3]
    elif kind == "linear":
        if len(tensors) < 2 or len(tensors[1]) != 2:
            return Unmapped("linear without a 2-D weight shape")
        x, w = tensors[0], tensors[1]
        tensors = [(math.prod(x[:-1]), x[-1]), (w[1], w[0])]
    if len(tensors) < 2:
        return Unmapped(f"{kind}: fewer than two input shapes recorded")
    a, b = tensors[0], tensors[1]
    if len(a) == 2 and len(b) == 2:
        m, k, n, batch = a[0], a[1], b[1], 1
    elif len(a) == 3 and len(b) == 3:
        batch, m, k, n = a[0], a[1], a[2], b[2]
    elif len(a) >= 2 and len(b) == 2:  # matmul of a stack by one matrix
        m, k, n, batch = math.prod(a[:-1]), a[-1], b[1], 1
    else:
        return Unmapped(f"{kind} of shapes {a} x {b}: no GEMM rule for them")
    if min(m, k, n, batch) <= 0:
        return Unmapped(f"{kind} with an empty operand")
    label = f"{kind} {f'{batch}x' if batch > 1 else ''}{m}x{k}x{n} {dt}"

    def build(chip: Chip) -> Cost:
        c, _ = compute_dtype(dt, chip)
        if batch > 1:
            return through_l2(batched_matmul(batch, m, k, n, dt, compute_dtype=c), chip)
        return through_l2(matmul(m, k, n, dt, compute_dtype=c), chip)

    return Work("gemm", label, build, "matmul" if batch == 1 else "",
                {"m": m, "k": k, "n": n, "dtype": dt} if batch == 1 else {},
                "fp32 at the TF32 peak where the chip has one" if dt == "fp32" else "")


def _attention(kind: str, dims: tuple[tuple[int, ...] | None, ...], dt: str) -> Work | Unmapped:
    q, k, v = (*dims, None, None, None)[:3]
    if q is None or k is None or v is None or len(q) != 4 or len(k) != 4:
        return Unmapped(f"{kind}: query / key / value shapes not recorded as 4-D")
    seq_first = kind.startswith(("_flash_attention", "_efficient_attention"))
    b, lq, h, d = (q[0], q[1], q[2], q[3]) if seq_first else (q[0], q[2], q[1], q[3])
    lkv, hkv = (k[1], k[2]) if seq_first else (k[2], k[1])
    dv = v[-1]
    if min(b, lq, h, d, lkv, hkv, dv) <= 0 or h % hkv:
        return Unmapped(f"{kind}: shapes {q}, {k} are not attention heads")
    backward = kind in ATTENTION_BACKWARD_OPS
    label = f"{'attention backward' if backward else 'attention'} b{b} h{h}/{hkv} " \
            f"q{lq} kv{lkv} d{d} {dt}"
    note = "causal assumed (half the score pairs): the mask is not in the trace"

    def build(chip: Chip) -> Cost:
        c, _ = compute_dtype(dt, chip)
        sram = chip.level("sram").unit_capacity_bytes if any(
            m.name == "sram" for m in chip.memory) else None
        if backward:
            return through_l2(attention_backward(b, lq, lkv, h, hkv, d, dv, causal=True,
                                                 dtype=c, sram_bytes=sram,
                                                 block_kv=None if sram else 128), chip)
        return through_l2(attention(b, lq, lkv, h, hkv, d, dv, causal=True, impl="flash",
                                    dtype=c, sram_bytes=sram, block_q=None if sram else 128),
                          chip)

    return Work("attention", label, build, "" if backward else "attention",
                {} if backward else {"batch": b, "q_len": lq, "kv_len": lkv, "heads": h,
                                     "kv_heads": hkv, "head_dim": d, "v_head_dim": dv,
                                     "causal": True, "dtype": dt}, note)


def _vector(op_class: str, label: str, flops: float, nbytes: float, dt: str,
            note: str = "") -> Work:
    def build(chip: Chip) -> Cost:
        peak = lookup_dtype(dt).peak
        return through_l2(Cost(bytes={"hbm": nbytes}, name=label,
                               vector_flops={peak: flops} if flops else None), chip)

    return Work(op_class, label, build, "elementwise", {}, note)


def _pointwise(kind: str, op: CpuOp, dt: str) -> Work | Unmapped:
    base = kind if kind in POINTWISE else kind.rstrip("_")
    tensors = [(d, _dtype(op.types, i) or dt) for i, d in enumerate(op.dims) if d is not None]
    if len(tensors) >= 2 and not kind.endswith("_") and base not in ("copy", "cat", "stack") \
            and len(op.dims) > ARITY.get(base, 1) and op.dims[-1] is not None:
        tensors = tensors[:-1]  # the out= tensor: written (counted below), not read
    if not tensors:
        return Unmapped(f"{kind}: no tensor shapes recorded")
    shape = _broadcast([d for d, _ in tensors])
    n = _numel(shape)
    out_size = 1 if base in COMPARISONS else lookup_dtype(tensors[0][1]).bytes
    if base in ("fill", "zero"):  # writes self, reads nothing
        return _vector("fill", f"{kind} {n} {dt}", 0.0, n * out_size, dt)
    if base in ("copy", "_to_copy", "clone"):  # copy_(dst, src): src read, dst written
        src = tensors[-1]
        nbytes = _numel(src[0]) * lookup_dtype(src[1]).bytes + n * out_size
        return _vector("copy", f"{kind} {n} {dt}", 0.0, nbytes, dt)
    if base in ("cat", "stack"):
        moved = sum(_numel(d) * lookup_dtype(t).bytes for d, t in tensors)
        return _vector("copy", f"{kind} {n} {dt}", 0.0, 2 * moved, dt)
    reads = sum(_numel(d) * lookup_dtype(t).bytes for d, t in tensors)
    flops = float(POINTWISE[base] * n)
    return _vector("elementwise", f"{kind} {n} {dt}", flops, reads + n * out_size, dt)


def _reduction(kind: str, op: CpuOp, dt: str) -> Work | Unmapped:
    base = kind.rstrip("_")
    first = next((d for d in op.dims if d is not None), None)
    if first is None:
        return Unmapped(f"{kind}: no input shape recorded")
    n = _numel(first)
    size = lookup_dtype(dt).bytes
    nbytes = n * size * (2 if base in SAME_SHAPE else 1)
    return _vector("reduction/norm", f"{kind} {n} {dt}", float(REDUCTION[base] * n), nbytes,
                   dt, "" if base in SAME_SHAPE else "its output not counted")


def _collective(comm: Comm) -> Work | Unmapped:
    kind = COLLECTIVE_NAMES.get(comm.collective.lower().removesuffix("_"))
    dt = COMM_TYPES.get(comm.dtype)
    if kind is None:
        return Unmapped(f"collective {comm.collective!r}: no model for it")
    if dt is None:
        return Unmapped(f"collective dtype {comm.dtype!r} unknown")
    if comm.group_size < 2:
        return Unmapped(f"{kind} over a group of {comm.group_size}: nothing crosses a link")
    # nccl-tests' buffer: the gathered output for all-gather, the input otherwise
    elements = comm.out_elements if kind == "all-gather" else comm.in_elements
    nbytes = elements * lookup_dtype(dt).bytes
    if nbytes <= 0:
        return Unmapped(f"{kind} of an empty buffer")
    ranks = comm.group_size

    def build(chip: Chip) -> Cost:
        up = chip.links.get("scale-up")
        domain = up.domain_size if up is not None else None
        if up is None:
            raise RooflineError(f"{chip.id} has no scale-up link to bound a {kind} on")
        if domain is not None and ranks > domain and "scale-out" in chip.links:
            # across domains: the best placement, whole domains (hierarchical)
            return collective(kind, nbytes, ranks, domain_size=domain, chip=chip)
        return collective(kind, nbytes, ranks, chip=chip)

    return Work("collective", f"{kind} {nbytes:.4g} B over {ranks} ranks {dt}", build,
                kind.replace("-", ""), {"kind": kind, "nbytes": nbytes, "ranks": ranks},
                "the ranks placed as close as the chip allows (one scale-up domain first)",
                nbytes)


def _device_copy(k: Kernel) -> Work | Unmapped:
    if k.nbytes is None or k.nbytes <= 0:
        return Unmapped(f"{k.category} without its byte count")
    low = k.name.lower()
    if k.category == "memset":
        return _vector("fill", f"memset {k.nbytes:.4g} B", 0.0, k.nbytes, "int8")
    if "dtod" in low or "device -> device" in low:
        return _vector("copy", f"memcpy DtoD {k.nbytes:.4g} B", 0.0, 2 * k.nbytes, "int8")
    return Unmapped("host <-> device copy: the chip file has no host link to bound it on")


def map_kernel(k: Kernel) -> Work | Unmapped:
    """The Work one GPU activity (with the others its op launched) did, or why not."""
    if k.category != "kernel":
        return _device_copy(k)
    if k.is_comm:
        if k.comm is None:
            return Unmapped("NCCL kernel without collective arguments (recorded by "
                            "PyTorch >= 2.1 with record_shapes=True)")
        return _collective(k.comm)
    op = k.op
    if op is None:
        return Unmapped("no CPU op launched it (a library or compiled-graph kernel)")
    kind = op.name.removeprefix("aten::")
    if not op.dims:
        return Unmapped(f"{op.name}: no input shapes (profile with record_shapes=True)")
    dt = next((TORCH_TYPES[t] for t in op.types if t in TORCH_TYPES and t not in
               ("int", "long int", "short int", "bool")), None)
    if dt is None:
        return Unmapped(f"{op.name}: no floating-point input type recorded")
    if kind in GEMMS:
        return _gemm(kind, op.dims, dt)
    if kind in ATTENTION_OPS or kind in ATTENTION_BACKWARD_OPS:
        return _attention(kind, op.dims, dt)
    if kind in POINTWISE or kind.rstrip("_") in POINTWISE:
        return _pointwise(kind, op, dt)
    if kind.rstrip("_") in REDUCTION:
        return _reduction(kind, op, dt)
    if kind in VIEWS or kind in ALLOCATIONS or kind in FACTORIES:
        return Unmapped(f"{op.name}: a view / allocation / factory op (no formula for its "
                        "kernel)")
    return Unmapped(f"{op.name}: no formula for this op")
