"""Put a JAX function on the roofline from XLA's own cost analysis.

`jax.jit(fn).lower(*args).compile().cost_analysis()` gives the FLOPs and bytes accessed of the
compiled (fused) program. Beside it we count the matrix-multiply FLOPs ourselves from the
jaxpr (2 · output elements · contracted elements for every dot_general), so the two can be
compared. Known ways XLA's numbers mislead, flagged when they show:
- FLOPs of ops XLA hands to a library as a custom call (cuBLAS / cuDNN GEMMs on GPU, some
  attention kernels) are not counted, so XLA can report fewer FLOPs than the matmuls need;
- 'bytes accessed' sums every fused computation's operands and outputs: it is what the
  compiled program touches, after fusion, not a minimum;
- transcendental ops (exp, logistic, tanh) are reported separately, not as FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cost import Cost
from ..dtypes import dtype as lookup_dtype
from ..errors import RooflineError
from ..evaluate import Estimate, evaluate
from ..hardware import Chip


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise RooflineError("tracing JAX code needs jax: pip install jax") from None
    return jax


@dataclass(frozen=True)
class JaxTrace:
    xla_flops: float
    xla_transcendentals: float
    xla_bytes: float
    matmul_flops: float  # our own count of the dot_generals in the jaxpr
    dtype: str  # of the first floating-point input (sets the peak)
    flags: tuple[str, ...] = field(default_factory=tuple)

    def cost(self) -> Cost:
        flops = max(self.xla_flops, self.matmul_flops)  # never below the matmuls' own work
        return Cost(flops={lookup_dtype(self.dtype).peak: flops}, bytes={"hbm": self.xla_bytes},
                    name="jax function")

    def estimate(self, hw: Chip | str) -> Estimate:
        return evaluate(self.cost(), hw)


def _dot_flops(eqn: Any) -> float:
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    out = eqn.outvars[0].aval.shape
    contracted = float(np.prod([lhs[d] for d in lhs_contract])) if lhs_contract else 1.0
    return 2.0 * float(np.prod(out)) * contracted


def _count_matmuls(jaxpr: Any) -> float:
    total = 0.0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            total += _dot_flops(eqn)
        for value in eqn.params.values():  # nested jaxprs: jit, pjit, remat, scan bodies, ...
            inner = getattr(value, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                total += _count_matmuls(inner)
            elif hasattr(value, "eqns"):
                total += _count_matmuls(value)
    return total


def trace_jax(fn: Any, *args: Any) -> JaxTrace:
    """XLA's cost analysis of `fn(*args)` with our matmul count beside it."""
    jax = _jax()
    compiled = jax.jit(fn).lower(*args).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older jax: one dict per device program
        analysis = analysis[0] if analysis else {}
    analysis = dict(analysis or {})
    xla_flops = float(analysis.get("flops", 0.0))
    xla_bytes = float(analysis.get("bytes accessed", 0.0))
    closed = jax.make_jaxpr(fn)(*args)
    ours = _count_matmuls(closed.jaxpr)
    floats = [a for a in jax.tree_util.tree_leaves(args)
              if hasattr(a, "dtype") and np.issubdtype(np.dtype(a.dtype), np.floating)]
    name = str(floats[0].dtype) if floats else "float32"
    try:
        dtype = lookup_dtype(name).name
    except RooflineError:
        dtype = "fp32"
    flags = []
    if ours > 0 and xla_flops < 0.99 * ours:
        flags.append(f"XLA reports {xla_flops:.4g} FLOPs, fewer than the {ours:.4g} its matmuls "
                     "need: some work runs as library custom calls it does not count")
    if xla_bytes == 0:
        flags.append("XLA reports no bytes accessed")
    return JaxTrace(xla_flops, float(analysis.get("transcendentals", 0.0)), xla_bytes, ours,
                    dtype, tuple(flags))
