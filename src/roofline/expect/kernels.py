"""Named kernels per architecture: the achievable fraction of a kernel family on the chips of
one architecture, where the chip's own file names none.

A figure `attention.fa2` is FlashAttention-2's fraction of the tensor-core peak; the chip
file's `[efficiency.attention.<kernel>]` (a figure for that very chip) wins over it, a local
calibration over both (`table.figures`). FlashAttention-2 is an Ampere kernel: on Hopper and
Blackwell it issues no wgmma / tcgen05 instructions, so it reaches a smaller share of the
newer tensor cores than the kernels written for them (FlashAttention-3 paper, arXiv:2407.08608
§4.1: FA2 at 35% of H100's peak where FA3 reaches 75%).

Fitted figures say to what: the fit half of benchmarks/validation (`benchmarks/validation/
fit_kernels.py` prints the value that minimises the fit half's median error).
"""

from __future__ import annotations

from ..hardware.model import Chip, Efficiency

# The catalog chips of each architecture (a chip file of another id takes no architecture
# figure: its own file's, or the generic default).
ARCHITECTURES: dict[str, tuple[str, ...]] = {
    "ampere": ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb"),
    "hopper": ("h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "h800-sxm",
               "h20", "gh200"),
    "blackwell": ("b200", "gb200", "b300", "gb300"),
    "cdna3": ("mi300x", "mi325x"),
    "cdna4": ("mi355x",),
}

_FIT = "fitted to the fit half of benchmarks/validation (fit_kernels.py): "

KERNELS: dict[str, dict[str, Efficiency]] = {
    "ampere": {
        # FlashAttention-2 paper (arXiv:2307.08691 §4.1): forward up to 73% of A100's peak
        "attention.fa2": Efficiency(0.70, "fitted", _FIT + "FlashAttention-2 forward on A100 "
                                    "(3 fit rows: 18.2% -> 3.5% median error; held-out 12 "
                                    "rows 19.0% -> 6.1%); the FA2 paper's 50-73% of peak"),
    },
    "hopper": {
        # FlashAttention-3 paper (arXiv:2407.08608 §1): FA2 at 35% of H100's peak
        "attention.fa2": Efficiency(0.38, "fitted", _FIT + "FlashAttention-2 forward on H100 "
                                    "(5 fit rows: 29.4% -> 6.4% median error; held-out 6 rows "
                                    "31.8% -> 25.7%); the FA3 paper's 35% of peak"),
        # FA3 paper Figure 6b (arXiv:2407.08608, H100 SXM5, head dim 128, 16K): FA2's
        # backward at 322 TFLOP/s, 0.33 of the 989 TFLOP/s dense fp16 peak (FA3's: 561)
        "attention_bwd.fa2": Efficiency(0.33, "FlashAttention-3 paper (arXiv:"
                                        "2407.08608) Figure 6b: FlashAttention-2 backward "
                                        "322 TFLOP/s on H100 SXM5 (head dim 128, seqlen 16K, "
                                        "non-causal) = 0.33 of the dense fp16 peak"),
        # cuDNN's fused flash attention (cudnn-frontend SDPA) runs faster than FA3 on Hopper
        "attention.cudnn": Efficiency(0.82, "fitted", _FIT + "cuDNN attention forward on "
                                      "H100 / H200 (5 fit rows: 21% -> 1% median error; "
                                      "held-out 5 rows 16% -> 12%)"),
        # decode (one query block per head, split KV): the kernel's share of the streaming
        # HBM fraction, fitted where the cache's bytes outweigh the launches (the value that
        # minimises the fit half's median error of the kernel's attention_decode rows)
        "decode_hbm.fa3": Efficiency(0.57, "fitted", _FIT + "FlashAttention-3's "
                                     "flash_attn_with_kvcache decode on H100 / H200 (6 fit "
                                     "rows: 49% -> 15% median error with its scheduler "
                                     "kernel's launch, physics.SCHEDULED_DECODE; held-out 6: "
                                     "45% -> 17%): its prefill kernel run with one query per "
                                     "head streams the cache at about half the roof"),
        "decode_hbm.fa2": Efficiency(0.58, "fitted", _FIT + "FlashAttention-2 decode on H100 "
                                     "(2 fit rows, ONNX Runtime's GQA: 41% -> 8%)"),
        "decode_hbm.tileops-fp8-decode": Efficiency(0.60, "fitted", _FIT + "TileOps' fp8 "
                                                    "decode on H200 (3 fit rows: 32% -> 2%)"),
        "decode_hbm.tileops-gqa-decode": Efficiency(0.60, "fitted", _FIT + "TileOps' GQA "
                                                    "decode on H200 (3 fit rows: 31% -> 1%)"),
        "decode_hbm.flashinfer-single-decode": Efficiency(0.87, "fitted", _FIT + "FlashInfer's "
                                                          "single_decode_with_kv_cache on H200 "
                                                          "(2 fit rows: 15% -> 7%)"),
    },
    "blackwell": {
        # FlashAttention-2 issues Ampere mma.sync on Blackwell, no tcgen05: a small share of
        # the new tensor cores (as on Hopper, FA3 paper arXiv:2407.08608 §4.1)
        "attention.fa2": Efficiency(0.21, "fitted", _FIT + "FlashAttention-2 forward on B200 "
                                    "(2 fit rows: 56% -> 10% median error; held-out 2 rows "
                                    "60% -> 10%)"),
        # MoE grouped GEMMs in FP4 (the experts of one layer in one call) reach about a third
        # of the dense FP4 peak, against ~0.75 for dense GEMMs: DeepGEMM's SM100 MXFP4 grouped
        # GEMMs at 2.8-4.3 of B200's 9 PFLOP/s (a DeepGEMM commit message), FlashInfer's NVFP4
        # grouped (masked) GEMMs alike (benchmarks/validation/ops.csv rows and sources)
        "matmul_grouped.fp4": Efficiency(0.34, "fitted", _FIT + "the Blackwell FP4 grouped "
                                         "GEMM rows (3 fit rows: 41% -> 4% median error; "
                                         "held-out 8 rows 32% -> 21%)"),
        # MLA decode kernels that issue no tcgen05 instructions reach a small share of the
        # Blackwell tensor cores (FlashInfer's FA2-style MLA; its CUTLASS MLA as benchmarked)
        "attention.flashinfer-fa2-mla": Efficiency(0.12, "fitted", _FIT + "FlashInfer's "
                                                   "FA2 MLA decode on B200 (2 fit rows: 79% "
                                                   "-> 2% median error)"),
        "attention.flashinfer-cutlass-mla": Efficiency(0.08, "fitted", _FIT + "FlashInfer's "
                                                       "CUTLASS MLA decode on B200 / B300 (5 "
                                                       "fit rows: 84% -> 14%)"),
    },
    "cdna4": {
        # (with the chip's exp roof, MI355X [special]: head dim 64 pays its exps, so the
        # head-dim-128 rows no longer pull the figure down; 0.41 before that roof)
        "attention.hipkittens": Efficiency(0.47, "fitted", _FIT + "HipKittens attention "
                                           "forward on MI355X (6 fit rows: 13.5% -> 3.1%; "
                                           "held-out 10 rows 11.6% -> 7.3%)"),
        "attention.aiter-gluon-mla": Efficiency(0.20, "fitted", _FIT + "aiter's Gluon MLA "
                                                "decode on MI355X (6 fit rows: 42% -> 18%)"),
    },
}


