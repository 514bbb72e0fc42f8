"""The attention kernels a PyTorch trace sees: which aten ops they are, their FLOPs under the
kernel's own mask (causal top left or bottom right, sliding window, packed varlen
sequences), and how many keys some query sees (what K and V a kernel must load).

torch.utils.flop_counter counts every attention call as if its score matrix were full;
these count the pairs each mask keeps (ops.attention's counting convention)."""

from __future__ import annotations

from typing import Any

import numpy as np

ATTENTION_OPS = {"_scaled_dot_product_flash_attention_for_cpu",
                 "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                 "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                 "_efficient_attention_forward", "_scaled_dot_product_fused_attention_overrideable"}
# their backward kernels: torch's formula for them ignores the causal mask too
ATTENTION_BACKWARD_OPS = {"_scaled_dot_product_flash_attention_for_cpu_backward",
                          "_scaled_dot_product_flash_attention_backward",
                          "_scaled_dot_product_efficient_attention_backward",
                          "_scaled_dot_product_cudnn_attention_backward",
                          "_flash_attention_backward", "_efficient_attention_backward",
                          "_scaled_dot_product_fused_attention_overrideable_backward"}

# kernels that take [B, L, H, d] rather than SDPA's [B, H, L, d]
_SEQ_FIRST = {"_flash_attention_forward", "_efficient_attention_forward",
              "_flash_attention_backward", "_efficient_attention_backward"}
# FlashAttention-2 aligns a causal mask bottom right (query i of Lq sees keys up to
# Lkv - Lq + i); SDPA sends it non-square causal masks only for CausalBias(LOWER_RIGHT).
# Every other kernel aligns top left, as SDPA's is_causal does (query i sees keys 0..i).
_BOTTOM_RIGHT = {"_scaled_dot_product_flash_attention", "_flash_attention_forward",
                 "_scaled_dot_product_flash_attention_backward", "_flash_attention_backward"}


