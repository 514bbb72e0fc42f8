"""The protocol a collective library runs a ring or tree collective with, in the expected time.

NCCL (and RCCL, its port) moves every ring or tree step with one of three protocols and picks,
per call, the one its cost model says is fastest (NVIDIA/nccl src/graph/tuning.cc,
`ncclTopoTuneModel` and `ncclTopoGetAlgoTime`: time = latency + bytes / bandwidth per
algorithm and protocol):

- LL: 8-byte stores of 4 data bytes and a 4-byte flag: the lowest latency per step, half the
  link's bandwidth on a ring (1/3.8 on a tree);
- LL128: 128-byte lines of 120 data bytes (0.92 of the bandwidth on a ring; 7/9 on a one-node
  tree, 120/128 across nodes), a longer step; NVLink only (tuning.cc enables it only where
  the intra-node path is NVLink, `typeIntra <= PATH_NVB`);
- Simple: the link's whole bandwidth (0.92 on a tree all-reduce), the longest step.

The bound charges every step LL's latency and every byte the whole bandwidth, which no one
protocol does: the expected time takes, per point, the fastest protocol with both of its own
(the latencies of tuning.cc's default tuner constants, as ratios to ring LL's, which the chip
files' link latencies are). A collective that is not a library ring or tree (NVLS, an
engine's one- or two-shot kernel, an all-to-all) keeps the bound's single chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..cost import Cost
from ..hardware import Chip

PROTOCOLS = ("LL", "LL128", "Simple")
# the vendors whose collective library runs these protocols: NCCL and RCCL (ROCm/rccl keeps
# NCCL's LL / LL128 / Simple and its tuning model); TPUs (XLA), Gaudi (HCCL) and Trainium
# (Neuron CCL) run their own
LIBRARY_VENDORS = ("NVIDIA", "AMD")
NCCL_ALGORITHMS = ("ring", "tree")

# NVIDIA/nccl src/graph/tuning.cc, ncclTunerConstantsDefaults (master 5067397c): per
# algorithm, the base latency of a call (baseLatencies, us) and per hardware class the
# latency of one step (hwLatencies, us), LL / LL128 / Simple
_BASE_US = {"ring": (6.6, 14.0, 8.4), "tree": (6.8, 14.0, 8.4)}
_STEP_US = {"nvlink": {"ring": (0.6, 1.9, 3.4), "tree": (0.6, 1.25, 4.0)},
            "pci": {"ring": (1.0, 2.5, 5.7), "tree": (1.0, 1.9, 4.0)},
            "net": {"ring": (2.7, 4.0, 14.0), "tree": (5.0, 8.5, 14.0)}}
# the share of the link's bandwidth each protocol keeps (tuning.cc's "model refinements":
# ring LL x .5, LL128 x .92; tree all-reduce x .92, then LL / 3.8, LL128 x 7/9 in one node)
_BANDWIDTH = {"ring": (0.5, 0.92, 1.0), "tree": (0.92 / 3.8, 0.92 * 7 / 9, 0.92)}
# across nodes: each step inside a node costs at least the network proxy's post overhead
# (getNetOverhead: 1 us on Intel hosts, x3 for Simple), and LL's bus bandwidth is capped
# (llMaxBws for 2 nodes on Intel hosts, 39 GB/s: LL serves only small messages there)
_NET_OVERHEAD_S = (1e-6, 1e-6, 3e-6)
LL_MAX_BUSBW = 39e9


def hardware_class(chip: Chip, link: str) -> str:
    """tuning.cc's hardware class of a link: the network between nodes (scale-out, unless it
    is PCIe), PCIe, or NVLink (AMD's xGMI taken as NVLink)."""
    technology = chip.links[link].technology
    if technology.lower().startswith("pcie"):
        return "pci"
    return "net" if link == "scale-out" else "nvlink"


def library_time(cost: Cost, chip: Chip, efficiency: Mapping[str, Any]) -> Any:
    """Per point, the library's fastest protocol's time for `cost` (a ring or tree collective
    on its links, `efficiency` the achievable share of each link's bandwidth): in one node,
    the longest of its links' chains (steps at the protocol's latency, its base latency once
    per call, its bytes at its share of the bandwidth). Across nodes the ring runs through
    every GPU of every node, so its steps do not overlap: their latencies add up, each step
    inside a node at least the proxy's network post overhead (tuning.cc `getNetOverhead`,
    1 us, x3 for Simple), and LL keeps at most LL_MAX_BUSBW. NaN where `cost.algorithm` is
    not a ring or tree."""
    algo = np.asarray(cost.algorithm if cost.algorithm is not None else "", dtype=object)
    links = sorted(cost.link_bytes.keys() | cost.link_steps.keys() | cost.link_calls.keys())
    pci_only = all(hardware_class(chip, k) == "pci" for k in links)
    nodes = np.asarray(cost.link_calls.get("scale-out", 0.0)) > 0  # the call crosses nodes
    out: Any = np.nan
    for name in dict.fromkeys(algo.ravel().tolist()):
        if name not in NCCL_ALGORITHMS:
            continue
        best: Any = np.inf
        for p, protocol in enumerate(PROTOCOLS):
            if protocol == "LL128" and pci_only:
                continue  # LL128 needs NVLink between the GPUs of a node
            longest: Any = 0.0
            latency: Any = 0.0
            transfer: Any = 0.0
            for k in links:
                lk = chip.links[k]
                klass = hardware_class(chip, k)
                step: Any = lk.latency_s * _STEP_US[klass][name][p] / _STEP_US[klass]["ring"][0]
                if k != "scale-out":  # across nodes: at least the network post overhead
                    step = np.where(nodes, np.maximum(step, _NET_OVERHEAD_S[p]), step)
                base = lk.base_latency_s * _BASE_US[name][p] / _BASE_US["ring"][0]
                rate: Any = lk.bandwidth_Bps * efficiency.get(k, 1.0) * _BANDWIDTH[name][p]
                if name == "tree" and protocol == "LL128":  # 120/128 across nodes
                    rate = np.where(nodes, rate * (120 / 128) / (7 / 9), rate)
                if protocol == "LL":
                    rate = np.where(nodes, np.minimum(rate, LL_MAX_BUSBW), rate)
                lat = (np.asarray(cost.link_steps.get(k, 0.0)) * step
                       + np.asarray(cost.link_calls.get(k, 0.0)) * base)
                moved = np.asarray(cost.link_bytes.get(k, 0.0)) / rate
                longest = np.maximum(longest, lat + moved)
                latency = latency + lat
                transfer = np.maximum(transfer, moved)
            best = np.minimum(best, np.where(nodes, latency + transfer, longest))
        out = np.where(algo == name, best, out)
    return out


def with_protocols(t_links: Any, cost: Cost, chip: Chip, efficiency: Mapping[str, Any]) -> Any:
    """`t_links` (the derated chip's time of `cost`), or where `cost` is a library's ring or
    tree collective on links alone, its fastest protocol's time (`library_time`: never
    below `t_links`, whose chain is every protocol's best latency and bandwidth at once)."""
    if not cost.link_bytes or cost.flops or cost.bytes or cost.has_arithmetic or \
            chip.vendor not in LIBRARY_VENDORS:
        return t_links
    library = library_time(cost, chip, efficiency)
    if np.all(np.isnan(library)):
        return t_links
    t = np.where(np.isnan(library), t_links, np.maximum(library, t_links))
    return float(t) if t.ndim == 0 else t
