"""One registry of data types: storage bits per element and the peak each computes at.

Weights, activations, KV cache and outputs each carry their own dtype; the compute dtype
selects which of a chip's peaks applies. int4 / fp4 are 4 bits = 0.5 byte per element.

Group-wise quantized formats are dtypes too: ``int4-g128`` is int4 with one fp16 scale per
128 elements, so it stores 4 + 16/128 = 4.125 bits per element and every op that counts
bytes counts the scales without knowing about them. Spelling: ``<dtype>-g<group>[-s<scale>]``
(scale dtype default fp16), e.g. ``int8-g64``, ``fp4-g16-sfp8`` (= ``nvfp4``),
``fp4-g32-se8m0`` (= ``mxfp4``).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .errors import RooflineError, unknown
from .lazy import cached_property
from .records import record


@record(frozen=True)
class DType:
    """A number format: its storage bits per element and the peak it computes at."""

    name: str
    bits: float  # storage bits per element, including amortised group scales
    peak: str  # key into a chip's peak table (tf32 is stored as 32-bit but computes at tf32)
    description: str

    @cached_property  # read for every operand of every op
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
        DType("fp4", 4, "fp4", "4-bit float (e2m1 element)"),
        DType("e8m0", 8, "none", "8-bit power-of-two scale (MX formats); storage only"),
    ]
}

_ALIASES = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp8_e4m3": "fp8", "fp8-e4m3": "fp8", "e4m3": "fp8", "float8_e4m3fn": "fp8",
    "fp8_e5m2": "fp8", "fp8-e5m2": "fp8", "e5m2": "fp8", "float8_e5m2": "fp8",
    "fp4_e2m1": "fp4", "e2m1": "fp4",
    "nvfp4": "fp4-g16-sfp8",  # NVIDIA: e2m1 with an e4m3 scale per 16 elements
    "mxfp4": "fp4-g32-se8m0",  # OCP MX: e2m1 with an e8m0 scale per 32 elements
    "mxfp6": "fp6-g32-se8m0",
    "mxfp8": "fp8-g32-se8m0",
}


_GROUPED = re.compile(r"^(?P<base>[a-z0-9_]+)-g(?P<group>[0-9]+)(?:-s(?P<scale>[a-z0-9_]+))?$")


def dtype(name: str | DType) -> DType:
    """Look up a dtype by name or alias (case-insensitive); unknown names raise RooflineError."""
    if isinstance(name, DType):
        return name
    exact = _REGISTRY.get(name)  # the common case: a canonical name
    if exact is not None:
        return exact
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in _REGISTRY:
        return _REGISTRY[key]
    grouped = _GROUPED.match(key)
    if grouped:
        return _group_quantized(grouped["base"], int(grouped["group"]), grouped["scale"] or "fp16")
    raise unknown("dtype", str(name), [*_REGISTRY, *_ALIASES, "<dtype>-g<group>[-s<scale>]"])


def _group_quantized(base_name: str, group: int, scale_name: str) -> DType:
    base, scale = dtype(base_name), dtype(scale_name)
    if base.bits > 8 or _GROUPED.match(base.name):
        raise RooflineError(f"dtype {base_name}-g{group}: group-wise scales apply to 8-bit or "
                            "narrower element types (int8, fp8, fp6, int4, fp4)")
    if group < 1:
        raise RooflineError(f"dtype {base_name}-g{group}: group size must be at least 1")
    name = f"{base.name}-g{group}" + ("" if scale.name == "fp16" else f"-s{scale.name}")
    return DType(name, base.bits + scale.bits / group, base.peak,
                 f"{base.name} with one {scale.name} scale per {group} elements")


def dtype_names() -> list[str]:
    """Canonical names of the dtypes a chip can compute in, widest first."""
    return [name for name, d in _REGISTRY.items() if d.peak == name]


class Operands(NamedTuple):
    """The dtypes of a matrix product: activations x, weights w, output o, compute c."""

    x: DType
    w: DType
    o: DType
    c: DType


@functools.lru_cache(maxsize=256)  # a few dtype combinations; every matrix op asks
def operand_dtypes(dtype: str | DType, weight_dtype: str | DType | None = None,
                   out_dtype: str | DType | None = None,
                   compute_dtype: str | DType | None = None) -> Operands:
    """Resolve operand dtypes; weights, output and compute default to the activation dtype
    (so weight-only int8 / int4 computes at the activation dtype's peak)."""
    def get(name: str | DType | None, default: DType) -> DType:
        return default if name is None else lookup(name)

    lookup = globals()["dtype"]  # the argument `dtype` shadows the function here
    x = lookup(dtype)
    return Operands(x, get(weight_dtype, x), get(out_dtype, x), get(compute_dtype, x))
