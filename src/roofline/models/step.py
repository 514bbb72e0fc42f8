"""What one step is and how its chips are laid out: the phase (prefill / decode / train with
its sizes), the parallelism, the precisions, where each parallel group's traffic goes, and
the KV cache bytes one token adds to one layer on one chip."""

from __future__ import annotations

import math
from dataclasses import field, replace
from functools import cache
from typing import Any

import numpy as np

from ..cost import Cost
from ..derivation import Num, any_true, one_point
from ..dtypes import dtype as lookup_dtype
from ..errors import ParameterError
from ..hardware import Chip, System
from ..ops.attention import kv_cache_bytes
from ..ops.collectives import collective
from ..records import record
from .spec import ModelSpec

PHASES = ("prefill", "decode", "train")


def _whole(x: Any) -> bool:
    """An integer (numpy's too) or an integral float; never a bool."""
    return not isinstance(x, bool) and isinstance(x, (int, np.integer, float, np.floating)) \
        and float(x).is_integer()


def _real(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float, np.integer, np.floating))


@record(frozen=True)
class Phase:
    """One step. The sizes may be numpy arrays: a whole batch x context grid is one analysis."""

    kind: str
    batch: Num  # sequences in the step (all DP replicas together)
    q_len: Num  # new tokens per sequence
    kv_len: Num  # keys each new token can see (context including the new tokens)
    recompute: bool = False
    # decode only: prompt tokens of chunked prefill riding in the same step (continuous
    # batching); they share the step's weight reads. 0: none; else positive everywhere
    prefill_tokens: Any = 0  # all DP replicas together
    prefill_q_len: Any = 1  # tokens computed per prompt (prefix-cache hits excluded)
    prefill_kv_len: Any = 1  # the prompt's length: keys its last token sees

    def __post_init__(self) -> None:
        if self.kind not in PHASES:
            raise ParameterError("kind", f"must be one of {', '.join(PHASES)}, got "
                                 f"{self.kind!r}")
        for name in ("batch", "q_len", "kv_len"):  # scalars or arrays: each point
            value = getattr(self, name)
            if any_true(value < 1 if one_point(value) else np.asarray(value) < 1):
                raise ParameterError(name, "must be at least 1 (every point), got "
                                     f"{getattr(self, name)}")

    @property
    def work_factor(self) -> float:
        """Forward passes' worth of work: 1 for inference, 3 for training (+1 recompute)."""
        return 1.0 if self.kind != "train" else 3.0 + (1.0 if self.recompute else 0.0)

    @property
    def comm_factor(self) -> float:
        """Forward passes' worth of communication: every forward collective has ONE backward
        partner (all-reduce <-> all-reduce, all-gather <-> reduce-scatter, dispatch <->
        combine), so training moves 2x the forward's bytes (3x with recomputation)."""
        return 1.0 if self.kind != "train" else 2.0 + (1.0 if self.recompute else 0.0)


def context_warning(phase: Phase, limit: float | None) -> str | None:
    """A context beyond the model's maximum position (RoPE scaling included) is analysed all
    the same (the bound extrapolates), with this warning; None within it."""
    longest = float(np.max(phase.kv_len))
    if not limit or longest <= limit:
        return None
    return (f"{longest:,.0f} positions exceed the {limit:,.0f} this model supports; the bound "
            "extrapolates")


def prefill(batch: Any, prompt_len: Any) -> Phase:
    return Phase("prefill", batch, prompt_len, prompt_len)


def decode(batch: Any, context: Any, k: Any = 1) -> Phase:
    """One decode step: k new tokens per sequence (k > 1: speculative decoding / MTP)."""
    return Phase("decode", batch, k, context + k)


def mixed(batch: Any, context: Any, prefill_tokens: Any, prompt_len: Any, k: Any = 1,
          cached: Any = 0) -> Phase:
    """One continuous-batching iteration: a decode step of `batch` sequences that also runs
    `prefill_tokens` prompt tokens (chunked prefill) from prompts of `prompt_len` tokens whose
    first `cached` come from the prefix cache. The prompt tokens go through the same weight
    GEMMs as the decode tokens; their attention is prefill attention, prefill_tokens /
    (prompt_len - cached) prompts' worth (fractional: the steady-state average)."""
    return replace(decode(batch, context, k), prefill_tokens=prefill_tokens,
                   prefill_q_len=np.asarray(prompt_len) - cached, prefill_kv_len=prompt_len)


