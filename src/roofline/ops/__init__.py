"""Ops: pure functions of shapes and dtypes that return a Cost (with its derivation).

Each op's parameters are declared apart from its function (`params.Param`, in `decls.py`
and the `*_decls.py` modules, or beside the function for the ops no model runs); `registry`
maps op names to those declarations and `run_op("matmul", "h100", m=128, k=8192, n=8192)`
evaluates one.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .attention import attention, kv_cache_bytes
from .elementwise import KINDS as ELEMENTWISE_KINDS
from .elementwise import elementwise
from .linear_attention import linear_attention, recurrent_state_bytes
from .matmul import dot, gemv, matmul

if TYPE_CHECKING:
    from .mla import mla_attention, mla_cache_elements
    from .registry import OPS, op_cost, op_decl, resolve_op, run_op

# Loaded on first use (PEP 562): the registry (every op's declaration, tiled and sharded
# matmuls, collectives), which a model's analysis never reads, and MLA, which only some
# models run. (`linear_attention` stays eager: the function shares its module's name, and
# a lazy import would leave the module bound in its place.)
_LAZY = {"OPS": ".registry", "op_cost": ".registry", "op_decl": ".registry",
         "resolve_op": ".registry", "run_op": ".registry",
         "mla_attention": ".mla", "mla_cache_elements": ".mla"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ELEMENTWISE_KINDS", "OPS", "attention", "dot", "elementwise", "gemv",
           "kv_cache_bytes", "linear_attention", "matmul", "mla_attention", "mla_cache_elements",
           "op_cost", "op_decl", "recurrent_state_bytes", "resolve_op", "run_op"]