# The attention kernel the generic `attention` figure stands for on each architecture (what
# it was fitted to): `--kernel` may name it too.
DEFAULT_ATTENTION = {"ampere": "fa2", "hopper": "fa3", "blackwell": "fa4"}

# The attention kernel a training framework runs where it differs from the architecture's
# default, per architecture (a framework named in none runs the default). llm-foundry's MPT
# (`attn_impl: flash`) calls the flash-attn package's flash_attn_func, FlashAttention-2
# (mosaicml/llm-foundry llmfoundry/models/layers/attention.py, flash_attn_fn), which issues
# no wgmma instructions on Hopper; its `triton` choice is an older Triton kernel, no faster.
# (torchtitan's PyTorch SDPA picks FlashAttention-2 or cuDNN by PyTorch version: not named)
FRAMEWORK_ATTENTION: dict[str, dict[str, str]] = {
    "llm-foundry": {"hopper": "fa2"},
}


def framework_attention(framework: str | None, chip: Chip) -> str | None:
    """The attention kernel `framework` (a row's or user's string: 'llm-foundry(composer)',
    'torchtitan') runs on `chip`'s architecture where it is not the default, else None."""
    if not framework:
        return None
    name = framework.strip().lower()
    arch = architecture(chip)
    for known, per_arch in FRAMEWORK_ATTENTION.items():
        if name.startswith(known) and arch in per_arch:
            return per_arch[arch]
    return None


def architecture(chip: Chip) -> str | None:
    """The architecture of a catalog chip (a clocked variant `h100-sxm@915MHz` is its
    part's), or None."""
    part = chip.id.split("@")[0]
    return next((arch for arch, ids in ARCHITECTURES.items() if part in ids), None)


def kernel_figures(chip: Chip) -> dict[str, Efficiency]:
    """The architecture's named-kernel figures for `chip` (empty for none)."""
    arch = architecture(chip)
    return dict(KERNELS.get(arch, {})) if arch else {}


def default_kernel(chip: Chip, figures: dict[str, Efficiency]) -> dict[str, Efficiency]:
    """The architecture's default attention kernel named: `attention.fa3` on Hopper is the
    chip's `attention` figure, unless a figure of that name exists."""
    name = DEFAULT_ATTENTION.get(architecture(chip) or "")
    if name is None or f"attention.{name}" in figures:
        return {}
    return {f"attention.{name}": figures["attention"]}


def kernel_names(figures: dict[str, Efficiency], kinds: tuple[str, ...]) -> list[str]:
    """The kernels `figures` names for these kinds (attention, attention_bwd, ...)."""
    return sorted({key.split(".", 1)[1] for key in figures
                   if "." in key and key.split(".")[0] in kinds})



def linear_kind(q_len: object, mixer: str = "gated_deltanet") -> str:
    """The figure kind of a chunked linear-attention op: `linear_attention_decode` for a
    one-token step (the recurrent state update, no chunks: HBM-bound); `ssd` for a Mamba-2
    chunked scan (its own kernels: chunk states, state passing, chunk scan); else
    `linear_attention`; each takes `.<kernel>` for a named kernel family."""
    import numpy as np

    if bool(np.all(np.asarray(q_len, dtype=float) <= 1)):
        return "linear_attention_decode"
    return "ssd" if mixer == "mamba2" else "linear_attention"
