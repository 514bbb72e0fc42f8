"""One registry of data types: storage bits per element and the peak each computes at.

Weights, activations, KV cache and outputs each carry their own dtype; the compute dtype
selects which of a chip's peaks applies. int4 / fp4 are 4 bits = 0.5 byte per element
(group-wise scales, where used, are counted by the op, not here).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import unknown


@dataclass(frozen=True)
class DType:
    name: str
    bits: int
    peak: str  # key into a chip's peak table (tf32 is stored as 32-bit but computes at tf32)
    description: str

    @property
    def bytes(self) -> float:
        """Bytes per element (0.5 for 4-bit types)."""
        return self.bits / 8


_REGISTRY: dict[str, DType] = {
    d.name: d
    for d in [
        DType("fp64", 64, "fp64", "IEEE double"),
        DType("fp32", 32, "fp32", "IEEE single (vector units on GPUs)"),
        DType("tf32", 32, "tf32", "fp32 storage, TensorFloat-32 tensor-core math"),
        DType("bf16", 16, "bf16", "bfloat16"),
        DType("fp16", 16, "fp16", "IEEE half"),
        DType("fp8", 8, "fp8", "8-bit float (e4m3 / e5m2)"),
        DType("int8", 8, "int8", "8-bit integer"),
        DType("fp6", 6, "fp6", "6-bit float (MX e2m3 / e3m2)"),
        DType("int4", 4, "int4", "4-bit integer"),
        DType("fp4", 4, "fp4", "4-bit float (e2m1; NVFP4 / MXFP4 element)"),
    ]
}

_ALIASES = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp8_e4m3": "fp8", "fp8-e4m3": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
    "fp8_e5m2": "fp8", "fp8-e5m2": "fp8", "e5m2": "fp8", "float8_e5m2": "fp8",
    "mxfp6": "fp6",
    "fp4_e2m1": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "e2m1": "fp4",
}


def dtype(name: str | DType) -> DType:
    """Look up a dtype by name or alias (case-insensitive); unknown names raise RooflineError."""
    if isinstance(name, DType):
        return name
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise unknown("dtype", str(name), list(_REGISTRY) + list(_ALIASES))
    return _REGISTRY[key]


def dtype_names() -> list[str]:
    """Canonical dtype names, widest first."""
    return list(_REGISTRY)
