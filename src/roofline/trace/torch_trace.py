"""Record every aten op a PyTorch function executes and count its FLOPs and bytes.

FLOPs come from torch.utils.flop_counter's formulas where it has one (matmuls,
convolutions, the fused attention kernels), from our own attention formula for the kernels
it misses (CPU flash attention; causal attention, which torch counts as if it were full),
and from a stated ops-per-element count for pointwise and reduction ops. An op that does
arithmetic but has no formula is flagged (`flops_source = "unknown"`), not silently zero.

Bytes are the tensor sizes each op reads and writes: the traffic of running every op as
its own kernel, which is the unfused upper end of what the code moves (a perfect fusion
keeps intermediates on chip; `Trace.fusion` says how much that would remove). View ops
(reshape, transpose, slicing) move nothing; factory ops (randn, empty) only write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import RooflineError
from .result import Trace, TracedOp

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
FACTORIES = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
             "full_like", "randn", "rand", "randint", "arange", "uniform_", "normal_",
             "scalar_tensor", "empty_strided", "new_empty", "new_zeros", "linspace"}
ATTENTION_OPS = {"_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                 "_efficient_attention_forward"}


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


def _key(t: Any) -> int:
    """Identity of the memory a tensor lives in (views share their base's storage)."""
    return int(t.untyped_storage().data_ptr())


def _nbytes(t: Any) -> int:
    return int(t.numel() * t.element_size())


# kernels that take [B, L, H, d] rather than SDPA's [B, H, L, d]
_SEQ_FIRST = {"_flash_attention_forward", "_efficient_attention_forward"}


def _named(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by their schema names (positions differ between kernels)."""
    named = dict(zip((a.name for a in func._schema.arguments), args, strict=False))
    named.update(kwargs)
    return named


def _attention_flops(kind: str, named: dict[str, Any]) -> tuple[float, str]:
    """2·B·H·pairs·(d + d_v) + 5 per score, pairs halved for causal (our attention formula)."""
    from ..ops.attention import SOFTMAX_FLOPS_PER_SCORE, score_pairs

    q, k, v = named["query"], named["key"], named["value"]
    seq, head = (1, 2) if kind in _SEQ_FIRST else (2, 1)
    batch, heads, lq, d = q.shape[0], q.shape[head], q.shape[seq], q.shape[-1]
    lkv, dv = k.shape[seq], v.shape[-1]
    causal = bool(named.get("is_causal", False)) or named.get("custom_mask_type", 0) in (1, 2)
    pairs = float(score_pairs(lq, lkv, causal).value)
    flops = batch * heads * pairs * (2 * (d + dv) + SOFTMAX_FLOPS_PER_SCORE)
    note = "causal: torch's formula counts the full score matrix" if causal else ""
    return flops, note


def count_flops(func: Any, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                out: Any) -> tuple[float, str, str]:
    """(FLOPs, source, note) for one aten call."""
    from torch.utils.flop_counter import flop_registry

    packet = func._overloadpacket
    if kind in ATTENTION_OPS:
        flops, note = _attention_flops(kind, _named(func, args, kwargs))
        return flops, "roofline", note
    if packet in flop_registry:
        return float(flop_registry[packet](*args, **kwargs, out_val=out)), "torch", ""
    base = kind.rstrip("_") if kind not in POINTWISE else kind
    if kind in VIEWS or kind in FACTORIES:
        return 0.0, "none", ""
    outs, ins = _tensors(out), _tensors(args)
    if base in POINTWISE:
        return float(POINTWISE[base] * sum(t.numel() for t in outs)), "roofline", ""
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
        moves = kind not in VIEWS
        reads = [(_key(t), _nbytes(t)) for t in ins] if moves and kind not in FACTORIES else []
        writes = [(_key(t), _nbytes(t)) for t in outs] if moves else []
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
