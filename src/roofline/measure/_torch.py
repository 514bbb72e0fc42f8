"""torch is optional: import it lazily, and turn its absence into a one-line error.

`importlib.import_module` keeps mypy out of torch (a huge, partly typed package): torch
objects are `Any` here, by design.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ParameterError, RooflineError

INSTALL_HINT = "pip install torch==2.13.0"

# roofline dtype -> torch dtype attribute (tf32 is fp32 storage with TF32 tensor-core math)
TORCH_DTYPES = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "bf16": "bfloat16",
                "fp16": "float16", "fp8": "float8_e4m3fn", "int8": "int8"}


def require_torch(what: str = "this measurement") -> Any:
    """The torch module, or a RooflineError with the install hint."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        raise RooflineError(f"{what} needs torch, which is not installed "
                            f"(install it with: {INSTALL_HINT})") from None


def require_cuda(torch: Any) -> None:
    """Raise unless torch sees a CUDA device."""
    if not torch.cuda.is_available():
        raise ParameterError("device", f"cuda: torch {torch.__version__} sees no CUDA device "
                             "(a CPU-only build, or no GPU here); use cpu")


def torch_dtype(torch: Any, name: str) -> Any:
    """The torch dtype for a roofline dtype name."""
    if name not in TORCH_DTYPES or not hasattr(torch, TORCH_DTYPES[name]):
        raise RooflineError(f"dtype {name!r} has no torch equivalent here "
                            f"(allowed: {', '.join(TORCH_DTYPES)})")
    return getattr(torch, TORCH_DTYPES[name])
