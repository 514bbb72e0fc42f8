"""DeepEP's own byte count: how its tests (and UCCL-EP's copies of them) turn a time into the
GB/s they print, so a printed bandwidth converts back to the time it was measured as.

Normal kernels (deepseek-ai/DeepEP tests/legacy/test_internode.py L42-63, L224-243;
test_intranode.py L188-201, at dd758caf): across nodes the "RDMA" bandwidth is
num_rdma_token_sent · hidden · 2 B / t, num_rdma_token_sent = the (token, node) pairs over a
rank's tokens with at least one of the token's experts on that node, its own node included;
inside a node the "NVL" bandwidth is the tokens a rank receives (one per source token whose
experts it holds, its own included) · hidden · 2 B / t. FP8 dispatch counts (1 + 4/128)/2 of
that (e4m3 plus one fp32 scale per 128 elements); the combine is BF16.

Routing (test_internode.py L42-46): scores |N(0, 1)| + 1 per (token, expert); the experts in
`nodes` consecutive groups (one per node); a token keeps the min(nodes, 4) groups with the
largest maximum score, then its top-k experts among them. test_intranode.py takes the plain
top-k: every k-subset equally likely.
"""

from __future__ import annotations

import functools
import math

import numpy as np

FP8_FACTOR = (1 + 4 / 128) / 2  # of the BF16 bytes: test_internode.py L239
SAMPLES = 16384  # tokens drawn for the group-limited count (standard error < 0.002)


@functools.cache
def destinations_per_token(experts: int, destinations: int, top_k: int,
                           topk_groups: int | None = None, seed: int = 0) -> float:
    """Expected destinations (nodes, or ranks inside one node) holding at least one of a
    token's top_k experts, its own included, under DeepEP's test routing. Without group
    limits (topk_groups None or >= destinations) exactly d·(1 - C(E - E/d, k)/C(E, k));
    with them, drawn as the test draws them (seeded)."""
    if topk_groups is None or topk_groups >= destinations:
        return destinations * (1 - math.comb(experts - experts // destinations, top_k)
                               / math.comb(experts, top_k))
    rng = np.random.default_rng(seed)
    scores = np.abs(rng.standard_normal((SAMPLES, experts))) + 1
    per_group = experts // destinations
    best = scores.reshape(SAMPLES, destinations, per_group).max(axis=-1)
    groups = np.argpartition(-best, topk_groups - 1, axis=1)[:, :topk_groups]
    keep = np.zeros((SAMPLES, destinations), dtype=bool)
    np.put_along_axis(keep, groups, True, axis=1)
    masked = scores * np.repeat(keep, per_group, axis=1)
    chosen = np.argpartition(-masked, top_k - 1, axis=1)[:, :top_k]
    hit = np.zeros((SAMPLES, destinations), dtype=bool)
    np.put_along_axis(hit, chosen // per_group, True, axis=1)
    return float(hit.sum(axis=1).mean())


def counted_bytes(tokens: int, hidden: int, experts: int, top_k: int, ranks: int, nodes: int,
                  op: str, dtype: str) -> float:
    """The bytes DeepEP's normal-kernel test divides by the time (per rank)."""
    per_element = 2.0 * (FP8_FACTOR if op == "dispatch" and dtype == "fp8" else 1.0)
    if nodes > 1:
        copies = destinations_per_token(experts, nodes, top_k, min(nodes, 4))
    else:
        copies = destinations_per_token(experts, ranks, top_k)
    return tokens * copies * hidden * per_element
