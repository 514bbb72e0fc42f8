"""Work split over chips: sharded matmuls (the Megatron tensor-parallel decoder layer is
`roofline.models.tp_layer`, built from the same layer ops as whole models).

All costs are per chip: the chip's share of the FLOPs and HBM traffic plus the collective it
takes part in, so `evaluate` weighs T_math against T_comm directly (the JAX Scaling Book,
https://jax-ml.github.io/scaling-book/roofline/, network communication rooflines).

sharded_matmul, X[M,K] x W[K,N] over p chips:
  contraction  each chip holds K/p of X's columns and W's rows and computes a partial
               Y[M,N]; the partial sums are all-reduced (or reduce-scattered, leaving Y
               sharded). FLOPs per chip 2·M·(K/p)·N; link bytes 2(p-1)/p·M·N·s_o. M cancels
               in the ratio: the per-chip shard K/p decides (critical ≈ 2200 on H100 NVLink).
  output       each chip holds N/p columns of W and computes Y[:, N/p]; an all-gather
               assembles Y (skip it with gather=False, as Megatron's column-parallel layer
               does when the next layer consumes the shard).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import derived, value
from ..dtypes import DType, operand_dtypes
from ..errors import ParameterError, RooflineError
from ..hardware import Chip
from ._common import shown, size, whole
from .attention import IMPLEMENTATIONS
from .attention_decls import flash_defaults
from .collective_decls import PLACEMENT_PARAMS, placement
from .collectives import collective
from .matmul import matmul
from .params import OpDecl, Param, chain, dtype_params

SHARDINGS = ("contraction", "output")


@derived
def sharded_matmul(
    m: Any,
    k: Any,
    n: Any,
    shards: Any,
    shard: str = "contraction",
    dtype: str | DType = "bf16",
    weight_dtype: str | DType | None = None,
    out_dtype: str | DType | None = None,
    compute_dtype: str | DType | None = None,
    reduce: str = "all-reduce",
    gather: bool = True,
    algo: str = "ring",
    link: str = "scale-up",
    domain_size: Any = None,
    link_share: Any = 1.0,
) -> Cost:
    """Per-chip cost of a matmul sharded over `shards` chips (see the module docstring).

    >>> from roofline import evaluate
    >>> evaluate(sharded_matmul(1024, 8192, 8192, 2), "h100").bound
    'compute'
    >>> evaluate(sharded_matmul(1024, 8192, 8192, 2, link="scale-out"), "h100").bound
    'scale-out'
    """
    p = whole("p", shards, "shards")
    ops = operand_dtypes(dtype, weight_dtype, out_dtype, compute_dtype)
    M, K, N = size("M", m), size("K", k), size("N", n)
    split = K if shard == "contraction" else N
    if np.any(np.asarray(value(p)) > np.asarray(value(split))):  # a shard below one row
        raise RooflineError(f"shards ({shown(shards)}) exceed the {shard} dimension "
                            f"({shown(value(split))}) they split")
    output_bytes = value(M * N * ops.o.bytes)
    if shard == "contraction":
        if reduce not in ("all-reduce", "reduce-scatter"):
            raise RooflineError(f"reduce: partial sums are combined by 'all-reduce' or "
                                f"'reduce-scatter', got {reduce!r}")
        local = matmul(m, value(K / p), n, *ops, name="local matmul")
        comm = collective(reduce, output_bytes, shards, algo, link, domain_size, link_share)
    elif shard == "output":
        local = matmul(m, k, value(N / p), *ops, name="local matmul")
        if not gather:
            return local
        comm = collective("all-gather", output_bytes, shards, algo, link, domain_size,
                          link_share)
    else:
        raise RooflineError(f"shard: one of {', '.join(SHARDINGS)}, got {shard!r}")
    total = local + comm
    return replace(total, name=f"{shard}-sharded matmul over {shards}")


# --- declarations: `roofline op sharded-matmul|tp-layer` and run_op --------------------------

_DTYPES = dtype_params("dtype", "weight", "out", "compute")
SHARDED_MATMUL = OpDecl(
    "sharded-matmul", "X[M,K] x W[K,N] sharded over chips: T_math vs T_comm per chip",
    sharded_matmul, (
        Param("m", "rows of X (tokens)", required=True),
        Param("k", "contraction dimension (full, before sharding)", required=True),
        Param("n", "columns of W (full)", required=True),
        Param("shards", "chips sharing the matmul", required=True),
        Param("shard", "which dimension is split", "choice", "contraction", choices=SHARDINGS),
        Param("reduce", "how partial sums combine (contraction sharding)", "choice",
              "all-reduce", choices=("all-reduce", "reduce-scatter")),
        Param("gather", "output sharding: all-gather Y (--no-gather leaves it sharded)", "bool",
              True),
        *PLACEMENT_PARAMS, *_DTYPES), placement)

_LAYER_SHAPE = ("hidden", "ffn", "heads", "kv_heads", "head_dim", "tp")


def _layer_shape(kwargs: dict[str, Any], chip: Chip) -> dict[str, Any]:
    """The layer's shape builds a model spec, so it is one value (batch and length may be
    swept); the head dimension defaults to hidden / heads where that divides."""
    for name in _LAYER_SHAPE:
        given = kwargs.get(name)
        if isinstance(given, np.ndarray):
            if np.unique(given).size > 1:
                raise ParameterError(name, "shapes the layer and cannot be swept (sweep batch "
                                     "or seq_len; one sweep per layer shape)", where="tp-layer: ")
            kwargs[name] = int(given.flat[0])
    if kwargs.get("head_dim") is None and kwargs["hidden"] % kwargs["heads"] == 0:
        kwargs["head_dim"] = kwargs["hidden"] // kwargs["heads"]
    return kwargs


def _tp_layer(**kwargs: Any) -> Cost:
    from ..models import tp_layer  # the model graph: imported when used, not at CLI start

    return tp_layer(**kwargs)


TP_LAYER = OpDecl(
    "tp-layer", "one decoder layer (forward) with Megatron tensor parallelism", _tp_layer, (
        Param("batch", "sequences", default=1),
        Param("seq_len", "tokens per sequence", required=True),
        Param("hidden", "model width", required=True),
        Param("ffn", "MLP width", required=True),
        Param("heads", "query heads", required=True),
        Param("kv_heads", "KV heads", follows="heads"),
        Param("head_dim", "head dimension (default hidden / heads)"),
        Param("tp", "tensor-parallel degree", default=1),
        Param("gated", "gated MLP (--no-gated: plain)", "bool", True),
        Param("impl", "attention kernel", "choice", "flash", choices=IMPLEMENTATIONS),
        Param("sram_bytes", "flash SRAM budget M (default: the chip's per-SM SRAM)", "bytes"),
        Param("block_q", "flash query-block rows Br"),
        *PLACEMENT_PARAMS, *dtype_params("dtype")),
    chain(_layer_shape, flash_defaults, placement))
