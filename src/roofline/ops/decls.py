"""`roofline op matmul / gemv / dot / elementwise / linear-attention` as declared operations:
their parameters and the chip defaults they take (the registry's; a model's analysis calls
the op functions and never loads these)."""

from __future__ import annotations

from typing import Any

from ..hardware import Chip
from ..units import parse_bytes
from .elementwise import KINDS, elementwise, preset
from .linear_attention import DEFAULT_CHUNK, STATE_DTYPE, linear_attention
from .linear_attention import KINDS as MIXERS
from .matmul import dot, gemv, matmul, warm_capacity
from .params import OpDecl, Param, dtype_params

_DTYPES = dtype_params("dtype", "weight", "out", "compute")
_WARM = Param("warm_l2_bytes", "operand bytes the L2 keeps between calls of a benchmark loop "
              "over the same data: a size, or l2 for the chip's L2 capacity; the rest come "
              "from HBM (default: none, a cold call)", "str", flag="--warm")


def _warm_l2(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """--warm l2: the chip's L2 capacity; --warm SIZE: that many bytes."""
    given = kwargs.get("warm_l2_bytes")
    if isinstance(given, str):
        if given.strip().lower() != "l2":
            kwargs["warm_l2_bytes"] = parse_bytes(given, "--warm")
            return kwargs
        kwargs["warm_l2_bytes"] = warm_capacity(chip)
    return kwargs


MATMUL = OpDecl("matmul", "X[M,K] x W[K,N] -> Y[M,N]", matmul, (
    Param("m", "rows of X (tokens)", required=True),
    Param("k", "contraction dimension", required=True),
    Param("n", "columns of W", required=True), *_DTYPES, _WARM), prepare=_warm_l2)
GEMV = OpDecl("gemv", "one token through W[K,N] (matmul with M = 1)", gemv, (
    Param("k", "input features", required=True),
    Param("n", "output features", required=True), *_DTYPES, _WARM), prepare=_warm_l2)
DOT = OpDecl("dot", "dot product of two length-N vectors", dot, (
    Param("n", "vector length", required=True), *dtype_params("dtype")))


def _preset_counts(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """The kind's preset fills the counts not given (so the inputs echo what was counted)."""
    spec = preset(kwargs["kind"])
    kwargs.setdefault("ops_per_element", spec.ops_per_element)
    kwargs.setdefault("inputs", spec.inputs)
    return kwargs


ELEMENTWISE = OpDecl("elementwise", "norm / softmax / activation / add over N elements",
                     elementwise, (
    Param("n", "number of elements", required=True),
    Param("kind", "preset operation count and inputs per element", "choice", "generic",
          choices=tuple(KINDS)),
    Param("ops_per_element", "override the preset's ops per element", "float",
          bounds=(1e-3, 1e6)),
    Param("inputs", "override the number of inputs"),
    *dtype_params("dtype", "out", "compute")), _preset_counts)


LINEAR_ATTENTION = OpDecl(
    "linear-attention", "linear attention / state-space mixer (Gated DeltaNet, Mamba-2): a "
    "fixed-size recurrent state per sequence instead of a KV cache", linear_attention, (
        Param("batch", "sequences", default=1),
        Param("q_len", "new tokens per sequence (prompt, or 1 for decode)", required=True),
        Param("kv_len", "positions so far incl. the new tokens (> q_len: a state to read)",
              follows="q_len"),
        Param("heads", "value heads (state heads)", default=32),
        Param("key_heads", "query/key heads", follows="heads"),
        Param("key_dim", "key head dimension d_k (Mamba-2: d_state)", default=128),
        Param("value_dim", "value head dimension d_v (Mamba-2: head_dim)", default=128),
        Param("kind", "mixer", "choice", "gated_deltanet", choices=tuple(MIXERS)),
        Param("chunk", "chunk length of the chunkwise-parallel form", default=DEFAULT_CHUNK),
        Param("conv_dim", "short-convolution channels (default 2·key_heads·d_k + heads·d_v)"),
        Param("conv_kernel", "short-convolution width", default=4),
        *dtype_params("dtype"),
        Param("state_dtype", "recurrent state dtype", "str", STATE_DTYPE)))
