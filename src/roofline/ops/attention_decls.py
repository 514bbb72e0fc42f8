"""`roofline op attention` and `roofline op mla` as declared operations: their parameters,
the chip defaults (flash tiling, L2), and the dispatch to the forward, FlashAttention-2's
backward, or MLA."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..cost import Cost
from ..errors import ParameterError
from ..hardware import Chip
from .attention import IMPLEMENTATIONS, attention, flash_tiling
from .mla import mla_attention, mla_form, mla_kernel
from .params import OpDecl, Param, dtype_params

_SRAM_TILING = ("sram_bytes", "block_q")
_L2_REUSE = ("l2_bytes",)


def flash_defaults(kwargs: dict[str, Any], chip: Chip,
                   keys: tuple[str, ...] = _SRAM_TILING) -> dict[str, Any]:
    """A flash kernel (or MLA, whose prompt form runs one) tiles as `flash_tiling` says; the
    `keys` the op takes are filled (by default the SRAM tiling: tp-layer takes no L2)."""
    if kwargs.get("impl", "flash") in ("flash", "mla"):
        tiling = flash_tiling(chip, *(kwargs.get(k) for k in (*_SRAM_TILING, *_L2_REUSE)))
        kwargs.update({k: tiling[k] for k in keys})
    return kwargs


def _flash_l2_defaults(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    return flash_defaults(kwargs, chip, (*_SRAM_TILING, *_L2_REUSE))


_MHA_ONLY = ("kv_heads", "head_dim", "v_head_dim", "window")  # MLA's shapes come from its ranks


def _attention_defaults(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    if kwargs.get("impl") == "mla":
        for name in _MHA_ONLY:
            kwargs.pop(name, None)
    return _flash_l2_defaults(kwargs, chip)


PASSES = ("forward", "backward", "forward-backward")


def attention_or_mla(**kwargs: Any) -> Cost:
    """`op attention`: impl "mla" is DeepSeek MLA with V3's ranks, in the form `mla_form`
    picks for q_len (absorbed for a few new tokens, expanded for a prompt). `direction` picks
    the forward, FlashAttention-2's backward (ops.attention_backward), or both."""
    direction = kwargs.pop("direction", "forward")
    if direction not in PASSES:
        raise ParameterError("direction", f"must be one of {', '.join(PASSES)}, got "
                             f"{direction!r}")
    if kwargs.get("impl") == "mla":
        if direction != "forward":
            raise ParameterError("direction", "backward: give the expanded MLA shapes to the "
                                 "attention op (head_dim 192, v_head_dim 128), not impl mla")
        return mla_attention(**{**kwargs, "impl": None}, form=mla_form(kwargs["q_len"]))
    if direction != "forward" and kwargs.get("impl", "flash") != "flash":
        raise ParameterError("impl", "flash is the one with a backward pass (FlashAttention-2's), "
                             f"not {kwargs.get('impl')}")
    forward = attention(**kwargs) if direction != "backward" else None
    if direction == "forward":
        assert forward is not None
        return forward
    from .attention_backward import attention_backward

    keep = ("batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim", "v_head_dim",
            "causal", "window", "dtype", "sram_bytes", "l2_bytes")
    backward = attention_backward(**{k: kwargs[k] for k in keep if k in kwargs},
                                  block_kv=kwargs.get("block_q"))
    if forward is None:
        return backward
    return replace(forward + backward, name="attention forward + backward")


def _mla_defaults(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    kwargs["impl"] = kwargs.get("impl") or mla_kernel(kwargs.get("form", "absorbed"))
    return _flash_l2_defaults(kwargs, chip)


_SEQUENCES = (
    Param("batch", "sequences", default=1),
    Param("q_len", "query tokens per sequence", required=True),
    Param("kv_len", "keys per sequence (context incl. the queries)", follows="q_len"),
)
_CAUSAL = Param("causal", "causal attention (--no-causal: full, bidirectional)", "bool", True)
_SRAM = Param("sram_bytes", "flash SRAM budget M (default: the chip's per-SM SRAM)", "bytes")
_L2 = (Param("l2_bytes", "flash: the L2 that catches K/V re-reads when one head's K/V "
             "fits (default: the chip's L2; none: all go to HBM)", "bytes"),)

ATTENTION = OpDecl(
    "attention", "attention: prefill, decode (--q-len 1) or speculative (--q-len k); "
    "--impl mla for DeepSeek's latent attention", attention_or_mla, (
        *_SEQUENCES,
        Param("heads", "query heads", required=True),
        Param("kv_heads", "KV heads (GQA / MQA)", follows="heads"),
        Param("head_dim", "head dimension", default=128),
        Param("v_head_dim", "value head dimension", follows="head_dim"),
        _CAUSAL,
        Param("window", "causal sliding window (keys)"),
        Param("impl", "kernel; mla: DeepSeek MLA with V3's ranks (op mla sets them)", "choice",
              "flash", choices=(*IMPLEMENTATIONS, "mla")),
        _SRAM, Param("block_q", "flash query-block rows Br (overrides --sram-bytes)"), *_L2,
        Param("direction", "forward, FlashAttention-2's backward (recomputing S and P: 2.5x "
              "the forward's GEMMs), or both", "choice", "forward", choices=PASSES,
              flag="--pass"),
        *dtype_params("dtype", "kv", "out")), _attention_defaults)

MLA = OpDecl(
    "mla", "multi-head latent attention (DeepSeek-V2/V3)", mla_attention, (
        *_SEQUENCES,
        Param("heads", "query heads", default=128),
        Param("kv_lora_rank", "latent KV rank r", default=512),
        Param("qk_rope_dim", "RoPE key dimension", default=64),
        Param("qk_nope_dim", "non-RoPE query/key head dimension", default=128),
        Param("v_head_dim", "value head dimension", default=128),
        Param("form", "absorbed (decode) or expanded (prefill)", "choice", "absorbed",
              choices=("absorbed", "expanded")),
        _CAUSAL,
        Param("impl", "kernel (default: decode for absorbed, flash for expanded)", "choice",
              choices=IMPLEMENTATIONS),
        _SRAM, Param("block_q", "flash query-block rows Br"), *_L2,
        *dtype_params("dtype", "kv", "out")), _mla_defaults)
