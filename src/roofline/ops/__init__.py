"""Ops: pure functions of shapes and dtypes that return a Cost (with its derivation)."""

from .elementwise import KINDS as ELEMENTWISE_KINDS
from .elementwise import elementwise
from .matmul import dot, gemv, matmul

__all__ = ["ELEMENTWISE_KINDS", "dot", "elementwise", "gemv", "matmul"]