def named_arguments(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by their schema names (positions differ between kernels)."""
    named = dict(zip((a.name for a in func._schema.arguments), args, strict=False))
    named.update(kwargs)
    return named


def _causal_mask(kind: str, named: dict[str, Any]) -> str:
    """The attention kernel's mask: "" (none), "top-left" or "bottom-right" causal."""
    custom = named.get("custom_mask_type") or 0  # the memory-efficient kernel's: 1 TL, 2 BR
    if custom == 2 or (kind in _BOTTOM_RIGHT and named.get("is_causal")):
        return "bottom-right"
    return "top-left" if custom == 1 or named.get("is_causal") else ""


def _packed(kind: str, named: dict[str, Any]) -> Any:
    """The query offsets of a varlen call (sequences packed in one row), else None."""
    return named.get("cum_seq_q", named.get("cu_seqlens_q")) if kind in _SEQ_FIRST else None


def _window(kind: str, named: dict[str, Any]) -> tuple[int, int]:
    """(left, right): how many keys before and after its own position a query sees, -1 for
    no limit. FlashAttention's window_size_left / right (a causal kernel sees none after);
    the memory-efficient kernel's window_size W: the W keys ending at the query's own."""
    if "window_size_left" in named or "window_size_right" in named:
        left, right = named.get("window_size_left"), named.get("window_size_right")
        left, right = (-1 if w is None else int(w) for w in (left, right))
        return left, 0 if named.get("is_causal") else right
    size = named.get("window_size")
    return (int(size) - 1 if size is not None and int(size) > 0 else -1), -1


def _seen(lq: int, lkv: int, mask: str, window: tuple[int, int]) -> Any:
    """Per query, the (first, last) key it sees: positions aligned top left (query i at
    position i) or bottom right (at Lkv - Lq + i, FlashAttention's rule, windows too)."""
    left, right = window
    pos = np.arange(lq) + (0 if mask == "top-left" else lkv - lq)
    last = pos if mask else (pos + right if right >= 0 else np.full(lq, lkv - 1))
    first = np.maximum(pos - left, 0) if left >= 0 else np.zeros(lq, dtype=np.int64)
    return first, np.minimum(last, lkv - 1)


def keys_read(kind: str, named: dict[str, Any]) -> tuple[int, int]:
    """(keys some query sees, keys): a top-left causal mask with fewer queries than keys never
    reaches the last Lkv - Lq keys, nor a window the keys before the first query's window;
    their K and V a kernel need not load. A packed (varlen) call: per sequence."""
    k = named["key"]
    mask, window = _causal_mask(kind, named), _window(kind, named)
    keys = k.shape[-3] if _packed(kind, named) is not None else \
        k.shape[1 if kind in _SEQ_FIRST else 2]
    if (mask != "top-left" and window == (-1, -1)) or keys == 0:
        return 1, 1
    seen = sum(max(int(last.max() - first.min() + 1), 0) if len(first) else 0
               for first, last in (_seen(lq, lkv, mask, window)
                                   for lq, lkv in _sequences(kind, named)))
    return min(seen, keys), keys


def _sequences(kind: str, named: dict[str, Any]) -> list[tuple[int, int]]:
    """(queries, keys) of each sequence of a packed (varlen) call; else of the one shape
    every (batch, head) shares."""
    q, k = named["query"], named["key"]
    offsets_q = _packed(kind, named)
    if offsets_q is None:
        seq = 1 if kind in _SEQ_FIRST else 2
        return [(q.shape[seq], k.shape[seq])]
    offsets_k = named.get("cum_seq_k", named.get("cu_seqlens_k"))
    return list(zip(_lengths(offsets_q, named.get("max_q", named.get("max_seqlen_q")),
                             q.shape[-3]),
                    _lengths(offsets_k, named.get("max_k", named.get("max_seqlen_k")),
                             k.shape[-3]), strict=True))


def _pairs(lq: int, lkv: int, mask: str, window: tuple[int, int] = (-1, -1)) -> float:
    """Score pairs per head under no mask (""), a top-left or a bottom-right causal mask,
    and a sliding window (`_window`)."""
    if window != (-1, -1):
        first, last = _seen(lq, lkv, mask, window)
        return float(np.maximum(last - first + 1, 0).sum())
    return _causal_pairs(lq, lkv, mask)


def _causal_pairs(lq: int, lkv: int, mask: str) -> float:
    """Score pairs per head under no mask (""), a top-left or a bottom-right causal mask."""
    from ..ops.attention import score_pairs

    if not mask:
        return float(score_pairs(lq, lkv, False).value)
    n = min(lq, lkv)
    if mask == "bottom-right":  # queries before the first key see nothing
        return float(score_pairs(n, lkv, True).value)
    # top left: query i sees min(i + 1, Lkv) keys; those past the last key see them all
    return float(score_pairs(n, n, True).value) + (lq - n) * lkv


def _lengths(offsets: Any, longest: Any, total: int) -> list[int]:
    """Sequence lengths of a packed (varlen) batch from its cumulative offsets."""
    if offsets.device.type == "meta":  # no values: every sequence at the longest (torch's rule)
        return [int(total if longest is None else longest)] * (offsets.shape[0] - 1)
    return [int(n) for n in offsets.diff().tolist()]


def attention_flops(kind: str, named: dict[str, Any]) -> tuple[float, str]:
    """2·B·H·pairs·(d + d_v) + 5 per score for the forward, 2·B·H·pairs·(3·d + 2·d_v) + 4
    per score for the backward (ops.attention_backward: five GEMM-sized products, 2.5x the
    forward's two, and the softmax backward), the pairs those of the kernel's causal mask."""
    from ..ops.attention import SOFTMAX_FLOPS_PER_SCORE
    from ..ops.attention_backward import SOFTMAX_BACKWARD_VECTOR_OPS

    q, k, v = named["query"], named["key"], named["value"]
    d, dv = q.shape[-1], v.shape[-1]
    mask, window = _causal_mask(kind, named), _window(kind, named)
    if _packed(kind, named) is not None:  # varlen: per sequence
        pairs = q.shape[-2] * sum(_pairs(a, b, mask, window)
                                  for a, b in _sequences(kind, named))
    else:
        seq, head = (1, 2) if kind in _SEQ_FIRST else (2, 1)
        pairs = q.shape[0] * q.shape[head] * _pairs(q.shape[seq], k.shape[seq], mask, window)
    per_pair = (2 * (3 * d + 2 * dv) + SOFTMAX_BACKWARD_VECTOR_OPS
                if kind in ATTENTION_BACKWARD_OPS else 2 * (d + dv) + SOFTMAX_FLOPS_PER_SCORE)
    note = "causal: torch's formula counts the full score matrix" if mask else \
        "sliding window: torch's formula counts the full score matrix" \
        if window != (-1, -1) else ""
    return pairs * per_pair, note
