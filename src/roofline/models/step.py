"""What one step is and how its chips are laid out: the phase (prefill / decode / train with
its sizes), the parallelism, the precisions, where each parallel group's traffic goes, and
the KV cache bytes one token adds to one layer on one chip."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..cost import Cost
from ..hardware import System
from ..ops.attention import kv_cache_bytes, mla_cache_elements
from ..ops.collectives import collective
from .spec import ModelSpec

PHASES = ("prefill", "decode", "train")


@dataclass(frozen=True)
class Phase:
    """One step. The sizes may be numpy arrays: a whole batch x context grid is one analysis."""

    kind: str
    batch: Any  # sequences in the step (all DP replicas together)
    q_len: Any  # new tokens per sequence
    kv_len: Any  # keys each new token can see (context including the new tokens)
    recompute: bool = False

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


def prefill(batch: Any, prompt_len: Any) -> Phase:
    return Phase("prefill", batch, prompt_len, prompt_len)


def decode(batch: Any, context: Any, k: Any = 1) -> Phase:
    """One decode step: k new tokens per sequence (k > 1: speculative decoding / MTP)."""
    return Phase("decode", batch, k, context + k)


def train(batch: Any, seq_len: Any, recompute: bool = False) -> Phase:
    return Phase("train", batch, seq_len, seq_len, recompute)


@dataclass(frozen=True)
class Parallel:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    microbatches: int = 1
    fsdp: bool = False

    @property
    def chips(self) -> int:
        return self.tp * self.pp * self.dp * self.cp


@dataclass(frozen=True)
class Precision:
    weights: str = "bf16"
    activations: str = "bf16"  # also the compute dtype
    kv_cache: str | None = None  # default: activations
    grads: str = "bf16"

    @property
    def kv(self) -> str:
        return self.kv_cache or self.activations


@dataclass(frozen=True)
class Placement:
    """Which link each parallel group sits on, for a given chip's scale-up domain."""

    domain: int  # chips per scale-up domain (1 when the chip has no scale-up link)
    links: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    algo: str = "ring"
    shares: dict[str, float] = field(default_factory=dict)  # group -> usable link fraction

    def comm(self, kind: str, nbytes: Any, group: str, ranks: int) -> Cost:
        link, domain_size = self.links[group]
        return collective(kind, nbytes, ranks, self.algo, link, domain_size,
                          self.shares.get(group, 1.0))


def place(parallel: Parallel, system: System) -> Placement:
    """Each group's link: ranks are numbered TP fastest, then CP, DP, PP; EP groups take
    consecutive ranks (they share the TP ranks' domain first)."""
    up = system.chip.links.get("scale-up")
    domain = system.chips_per_domain
    strides = {"tp": 1, "cp": parallel.tp, "dp": parallel.tp * parallel.cp, "ep": 1,
               "pp": parallel.tp * parallel.cp * parallel.dp}
    sizes = {"tp": parallel.tp, "cp": parallel.cp, "dp": parallel.dp, "ep": parallel.ep,
             "pp": parallel.pp}
    links: dict[str, tuple[str, int | None]] = {}
    for group, stride in strides.items():
        members_per_domain = max(1, min(sizes[group], domain // stride)) if up else 1
        if members_per_domain >= sizes[group]:
            links[group] = ("scale-up" if up else "scale-out", None)
        elif members_per_domain == 1:
            links[group] = ("scale-out", None)
        else:  # part of the group shares a domain: hierarchical
            links[group] = ("scale-up", members_per_domain)
    shares = {group: float(system.link_share("scale-up", min(sizes[group], domain)))
              for group, (link, _) in links.items() if link == "scale-up"}
    return Placement(domain, links, shares=shares)


def kv_bytes_per_token_per_layer(spec: ModelSpec, par: Parallel, prec: Precision) -> float:
    """KV cache bytes one token adds to one layer on one chip: the op library's
    `kv_cache_bytes` for one token, with this chip's KV heads (fewer KV heads than TP ranks:
    each rank keeps one) or MLA's latent (shared by all heads: every TP rank keeps all)."""
    if spec.mla:
        latent = mla_cache_elements(spec.mla.kv_lora_rank, spec.mla.qk_rope_dim)
        return float(kv_cache_bytes(1, 1, latent, kv_dtype=prec.kv, kv_shared=True))
    return float(kv_cache_bytes(1, max(1.0, spec.kv_heads / par.tp), spec.head_dim,
                                kv_dtype=prec.kv))
