"""One phase of a collective over n ranks on one link (ring, tree, nvls, one- and two-shot,
all-to-all direct / pairwise / ring): its message steps and bytes per direction (the table
in `roofline.ops.collectives`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...derivation import Num, Quantity, call, one_point, sym, value


def _log2(n: Quantity) -> Quantity:
    return call("ceil_log2", _ceil_log2, n)


def _ceil_log2(v: Any) -> Any:
    if one_point(v):
        return float(math.ceil(math.log2(v)))
    return np.ceil(np.log2(v))


def flat_phase(kind: str, algo: str, n: Quantity, m: Quantity) -> tuple[Quantity, Quantity]:
    """(steps, bytes per direction) for one phase over n ranks on one link."""
    if kind == "send-recv":
        return sym("1", 1.0), m
    if kind == "all-to-all":
        if algo == "direct":
            return sym("1", 1.0), (n - 1) / n * m
        if algo == "pairwise":
            return n - 1, (n - 1) / n * m
        # ring relay, each chunk the short way: sum over k of min(k, n-k) hops = floor(n²/4)
        return (call("floor", np.floor, n / 2),
                call("floor", np.floor, n * n / 4) / n * m)
    if algo == "ring":
        if kind == "all-reduce":
            return 2 * (n - 1), 2 * (n - 1) / n * m
        if kind == "broadcast":
            return n - 1, m
        return n - 1, (n - 1) / n * m
    if algo == "one-shot":  # one step: an all-reduce reads the n - 1 other buffers at once
        # and reduces them; an all-gather stores its shard in every peer's buffer, a
        # reduce-scatter loads its shard of every peer's and reduces it
        return sym("1", 1.0), (n - 1) * m if kind == "all-reduce" else (n - 1) / n * m
    if algo == "two-shot":  # each rank reduces its 1/n, read from every peer, then every
        return sym("2", 2.0), 2 * (n - 1) / n * m  # peer reads the reduced shards: 2 steps
    if algo == "tree":
        depth = _log2(n)
        if kind != "all-reduce":
            return depth, m
        return 2 * depth, call("tree_share", _tree_share, n) * m
    return sym("2", 2.0), m  # nvls all-reduce


def _tree_share(n: Any) -> Any:
    """The busiest rank's bytes per direction of NCCL's double binary tree all-reduce, in
    units of the message: each of the two trees carries half of it (a rank sends its half up
    to its parent and down to each child). From 4 ranks some rank has a parent and two
    children in one tree (1.5) and is a leaf of the other (0.5): 2. Two ranks: root with one
    child in one tree, leaf in the other: 1. Three (ncclGetBtree, the second tree shifted by
    one): a rank is root with one child in one tree (0.5) and interior with one child in the
    other (1.0): 1.5 (nccl#1801: 3 GB200 trays over IB move ~1.56x the message per rank).
    Inside a node NCCL's tree is a chain, whose middle ranks move 2x: this bound is looser
    there, still a bound."""
    if one_point(n):
        return 0.0 if n <= 1 else 1.0 if n == 2 else 1.5 if n == 3 else 2.0
    v = np.asarray(n, dtype=float)
    return np.select([v <= 1, v == 2, v == 3], [0.0, 1.0, 1.5], 2.0)


def full_steps(count: Num, like: Quantity) -> Num:
    """Steps broadcast to the message shape, so a sweep over sizes gives arrays throughout."""
    message = value(like)
    if one_point(count) and one_point(message):
        return count
    shape = np.broadcast_shapes(np.shape(count), np.shape(message))
    return count if shape == () else np.broadcast_to(count, shape)
