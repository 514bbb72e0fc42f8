"""What an op is, typed: a record set where the op builds its Cost (`Cost.op`) and read by the
forecast (`roofline.expect`), which never parses an op's display name or its derivation.

One record per kind of kernel the forecast treats apart (a collective is known by its
`Cost.algorithm` and links). Shape fields are per call (one GEMM
of a grouped or batched product, one attention call) and may hold numpy arrays, as the Cost's
counts do; a Cost repeated (`Cost.scaled`) keeps its record, a sum of two Costs keeps the
first's only where both carry the same kind of kernel (`summed`), and a sum with an empty
Cost (`sum(costs, Cost())`) keeps the other's.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from .records import record


class OpKind(StrEnum):
    GEMM = "gemm"  # a dense, batched or grouped (MoE) matrix product
    ATTENTION = "attention"  # a softmax attention kernel: flash, naive or decode; MHA/GQA/MLA
    LINEAR_ATTENTION = "linear_attention"  # a chunked recurrence (Gated DeltaNet, Mamba-2)
    ELEMENTWISE = "elementwise"  # norms, activations, residual adds, rotary, softmax
    EMBEDDING = "embedding"  # a table lookup
    OPTIMIZER = "optimizer"  # a parameter update


@record(frozen=True, slots=True)
class Gemm:
    """One product X[M,K] x W[K,N] (`groups`: products in one call, e.g. a batched matmul's
    batch; a grouped MoE GEMM's touched experts over the whole EP group, M tokens each on
    average: the rank's routed rows are its FLOPs over 2·N·K, expect.step.routed_rows)."""

    m: Any
    n: Any
    k: Any
    weight_dtype: str  # the W operand's dtype: a narrower one than the math is dequantized
    groups: Any = 1.0
    grouped: bool = False  # an MoE grouped GEMM: `groups` experts, M tokens each on average

    kind = OpKind.GEMM


@record(frozen=True, slots=True)
class Attention:
    """One attention call over `batch` sequences of `heads` query heads: `q_len` new queries
    against `kv_len` keys. `passes`: "forward", "backward" or "forward + backward"; `impl`:
    flash, naive or decode; `mla`: multi-head latent attention (DeepSeek); `kv_heads`: the
    K/V heads the query heads share (GQA; None: as many as query heads); `kv_dtype`: the
    K/V operands' dtype (the cache's; None: the queries' own)."""

    batch: Any
    heads: Any
    q_len: Any
    kv_len: Any
    head_dim: Any
    impl: str
    passes: str = "forward"
    mla: bool = False
    kv_heads: Any = None
    kv_dtype: str | None = None

    kind = OpKind.ATTENTION

    @property
    def backward(self) -> bool:
        return self.passes != "forward"


@record(frozen=True, slots=True)
class LinearAttention:
    """A chunked linear-attention mixer (`mixer`: gated_deltanet, mamba2, ...)."""

    batch: Any
    heads: Any
    q_len: Any
    mixer: str
    chunk: Any = 64  # tokens per chunk of the chunkwise-parallel form
    value_dim: Any = 128  # d_v: the state's columns (a kernel may split them over CTAs)
    key_dim: Any = 128  # d_k: the state's rows

    kind = OpKind.LINEAR_ATTENTION


@record(frozen=True, slots=True)
class Plain:
    """A kernel the forecast times by its roofs alone: elementwise, embedding, optimizer."""

    kind: OpKind
    what: str = ""  # its own name (rmsnorm, swiglu, adam, ...)


OpId = Gemm | Attention | LinearAttention | Plain
EMBEDDING = Plain(OpKind.EMBEDDING, "embedding")


def summed(a: OpId | None, b: OpId | None) -> OpId | None:
    """The record of two calls of one kind of kernel run one after another (packed sequences
    of different lengths, attention forward then backward): the first call's, the passes
    joined; two kinds of kernel are no single kernel (None)."""
    if type(a) is not type(b) or a is None:
        return None
    if isinstance(a, Attention) and isinstance(b, Attention) and a.passes != b.passes:
        return Attention(a.batch, a.heads, a.q_len, a.kv_len, a.head_dim, a.impl,
                         f"{a.passes} + {b.passes}", a.mla, a.kv_heads, a.kv_dtype)
    return a
