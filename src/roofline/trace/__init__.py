"""Trace real code onto the roofline: PyTorch (TorchDispatchMode) and JAX (XLA cost analysis).

torch and jax are optional: they are imported only when a trace runs.
"""

from .jax_trace import JaxTrace, trace_jax
from .result import Fusion, Trace, TracedOp, TraceRow
from .torch_trace import trace, tracing

__all__ = ["Fusion", "JaxTrace", "Trace", "TraceRow", "TracedOp", "trace", "trace_jax", "tracing"]