def train(batch: Any, seq_len: Any, recompute: bool = False) -> Phase:
    return Phase("train", batch, seq_len, seq_len, recompute)


@record(frozen=True)
class Parallel:
    """How a step is split across chips: tensor, pipeline, data, expert and context
    parallel degrees, micro-batches and ZeRO / FSDP sharding."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    microbatches: int = 1
    fsdp: bool = False  # ZeRO-3 (kept as an alias of zero=3)
    zero: int = 0  # ZeRO stage over dp: 1 shards optimizer state, 2 gradients too, 3 weights
    # expert tensor parallelism: each routed expert split over moe_tp ranks, E/ep experts per
    # rank, moe_tp·ep = tp·dp (AIConfigurator's and TensorRT-LLM's moe_tp_size x moe_ep_size);
    # 0: the layout implied by ep (tp without EP, whole experts with it): `expert_tp`
    moe_tp: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "ep", "cp", "microbatches"):
            given = getattr(self, name)
            if not _whole(given) or given < 1:
                raise ParameterError(name, f"must be a whole number >= 1, got {given!r}")
        if not _whole(self.moe_tp) or self.moe_tp < 0:
            raise ParameterError("moe_tp", f"must be a whole number >= 1 (0: implied by ep), "
                                 f"got {self.moe_tp!r}")
        if not _whole(self.zero) or self.zero not in (0, 1, 2, 3):
            raise ParameterError("zero", f"must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.fsdp and self.zero not in (0, 3):
            raise ParameterError("zero", f"must be 0 or 3 with fsdp (ZeRO-3), got {self.zero}")

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def expert_tp(self) -> int:
        """Ranks each routed expert is split over: moe_tp where given, else tp without EP
        (tensor-parallel experts) and 1 with it (whole experts, E/ep per rank)."""
        return self.moe_tp or (self.tp if self.ep == 1 else 1)

    @property
    def zero_stage(self) -> int:
        return 3 if self.fsdp else self.zero


@record(frozen=True)
class Precision:
    """The dtypes a step uses: weights, activations, KV cache, gradients, GEMM compute."""

    weights: str = "bf16"  # the layers' weights (the embedding and LM head: `tables`)
    activations: str = "bf16"  # also the compute dtype
    kv_cache: str | None = None  # default: activations
    grads: str = "bf16"
    expert_weights: str | None = None  # the routed experts' weights (default: weights)
    quantize_embeddings: bool = False  # the embedding and LM head in the weight dtype too
    weights_from: str = field(default="", compare=False)  # why the weights have their dtype
    matmul: str | None = None  # the weight GEMMs' compute dtype (fp8 training); default:
    # activations. Attention and elementwise work stay in the activation dtype (torchtitan
    # Float8, Transformer Engine)
    dispatch: str | None = None  # the EP dispatch's dtype; default: `ep_dispatch`

    @property
    def kv(self) -> str:
        return self.kv_cache or self.activations

    @property
    def gemm(self) -> str:
        return self.matmul or self.activations

    @property
    def experts(self) -> str:
        return self.expert_weights or self.weights

    @property
    def ep_dispatch(self) -> str:
        """The EP dispatch's dtype: where the expert GEMMs take 8-bit (or narrower) float
        operands, the tokens go out already quantized, in the narrowest such dtype (DeepSeek-
        V3 quantizes the activations before the MoE up-projections to FP8 and dispatches
        them so, combining in BF16: arXiv:2412.19437 §3.3.2; DeepEP's normal and low-latency
        dispatch send FP8, docs/legacy.md); else the activation dtype. The combine returns
        activations."""
        if self.dispatch:
            return self.dispatch
        narrow = [name for name in (self.gemm, self.experts)
                  if lookup_dtype(name).peak in ("fp8", "fp6", "fp4")]
        return min(narrow, key=lambda n: lookup_dtype(n).bits) if narrow else self.activations

    @property
    def tables(self) -> str:
        """The embedding and LM head's dtype. Weight quantization (AWQ, GPTQ, ModelOpt,
        DeepSeek-V3's fp8 checkpoint) leaves them in the activation dtype unless
        `quantize_embeddings`; weights no narrower than the activations hold them too."""
        if self.quantize_embeddings or \
                lookup_dtype(self.weights).bits >= lookup_dtype(self.activations).bits:
            return self.weights
        return self.activations


@cache  # frozen inputs and result: every analysis without a Precision asks
def model_precision(spec: ModelSpec, weights: str | None = None, activations: str = "bf16",
                    kv_cache: str | None = None, quantize_embeddings: bool = False
                    ) -> Precision:
    """A run's dtypes. Weights not given default to the checkpoint's own dtype (its config's
    quantization_config: DeepSeek-V3 ships fp8), else the activation dtype; `weights_from`
    says so when the config had a say."""
    why = ""
    if weights is None and spec.weight_dtype and spec.quantized_experts_only:
        # gpt-oss: MXFP4 experts; attention, router, embedding, LM head stay in bf16
        return Precision(activations, activations, kv_cache, expert_weights=spec.weight_dtype,
                         quantize_embeddings=quantize_embeddings, weights_from=(
                             f"routed experts {spec.weight_dtype} from the config's "
                             f"quantization_config; the rest {activations}, as its "
                             "modules_to_not_convert keeps them"))
    if weights is None and spec.weight_dtype:
        weights = spec.weight_dtype
        why = f"from the config's quantization_config, quant_method {spec.quantization}"
    elif weights is None:
        weights = activations
        if spec.quantization:
            why = (f"the activation dtype: the config's quantization_config (quant_method "
                   f"{spec.quantization}) is not one read here; give the weight dtype")
    return Precision(weights, activations, kv_cache, quantize_embeddings=quantize_embeddings,
                     weights_from=why)


@record(eq=False)  # a step record: not frozen (roofline.models)
class Placement:
    """Which link each parallel group sits on, for a given chip's scale-up domain."""

    domain: int  # chips per scale-up domain (1 when the chip has no scale-up link)
    links: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    algo: str = "ring"
    shares: dict[str, float] = field(default_factory=dict)  # group -> usable link fraction
    chip: Chip | None = None  # whose links pick each collective's algorithm under "auto"
    # a step repeats its collectives (the attention and MLP all-reduces are the same size):
    # "auto" times every candidate algorithm, so each is built once (Costs are frozen); a
    # size array is keyed by its bytes while small (a (batch, 1) column of a sweep chunk)
    _built: dict[tuple[Any, ...], Cost] = field(default_factory=dict, init=False, compare=False,
                                                 repr=False)

    def comm(self, kind: str, nbytes: Any, group: str, ranks: int) -> Cost:
        key: tuple[Any, ...] | None = None
        if one_point(nbytes) or np.ndim(nbytes) == 0:
            key = (kind, float(nbytes), group, ranks)
        elif isinstance(nbytes, np.ndarray) and nbytes.size <= 4096:  # a sweep chunk's column
            key = (kind, nbytes.shape, nbytes.dtype.str, nbytes.tobytes(), group, ranks)
        if key is not None and key in self._built:
            return self._built[key]
        link, domain_size = self.links[group]
        cost = collective(kind, nbytes, ranks, self.algo, link, domain_size,
                          self.shares.get(group, 1.0), self.chip)
        if key is not None:
            self._built[key] = cost
        return cost


