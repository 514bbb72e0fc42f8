"""roofline: how fast can a piece of ML work possibly run on given hardware, and what limits it.

`import roofline` loads the numpy-only core (units, dtypes, hardware, cost, evaluate, ops;
models on first use); tracing, measurement, plots and reports load when used.

>>> import roofline
>>> est = roofline.evaluate(roofline.matmul(m=128, k=8192, n=8192), "h100")
>>> est.bound, round(est.t_lower_s * 1e6, 1)
('hbm', 41.3)
>>> est
Estimate(matmul on h100-sxm: hbm-bound, t_lower 41.3 us, I_hbm 124.1 FLOP/B)
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .cost import Cost
from .derivation import Term
from .dtypes import DType, dtype
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .hardware import Chip, Link, MemoryLevel, Peak, System, list_chips, load_chip, make_system
from .ops import attention, dot, elementwise, gemv, kv_cache_bytes, matmul
from .ops.collectives import collective

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .models import ModelAnalysis, analyze, tp_layer
    from .ops.mla import mla_attention
    from .ops.parallel import sharded_matmul
    from .trace import trace, trace_jax, tracing

# Loaded on first use, so `import roofline` (and the CLI) stays quick.
_LAZY = {"sharded_matmul": ".ops.parallel", "analyze": ".models", "ModelAnalysis": ".models",
         "tp_layer": ".models", "mla_attention": ".ops.mla", "trace": ".trace",
         "trace_jax": ".trace", "tracing": ".trace"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(ModuleType):
    """`roofline.trace` is the function, every time: importing the `roofline.trace`
    subpackage binds the module under that name on its parent, which would shadow the lazy
    function from then on (`TypeError: 'module' object is not callable` on the second call).
    The subpackage stays importable as `roofline.trace.cli` and in sys.modules."""

    @property
    def trace(self) -> Any:
        return import_module(".trace", __name__).trace

    @trace.setter
    def trace(self, value: Any) -> None:  # the import system's binding of the subpackage
        pass


sys.modules[__name__].__class__ = _Package


if "IPython" in sys.modules:  # a notebook: teach its HTML formatter our result types
    _ipython = sys.modules["IPython"].get_ipython()
    if _ipython is not None and hasattr(_ipython, "display_formatter"):
        from .render.notebook import register as _register

        _register(_ipython)

__all__ = [
    "Chip",
    "Cost",
    "DType",
    "Estimate",
    "Link",
    "MemoryLevel",
    "ModelAnalysis",
    "Peak",
    "RooflineError",
    "System",
    "Term",
    "analyze",
    "attention",
    "collective",
    "dot",
    "dtype",
    "elementwise",
    "evaluate",
    "gemv",
    "kv_cache_bytes",
    "list_chips",
    "load_chip",
    "make_system",
    "matmul",
    "mla_attention",
    "sharded_matmul",
    "tp_layer",
    "trace",
    "trace_jax",
    "tracing",
]
