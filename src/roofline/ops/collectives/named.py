"""One named algorithm's Cost: flat inside a domain, hierarchical past it (with the
checks a named algorithm must pass there)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...cost import Cost
from ...derivation import (
    any_true,
    steps,
    sym,
    unwrap,
    value,
)
from ...errors import RooflineError
from .._common import size, whole
from .algorithms import IMPLEMENTS, SHOTS, check_algo
from .flat import flat_phase, full_steps
from .hierarchical import hierarchical_cost


def named_collective(kind: str, algo: str, nbytes: Any, ranks: Any, link: str, domain_size: Any,
                link_share: Any) -> Cost:
    check_algo(kind, algo)
    m = size("m", nbytes, "bytes")
    n = whole("n", ranks, "ranks")
    # ranks = 1 is allowed (a sweep may include it): 0 steps, 0 bytes and no call
    # (scalar-friendly comparisons: a whole-model estimate builds these on single numbers)
    hierarchical = domain_size is not None and link == "scale-up" and kind != "send-recv" \
        and any_true(value(n) > np.asarray(domain_size) if np.ndim(domain_size) else
                     value(n) > domain_size)
    share = size("share", link_share, "link_share")
    if any_true(value(share) > 1):
        raise RooflineError(f"link_share: a fraction in (0, 1], got {link_share!r}")
    if not hierarchical:
        hops, traffic = flat_phase(kind, algo, n, m)
        others = (value(n) > 1) * 1.0
        if any_true(others == 0):  # a group of one moves nothing, on any algorithm
            hops, traffic = hops * sym("[n > 1]", others), traffic * sym("[n > 1]", others)
        if any_true(value(share) < 1):
            traffic = traffic / share
        # one- and two-shot all-reduces are the engines' own kernels (vLLM, SGLang,
        # TensorRT-LLM, aiter custom all-reduce), not NCCL calls: no NCCL base latency; nor
        # has NVLS one in NCCL's own cost model (tuning.cc: baseLat 0 for NVLS and NVLS tree,
        # 6.6 us for Ring LL): its NVLS tree ran 128 B on 2 H100s in a CUDA graph in about
        # 6 us (nccl#1259), under 6.6 us + two steps
        calls = others * (0.0 if algo in SHOTS or algo == "nvls" else 1.0)
        return Cost(link_bytes={link: value(traffic)},
                    link_steps={link: full_steps(value(hops), m)},
                    link_calls={link: full_steps(calls, m)},
                    steps=steps((f"{link} steps", hops), (f"{link} bytes", traffic)),
                    name=f"{kind} ({algo})", algorithm=algo)
    if algo == "ring" and kind == "all-to-all":
        raise RooflineError("all-to-all 'ring' relays between neighbours of one ring; a group "
                            "that spans scale-up domains uses direct or pairwise")
    if algo in SHOTS:
        others = [a for a in IMPLEMENTS[kind] if a not in SHOTS]
        raise RooflineError(f"a {algo} {kind} reaches its peers' buffers over the scale-up "
                            f"link: its group must fit one domain (use {', '.join(others)})")
    domain = whole("a", domain_size, "domain_size")
    # a group smaller than a domain stays inside it: a = min(n, domain), b = n / a domains
    a = np.minimum(np.asarray(value(n)), np.asarray(value(domain))) * 1.0
    return hierarchical_cost(kind, algo, n, m, unwrap(a), share)
