"""MFU and HFU of a measured training step (seed 001 §2.8, seed 000 §5).

model FLOPs per step = 6·N·tokens  +  12·L·h·s² per sequence · sequences
  6·N per token: 2 (a multiply-add) x 3 (forward, backward for activations, for weights);
  12·L·h·s² per sequence: the attention score and value matmuls (4·s²·h per layer forward,
  times 3), which the 6·N term misses. It is per sequence, so a step of `tokens` tokens at
  sequence length s holds tokens / s sequences (DESIGN §4 item 6: the seed's code forgets to
  multiply by them). Non-causal counting by default, as in Megatron-LM; `causal=True` counts
  half the score matrix, the convention `roofline model` uses. The two MFUs then agree when N
  leaves out the input embedding table (a lookup does no multiply-adds; `roofline model`
  counts it as zero FLOPs), i.e. N = published count − vocab·hidden for untied embeddings.
hardware FLOPs (HFU) add what recomputation re-executes: one more forward, 2·N per token
  and 4·L·h·s² per sequence with full activation recomputation.
MFU = model FLOPs / (step time · chips · dense peak). Above ~75% a real training run is
implausible (communication, bubbles and memory-bound ops always cost something); above 100%
the inputs are inconsistent (seed 001's worked example computes 99%, not 49%: DESIGN §4 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import RooflineError
from ..hardware import Chip, load_chip

PLAUSIBLE_MFU = 0.75


@dataclass(frozen=True)
class MFUResult:
    model_flops: float  # per step, all chips
    hardware_flops: float
    attention_flops: float  # the part of model_flops from attention scores
    causal: bool  # attention counted as half the score matrix
    achieved_flops_per_s: float
    peak_flops_per_s: float  # all chips
    mfu: float
    hfu: float
    warning: str | None


def mfu(params: float, tokens_per_step: float, step_time_s: float, chips: int,
        hw: Chip | str, dtype: str = "bf16", layers: int | None = None,
        hidden: int | None = None, seq_len: int | None = None,
        recompute: bool = False, causal: bool = False) -> MFUResult:
    """MFU and HFU of one training step (see the module docstring for the counting)."""
    for name, value in [("params", params), ("tokens_per_step", tokens_per_step),
                        ("step_time_s", step_time_s), ("chips", chips)]:
        if not (value > 0 and math.isfinite(value)):
            raise RooflineError(f"{name} must be positive and finite, got {value!r}")
    attention_args = [layers, hidden, seq_len]
    if any(a is not None for a in attention_args) and not all(a for a in attention_args):
        raise RooflineError("the attention term needs all of --layers, --hidden and --seq-len")
    chip = load_chip(hw)
    attention = 0.0
    if layers and hidden and seq_len:
        sequences = tokens_per_step / seq_len
        attention = 12.0 * layers * hidden * seq_len**2 * sequences * (0.5 if causal else 1.0)
    model = 6.0 * params * tokens_per_step + attention
    hardware = model + ((2.0 * params * tokens_per_step + attention / 3.0) if recompute else 0.0)
    peak = chips * chip.peak_flops(dtype)
    achieved = model / step_time_s
    value = achieved / peak
    if not math.isfinite(value):
        raise RooflineError(f"MFU does not come out finite (achieved {achieved!r} FLOP/s): "
                            "check step_time_s")
    warning = None
    if value > 1.0:
        warning = (f"MFU {value:.0%} exceeds 100%: the step is faster than the hardware's dense "
                   "peak allows; check the step time, token count and chip count")
    elif value > PLAUSIBLE_MFU:
        warning = (f"MFU {value:.0%} is implausibly high for real training (above "
                   f"{PLAUSIBLE_MFU:.0%}); well-tuned large runs reach about 40-60%")
    return MFUResult(model, hardware, attention, causal, achieved, peak, value,
                     hardware / step_time_s / peak, warning)
