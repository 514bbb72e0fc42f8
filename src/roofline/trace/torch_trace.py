"""Record every aten op a PyTorch function executes and count its FLOPs and bytes.

FLOPs come from torch.utils.flop_counter's formulas where it has one (matmuls,
convolutions, the fused attention kernels), from our own attention formula for the kernels
it misses (CPU flash attention; causal attention, which torch counts as if it were full),
and from a stated ops-per-element count for pointwise and reduction ops. An op that does
arithmetic but has no formula is flagged (`flops_source = "unknown"`), not silently zero.

Bytes are the tensor sizes each op reads and writes: the traffic of running every op as
its own kernel, which is the unfused upper end of what the code moves (a perfect fusion
keeps intermediates on chip; `Trace.fusion` says how much that would remove). View ops
(reshape, transpose, slicing) and allocations (empty) move nothing; factory ops (randn,
zeros) only write; copy_, fill_, zero_ and out= arguments are written, not read. Indexed ops
move only the elements their indices select: a lookup (embedding, gather) reads those of its
source, an in-place scatter (a KV-cache update) writes those of its target, each distinct
element once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..errors import RooflineError
from .result import Trace, TracedOp
from .torch_attention import (
    ATTENTION_BACKWARD_OPS,
    ATTENTION_OPS,
    attention_flops,
    keys_read,
    named_arguments,
)

# FLOPs per output element of pointwise ops (the elementwise op's convention, KINDS)
POINTWISE = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "relu": 1, "maximum": 1,
    "minimum": 1, "clamp": 1, "where": 1, "reciprocal": 1, "sqrt": 1, "rsqrt": 1, "exp": 1,
    "log": 1, "tanh": 1, "sigmoid": 4, "silu": 4, "gelu": 8, "pow": 1, "square": 1,
    "cos": 1, "sin": 1, "addcmul": 2, "addcdiv": 2, "lerp": 2, "mul_": 1, "add_": 1,
    "masked_fill": 1, "eq": 1, "ne": 1, "lt": 1, "gt": 1, "le": 1, "ge": 1, "fill": 0,
    "zero": 0, "copy": 0, "_to_copy": 0, "clone": 0, "cat": 0, "stack": 0, "embedding": 0,
    "index_select": 0, "gather": 0, "scatter": 0, "index": 0, "repeat": 0, "tril": 0,
    "triu": 0, "flip": 0, "roll": 0,
}
# FLOPs per INPUT element of reductions and normalisations
REDUCTION = {"sum": 1, "mean": 1, "amax": 1, "amin": 1, "max": 1, "min": 1, "var": 3,
             "std": 3, "_softmax": 5, "softmax": 5, "_log_softmax": 6, "log_softmax": 6,
             "native_layer_norm": 7, "layer_norm": 7, "_fused_rms_norm": 4, "rms_norm": 4,
             "cumsum": 1, "norm": 2, "linalg_vector_norm": 2}
# ops that only reinterpret memory: no FLOPs, no bytes
VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "slice",
         "select", "split", "split_with_sizes", "unsqueeze", "squeeze", "alias", "detach",
         "as_strided", "unbind", "chunk", "narrow", "lift_fresh", "view_as_real",
         "view_as_complex", "_reshape_alias", "unflatten", "flatten", "movedim", "diagonal"}
# ops that create tensors from nothing: they write their output, read nothing
FACTORIES = {"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "randn", "rand",
             "randint", "arange", "uniform_", "normal_", "scalar_tensor", "new_zeros",
             "new_ones", "new_full", "linspace"}
# allocations: no kernel runs, nothing is read or written until another op fills them
ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
               "empty_permuted"}
# ops that read only the elements their indices select from their first tensor argument
LOOKUPS = {"embedding", "_embedding_bag", "_embedding_bag_forward_only", "index",
           "index_select", "gather", "take"}
# in-place ops that write only the elements their indices select in their first argument
SCATTERS = {"index_put_", "_index_put_impl_", "index_copy_", "index_add_", "index_fill_",
            "scatter_", "scatter_add_", "scatter_reduce_"}
_ACCUMULATES = {"index_add_", "scatter_add_", "scatter_reduce_"}  # read what they update
_OVERWRITES = {"copy_", "fill_", "zero_"}  # in-place ops that never read what they replace


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise RooflineError("tracing PyTorch code needs torch: pip install torch==2.13.0 (CPU "
                            "wheel on this machine) or pip install 'roofline[torch]'") from None
    return torch


def _dtype_name(t: Any) -> str:
    from ..dtypes import dtype as lookup

    name = str(t.dtype).removeprefix("torch.")
    try:
        return lookup(name).name
    except RooflineError:
        return "fp32" if t.is_floating_point() else "int8"


def _tensors(tree: Any) -> list[Any]:
    torch = _torch()
    from torch.utils._pytree import tree_leaves

    return [x for x in tree_leaves(tree) if isinstance(x, torch.Tensor)]


def _distinct(index: Any) -> int:
    """How many different values an index tensor holds: each is one read or write (a row looked
    up twice comes from memory once); every entry where its values cannot be read (meta)."""
    torch = _torch()
    if index.device.type != "meta":
        try:
            return int(torch.unique(index).numel())
        except RuntimeError:  # a fake tensor has no values either
            pass
    return int(index.numel())


def _indexed(src: Any, indices: list[Any]) -> int:
    """Elements of src that src[indices] (advanced indexing) selects, each counted once."""
    torch = _torch()
    coords: list[Any] = []
    sizes: list[int] = []
    dim, kept = 0, 1
    for index in indices:
        if index is None:  # a full slice: the dimension is kept whole
            kept *= src.shape[dim]
            dim += 1
        elif index.dtype in (torch.bool, torch.uint8):  # a mask: its true positions
            try:
                coords += index.nonzero().unbind(1)
            except RuntimeError:  # no values (meta, fake): all of src counts
                return int(src.numel())
            sizes += src.shape[dim:dim + index.dim()]
            dim += index.dim()
        else:
            coords.append(index)
            sizes.append(src.shape[dim])
            dim += 1
    kept *= math.prod(src.shape[dim:])
    if not coords:
        return int(src.numel())
    flat: Any = 0  # a number: the index tensors may live on another device than src
    for index, n in zip(coords, sizes, strict=True):  # negative indices count from the end
        flat = flat * n + index.remainder(n)
    return _distinct(flat) * kept


def _positions(src: Any, dim: int, index: Any) -> Any:
    """Flat positions in src that gather / scatter along dim touch: index[p] along dim, the
    position p itself along every other dimension."""
    torch = _torch()
    dim %= src.dim()
    strides = [math.prod(src.shape[d + 1:]) for d in range(src.dim())]
    flat = index * strides[dim]
    for d in range(index.dim()):
        if d != dim:
            shape = [-1 if e == d else 1 for e in range(index.dim())]
            flat = flat + torch.arange(index.shape[d], device=index.device).view(shape) * strides[d]
    return flat


def _selected(kind: str, named: dict[str, Any], src: Any) -> int:
    """Elements of src (the table looked up, the tensor updated) an indexed op touches."""
    if src.dim() == 0:
        return int(src.numel())
    if kind in ("index", "index_put_", "_index_put_impl_"):
        count = _indexed(src, named["indices"])
    elif kind in ("gather", "scatter_", "scatter_add_", "scatter_reduce_"):
        count = _distinct(_positions(src, named["dim"], named["index"]))
    elif kind == "take":  # flat indices into src, negative from the end
        count = _distinct(named["index"].remainder(src.numel()))
    else:  # whole slices along one dimension: rows of an embedding table, cache positions
        dim = named.get("dim", 0)
        count = _distinct(named.get("index", named.get("indices"))) \
            * (src.numel() // max(src.shape[dim], 1))
    return min(count, int(src.numel()))


def _traffic(kind: str, named: dict[str, Any], written: set[str],
             outs: list[Any]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(reads, writes) as (storage key, bytes) of one op run as its own kernel; `written`
    names the arguments it overwrites without reading (out=, copy_'s self)."""
    if kind in VIEWS or kind in ALLOCATIONS:
        return [], []
    writes = [(_key(t), _nbytes(t)) for t in outs]
    if kind in FACTORIES:
        return [], writes
    read = {name: value for name, value in named.items() if name not in written}
    src = read.get("self", read.get("weight"))  # the table looked up, the tensor updated
    if (kind in LOOKUPS or kind in SCATTERS) and src is not None:
        part = (_key(src), _selected(kind, named, src) * src.element_size())
        reads = []
        for t in _tensors([v for v in read.values() if v is not src]):
            size = _nbytes(t)
            if id(t) == id(named.get("src")):  # a scatter reads its src where index points
                size = min(size, named["index"].numel() * t.element_size())
            reads.append((_key(t), size))
        if kind in LOOKUPS:
            return [part, *reads], writes
        accumulates = kind in _ACCUMULATES or named.get("accumulate") or named.get("reduce")
        return [part, *reads] if accumulates else reads, [part]
    reads = [(t, _nbytes(t)) for t in _tensors(list(read.values()))]
    if kind in ATTENTION_OPS or kind in ATTENTION_BACKWARD_OPS:  # K, V: the keys queries see
        seen, keys = keys_read(kind, named)
        kv = (named["key"], named["value"])
        reads = [(t, b // keys * seen if any(t is x for x in kv) else b) for t, b in reads]
    return [(_key(t), b) for t, b in reads], writes


def _key(t: Any) -> int:
    """Identity of the memory a tensor lives in (views share their base's storage)."""
    return int(t.untyped_storage().data_ptr())


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())




# ops that add (or reduce) the elements they select into their output: one FLOP each
_ADDS_SELECTED = {"index_add_", "scatter_add_", "scatter_reduce_", "index_put_",
                  "_index_put_impl_", "_embedding_bag", "_embedding_bag_forward_only"}


def _adds_selected(kind: str, named: dict[str, Any]) -> float:
    """One add (a max for a max reduction) per element gathered or scattered: an embedding
    bag's looked-up rows, index_add's source, a scatter's indexed elements, an accumulating
    index_put's values (a plain index_put copies: none)."""
    if "embedding_bag" in kind:
        return float(named["indices"].numel() * named["weight"].shape[-1])
    if kind == "index_add_":
        return float(named["source"].numel())
    if kind in ("index_put_", "_index_put_impl_"):
        return float(named["values"].numel()) if named.get("accumulate") else 0.0
    return float(named["index"].numel())  # scatter_add_, scatter_reduce_


def count_flops(func: Any, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                out: Any) -> tuple[float, str, str]:
    """(FLOPs, source, note) for one aten call."""
    from torch.utils.flop_counter import flop_registry

    packet = func._overloadpacket
    if kind in ATTENTION_OPS or kind in ATTENTION_BACKWARD_OPS:
        flops, note = attention_flops(kind, named_arguments(func, args, kwargs))
        return flops, "roofline", note
    if packet in flop_registry:
        return float(flop_registry[packet](*args, **kwargs, out_val=out)), "torch", ""
    base = kind.rstrip("_") if kind not in POINTWISE else kind
    if kind in VIEWS or kind in FACTORIES or kind in ALLOCATIONS:
        return 0.0, "none", ""
    outs, ins = _tensors(out), _tensors(args)
    if base in POINTWISE:
        return float(POINTWISE[base] * sum(t.numel() for t in outs)), "roofline", ""
    if kind in _ADDS_SELECTED:
        return _adds_selected(kind, named_arguments(func, args, kwargs)), "roofline", ""
    if base in REDUCTION and ins:
        return float(REDUCTION[base] * ins[0].numel()), "roofline", ""
    return 0.0, "unknown", "does arithmetic the counter has no formula for"


class _Recorder:
    """The TorchDispatchMode that records ops (built lazily: torch is optional)."""

    def __init__(self, timed: bool) -> None:
        torch = _torch()
        from torch.utils._python_dispatch import TorchDispatchMode

        recorder = self
        self.ops: list[TracedOp] = []
        self.timed = timed

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                ins = _tensors((args, kwargs))
                cuda = any(t.is_cuda for t in ins)
                if recorder.timed and cuda:
                    torch.cuda.synchronize()
                start = time.perf_counter()
                out = func(*args, **kwargs)
                if recorder.timed and cuda:
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
                recorder.record(func, args, kwargs, out, elapsed if recorder.timed else None)
                return out

        self.mode = Mode()

    def record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any,
               elapsed: float | None) -> None:
        kind = func._overloadpacket.__name__
        outs = _tensors(out)
        ins = _tensors((args, kwargs))
        flops, source, note = count_flops(func, kind, args, kwargs, out)
        # out= arguments, and the self of copy_ / fill_ / zero_, are written, never read
        written = {a.name for a in func._schema.arguments
                   if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write}
        if kind in _OVERWRITES:
            written.add("self")
        reads, writes = _traffic(kind, named_arguments(func, args, kwargs), written, outs)
        first = next((t for t in [*ins, *outs] if t.is_floating_point()), None)
        self.ops.append(TracedOp(
            index=len(self.ops), op=str(func), kind=kind,
            dtype=_dtype_name(first) if first is not None else "fp32",
            shapes=[tuple(t.shape) for t in ins], out_shapes=[tuple(t.shape) for t in outs],
            flops=flops, flops_source=source, bytes_read=float(sum(b for _, b in reads)),
            bytes_written=float(sum(b for _, b in writes)), time_s=elapsed, reads=reads,
            writes=writes, note=note))


class tracing:
    """Record the aten ops run inside the block; `.trace` holds the result afterwards."""

    def __init__(self, time_ops: bool = False) -> None:
        self._recorder = _Recorder(time_ops)
        self.trace: Trace | None = None

    def __enter__(self) -> tracing:
        self._recorder.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._recorder.mode.__exit__(*exc)
        self.trace = Trace(self._recorder.ops, outputs=set())


def trace(fn: Callable[..., Any], *args: Any, time_ops: bool = False, **kwargs: Any) -> Trace:
    """Run fn(*args, **kwargs) once, recording every aten op it executes."""
    recorder = _Recorder(time_ops)
    with recorder.mode:
        out = fn(*args, **kwargs)
    return Trace(recorder.ops, outputs={_key(t) for t in _tensors(out)})
