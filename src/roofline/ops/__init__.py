"""Ops: pure functions of shapes and dtypes that return a Cost (with its derivation)."""

from .attention import attention, kv_cache_bytes, mla_attention, mla_cache_elements
from .elementwise import KINDS as ELEMENTWISE_KINDS
from .elementwise import elementwise
from .matmul import dot, gemv, matmul

__all__ = ["ELEMENTWISE_KINDS", "attention", "dot", "elementwise", "gemv", "kv_cache_bytes",
           "matmul", "mla_attention", "mla_cache_elements"]
