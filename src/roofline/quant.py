"""Quantization schemes and their critical batch on a chip: a weight GEMM turns compute-bound
at batch M* = s_w·P / (2·BW) (solve.critical_batch), so each scheme moves it by its weight
bytes s_w and its compute peak P.

Each scheme fixes the weight, activation and compute dtypes (and the output dtype, bf16 for
all: real kernels dequantize their output). The bytes per parameter include group scales
(int4-g128 = 4 + 16/128 bits = 0.515625 B; nvfp4 = 4 + 8/16 bits = 0.5625 B), and the
critical batch is `solve.critical_batch` for the scheme's dtypes: in the large-K, N limit
M* = s_w·P/(2·BW), so

- weight-only schemes (W8A16, W4A16) keep the bf16 peak and cut the weight bytes: the
  critical batch falls with the bytes (H100: 295 -> 148 -> 76);
- schemes that quantize weights, activations and compute together (W8A8, W4A4) double the
  peak as they halve the bytes: the critical batch stays near the bf16 one, and every step
  runs faster. Group scales make the 4-bit ones a little higher (nvfp4 on B200: ~1.1x).

Where the chip lacks the peak: a row whose compute dtype has no peak on that chip is
skipped (no fp8 rows on A100 or TPU v5e, no fp4 rows before Blackwell / MI355X). Some
published tables list an fp4 "3958 T" for H100, which has no fp4 tensor cores (3958 TFLOPS is
H100 SXM's sparse FP8 figure, NVIDIA H100 datasheet); here that row appears only on chips
with an fp4 peak. The table
knows compute peaks, not which scale formats a chip's hardware decodes (B200 runs both NVFP4
and MXFP4; MI355X runs MXFP4), so both fp4 rows appear wherever there is an fp4 peak.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .derivation import Num
from .dtypes import dtype as lookup_dtype
from .hardware import Chip, half_dtype, load_chip
from .solve import critical_batch

__all__ = ["SCHEMES", "QuantRow", "QuantScheme", "quant_table"]


@dataclass(frozen=True)
class QuantScheme:
    """A quantization recipe: which dtype each operand is stored and computed in."""

    scheme: str
    notation: str  # W<weight bits>A<activation bits>
    weight_dtype: str
    activation_dtype: str
    compute_dtype: str
    note: str
    out_dtype: str = "bf16"


SCHEMES: tuple[QuantScheme, ...] = (
    QuantScheme("bf16", "W16A16", "bf16", "bf16", "bf16", "full precision"),
    QuantScheme("int8 weight-only", "W8A16", "int8", "bf16", "bf16",
                "int8 weights dequantized to bf16 in the kernel"),
    QuantScheme("int4-g128 weight-only", "W4A16", "int4-g128", "bf16", "bf16",
                "GPTQ / AWQ: int4 with one fp16 scale per 128 weights"),
    QuantScheme("fp8 weight-only", "W8A16", "fp8", "bf16", "bf16",
                "fp8 weights on bf16 math (FP8-Marlin style, for chips without fp8 math)"),
    QuantScheme("int8", "W8A8", "int8", "int8", "int8", "SmoothQuant-style int8 GEMM"),
    QuantScheme("fp8", "W8A8", "fp8", "fp8", "fp8", "fp8 (e4m3) GEMM"),
    QuantScheme("nvfp4", "W4A4", "nvfp4", "nvfp4", "nvfp4",
                "e2m1 with an fp8 scale per 16 elements"),
    QuantScheme("mxfp4", "W4A4", "mxfp4", "mxfp4", "mxfp4",
                "OCP MX: e2m1 with an e8m0 scale per 32 elements"),
)


@dataclass(frozen=True)
class QuantRow:
    """One scheme on one chip; critical_batch is in tokens (an array for array-valued k, n)."""

    scheme: str
    notation: str
    weight_dtype: str
    activation_dtype: str
    compute_dtype: str
    out_dtype: str
    bytes_per_param: float
    peak_flops_per_s: float
    critical_batch: Num


def quant_table(hw: Chip | str, k: object = None, n: object = None) -> list[QuantRow]:
    """The schemes the chip has a compute peak for, with their critical batch.

    k and n are the weight's dimensions (None: the large-K, N limit).

    >>> [(r.scheme, round(r.critical_batch)) for r in quant_table("h100")][:3]
    [('bf16', 295), ('int8 weight-only', 148), ('int4-g128 weight-only', 76)]
    """
    chip = load_chip(hw)
    half = half_dtype(chip)
    rows = []
    for s in SCHEMES:
        if half != "bf16":  # a chip without bf16 (V100): its 16-bit float plays the part
            s = replace(s, scheme=s.scheme.replace("bf16", half), note=s.note.replace(
                "bf16", half), **{f: half for f in ("weight_dtype", "activation_dtype",
                                                    "compute_dtype", "out_dtype")
                                  if getattr(s, f) == "bf16"})
        if lookup_dtype(s.compute_dtype).peak not in chip.peaks:
            continue  # the chip cannot compute in this dtype: the scheme does not apply
        rows.append(QuantRow(
            scheme=s.scheme,
            notation=s.notation,
            weight_dtype=s.weight_dtype,
            activation_dtype=s.activation_dtype,
            compute_dtype=s.compute_dtype,
            out_dtype=s.out_dtype,
            bytes_per_param=lookup_dtype(s.weight_dtype).bytes,
            peak_flops_per_s=chip.peak_flops(s.compute_dtype),
            critical_batch=critical_batch(chip, k, n, dtype=s.activation_dtype,
                                          weight_dtype=s.weight_dtype,
                                          out_dtype=s.out_dtype,
                                          compute_dtype=s.compute_dtype),
        ))
    return rows
