"""Ops: pure functions of shapes and dtypes that return a Cost (with its derivation).

Each op module also declares its ops' parameters (`params.Param`); `registry` maps op names
to those declarations and `run_op("matmul", "h100", m=128, k=8192, n=8192)` evaluates one.
"""

from typing import TYPE_CHECKING, Any

from .attention import attention, kv_cache_bytes
from .elementwise import KINDS as ELEMENTWISE_KINDS
from .elementwise import elementwise
from .linear_attention import linear_attention, recurrent_state_bytes
from .matmul import dot, gemv, matmul
from .mla import mla_attention, mla_cache_elements

if TYPE_CHECKING:
    from .registry import OPS, op_cost, op_decl, resolve_op, run_op

_REGISTRY = frozenset({"OPS", "op_cost", "op_decl", "resolve_op", "run_op"})


def __getattr__(name: str) -> Any:
    """The registry (every op's declaration, tiled and sharded matmuls, collectives) on first
    use: a model's analysis needs none of it."""
    if name in _REGISTRY:
        from . import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ELEMENTWISE_KINDS", "OPS", "attention", "dot", "elementwise", "gemv",
           "kv_cache_bytes", "linear_attention", "matmul", "mla_attention", "mla_cache_elements",
           "op_cost", "op_decl", "recurrent_state_bytes", "resolve_op", "run_op"]
