"""Linear attention and state-space mixers: Gated DeltaNet (Qwen3-Next), Mamba-2 (Nemotron-H).

A fixed-size recurrent state per sequence and head replaces the growing KV cache:
  gated_deltanet  S [d_k, d_v] per value head (d_k, d_v: key and value head dims)
  mamba2          S [d_state, head_dim] per head (pass key_dim = d_state, value_dim = head_dim)
plus a short causal convolution that keeps the last (kernel - 1) inputs of its channels.

Counting conventions (a multiply-add is 2 FLOPs; per token and value head):
- state products: DeltaNet touches the state n_s = 3 times per token (W·S and Q·S read it,
  Kᵀ·U' updates it), Mamba-2 n_s = 2 times (Bᵀ·X into it, C·S out of it): 2·n_s·d_k·d_v.
- intra-chunk products (the chunkwise-parallel form with chunk C, 64 in the FLA kernels; q new
  tokens of a decode step are one chunk of q): each token meets the Ce = min(C, Lq) tokens of
  its chunk. DeltaNet: Q·Kᵀ, K·Kᵀ and T·(βK) over d_k, T·(βV) and A·V' over d_v:
  2·Ce·(3·d_k + 2·d_v) (fla-org/flash-linear-attention fla/ops/gated_delta_rule/chunk.py: the
  kkt, w/u, h and o kernels, each per value head); Mamba-2: its product with X over head_dim
  per head, 2·Ce·d_v, and C·Bᵀ over d_state once per group (key_heads = n_groups), 2·Ce·d_k
  per token and group (state-spaces/mamba mamba_ssm/ops/triton/ssd_combined.py: bmm_chunk_fwd
  runs over the groups, chunk_scan over the heads). Dense tiles, as the kernels compute them
  (the causal mask is not skipped).
- convolution: 2·kernel FLOPs per channel and token.
HBM bytes: the projected inputs (q and k: key_heads·d_k each, v: heads·d_v, two gates per
head) read once and the output (heads·d_v) written once, in the activation dtype; the state
read once when the sequence has a past (kv_len > q_len) and written once, in the state dtype
(fp32 by default: the kernels accumulate the recurrence in fp32), the convolution state
likewise in the activation dtype. Chunk states stay on chip (one fused kernel): a lower bound.
So a decode step reads and writes the same bytes per sequence however long the context is;
batching does not share them (each sequence has its own state), as with a KV cache.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, Quantity, Term, call, define, derived, numeric, steps, sym, value
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError, unknown
from ..opid import LinearAttention
from ..records import record
from ._common import size


@record(frozen=True)
class MixerKind:
    """A linear-attention mixer's state and intra-chunk products per token."""

    state_products: int  # n_s: products with the d_k x d_v state per token
    intra_k: int  # intra-chunk products over d_k per token pair
    intra_v: int  # ... over d_v
    note: str
    keys_per_group: bool = False  # the d_k products run once per key head, not value head


KINDS: dict[str, MixerKind] = {
    "gated_deltanet": MixerKind(3, 3, 2, "Gated DeltaNet (Qwen3-Next): delta rule, WY form"),
    "mamba2": MixerKind(2, 1, 1, "Mamba-2 SSD (Nemotron-H): key_dim = d_state, "
                                 "value_dim = head_dim, key_heads = n_groups", True),
}
DEFAULT_CHUNK = 64  # FLA's chunk_gated_delta_rule and Mamba-2's SSD kernels use 64 / 128-256
STATE_DTYPE = "fp32"


@numeric
def recurrent_state_bytes(heads: Any, key_dim: Any, value_dim: Any,
                          state_dtype: str | DType = STATE_DTYPE, conv_dim: Any = 0,
                          conv_kernel: Any = 4, conv_dtype: str | DType = "bf16") -> Num:
    """Bytes one sequence keeps per layer: heads·d_k·d_v state elements plus the convolution's
    last (kernel - 1) inputs of conv_dim channels. The same whatever the context length."""
    H, dk, dv = size("H", heads, "heads"), size("d_k", key_dim, "key_dim"), \
        size("d_v", value_dim, "value_dim")
    state = H * dk * dv * sym("s_state", lookup_dtype(state_dtype).bytes)
    if not np.any(np.asarray(conv_dim)):
        return value(state)
    conv = size("conv", conv_dim, "conv_dim") * (size("k_conv", conv_kernel, "conv_kernel") - 1) \
        * sym("s_x", lookup_dtype(conv_dtype).bytes)
    return value(state + conv)