def place(parallel: Parallel, system: System) -> Placement:
    """Each group's link: ranks are numbered TP fastest, then CP, DP, PP; EP groups take
    consecutive ranks (they share the TP ranks' domain first)."""
    key = ("placement", parallel, system.chips_per_domain)  # the chip's links are fixed
    known = system.chip.memo.get(key)
    if known is None:
        known = system.chip.memo[key] = _links_by_group(parallel, system)
    links, shares = known
    # "auto": the fastest algorithm per collective and size (all-to-all: direct); a fresh
    # Placement per step: its collectives' cache is the step's own
    return Placement(system.chips_per_domain, dict(links), "auto", dict(shares), system.chip)


def _links_by_group(parallel: Parallel, system: System
                    ) -> tuple[dict[str, tuple[str, int | None]], dict[str, float]]:
    """Each group's (link, ranks per domain if hierarchical) and usable share of it."""
    up = system.chip.links.get("scale-up")
    domain = system.chips_per_domain
    strides = {"tp": 1, "cp": parallel.tp, "dp": parallel.tp * parallel.cp, "ep": 1,
               "pp": parallel.tp * parallel.cp * parallel.dp}
    sizes = {"tp": parallel.tp, "cp": parallel.cp, "dp": parallel.dp, "ep": parallel.ep,
             "pp": parallel.pp}
    links: dict[str, tuple[str, int | None]] = {}
    together: dict[str, int] = {}  # the group's ranks in one domain: they share its links
    for group, stride in strides.items():
        members_per_domain = max(1, min(sizes[group], domain // stride)) if up else 1
        together[group] = members_per_domain
        if members_per_domain >= sizes[group]:
            links[group] = ("scale-up" if up else "scale-out", None)
        elif members_per_domain == 1:
            links[group] = ("scale-out", None)
        else:  # part of the group shares a domain: hierarchical
            links[group] = ("scale-up", members_per_domain)
    shares = {group: float(system.link_share("scale-up", together[group]))
              for group, (link, _) in links.items() if link == "scale-up"}
    return links, shares


@cache  # frozen inputs: the footprint and the layers ask per analysis
def kv_bytes_per_token_per_layer(spec: ModelSpec, par: Parallel, prec: Precision) -> float:
    """KV cache bytes one token adds to one layer on one chip: the op library's
    `kv_cache_bytes` for one token, with this chip's KV heads (fewer KV heads than TP ranks:
    each rank keeps one) or MLA's latent (shared by all heads: every TP rank keeps all)."""
    if spec.mla:
        from ..ops.mla import mla_cache_elements  # only MLA models load it

        latent = mla_cache_elements(spec.mla.kv_lora_rank, spec.mla.qk_rope_dim)
        return float(kv_cache_bytes(1, 1, latent, kv_dtype=prec.kv, kv_shared=True))
    return float(kv_cache_bytes(1, max(1.0, spec.kv_heads / par.tp), spec.head_dim,
                                kv_dtype=prec.kv))


@record(frozen=True)
class MemoryBudget:
    """How much of the device's memory a deployment may use: a fraction of what the device
    exposes (as vLLM's gpu_memory_utilization) minus a reserve for the runtime and workspace
    (CUDA context, NCCL buffers, cuBLAS workspace). The default is the physical bound: all."""

    util: float = 1.0
    reserve_bytes: float = 0.0

    def __post_init__(self) -> None:
        if not _real(self.util) or not 0 < self.util <= 1:
            raise ParameterError("util", f"must be in (0, 1], got {self.util!r}")
        if not _real(self.reserve_bytes) or not 0 <= self.reserve_bytes < math.inf:
            raise ParameterError("reserve_bytes", f"must be a finite number >= 0, got "
                                 f"{self.reserve_bytes!r}")

    def usable(self, capacity_bytes: float) -> float:
        usable = capacity_bytes * self.util - self.reserve_bytes
        if usable <= 0:
            raise ParameterError("reserve_bytes", f"of {self.reserve_bytes:g} B leaves nothing "
                                 f"of {capacity_bytes * self.util:g} B (the capacity times "
                                 "the share of it used)")
        return usable

    def describe(self, capacity_bytes: float) -> str:
        if self.util == 1 and self.reserve_bytes == 0:
            return "all the device exposes"
        from ..units import format_bytes

        return (f"{100 * self.util:g}% of {format_bytes(capacity_bytes)} exposed"
                + (f" less {format_bytes(self.reserve_bytes)} reserved"
                   if self.reserve_bytes else ""))
