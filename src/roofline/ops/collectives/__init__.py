"""Collectives in the alpha-beta model: message steps (alpha), bytes per direction (beta) and
one collective call (its base latency).

`nbytes` is the buffer size as nccl-tests reports it: the full per-rank vector for
all-reduce, broadcast and send/recv, the full gathered output for all-gather, the full
input for reduce-scatter, and each rank's whole send buffer for all-to-all.

Per rank, over n ranks (each step sends one message; bytes are per direction):

    collective       ring                          tree (double binary)   nvls (in-switch)
    all-reduce       2(n-1) steps, 2(n-1)/n·m      2·ceil(log2 n), 2·m*   2 steps, m
    all-gather       n-1,  (n-1)/n·m               -                      -
    reduce-scatter   n-1,  (n-1)/n·m               -                      -
    broadcast        n-1,  m (pipelined chain)     ceil(log2 n), m        -
    send-recv        1,    m                       (any name: one message)

    all-to-all       direct: 1 step, (n-1)/n·m     pairwise: n-1 steps, (n-1)/n·m
                     ring: floor(n/2) steps, floor(n²/4)/n·m

    all-reduce       one-shot: 1 step, (n-1)·m     two-shot: 2 steps, 2(n-1)/n·m
    all-gather,      one-shot: 1 step, (n-1)/n·m
    reduce-scatter

The ring rows are the bandwidth-optimal schedules (Thakur et al.); "tree" is NCCL's
pipelined double binary tree: log-depth latency, but the busiest rank moves 2·m (* m over
2 ranks, 1.5·m over 3: `flat._tree_share`). "one-shot" and "two-shot" are the serving engines'
custom all-reduce kernels over a switch or full mesh (every peer's buffer read directly:
all of them at once, or a reduce-scatter then an all-gather); they are no NCCL call, so
they pay no NCCL base latency. "auto" weighs both (a two-shot kernel, vLLM / aiter custom
all-reduce of 0.25-8 MiB, ran 1.5 MiB on 8x MI355X in 12.9 us, below ring's and tree's
bounds); where it picks two-shot the Cost keeps the libraries' own pick as `runs`, which
the expected time assumes outside CUDA graphs (NCCL / RCCL run ring or tree there). A
one-shot all-gather (reduce-scatter) stores its shard in (loads its shard from) every
peer's buffer at once, as NCCL 2.27+'s symmetric-memory kernels and PyTorch's symmetric
memory do (Megatron-LM#5596: 2 MiB on 8x H100 in 10.9 / 10.8 us of device time, under a
ring's 7 steps and NCCL base latency); "auto" weighs it for the bound, and the expected
time keeps the libraries' ring as `runs` (plain buffers are not symmetric). "nvls" is
NVLink SHARP: every GPU pushes its m bytes into the switch, which reduces and multicasts the
result back: m each way in two steps (ideal; needs a link with in-switch reduction).
All-to-all: "direct" posts every peer's chunk at once (what NCCL and DeepEP do: one round of
latency, the default); "pairwise" exchanges with one peer per step (n-1 rounds); "ring"
relays chunks between neighbours only, each the short way round a bidirectional ring (a
torus axis without direct paths): a chunk k hops away crosses k links.

"auto" (`choose_algorithm`, auto.py) is the fastest implementation: per message size, the
algorithm the collective implements (nvls only where the link reduces in the switch; one-
and two-shot only where every peer is in reach) with the smallest alpha-beta time on the
chip. Each algorithm's time is a lower bound of its own, so their minimum bounds whatever
the library or engine chose.

A group larger than one scale-up domain (`domain_size` ranks) runs hierarchically, with
a = domain_size ranks inside each domain and b = n / a domains (a group that does not fill
whole domains is spread evenly over the fewest that hold it: b = ceil(n / domain_size),
a = n / b): all-reduce = reduce-scatter
inside (a, m) + all-reduce across (b, m/a, each GPU on its own NIC) + all-gather inside
(a, m); all-gather / reduce-scatter / broadcast split the same way; all-to-all sends
(a-1)/n·m over the scale-up link and (n-a)/n·m over scale-out.

Every collective is one call: it pays the base latency (launch, synchronisation) once per
call, as NCCL's tuning model charges it (the network's longer per-step latency is its
alpha); that model charges NVLS none, and the kernels that reach their peers directly (one-
and two-shot) are no NCCL call. The phases of a hierarchical collective pipeline across
their links (evaluate bounds each link's chain on its own), and the call's launch precedes
every one of them: each link the call uses carries its base latency.

busbw (nccl-tests): algbw = m / t; busbw = algbw · factor with factor 2(n-1)/n for
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and
send-recv — so a ring all-reduce's busbw approaches the per-direction link bandwidth.
Reduction arithmetic (a few adds per element) and the HBM traffic of the buffers are ignored.

The package, by algorithm family: `algorithms` (the vocabulary and checks), `flat` (one
phase on one link), `hierarchical` (across scale-up domains), `named` (one named
algorithm's Cost), `auto` (the fastest per message size), `pointwise` (sweeps whose pick or
group varies), `build` (`collective` itself), `expert_parallel` (one copy per destination)
and `crossover` (latency- vs bandwidth-bound).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .algorithms import (
    ALGORITHMS,
    AUTO,
    COLLECTIVES,
    DEFAULT_ALGO,
    ENGINE_ONLY,
    GRAPH_KERNELS,
    IMPLEMENTS,
    SHOTS,
    busbw_factor,
)
from .auto import choose_algorithm
from .build import collective

if TYPE_CHECKING:
    from .crossover import crossover_from_times, latency_crossover_bytes
    from .expert_parallel import one_copy_per_destination

# loaded on first use (PEP 562): a dense model's step needs neither
_LAZY = {"crossover_from_times": ".crossover", "latency_crossover_bytes": ".crossover",
         "one_copy_per_destination": ".expert_parallel"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALGORITHMS",
    "AUTO",
    "COLLECTIVES",
    "DEFAULT_ALGO",
    "ENGINE_ONLY",
    "GRAPH_KERNELS",
    "IMPLEMENTS",
    "SHOTS",
    "busbw_factor",
    "choose_algorithm",
    "collective",
    "crossover_from_times",
    "latency_crossover_bytes",
    "one_copy_per_destination",
]
