"""MFU and HFU of a measured training step (the definitions of Chowdhery et al., PaLM,
arXiv:2204.02311, Appendix B).

model FLOPs per step = 6·N·tokens  +  12·L·h·s² per sequence · sequences
  6·N per token: 2 (a multiply-add) x 3 (forward, backward for activations, for weights);
  12·L·h·s² per sequence: the attention score and value matmuls (4·s²·h per layer forward,
  times 3), which the 6·N term misses. It is per sequence, so a step of `tokens` tokens at
  sequence length s holds tokens / s sequences (a per-sequence term a step must
  multiply by them). Non-causal counting by default, as in Megatron-LM; `causal=True` counts
  half the score matrix, the convention `roofline model` uses. The two MFUs then agree when N
  leaves out the input embedding table (a lookup does no multiply-adds; `roofline model`
  counts it as zero FLOPs), i.e. N = published count − vocab·hidden for untied embeddings.
hardware FLOPs (HFU) add what recomputation re-executes: one more forward, 2·N per token
  and 4·L·h·s² per sequence with full activation recomputation.
MFU = model FLOPs / (step time · chips · dense peak). Above ~75% a real training run is
implausible (communication, bubbles and memory-bound ops always cost something); above 100%
the inputs are inconsistent (3.5e18 FLOP in 7 s on 512 chips of 989 TFLOP/s is
99%, not the 49% sometimes quoted for it).
"""

from __future__ import annotations

import math

from ..errors import ParameterError, RooflineError
from ..hardware import Chip, load_chip
from ..records import record
from .catalog import load_model
from .params import param_counts
from .spec import ModelSpec

PLAUSIBLE_MFU = 0.75


@record(frozen=True)
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
    attention_counted: bool = True  # False: layers, hidden and seq_len were not all known
    params: float = 0.0  # N, as counted
    notes: tuple[str, ...] = ()  # what came from the model, what was left out


def model_inputs(spec: ModelSpec) -> dict[str, float]:
    """What a model's config says about its MFU: N = the parameters one token uses (MoE:
    active) less the input embedding table (a lookup does no multiply-adds; a tied table still
    counts, as the LM head), the layers, the attention width heads·(qk + v head dims)/2 (the
    hidden size for most models; MLA's is wider) and the context it was trained at."""
    counts = param_counts(spec)
    lookup = counts.embedding - (spec.vocab * spec.hidden if spec.tied_embeddings else 0)
    m = spec.mla
    width = (spec.heads * (m.qk_nope_dim + m.qk_rope_dim + m.v_head_dim) / 2 if m
             else spec.heads * spec.head_dim)
    out = {"params": counts.active - lookup, "layers": spec.layers, "hidden": width}
    if spec.trained_context or spec.max_context:
        out["seq_len"] = spec.trained_context or spec.max_context or 0
    return out


def mfu(params: float | None, tokens_per_step: float, step_time_s: float, chips: int,
        hw: Chip | str, dtype: str = "bf16", layers: int | None = None,
        hidden: float | None = None, seq_len: int | None = None,
        recompute: bool = False, causal: bool = False,
        model: str | ModelSpec | None = None) -> MFUResult:
    """MFU and HFU of one training step (see the module docstring for the counting).
    `model` (a catalog id, config.json or ModelSpec) fills what is not given: params, layers,
    hidden (the attention width) and seq_len (`model_inputs`)."""
    given: dict[str, float | None] = {"params": params, "layers": layers, "hidden": hidden,
                                      "seq_len": seq_len}
    notes: list[str] = []
    spec: ModelSpec | None = None
    if model is not None:
        spec = load_model(model)
        filled = {k: v for k, v in model_inputs(spec).items() if given[k] is None}
        given.update(filled)
        if filled:
            notes.append(f"from {spec.name}: " + ", ".join(_describe(k, v) for k, v in
                                                         filled.items()))
    n, n_layers, width, s = (given[k] for k in ("params", "layers", "hidden", "seq_len"))
    if n is None:
        raise ParameterError("params", "is needed (the parameter count), or a model to count "
                             "them")
    for name, value in [("params", n), ("tokens_per_step", tokens_per_step),
                        ("step_time_s", step_time_s), ("chips", chips)]:
        if not (value > 0 and math.isfinite(value)):
            raise RooflineError(f"{name} must be positive and finite, got {value!r}")
    attention_args = [n_layers, width, s]
    if any(a is not None for a in attention_args) and not all(a for a in attention_args):
        raise RooflineError("the attention term needs all of layers, hidden and seq_len")
    chip = load_chip(hw)
    attention = 0.0
    counted = bool(n_layers and width and s)
    if n_layers and width and s:
        sequences = tokens_per_step / s
        if spec is not None and layers is None:  # the model's own layers: windows and
            n_layers = _score_layers(spec, s)     # chunks see fewer keys (Gemma 3, gpt-oss)
            if n_layers != spec.layers:
                notes.append(f"attention of {n_layers:.4g} full layers' worth: windowed, "
                             "chunked and linear-attention layers see fewer keys")
        attention = 12.0 * n_layers * width * s**2 * sequences * (0.5 if causal else 1.0)
    else:
        notes.append("attention not counted (6·N per token only): give --layers, --hidden and "
                     "--seq-len, or --model ID, to add 12·L·h·s² per sequence")
    model_flops = 6.0 * n * tokens_per_step + attention
    hardware = model_flops + ((2.0 * n * tokens_per_step + attention / 3.0) if recompute
                              else 0.0)
    peak = chips * chip.peak_flops(dtype)
    achieved = model_flops / step_time_s
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
    return MFUResult(model_flops, hardware, attention, causal, achieved, peak, value,
                     hardware / step_time_s / peak, warning, counted, n, tuple(notes))


def _score_layers(spec: ModelSpec, s: float) -> float:
    """The layers' causal score pairs at sequence length s, in full layers' worth (s²/2
    each): a window W sees s·W - W(W-1)/2, a chunk C about s·C/2, a linear-attention layer
    none (its recurrence is no score matrix)."""
    full = s * s / 2
    total = 0.0
    for i in range(spec.layers):
        kind, span = spec.layer_attention(i)
        if kind == "linear":
            continue
        if kind == "full" or span is None or span >= s:
            total += 1.0
        elif kind == "window":
            total += (s * span - span * (span - 1) / 2) / full
        else:  # chunked: each chunk of C a causal C x C block
            total += (s / span) * (span * span / 2) / full
    return total


def _describe(key: str, value: float) -> str:
    return {"params": f"N = {value / 1e9:.3g}B (active parameters, input embedding left out)",
            "layers": f"{value:g} layers",
            "hidden": f"attention width {value:g} (heads · (qk + v head dims) / 2)",
            "seq_len": f"seq-len {value:g} (its trained context; give --seq-len for your run's)"
            }[key]
