"""roofline: how fast can a piece of ML work possibly run on given hardware, and what limits it.

>>> import roofline
>>> est = roofline.evaluate(roofline.matmul(m=128, k=8192, n=8192), "h100")
>>> est.bound, round(est.t_lower_s * 1e6, 1)
('hbm', 41.3)
"""

from typing import TYPE_CHECKING, Any

from .cost import Cost
from .derivation import Term
from .dtypes import DType, dtype
from .errors import RooflineError
from .evaluate import Estimate, evaluate
from .hardware import Chip, Link, MemoryLevel, Peak, System, list_chips, load_chip, make_system
from .ops import attention, dot, elementwise, gemv, kv_cache_bytes, matmul, mla_attention
from .ops.collectives import collective
from .ops.parallel import sharded_matmul
from .trace import trace, trace_jax, tracing

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .models import tp_layer


def __getattr__(name: str) -> Any:
    # the model graph loads on first use: `import roofline` (and the CLI) stays quick
    if name == "tp_layer":
        from .models import tp_layer

        return tp_layer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "Chip",
    "Cost",
    "DType",
    "Estimate",
    "Link",
    "MemoryLevel",
    "Peak",
    "RooflineError",
    "System",
    "Term",
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
