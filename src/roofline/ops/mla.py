"""Multi-head latent attention (DeepSeek-V2 / V3): the latent KV cache, the absorbed form for
a few new tokens (decode, speculative) and the expanded form for a prompt."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, derived, numeric, value
from ..dtypes import DType
from ..errors import RooflineError
from ._common import shown, size
from .attention import attention


@derived
def mla_attention(
    batch: Any,
    q_len: Any,
    kv_len: Any,
    heads: Any = 128,
    kv_lora_rank: Any = 512,
    qk_rope_dim: Any = 64,
    qk_nope_dim: Any = 128,
    v_head_dim: Any = 128,
    form: str = "absorbed",
    causal: bool = True,
    impl: str | None = None,
    dtype: str | DType = "bf16",
    kv_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    sram_bytes: Any = None,
    block_q: Any = None,
    l2_bytes: Any = None,
) -> Cost:
    """MLA attention. The cache holds kv_lora_rank + qk_rope_dim elements per token per layer
    (576 for DeepSeek-V3), shared by all heads.

    absorbed (decode): W_UK is folded into the query and W_UV into the output projection, so
      attention runs as MQA over the latent cache: one KV "head" of dim r + rope for scores,
      whose first r elements are also the values (kv_shared): FLOPs per score 2·(r+rope) + 2·r.
    expanded (prefill): K and V are decompressed per head (the up-projection matmuls belong to
      the model graph), then ordinary MHA with head_dim = nope + rope and v_head_dim.
    """
    kernel = impl or mla_kernel(form)
    if form == "absorbed":
        r = size("r", kv_lora_rank, "kv_lora_rank")
        rope = size("rope", qk_rope_dim, "qk_rope_dim")
        return attention(batch, q_len, kv_len, heads, 1, value(r) + value(rope), value(r), causal,
                         None, kernel, dtype, kv_dtype, out_dtype, sram_bytes,
                         block_q, kv_shared=True, name="mla (absorbed)", l2_bytes=l2_bytes,
                         mla=True)
    if form == "expanded":
        nope = size("nope", qk_nope_dim, "qk_nope_dim")
        rope = size("rope", qk_rope_dim, "qk_rope_dim")
        return attention(batch, q_len, kv_len, heads, heads, value(nope) + value(rope),
                         v_head_dim, causal, None, kernel, dtype, kv_dtype, out_dtype,
                         sram_bytes, block_q, name="mla (expanded)", l2_bytes=l2_bytes, mla=True)
    raise RooflineError(f"unknown MLA form {form!r} (allowed: absorbed, expanded)")


def mla_kernel(form: str) -> str:
    """MLA's default kernel: absorbed runs as decode over the latent cache, expanded as flash."""
    return "decode" if form == "absorbed" else "flash"


MLA_ABSORBED_MAX_Q_LEN = 16


def mla_form(q_len: Any) -> str:
    """Which MLA form serves q_len new tokens: absorbed for a few (decode, speculative
    decoding: attention over the 576-wide latent cache), expanded for a prompt (decompress K
    and V once, then ordinary attention)."""
    few = np.asarray(q_len) <= MLA_ABSORBED_MAX_Q_LEN
    if np.all(few):
        return "absorbed"
    if not np.any(few):
        return "expanded"
    raise RooflineError(f"q_len: MLA is absorbed up to {MLA_ABSORBED_MAX_Q_LEN} tokens and "
                        f"expanded above; sweep q_len on one side of it, got {shown(q_len)}")


@numeric
def mla_cache_elements(kv_lora_rank: Any = 512, qk_rope_dim: Any = 64) -> Num:
    """Cached elements per token per layer: the latent c_kv plus the shared RoPE key."""
    return value(size("r", kv_lora_rank, "kv_lora_rank")
                 + size("rope", qk_rope_dim, "qk_rope_dim"))