@derived
def linear_attention(
    batch: Any,
    q_len: Any,
    kv_len: Any = None,
    heads: Any = 32,
    key_heads: Any = None,
    key_dim: Any = 128,
    value_dim: Any = 128,
    kind: str = "gated_deltanet",
    chunk: Any = DEFAULT_CHUNK,
    conv_dim: Any = None,
    conv_kernel: Any = 4,
    dtype: str | DType = "bf16",
    state_dtype: str | DType = STATE_DTYPE,
    name: str = "linear attention",
) -> Cost:
    """One linear-attention mixer over q_len new tokens per sequence (prefill: the prompt;
    decode: 1, or k speculative), with kv_len positions so far including them (default
    q_len: no past, no state to read). Sizes may be numpy arrays.

    >>> c = linear_attention(1, 1, 65536, heads=32, key_heads=16)  # one decode step
    >>> round(c.bytes["hbm"] / 2**20, 2)   # 2 MiB of fp32 state read + written, and the inputs
    4.12
    """
    mixer = KINDS.get(kind)
    if mixer is None:
        raise unknown("linear attention kind", kind, KINDS)
    x, s_state = lookup_dtype(dtype), lookup_dtype(state_dtype)
    B, Lq = size("B", batch, "batch"), size("Lq", q_len, "q_len")
    Lkv = size("Lkv", q_len if kv_len is None else kv_len, "kv_len")
    if np.any(np.asarray(value(Lq)) > np.asarray(value(Lkv))):
        raise RooflineError("q_len must not exceed kv_len (the new tokens are the last q_len "
                            "positions)")
    H, dk, dv = size("H", heads, "heads"), size("d_k", key_dim, "key_dim"), \
        size("d_v", value_dim, "value_dim")
    Hk = size("H_k", heads if key_heads is None else key_heads, "key_heads")
    C, kc = size("C", chunk, "chunk"), size("k_conv", conv_kernel, "conv_kernel")
    channels = 2 * Hk * dk + H * dv if conv_dim is None else size("conv", conv_dim, "conv_dim")
    s, s_st = sym("s", x.bytes), sym("s_state", s_state.bytes)
    terms: list[Term] = []
    ce = define(terms, "tokens per chunk", "Ce", call("min_C", lambda v: np.minimum(v, value(C)),
                                                       Lq))
    tokens = B * Lq * H
    state_flops = 2 * sym("n_s", float(mixer.state_products)) * dk * dv * tokens
    key_share = Hk / H if mixer.keys_per_group else 1.0  # Mamba-2's C·Bᵀ: once per group
    intra_flops = 2 * ce * (sym("a_k", float(mixer.intra_k)) * dk * key_share +
                            sym("a_v", float(mixer.intra_v)) * dv) * tokens
    conv_flops = 2 * kc * channels * B * Lq
    flops = state_flops + intra_flops + conv_flops
    io = B * Lq * (2 * Hk * dk + H * dv + 2 * H + H * dv) * s  # q, k, v, 2 gates in; o out
    has_past = define(terms, "sequences carry a state (1: a past, 0: a fresh prompt)", "past",
                      call("past>0", lambda v: (v > 0).astype(float) if isinstance(v, np.ndarray)
                           else float(v > 0), Lkv - Lq))
    state_once = B * H * dk * dv * s_st + B * channels * (kc - 1) * s
    state_rw = define(terms, "state bytes read and written", "state",
                      (1 + has_past) * state_once)
    hbm = io + state_rw
    terms += steps(("state FLOPs (n_s products with the state)", state_flops),
                   ("intra-chunk FLOPs", intra_flops), ("convolution FLOPs", conv_flops),
                   ("FLOPs", flops), ("input/output bytes", io), ("HBM bytes", hbm))
    return Cost(flops={x.peak: _value(flops)}, bytes={"hbm": _value(hbm)}, steps=tuple(terms),
                name=name if name != "linear attention" else f"linear attention ({kind})",
                op=LinearAttention(value(B), value(H), value(Lq), kind, value(C),
                                   value(dv), value(dk)))


def _value(e: Quantity) -> Num:
    v = np.asarray(value(e), dtype=float)  # a plain float for scalars, as the other ops give
    return float(v) if v.ndim == 0 else v
