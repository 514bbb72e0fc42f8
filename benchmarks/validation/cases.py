"""Published measurements turned into the tool's predictions: one path per kind, shared by the
tests that hold the bound (tests/test_published_*.py, tests/test_serve_published.py) and by
check.py, which scores the expected time.

Every row of ops.csv and systems.csv becomes a `Case`: its measured figure against the same
work built with the tool on the row's chip. `ratio(expect)` is measured speed over predicted
speed (= predicted time / measured time): for the bound (`expect=False`) it must stay <= 1;
for the expected time (`expect=True`) it should be near 1. Rows the tool cannot model (chip or
model not in the catalog, size not published) carry the reason in `skip`.

Import it as `import cases`: tests/conftest.py puts this folder on sys.path for the tests,
check.py puts it there itself.
"""

from __future__ import annotations

import csv
import functools
import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import deepep  # benchmarks/validation: DeepEP's own byte count

from roofline import RooflineError, evaluate, load_chip
from roofline.cost import Cost
from roofline.dtypes import dtype
from roofline.expect import expected, expected_step
from roofline.expect.table import engine
from roofline.hardware import Chip
from roofline.ops.attention import attention, flash_tiling
from roofline.ops.collectives import busbw_factor, one_copy_per_destination
from roofline.ops.matmul import matmul, warm_capacity
from roofline.ops.mla import mla_attention
from roofline.ops.registry import run_op

HERE = Path(__file__).resolve().parent
OPS_CSV = HERE / "ops.csv"
SYSTEMS_CSV = HERE / "systems.csv"


# --- rows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    kind: str
    chip: str
    params: dict[str, str]
    metric: str
    value: float
    source: str
    notes: str
    n_chips: int = 1


def rows(kinds: tuple[str, ...], path: Path = OPS_CSV) -> list[Row]:
    out = []
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] in kinds:
                params = _params(r["id"], r["params"])
                out.append(Row(r["id"], r["kind"], r["chip"], params, r["metric"],
                               float(r["value"]), r["source"], r["notes"],
                               int(r["n_chips"] or 1)))
    return out


def _params(row_id: str, text: str) -> dict[str, str]:
    """key=value pairs split on ';'. A piece without '=' is a value that held a ';' (it would
    silently cut that value and drop the keys after it): an error naming the row."""
    pieces = [p for p in text.split(";") if p.strip()]
    bad = [p for p in pieces if "=" not in p]
    if bad:
        raise ValueError(f"row {row_id}: params piece {bad[0]!r} has no '=' (a ';' inside a "
                         "value? use ',' or '/' there)")
    return dict(p.split("=", 1) for p in pieces)


class Unbounded(Exception):
    """A row the tool cannot bound: unknown chip, shape not stated."""


def _int(row: Row, name: str) -> int:
    try:
        return int(row.params[name])
    except (KeyError, ValueError):
        raise Unbounded(f"{name} not stated ({row.params.get(name, 'missing')})") from None


def _time(cost: Cost, chip: Chip, expect: bool, kernel: str | None = None,
          dequant: str | None = None, graphs: bool = False) -> float:
    """The bound's t_lower or the expected time of a Cost on a chip, seconds (`dequant`: the
    weight family of a weight-only GEMM, streamed at the dequantizing kernels' fraction;
    `graphs`: timed as CUDA graph replays, one graph launch per kernel)."""
    if expect:
        return float(expected(cost, chip, kernel=kernel, dequant=dequant,
                              cuda_graphs=graphs).t_s)
    return float(evaluate(cost, chip).t_lower_s)


# --- kernels: gemm, attention_fwd, attention_bwd, hbm (decode kernels below) ---------------

KERNEL_KINDS = ("gemm", "attention_fwd", "attention_bwd", "hbm", "mla_decode", "attention_decode",
                "linear_attention")
BACKWARD_FACTOR = 2.5  # FlashAttention: backward FLOPs = 2.5x forward (5 GEMMs against 2)

# What a row's own columns do not say, from its notes (the reason is the note's wording).
READINGS: dict[str, dict[str, Any]] = {
    # "aiter does NOT halve causal FLOPs"; "kv_heads=8 (GQA)"
    "aiter-mi355x-d128-s8k-gqa-causal-bwd": {"causal_flops_halved": False, "kv_heads": 8},
}
SKUS = {"b200": ("b200", "gb200"),  # FA4 rows: "exact SKU (B200 vs GB200) not printed"
        # decode rows that name the GPU but not its form factor, or only its architecture
        "h100": ("h100-sxm", "h100-nvl", "h100-pcie"), "h200": ("h200-sxm", "h200-nvl"),
        "hopper": ("h100-sxm", "h100-nvl", "h100-pcie", "h200-sxm", "h200-nvl", "h800-sxm",
                   "h20", "gh200")}
# DeepEP V2's README names the architecture only (SM90 / SM100): every part it could be
SKUS["hopper-sm90"] = SKUS["hopper"]
SKUS["blackwell-sm100"] = ("b200", "gb200", "b300", "gb300")


def kernel_chips(row: Row) -> list[Chip]:
    chips = []
    for name in SKUS.get(row.chip, (row.chip,)):
        try:
            chips.append(load_chip(name))
        except RooflineError:
            continue
    if not chips:
        raise Unbounded(f"chip {row.chip!r} is not in the catalog")
    return chips


