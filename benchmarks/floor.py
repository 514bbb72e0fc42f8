"""The numpy floor of a decode sweep: the benchmark's one configuration (Llama-3-70B, H100,
TP 4, bf16) written directly as closed-form numpy over a batch x context grid.

Not a reference for the numbers (the library's graph has more in it: norms, residuals, the
LM head, collectives' algorithms); a reference for the time a vectorized evaluation of the
same points cannot beat: weights and KV cache over HBM, GEMM and attention FLOPs over the
peak, two all-reduces per layer over the link, the memory check.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from roofline.hardware import load_chip
from roofline.models.catalog import load_model
from roofline.models.params import param_counts

Array = np.ndarray[Any, Any]


def decode_floor(batch: Array, context: Array, tp: int = 4) -> dict[str, Array]:
    """Per point: the step's time bound, tokens/s, the bound (0 compute, 1 HBM), fits."""
    spec, chip = load_model("llama-3-70b"), load_chip("h100")
    s = 2.0  # bf16
    peak, hbm = chip.peak_flops("bf16"), chip.level("hbm").bandwidth_Bps
    link = chip.link("scale-up")
    params = param_counts(spec).total / tp
    kv_token = 2 * spec.layers * max(1, spec.kv_heads // tp) * spec.head_dim * s
    attn_flops = 4 * spec.layers * (spec.heads // tp) * spec.head_dim
    b, n = batch[:, None], context[None, :]
    kv = b * (n + 1) * kv_token
    flops = 2 * params * b + attn_flops * b * (n + 1)
    t_compute = flops / peak
    t_hbm = (params * s + kv) / hbm
    comm = 2 * spec.layers * (2 * (tp - 1) * link.latency_s
                              + 2 * (tp - 1) / tp * b * spec.hidden * s / link.bandwidth_Bps)
    t = np.maximum(t_compute, t_hbm) + comm
    return {"t_s": t, "tokens_per_s": b / t, "bound": (t_hbm > t_compute).astype(np.uint8),
            "fits": params * s + kv <= chip.memory[0].capacity_bytes}