def _gemm(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    """Every reading of the row (the first: as printed, MxNxK with bf16 out). A
    `weight_dtype` column is a weight-only quantized GEMM (int4 / int8 weights, group scales
    in the dtype's name, dequantized into the activations' `dtype` math): the weights stream
    at their own width, and the expected time at the dequantizing kernels' fraction."""
    from roofline.expect.op import dequant_family

    m, n, k = _int(row, "m"), _int(row, "n"), _int(row, "k")
    groups = int(row.params.get("groups", 1))
    # `cache=warm`: timed over repeated calls on the same operands (aiconfigurator's
    # collector): the L2 keeps what fits between calls (ops.matmul's warm bound)
    warm = None
    if row.params.get("cache") == "warm":
        try:
            warm = warm_capacity(chip)
        except RooflineError as why:
            raise Unbounded(f"cache=warm: {why}") from None
    dt, wd = row.params["dtype"], row.params.get("weight_dtype")
    if row.metric == "tflops":
        measured_s = groups * 2 * m * n * k / (row.value * 1e12)
    elif row.metric == "time_us":
        measured_s = row.value * 1e-6
    else:
        raise AssertionError(f"{row.id}: unknown gemm metric {row.metric!r} (tflops, time_us)")
    outs = ["bf16"] if "BF16 out" in row.notes else sorted({dt, "bf16"})
    shapes = [(m, k, n), (m, n, k)] if "ordering ambiguity" in row.notes else [(m, k, n)]
    for (a, b, c) in shapes:  # MxNxK as printed, or MxKxN as the README text has it
        for out in outs:
            cost = groups * matmul(a, b, c, dt, weight_dtype=wd, out_dtype=out,
                                   warm_l2_bytes=warm)
            grouped = row.params.get("layout", "").startswith("grouped")  # MoE experts
            if groups > 1 or grouped:  # one batched / grouped call (its typed record)
                cost = replace(cost, op=replace(cost.op, groups=float(groups), grouped=grouped))
            yield _time(cost, chip, expect, dequant=dequant_family(wd, cost),
                        graphs=row.params.get("timing") == "cuda-graph") / measured_s


def attention_shape(row: Row) -> dict[str, Any]:
    """The row's attention: MHA unless a `kv_heads` column (or its notes' reading) says GQA."""
    p, extra = row.params, READINGS.get(row.id, {})
    dt = p["dtype"] if p["dtype"] != "not_stated" else "bf16"  # FA4's benchmark default
    heads = _int(row, "heads")
    kv_heads = _int(row, "kv_heads") if "kv_heads" in p else extra.get("kv_heads", heads)
    return dict(batch=_int(row, "batch"), q_len=_int(row, "seqlen"), kv_len=_int(row, "seqlen"),
                heads=heads, kv_heads=kv_heads, head_dim=_int(row, "head_dim"),
                causal=p["causal"] == "1", dtype=dt)


def fa_forward_flops(row: Row) -> float:
    """FlashAttention's convention: 4·B·N²·H·d, halved when causal (unless the row says its
    source did not halve it)."""
    s = attention_shape(row)
    flops = 4.0 * s["batch"] * s["q_len"] ** 2 * s["heads"] * s["head_dim"]
    halved = READINGS.get(row.id, {}).get("causal_flops_halved", True)
    return flops / 2 if s["causal"] and halved else flops


def _attention_fwd(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    measured_s = fa_forward_flops(row) / (row.value * 1e12)
    cost = attention(**attention_shape(row), impl="flash", **flash_tiling(chip))
    yield _time(cost, chip, expect, row.params.get("impl")) / measured_s


def backward_cost(row: Row, chip: Chip) -> Cost:
    """The backward op on the chip's tiling: SRAM K/V blocks, L2 reuse of the query side."""
    from roofline.ops.attention_backward import attention_backward

    shape, tiling = attention_shape(row), flash_tiling(chip)
    return attention_backward(**shape, sram_bytes=tiling["sram_bytes"],
                              block_kv=tiling["block_q"], l2_bytes=tiling["l2_bytes"])


def _attention_bwd(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    measured_s = BACKWARD_FACTOR * fa_forward_flops(row) / (row.value * 1e12)
    yield _time(backward_cost(row, chip), chip, expect, row.params.get("impl")) / measured_s


def _hbm(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    roof = chip.level("hbm").bandwidth_Bps  # GB/s achieved over the roof (or the expected)
    yield row.value * 1e9 / (roof * (_figure(chip, "hbm") if expect else 1.0))


def _figure(chip: Chip, kind: str) -> float:
    from roofline.expect import figures

    return figures(chip)[kind].value


# --- decode kernels: mla_decode, attention_decode -------------------------------------------


def decode_readings(row: Row, names: tuple[str, ...]) -> list[dict[str, int]]:
    """Every reading of the row's sizes. A size printed `a|b|c` is the sweep of the source's
    script behind an "up to" figure that does not say which point it was: the figure is
    bounded at every point (the first is the row's own reading, for the expected time)."""
    try:
        options = [[int(v) for v in row.params[n].split("|")] for n in names]
    except (KeyError, ValueError):
        raise Unbounded(f"{'/'.join(names)} not all stated") from None
    return [dict(zip(names, point, strict=True)) for point in itertools.product(*options)]


def _measured_s(row: Row, flops: float, nbytes: float) -> float:
    """The row's figure as a time: printed times as they are, rates through the work the
    source itself counts (`flops`, `nbytes`: its own formula, not the tool's)."""
    per = {"time_us": 1e-6, "time_ms": 1e-3}
    if row.metric in per:
        return row.value * per[row.metric]
    work = {"tflops": (flops, 1e12), "GBps": (nbytes, 1e9), "TBps": (nbytes, 1e12)}
    if row.metric not in work:
        raise AssertionError(f"{row.id}: unknown metric {row.metric!r}")
    amount, scale = work[row.metric]
    return amount / (row.value * scale)


MLA_D, MLA_DV = 576, 512  # absorbed MLA: kv_lora_rank + rope per cached token, kv_lora_rank


def mla_source_work(row: Row, s: dict[str, int]) -> tuple[float, float]:
    """FLOPs and bytes as FlashMLA (tests/test_flash_mla.py) and FlashInfer
    (benchmarks/bench_deepseek_mla.py) count them: FLOPs = 2·b·s_q·s_k·h_q·(d + dv), every
    query against every key, no causal discount (FlashInfer: 2·b·h·(2·512 + 64)·s_k, the
    same); bytes = (b·s_k·d + b·s_q·h_q·(d + dv))·sizeof(dtype), the latent cache once, Q in
    and O out (FlashMLA's sparse kernel: s_k = topk); a `kv_dtype` column (aiter's fp8 cache)
    sizes the cache at its own width."""
    size = dtype(row.params["dtype"]).bits / 8
    cache = dtype(row.params.get("kv_dtype", row.params["dtype"])).bits / 8
    b, q, k, h = s["batch"], s["s_q"], s["s_k"], s["h_q"]
    flops = 2.0 * b * q * k * h * (MLA_D + MLA_DV)
    return flops, b * k * MLA_D * cache + b * q * h * (MLA_D + MLA_DV) * size


def mla_decode_cost(row: Row, s: dict[str, int]) -> Cost:
    """Absorbed MLA (DeepSeek-V3's ranks: 576-wide latent cache, 512-wide values) over the
    row's cache; a sparse (top-k) row attends to its topk keys, without a causal mask."""
    p = row.params
    return mla_attention(s["batch"], s["s_q"], s["s_k"], heads=s["h_q"], form="absorbed",
                         causal=p.get("causal", "1") == "1", dtype=p["dtype"],
                         kv_dtype=p.get("kv_dtype", p["dtype"]))


def _mla_decode(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    sk = "topk" if "topk" in row.params else "s_k"
    for s in decode_readings(row, ("batch", "s_q", sk, "h_q")):
        s["s_k"] = s.pop(sk)
        measured_s = _measured_s(row, *mla_source_work(row, s))
        yield _time(mla_decode_cost(row, s), chip, expect, row.params.get("impl")) / measured_s


def gqa_source_work(row: Row, s: dict[str, int]) -> tuple[float, float]:
    """FLOPs and bytes as FlashInfer's benchmarks count them (flashinfer/testing/utils.py
    attention_flops, non-causal: 4·b·s_q·s_k·h·d; attention_tb_per_sec and
    bench_cute_dsl_decode's 2·q + kv bytes, as nvbench's Read + Write): Q and O once and
    b·s_k·h_kv·d elements each of K and V."""
    p = row.params
    act, kv = dtype(p["dtype"]).bits / 8, dtype(p.get("kv_dtype", p["dtype"])).bits / 8
    b, q, k, d = s["batch"], s["s_q"], s["s_k"], s["head_dim"]
    nbytes = 2 * b * q * s["heads"] * d * act + 2 * b * k * s["kv_heads"] * d * kv
    return 4.0 * b * q * k * s["heads"] * d, nbytes


def attention_decode_cost(row: Row, s: dict[str, int]) -> Cost:
    """GQA / MHA decode over a (paged) KV cache: split-KV decoding reads each cache once; a
    speculative row (s_q > 1) is causal over its own tokens."""
    p = row.params
    return attention(s["batch"], s["s_q"], s["s_k"], s["heads"], s["kv_heads"], s["head_dim"],
                     causal=True, impl="decode", dtype=p["dtype"],
                     kv_dtype=p.get("kv_dtype", p["dtype"]))


def _attention_decode(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    for s in decode_readings(row, ("batch", "s_q", "s_k", "heads", "kv_heads", "head_dim")):
        measured_s = _measured_s(row, *gqa_source_work(row, s))
        yield _time(attention_decode_cost(row, s), chip, expect, row.params.get("impl")) \
            / measured_s


# --- linear attention: Gated DeltaNet prefill (Qwen3-Next / Qwen3.5) -------------------------


def packed_seqlens(row: Row) -> dict[int, int]:
    """The row's packed (varlen) sequences as {length: count}: `a+b` is two sequences, `L*n`
    is n sequences of L (FlashInfer's bench_gdn_prefill labels 4096+4096 and 8192x8)."""
    out: dict[int, int] = {}
    try:
        for part in row.params["seqlens"].split("+"):
            length, _, n = part.partition("*")
            out[int(length)] = out.get(int(length), 0) + int(n or 1)
    except (KeyError, ValueError):
        raise Unbounded(f"seqlens not stated ({row.params.get('seqlens', 'missing')})") from None
    return out


def gdn_source_flops(row: Row) -> float:
    """FLOPs as FlashInfer's bench_gdn_prefill.py counts them (`_gdn_tflops`): two d x d
    products per token and value head (the k·vᵀ state update and q·S), 4·T·h_v·d²."""
    tokens = sum(length * n for length, n in packed_seqlens(row).items())
    return 4.0 * tokens * _int(row, "h_v") * _int(row, "d_k") * _int(row, "d_v")


def linear_attention_cost(row: Row) -> Cost:
    """The row's chunked mixer (`ops.linear_attention`) summed over its packed sequences: h_v
    value (state) heads, h_qk query/key heads, an initial state read and the final state
    written where the row passes one (initial_state=1: kv_len = q_len + 1), at the kernel's
    chunk where the row names one (`chunk`: Mamba-2's SSD kernels run 256), else the op's 64.
    The timed kernel runs no short convolution and the op has no switch for none: a
    1-channel, width-1 one (2 FLOPs a token, no state) stands for it."""
    from roofline.ops.linear_attention import DEFAULT_CHUNK, linear_attention

    p = row.params
    past = 1 if p.get("initial_state", "0") == "1" else 0
    return sum((linear_attention(n, length, length + past, heads=_int(row, "h_v"),
                                 key_heads=_int(row, "h_qk"), key_dim=_int(row, "d_k"),
                                 value_dim=_int(row, "d_v"), kind=p.get("mixer", "gated_deltanet"),
                                 chunk=int(p.get("chunk", DEFAULT_CHUNK)),
                                 conv_dim=1, conv_kernel=1, dtype=p["dtype"],
                                 state_dtype=p.get("state_dtype", "fp32"))
                for length, n in packed_seqlens(row).items()), Cost())


def _linear_attention(row: Row, chip: Chip, expect: bool) -> Iterator[float]:
    """A printed time as it is; a TFLOP/s figure through FlashInfer's own 4·T·h_v·d²."""
    measured_s = _measured_s(row, gdn_source_flops(row), 0.0)
    yield _time(linear_attention_cost(row), chip, expect, row.params.get("impl")) / measured_s


KERNELS: dict[str, Callable[[Row, Chip, bool], Iterator[float]]] = {
    "gemm": _gemm, "attention_fwd": _attention_fwd, "attention_bwd": _attention_bwd,
    "hbm": _hbm, "mla_decode": _mla_decode, "attention_decode": _attention_decode,
    "linear_attention": _linear_attention}


def kernel_ratio(row: Row, expect: bool = False) -> float:
    """Measured speed over predicted: the bound at the loosest reading of the row (it must
    hold whatever the row meant); the expected time at the row's first reading and SKU."""
    if expect:
        return next(KERNELS[row.kind](row, kernel_chips(row)[0], True))
    return min(r for chip in kernel_chips(row) for r in KERNELS[row.kind](row, chip, False))


# --- collectives and DeepEP -----------------------------------------------------------------

COLLECTIVE_KINDS = ("collective", "moe_dispatch")
# collective rows that beat the bound today: known bugs, each with why (the tests mark them
# strict xfails: a fix turns them red)
BEATEN: dict[str, str] = {}
# published cells that cannot be the op their table names: the source's own kernel moves
# several times the bytes the cell's time allows over the source's own NIC, so the cell is a
# stage of the op (a send- or receive-only time) or a misprint; skipped with the evidence
# (a bound lowered under the NIC's rate to hold them would be false for every other row)
NOT_THE_OP: dict[str, str] = {
    "pplx-cx7-ep16-prefill-combine-time": (
        "pplx-garden's EP16 pplx-CX7 prefill combine cell (1062.2 us) is below the NIC floor "
        "of any combine of bf16 outputs: one reduced copy per (token, other node), 4096 x "
        "14336 B x 0.9965 = 58.5 MB a rank, needs 1170 us at 400 Gb/s (one ConnectX-7 a "
        "GPU: fabric-lib's 400 Gb/s peak, arXiv:2510.27656), and pplx's kernel sends every "
        "(token, expert) pair on its own (p2p-all-to-all/a2a-kernels/src/a2a/"
        "a2a_combine_send.cu copies each remote pair's expert row to the send buffer, no "
        "reduction): 4 remote pairs a token, 235 MB, 4.7 ms; its own EP8 (1405.1) and EP32 "
        "(7526.8) cells and pplx-EFA's EP16 (5379.1) follow that volume. The release's bench "
        "(b3c4b59 benchmarks/bench_all_to_all.py) timed send-only and receive-only stages "
        "beside the whole op, so the cell is likely one of those, or shifted: the same "
        "table's EP8 pplx-CX7 dispatch (5071.1) repeats DeepEP-CX7's EP64 dispatch (5071.6)"),
}
# a row's `timing`: launched in a CUDA / HIP graph (nccl-tests -G, mscclpp-test, FlashInfer's
# bench_gpu_time(use_cuda_graph=True)) or the kernel's device time (a profiler): no host-side
# enqueue in the measured time
GRAPH_TIMED = ("graph", "device")
# a row's `kernel` whose own schedule the bound names, so the expected time runs it (not the
# per-copy volume of `Cost.runs`): DeepEP's V1 normal kernels (and UCCL-EP's port of them)
# send a token once per destination rank and, across nodes, once per destination node over
# RDMA, then forward it over NVLink (deepseek-ai/DeepEP README, "normal kernels":
# asymmetric-domain forwarding; csrc/kernels/internode.cu)
OWN_KERNELS = ("deepep-normal",)
# a row's `impl` whose buffers are symmetric (registered in every peer's address space), so
# the library runs a kernel that loads and stores its peers' buffers directly, the bound's
# one- or two-shot schedule, not a ring: NCCL 2.27+'s symmetric-memory kernels (NVIDIA
# blog "Enabling Fast Inference and Resilient Training with NCCL 2.27": symmetric kernels for
# all-reduce, all-gather and reduce-scatter within an NVLink domain)
DIRECT_KERNELS = ("nccl-symmetric",)
COLLECTIVE_OP = {"allreduce": "all-reduce", "allgather": "all-gather",
                 "reducescatter": "reduce-scatter", "alltoall": "all-to-all",
                 "sendrecv": "send-recv", "broadcast": "broadcast", "dispatch": "all-to-all",
                 "combine": "all-to-all"}


@dataclass(frozen=True)
class Collective:
    id: str
    chip: str
    op: str  # the collective
    ranks: int
    nodes: int
    metric: str
    measured: float
    nbytes: float = 0.0
    algo: str = ""
    skip: str = ""  # why the row is not checked
    ratio: float = float("nan")  # measured/bound (bandwidths) or bound/measured (times)
    bound_name: str = ""
    expected_ratio: float = float("nan")  # the same against the expected time


def collective_case(row: Row) -> Collective:
    """The bound at the loosest part the row could name (a row naming an architecture is
    checked on each of its parts); the expected time on its first."""
    p = row.params
    base = Collective(row.id, row.chip, COLLECTIVE_OP[p["op"]], int(p["ranks"]),
                      int(p.get("nodes", 1)), row.metric, row.value)
    if row.id in NOT_THE_OP:
        return replace(base, skip="not the whole op: " + NOT_THE_OP[row.id])
    try:
        chips = kernel_chips(row)
    except Unbounded as why:
        return replace(base, skip=str(why))
    if row.kind == "moe_dispatch":
        nbytes = int(p["tokens"]) * int(p["hidden"]) * int(p["topk"]) * dtype(p["dtype"]).bits / 8
        algo = "direct"
    elif p.get("bytes", "unknown") == "unknown":
        return replace(base, skip="message size not published")
    else:
        nbytes, algo = float(p["bytes"]), p.get("algo", "auto")
    # a bandwidth printed by DeepEP's test (UCCL-EP's copy too) counts its own bytes
    measured_bytes = deepep.counted_bytes(
        int(p["tokens"]), int(p["hidden"]), int(p["experts"]), int(p["topk"]), base.ranks,
        base.nodes, p["op"], p["dtype"]) if p.get("count") == "deepep" else nbytes
    placed = {"domain_size": base.ranks // base.nodes} if base.nodes > 1 else {}
    crossed = ("scale-up", "scale-out") if base.nodes > 1 else ("scale-up",)
    # a part without a link the row crosses cannot have run it (a PCIe card across nodes)
    usable = [c for c in chips if all(link in c.links for link in crossed)]
    if not usable:
        missing = next(link for link in crossed if link not in chips[0].links)
        return replace(base, skip=f"chip {row.chip!r} has no {missing} link")
    readings = []
    for chip in usable:
        cost = run_op(base.op.replace("-", ""), chip, nbytes=nbytes, ranks=base.ranks,
                      algo=algo, **placed).cost
        if row.kind == "moe_dispatch":  # the model's own EP all-to-all
            cost = one_copy_per_destination(cost, int(p["topk"]), base.ranks,
                                            base.ranks / base.nodes if base.nodes > 1
                                            else None,
                                            int(p["experts"]) if "experts" in p else None,
                                            *_routing_groups(p))
        readings.append((_collective_ratio(base, measured_bytes,
                                           float(evaluate(cost, chip).t_lower_s)), cost, chip))
    first_cost, first_chip = readings[0][1], readings[0][2]
    # an engine's custom all-reduce (SGLang, vLLM / aiter, PCIe one-shot) timed on its own:
    # its kernel, no NCCL call
    t_expected = float(expected(first_cost, first_chip, engine_kernels=p.get("impl", "").startswith(
                                DIRECT_KERNELS) or "custom-allreduce" in p.get("impl", "")
                                or p.get("kernel") in OWN_KERNELS,
                                in_graph=p.get("timing") in GRAPH_TIMED).t_s)
    ratio, cost, _ = min(readings, key=lambda r: r[0])
    return replace(base, nbytes=nbytes, algo=algo, ratio=ratio,
                   expected_ratio=_collective_ratio(base, measured_bytes, t_expected),
                   bound_name=cost.name)


def _routing_groups(p: dict[str, str]) -> tuple[int, int]:
    """(n_group, topk_group) of the row's router; (1, 1): unrestricted."""
    groups = int(p.get("groups", 1))
    return groups, int(p.get("topk_groups", groups))


def _collective_ratio(case: Collective, nbytes: float, t_predicted: float) -> float:
    """measured/predicted: <= 1 when a bound holds."""
    if case.metric == "time_us":
        return t_predicted / (case.measured * 1e-6)
    algbw = nbytes / t_predicted
    if case.metric == "busbw_GBps":
        return case.measured * 1e9 / (algbw * float(busbw_factor(case.op, case.ranks)))
    if case.metric in ("algbw_GBps", "GBps"):
        return case.measured * 1e9 / algbw
    raise AssertionError(f"{case.id}: unknown metric {case.metric!r}")


# --- training ----------------------------------------------------------------------------

TRAIN_MODELS = {
    "meta-llama/Llama-3.1-405B": "llama-3.1-405b", "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "meta-llama/Meta-Llama-3-70B": "llama-3-70b", "meta-llama/Llama-3.1-8B": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b", "openai/gpt-oss-120b": "gpt-oss-120b",
    "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b", "meta-llama/Llama-2-70b-hf": "llama-2-70b",
    "deepseek-ai/DeepSeek-V3 (w/o MTP)": "deepseek-v3", "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b", "moonshotai/Kimi-K2-Base": "kimi-k2",
    "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b",
    "meta-llama/Llama-4-Scout-17B-16E": "llama-4-scout",
    "meta-llama/Llama-4-Maverick-17B-128E": "llama-4-maverick",
    "mistralai/Mistral-7B-v0.1": "mistral-7b", "google/gemma-3-12b-pt": "gemma-3-12b",
    "meta-llama/Llama-2-7b-hf": "llama-2-7b", "GPT3-175B": "gpt3-175b",
    **{f"mpt-{n}b": f"mpt-{n}b" for n in (3, 7, 13, 30, 70)}}  # llm-foundry's yamls
# torchtitan's Grand Teton H100 (96 GB HBM2e, 2.4 TB/s, 500 W) is slower than the catalog's
# H100 SXM: the SXM bound is looser there, and still a bound
TRAIN_CHIPS = {"h100-hbm2e-96gb": "h100-sxm"}
FP8 = ("fp8", "fp8-cs", "mxfp8", "fp8-linear")


@dataclass(frozen=True)
class Training:
    id: str
    source: str
    ratio: float = float("nan")  # measured / bound
    skip: str = ""
    expected_ratio: float = float("nan")  # measured / expected


def _pint(p: dict[str, str], key: str, default: int) -> int:
    value = p.get(key, "")
    return int(value) if value.isdigit() else default


def _named_schedule(p: dict[str, str], layout: Any) -> Any:
    """The schedule a row's bound takes: its layout's interleaved pipeline (vpp > 1) or the
    1F1B it names, with TP and EP overlap; DualPipe and the zero-bubble schedules (a bubble
    no smaller than none: models.schedule.best_schedule); none named: None, the headline."""
    named = p.get("schedule", "").lower()
    if named in ("dualpipe", "interleavedzerobubble"):
        return replace(layout, pipeline="zero-bubble", vpp=1)
    return layout if named or layout.vpp > 1 else None


def training_case(row: Row) -> Training:
    from roofline.models import Parallel, analyze, load_model, model_precision, param_counts, train
    from roofline.models.schedule import Schedule

    p = row.params
    base = Training(row.id, row.source)
    model = TRAIN_MODELS.get(p.get("model", ""))
    if model is None:
        return replace(base, skip=f"model {p.get('model')!r} is not in the catalog")
    try:
        chip = load_chip(TRAIN_CHIPS.get(row.chip, row.chip))
    except RooflineError:
        return replace(base, skip=f"chip {row.chip!r} is not in the catalog")
    tp, pp, cp, ep = (_pint(p, k, 1) for k in ("tp", "pp", "cp", "ep"))
    seq = _pint(p, "seq_len", 0)
    dp = _pint(p, "dp", row.n_chips // (tp * pp * cp))
    if "global_batch" in p and p["global_batch"].isdigit():
        batch = int(p["global_batch"])
    elif "batch_per_dp" in p:
        batch = int(p["batch_per_dp"]) * dp
    else:
        batch = _pint(p, "micro_batch", 1) * dp
    # torchtitan's table prints the local (per-DP-rank) batch, which its pipeline splits into
    # micro-batches of one sequence; Megatron / NeMo print the micro-batch size itself
    micro = 1 if p.get("framework") == "torchtitan" else _pint(p, "micro_batch", 1)
    m = max(1, batch // (dp * micro))
    vpp = _pint(p, "vpp", 1)
    if vpp > 1 and m % pp:
        m = pp * -(-m // pp)  # interleaving needs multiples of pp: round up (a smaller bubble)
    dt = p.get("dtype", "bf16").split("(")[0]
    spec = load_model(model)
    prec = model_precision(spec, "bf16")
    if dt in FP8 or dt.startswith("fp8"):
        prec = replace(prec, matmul="fp8")
    elif dt == "nvfp4":
        prec = replace(prec, matmul="fp4")
    elif dt == "int8":  # int8 GEMMs (MaxText's AQT): the int8 peak, twice bf16's on TPUs
        prec = replace(prec, matmul="int8")
    par = Parallel(tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, microbatches=m, fsdp=p.get("fsdp") == "1")
    # the forecast's schedule: the layout's pipeline with every overlap the frameworks offer
    schedule = Schedule("interleaved" if vpp > 1 and pp > 1 else "1f1b", vpp if pp > 1 else 1,
                        tp_overlap=True, ep_overlap=True)
    recompute = p.get("recompute", "").startswith("full")
    try:
        a = analyze(spec, chip, train(batch, seq, recompute), par, prec, schedule=schedule)
        # the bound: the schedule the row names, else the headline (the best published
        # schedule for the layout, which must hold for every implementation)
        named = _named_schedule(p, schedule)
        headline = a if named == schedule else analyze(spec, chip, train(batch, seq, recompute),
                                                       par, prec, schedule=named)
    except RooflineError as exc:
        return replace(base, skip=f"layout not analysable: {exc}")
    bound = float(headline.tokens_per_s) / par.chips  # tokens/s per GPU at the lower bound
    # the framework's own factor where one is fitted (framework.train.<framework>)
    forecast = float(expected_step(a, chip, framework=p.get("framework")).tokens_per_s) \
        / par.chips
    if row.metric == "tokens_per_s_per_gpu":
        measured = row.value
    else:  # TFLOP/s or MFU: the largest FLOPs per token of the convention (full attention)
        counts = param_counts(spec)
        per_token = 6 * counts.active + 12 * spec.layers * spec.heads * spec.head_dim * seq
        # an MFU is over the peak its source names (`mfu_peak`: Composer's amp_fp8 MFU is
        # over the fp8 peak), else bf16's
        achieved = row.value * 1e12 if row.metric == "tflops_per_gpu" else \
            row.value * chip.peak_flops(p.get("mfu_peak", "bf16"))
        measured = achieved / per_token
    return replace(base, ratio=measured / bound, expected_ratio=measured / forecast)


# --- serving -----------------------------------------------------------------------------

# serving engines (not gpt-fast / torchao generate); NVIDIA NIM serves through TensorRT-LLM or
# vLLM inside and its benchmark pages do not name which (no engine-specific expected factor)
ENGINES = ("vllm", "sglang", "tensorrt", "nim")
# engines whose MoE layers shard each expert over the tensor-parallel group unless the launch
# asks for expert parallelism: a vLLM row that states no EP ran ep_size 1, no all-to-all
# (FusedMoEParallelConfig.make: `use_ep = dp_size_ * tp_size_ > 1 and
# vllm_parallel_config.enable_expert_parallel`, off by default; vllm-project/vllm
# vllm/model_executor/layers/fused_moe/config.py). Read so where the row has one attention
# group (dp 1): experts sharded over TP x DP without EP are not modelled. SGLang's default is
# the same (ep_size 1, MoE tp_size // ep_size; sgl-project/sglang python/sglang/srt/
# server_args.py), but its fitted factor (expect.table framework.decode.sglang) was fitted
# on its MoE rows read as EP = TP; read so they moved its fit half's MoE rows from 18% to
# 19% median error, so they keep that reading until the factor is refitted
TP_SHARDED_EXPERTS = ("vllm",)
THROUGHPUT = {"output_tokens_per_s": "output_tokens_per_s",
              "output_tokens_per_s_per_gpu": "output_tokens_per_s_per_chip",
              "total_tokens_per_s": "total_tokens_per_s"}
LATENCY = {"ttft_ms": ("ttft_s", 1e-3), "tpot_ms": ("tpot_s", 1e-3),
           "e2e_latency_s": ("e2e_s", 1.0)}
# checkpoint name -> catalog id (an explicit table: a wrong guess must not pass silently)
SERVE_MODELS = [(r"llama-3\.1-8b", "llama-3.1-8b"), (r"llama-3\.3-70b", "llama-3.3-70b"),
                (r"llama-3\.1-70b", "llama-3.1-70b"), (r"llama-3\.1-405b", "llama-3.1-405b"),
                (r"llama-2-70b", "llama-2-70b"), (r"llama-2-7b", "llama-2-7b"),
                (r"gpt-oss-20b", "gpt-oss-20b"),
                (r"deepseek-r1", "deepseek-r1"), (r"deepseek-v3(?!\.)", "deepseek-v3"),
                (r"gpt-oss-120b", "gpt-oss-120b"), (r"qwen3-235b-a22b", "qwen3-235b-a22b"),
                (r"kimi-k2", "kimi-k2"), (r"llama-4-scout", "llama-4-scout"),
                (r"qwen3-30b-a3b", "qwen3-30b-a3b"), (r"llama-4-maverick", "llama-4-maverick"),
                (r"mixtral-8x7b", "mixtral-8x7b"), (r"llama-3-70b", "llama-3-70b"),
                (r"qwen3-8b", "qwen3-8b"), (r"qwen3-32b", "qwen3-32b"),
                (r"qwen2\.5-7b(?!\d)", "qwen2.5-7b"), (r"qwen2\.5-72b", "qwen2.5-72b"),
                (r"llama-3\.2-1b", "llama-3.2-1b"), (r"llama-3\.2-3b", "llama-3.2-3b"),
                (r"mistral-7b", "mistral-7b"), (r"phi-4(?!-)", "phi-4"),
                (r"phi-3-mini", "phi-3-mini"),
                *((rf"gemma-3-{n}b", f"gemma-3-{n}b") for n in (1, 4, 12, 27))]


def _serve_dtype(text: str) -> str | None:
    """The narrowest dtype named (a mixed checkpoint's narrowest keeps the bound a bound)."""
    text = text.lower()
    for name in ("nvfp4", "mxfp4", "int4", "fp8", "float8", "int8", "fp16", "bf16"):
        if name in text:
            return {"float8": "fp8"}.get(name, name)
    return None


def _catalogued(row: Row, model: str | None) -> tuple[Chip | None, str]:
    """The row's chip, or why the row is skipped: its model or its chip is not in the
    catalog."""
    from roofline.models import list_models

    if model is None or model not in list_models():
        return None, f"model {row.params.get('model')!r} is not in the catalog"
    try:
        return load_chip(row.chip), ""
    except RooflineError:
        return None, f"chip {row.chip!r} is not in the catalog"


def _serve_model(row: Row) -> str | None:
    """The catalog id of a serving row's model (SERVE_MODELS), if one matches."""
    return next((cid for pat, cid in SERVE_MODELS
                 if re.search(pat, row.params.get("model", "").lower())), None)


def serving_case(row: Row) -> tuple[dict[str, Any] | None, str]:
    """(deployment, "") or (None, why it is skipped)."""
    from roofline.models import load_model, model_precision

    p = row.params
    fw = p.get("framework", "").lower()
    if not fw.startswith(ENGINES):
        return None, f"{fw or 'no framework'}: not a serving engine run"
    model = _serve_model(row)
    found, why = _catalogued(row, model)
    if found is None:
        return None, why
    chip = found.id
    ins, outs = p.get("input_len", p.get("prompt_len")), p.get("output_len")
    if ins is None or outs is None:
        return None, "input or output length not stated"
    if float(outs) < 2:
        return None, "prefill only (output_len 1): not a serving run"
    if row.metric not in THROUGHPUT and row.metric not in LATENCY and \
            row.metric != "tokens_per_s":
        return None, f"metric {row.metric} is not a serving figure"
    pp, tp = int(p.get("pp", 1)), int(p.get("tp", 1))
    # unstated data parallelism: the row's chips (MoE: attention DP with experts over all)
    dp = int(p.get("attention_dp", p.get("dp", max(1, row.n_chips // (tp * pp)))))
    spec = load_model(model)
    # an InferenceMAX record names its expert-parallel size (`ep=1`: the engine's default,
    # experts sharded by TP); otherwise unstated: vLLM's default shards each expert over TP
    # (one attention group), else MoE experts over all the row's chips
    recorded = re.search(r"\bep=(\d+)", row.source)
    ep = int(p["ep"]) if p.get("ep", "").isdigit() else int(recorded.group(1)) if recorded \
        else (1 if not spec.moe or (dp == 1 and engine(fw) in TP_SHARDED_EXPERTS) else tp * dp)
    mtp = int(p.get("mtp", p.get("speculate_k", 0)) or 0)
    stated = _serve_dtype(p.get("weight_dtype", "")) or _serve_dtype(p.get("dtype", "")) \
        or "bf16"
    # the engine loads the checkpoint: its own dtype where it is narrower (Kimi-K2 ships fp8)
    weights = min(stated, model_precision(spec).weights, key=lambda d: dtype(d).bits)
    load = p.get("concurrency", p.get("batch"))
    kv = _serve_dtype(p.get("kv_dtype", ""))
    # the bound reads an unstated KV cache at fp8 (the narrowest an engine stores: loosest);
    # the expected time at the engine's default: kv_cache_dtype "auto" = the model's dtype
    # (vLLM, SGLang), fp8 where the checkpoint ships KV scales ("FP8-KV"; TensorRT-LLM's
    # ModelOpt fp8 / fp4 checkpoints quantize the KV cache with the weights)
    quantized = dtype(weights).bits <= 8
    kv_default = "fp8" if "fp8-kv" in p.get("model", "").lower() or (
        quantized and engine(fw) == "tensorrt-llm") else model_precision(spec).activations
    return dict(model=model, chip=chip, input_len=float(ins), output_len=float(outs), tp=tp,
                pp=pp, dp=dp, ep=ep, weights=weights, kv=kv or "fp8",
                expected_kv=kv or kv_default, spec_k=mtp,
                concurrency=int(load) if load else None, framework=engine(fw),
                disagg="disagg" in fw, metric=row.metric, value=row.value,
                # a load balancer the source states (EPLB's redundant experts): its max / mean
                eplb=float(p["eplb"]) if "eplb" in p else None,
                # lengths spread around their means (the source says so): the clients drift
                # out of step, their prompts no longer arriving together
                in_step="length_spread" not in row.params), ""


# A draft's chance of being accepted where a run does not publish it, for the expected time
# (the bound takes every draft accepted): DeepSeek-V3's MTP module predicts the second token
# with 85-90% acceptance (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 5.4.3);
# the lower edge, as TensorRT-LLM and SGLang chain that one module for every draft
MTP_ACCEPT = 0.85


@functools.cache
def serve_plan(model: str, chip: str, input_len: float, output_len: float, tp: int, pp: int,
               dp: int, ep: int, weights: str, kv: str, spec_k: int, concurrency: int | None,
               disagg: bool, expect: bool = False, framework: str | None = None,
               in_step: bool = True, eplb: float | None = None, accept: float = 1.0) -> Any:
    from roofline.models.step import MemoryBudget
    from roofline.serve import Load, Space, Workload, plan

    w = Workload.from_lengths(input_len, output_len, spec_k=spec_k,
                              accept=accept if spec_k else 0, in_step=in_step)
    space = Space(tp=(tp,), pp=(pp,), dp=(dp,), ep=(ep,), weight_dtypes=(weights,),
                  kv_dtypes=(kv,), chunks=(512, 2048, 8192, 32768), max_chips=4096,
                  modes=("disaggregated",) if disagg else ("aggregated",), eplb=eplb)
    # the run's own memory and running-batch settings are not published: all the memory and
    # no engine cap for the bound (it must hold for any setting); the expected time runs the
    # engine's default cap (serve/runtime.py: vLLM's max_num_seqs, TensorRT-LLM's
    # max_batch_size)
    return plan(model, [chip], w, space=space, load=Load(concurrency=concurrency),
                budget=MemoryBudget(1.0), expect=expect, framework=framework,
                engine_limits=expect)


def serving_ratio(case: dict[str, Any], expect: bool = False) -> float:
    """measured / predicted for a throughput, predicted / measured for a latency: <= 1 is
    consistent with a bound."""
    key = {k: case[k] for k in ("model", "chip", "input_len", "output_len", "tp", "pp", "dp",
                                "ep", "weights", "kv", "spec_k", "concurrency", "disagg")}
    if expect:  # the engine's own KV dtype and fitted factor; whether its clients stay in step
        key.update(kv=case.get("expected_kv", key["kv"]), framework=case.get("framework"),
                   in_step=case.get("in_step", True), eplb=case.get("eplb"),
                   accept=MTP_ACCEPT)
    c = serve_plan(**key, expect=expect).columns
    ok = c["fits"] & c["feasible"]
    if not ok.any():
        return math.inf
    m, v = case["metric"], case["value"]
    if m in THROUGHPUT:
        col = c[THROUGHPUT[m]]
        if case["disagg"] and m == "output_tokens_per_s_per_gpu":  # the decode pool's GPUs
            col = c["output_tokens_per_s"] / c["decode_chips"]
        return float(v / col[ok].max())
    if m == "tokens_per_s":  # tokens/s of one user: 1 / TPOT
        return float(v * c["tpot_s"][ok].min())
    column, scale = LATENCY[m]
    return float(c[column][ok].min() / (v * scale))


# --- prefill-only runs: one forward pass over a static batch of prompts ------------------


@dataclass(frozen=True)
class Prefill:
    id: str
    kind: str
    chip: str
    ratio: float = float("nan")  # bound time over measured time (<= 1 when the bound holds)
    expected_ratio: float = float("nan")  # expected time over measured time
    skip: str = ""


def _prefill_precision(spec: Any, weights: str, chip: Chip, kv: str) -> Any:
    """As the serving plan reads a run's dtypes: the stated weights (never wider than the
    checkpoint's), fp8 / fp4 GEMMs where the weights and the chip have them, experts the
    checkpoint keeps narrower stay so."""
    from roofline.models import Precision, model_precision
    from roofline.serve.iteration import activation_dtype

    native = model_precision(spec)
    act = activation_dtype(weights, chip)
    if weights == native.weights:
        return model_precision(spec, None, act, kv)
    experts = native.expert_weights if native.expert_weights and \
        dtype(native.expert_weights).bits < dtype(weights).bits else None
    return Precision(weights=weights, activations=act, kv_cache=kv, expert_weights=experts)


def prefill_case(row: Row) -> Prefill:
    """A prefill-only run (output_len 1): `batch` prompts of `prompt_len` tokens through one
    forward pass, no decode step (TensorRT-LLM's gptSessionBenchmark --input_output_len L,1,
    vLLM's benchmark_latency --output-len 1). ttft_ms is that pass's time. The bound reads an
    unstated KV cache at fp8 and an unstated batch as 1 (both the loosest), as serving does."""
    from roofline.models import Parallel, analyze, load_model, model_precision
    from roofline.models import prefill as prefill_phase

    p = row.params
    base = Prefill(row.id, row.kind, row.chip)
    fw = p.get("framework", "").lower()
    if not fw.startswith(ENGINES):
        return replace(base, skip=f"{fw or 'no framework'}: not a serving engine run")
    model = _serve_model(row)
    chip, why = _catalogued(row, model)
    if chip is None or model is None:
        return replace(base, skip=why)
    if p.get("output_len") != "1" or row.metric != "ttft_ms":
        return replace(base, skip=f"{row.metric} with output_len {p.get('output_len')}: "
                       "not a prefill-only TTFT")
    spec = load_model(model)
    stated = _serve_dtype(p.get("weight_dtype", "")) or _serve_dtype(p.get("dtype", "")) \
        or "bf16"
    weights = min(stated, model_precision(spec).weights, key=lambda d: dtype(d).bits)
    kv = _serve_dtype(p.get("kv_dtype", ""))
    par = Parallel(tp=_pint(p, "tp", 1), pp=_pint(p, "pp", 1))
    phase = prefill_phase(_pint(p, "batch", 1), _int(row, "prompt_len"))
    measured_s = row.value * 1e-3
    tight = analyze(spec, chip, phase, par, _prefill_precision(spec, weights, chip, kv or "fp8"))
    # the forecast reads an unstated KV cache as the engine's recipe keeps it: TensorRT-LLM's
    # fp8 checkpoints quantize it too (quantize.py --qformat fp8 --kv_cache_dtype fp8,
    # NVIDIA/TensorRT-LLM examples/quantization/README.md), the others at the model's dtype
    recipe = "fp8" if engine(fw) == "tensorrt-llm" and dtype(weights).peak == "fp8" else None
    plain = analyze(spec, chip, phase, par, _prefill_precision(
        spec, weights, chip, kv or recipe or model_precision(spec).activations))
    chunk = p.get("prefill_chunk")
    forecast = expected_step(plain, chip, framework=engine(fw), prefill_chunk=(
        _int(row, "prompt_len") if chunk == "none" else float(chunk) if chunk else None),
        dynamic_chunks=p.get("dynamic_chunking") == "1")
    return replace(base, ratio=float(tight.t_lower_s) / measured_s,
                   expected_ratio=float(forecast.t_s) / measured_s)


# --- generation scripts: gpt-fast and torchao's copy of its generate.py -------------------

GENERATORS = ("gpt-fast", "torchao")  # torchao/_models/llama/generate.py is gpt-fast's
GENERATE_MODELS = {"meta-llama/Llama-2-7b-chat-hf": "llama-2-7b",
                   "meta-llama/Llama-2-70b-chat-hf": "llama-2-70b",
                   "meta-llama/Llama-3.1-8B": "llama-3.1-8b",
                   "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
                   "meta-llama/Llama-3.1-405B": "llama-3.1-405b",
                   "mistralai/Mixtral-8x7B-v0.1": "mixtral-8x7b"}
# torchao's int4 HQQ checkpoint is int4 with a group of 64 (the row's note: "group size 64")
GENERATE_DTYPES = {"int4-hqq-g64": "int4-g64"}
NEW_TOKENS = 200  # generate.py's default --max_new_tokens: the mean context is prompt + 100


@dataclass(frozen=True)
class Generate:
    id: str
    kind: str
    chip: str
    ratio: float = float("nan")  # measured tokens/s over the bound's
    expected_ratio: float = float("nan")  # over the expected
    skip: str = ""


def generate_case(row: Row) -> Generate:
    """A batch-1 generate.py run: tokens/s of one stream, one decode step per token, under
    torch.compile(mode="reduce-overhead") (a CUDA graph). gpt-fast's GB/s column is its own
    model bytes times the same tokens/s: scored once, as tokens/s."""
    from roofline.models import Parallel, Precision, analyze, decode

    p = row.params
    base = Generate(row.id, row.kind, row.chip)
    fw = p.get("framework", "").lower()
    if not fw.startswith(GENERATORS):
        return replace(base, skip=f"{fw or 'no framework'}: not a generate.py run")
    if row.metric != "tokens_per_s":
        return replace(base, skip=f"{row.metric}: the same run as its tokens_per_s row "
                       "(model bytes x tokens/s)")
    if "speculate_k" in p:
        return replace(base, skip="speculative decoding: the draft's acceptance not published")
    model = GENERATE_MODELS.get(p.get("model", ""))
    chip, why = _catalogued(row, model)
    if chip is None or model is None:
        return replace(base, skip=why)
    weights = p.get("weight_dtype", "bf16")
    prec = Precision(weights=GENERATE_DTYPES.get(weights, weights), activations="bf16")
    par = Parallel(tp=_pint(p, "tp", 1), ep=1)
    prompt, batch = _pint(p, "prompt_len", 1), _pint(p, "batch", 1)
    # the bound at the shortest context (the loosest), the expected at the run's mean
    tight = analyze(model, chip, decode(batch, prompt), par, prec)
    mean = analyze(model, chip, decode(batch, prompt + NEW_TOKENS // 2), par, prec)
    forecast = expected_step(mean, chip, cuda_graphs=True, framework=engine(fw))
    return replace(base, ratio=row.value * float(tight.t_lower_s) / batch,
                   expected_ratio=row.value * float(forecast.t_s) / batch)


# --- every kind together (check.py) ------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """One row, scored: measured/bound and measured/expected (as speeds)."""

    id: str
    kind: str
    chip: str
    bound: float
    expected: float
    extra: dict[str, Any] = field(default_factory=dict)


def scored() -> tuple[list[Scored], dict[str, str]]:
    """Every row the tool can model, and the skipped ones with their reason."""
    out: list[Scored] = []
    skipped: dict[str, str] = {}
    for row in rows(KERNEL_KINDS):
        try:
            out.append(Scored(row.id, row.kind, row.chip, kernel_ratio(row),
                              kernel_ratio(row, True)))
        except Unbounded as why:
            skipped[row.id] = str(why)
    for row in rows(COLLECTIVE_KINDS):
        c = collective_case(row)
        if c.skip:
            skipped[row.id] = c.skip
        else:
            out.append(Scored(row.id, row.kind, row.chip, c.ratio, c.expected_ratio))
    for row in rows(("train",), SYSTEMS_CSV):
        t = training_case(row)
        if t.skip:
            skipped[row.id] = t.skip
        else:
            out.append(Scored(row.id, "train", row.chip, t.ratio, t.expected_ratio))
    for row in rows(("serving", "decode", "prefill"), SYSTEMS_CSV):
        case, why = serving_case(row)
        if case is None and row.kind == "decode":
            g = generate_case(row)
            if not g.skip:
                out.append(Scored(row.id, row.kind, row.chip, g.ratio, g.expected_ratio))
                continue
            # a generate.py run's own reason; a serving engine's row keeps serving_case's
            if row.params.get("framework", "").lower().startswith(GENERATORS):
                why = g.skip
        if case is None and row.kind == "prefill" and why.startswith("prefill only"):
            f = prefill_case(row)
            if not f.skip:
                out.append(Scored(row.id, row.kind, row.chip, f.ratio, f.expected_ratio))
                continue
            why = f.skip
        if case is None:
            skipped[row.id] = why
        else:
            out.append(Scored(row.id, row.kind, row.chip, serving_ratio(case),
                              serving_ratio(case, True)))
    return out, skipped
