"""Published kernel measurements against the tool's bound: measured/bound <= 1 for every row.

Rows: benchmarks/validation/ops.csv (each with its source: repository@commit file#line, or
paper and figure), kinds gemm, attention_fwd, attention_bwd, hbm, mla_decode,
attention_decode and linear_attention. Each row's figure is turned into a time in the source's
own FLOP (or byte) convention, and the bound is the tool's t_lower for the same work on the
row's chip:

- gemm: `matmul(m, k, n)` (2·M·N·K FLOPs, the sources' convention too); a grouped GEMM is
  `groups` such matmuls (m is M per group); a `weight_dtype` column is a weight-only
  quantized GEMM (int4 / int8 weights, group scales in the dtype, fp16 / bf16 math).
- attention_fwd: `attention(B, N, N, H, Hkv, d, causal, impl="flash")` with the chip's flash
  defaults (SRAM tiling, L2); the measured time is FlashAttention's FLOPs, 4·B·N²·H·d (halved
  when causal), over the TFLOP/s printed.
- attention_bwd: FlashAttention's backward convention (2.5x the forward's FLOPs). Bound: 2.5x
  ... the backward op (`ops.attention_backward`, FlashAttention-2 Algorithm 2) on the chip's
  tiling, its query-side re-reads served by L2 where they fit (as the forward's K/V).
- hbm: a measured (effective) bandwidth against the chip's HBM roof.
- mla_decode: `mla_attention(B, s_q, s_k, h_q, form="absorbed")` (DeepSeek-V3's 576-wide
  latent cache, 512-wide values; a sparse top-k row over its topk keys); a rate is a time
  through FlashMLA's / FlashInfer's own counts, 2·b·s_q·s_k·h_q·(576 + 512) FLOPs and
  (b·s_k·576 + b·s_q·h_q·(576 + 512))·s bytes (`cases.mla_source_work`).
- attention_decode: `attention(B, s_q, s_k, H, Hkv, d, impl="decode")` (GQA / MHA over a
  paged KV cache, each cache read once); a rate through FlashInfer's bytes, Q + K + V + O.
- linear_attention: Gated DeltaNet prefill (Qwen3-Next / Qwen3.5), `linear_attention(...)`
  summed over the row's packed sequences with its initial state read and final state written
  (`cases.linear_attention_cost`); printed times as they are (FlashInfer's TFLOPS column is
  4·T·h_v·d² over that time, `cases.gdn_source_flops`).

Where a row leaves something open (shape order MxNxK vs MxKxN, output dtype, SKU, dtype not
printed, the point of a sweep behind an "up to" figure: sizes written `a|b|c`), every reading
is bounded and the loosest one is kept: a bound must hold for the row whatever it meant.
Rows on chips the catalog lacks are skipped with the reason.
``pytest -s tests/test_published_kernels.py -k table`` prints the per-kind table (README).
The rows and the bound are benchmarks/validation/cases.py's (`cases.kernel_ratio`), the one
path check.py scores the expected time on too.
"""

from __future__ import annotations

import statistics
from typing import Any

import cases  # benchmarks/validation (tests/conftest.py): the rows and the bound, one path
import pytest
from cases import Row, Unbounded

from roofline import load_chip
from roofline.ops.attention import attention, flash_tiling

KINDS = cases.KERNEL_KINDS


def _param(row: Row) -> Any:
    return pytest.param(row, id=row.id)


@pytest.mark.parametrize("row", [_param(r) for r in cases.rows(KINDS)])
def test_published_kernel_never_beats_the_bound(row: Row) -> None:
    try:
        ratio = cases.kernel_ratio(row)
    except Unbounded as why:
        pytest.skip(f"{row.id}: {why}")
    assert ratio <= 1.0, (f"{row.id} ({row.source}) runs at {ratio:.3f}x the tool's bound on "
                          f"{row.chip}: the bound is too tight")


def table() -> list[tuple[str, int, float, float, int]]:
    """Per kind: rows bounded, max and median measured/bound, rows skipped."""
    out = []
    for kind in KINDS:
        ratios, skipped = [], 0
        for row in cases.rows((kind,)):
            try:
                ratios.append(cases.kernel_ratio(row))
            except Unbounded:
                skipped += 1
        out.append((kind, len(ratios), max(ratios), statistics.median(ratios), skipped))
    return out


def format_table() -> str:
    lines = ["| kind | rows | max measured/bound | median | skipped (chip or shape unknown) |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {k} | {n} | {hi:.2f} | {med:.2f} | {sk} |" for k, n, hi, med, sk in table()]
    return "\n".join(lines)


def test_every_kind_has_bounded_rows_and_the_table_prints(capsys: Any) -> None:
    summary = table()
    assert [k for k, *_ in summary] == list(KINDS)
    for kind, n, hi, med, _ in summary:
        assert n >= 5, f"{kind}: only {n} rows could be bounded"
        assert med <= hi <= 1.0
    with capsys.disabled():
        print("\n" + format_table())


def test_flash_forward_d256_short_sequences_read_hbm_once() -> None:
    # FA3 Figure 5e on H100: d = 256 at 512 and 2k tokens. Charging every K/V re-read to HBM
    # called them HBM-bound at 1.12x and 1.03x their measured speed: the re-reads come from
    # L2, and HBM sees Q, K, V and O once (32 x 8 heads x 512 tokens x 4 x 256 x 2 B)
    wanted = ("fa3-h100-d256-s512-nc-fwd-fp16", "fa3-h100-d256-s2k-nc-fwd-fp16")
    found = [r for r in cases.rows(("attention_fwd",)) if r.id in wanted]
    assert len(found) == len(wanted)
    for row in found:
        chip = load_chip(row.chip)
        shape = cases.attention_shape(row)
        cost = attention(**shape, impl="flash", **flash_tiling(chip))
        once = shape["batch"] * shape["heads"] * shape["q_len"] * 4 * 256 * 2
        assert cost.bytes["hbm"] == pytest.approx(once) and cost.bytes["l2"] > once
        assert cases.kernel_ratio(row) < 0.8


def test_row_flop_conventions() -> None:
    by_id = {r.id: r for r in cases.rows(("attention_fwd", "attention_bwd"))}
    # FlashAttention halves causal FLOPs: 4·B·N²·H·d / 2 (FA3 Figure 5d, d = 128, N = 512)
    fa3 = by_id["fa3-h100-d128-s512-causal-fwd-fp16"]
    assert cases.fa_forward_flops(fa3) == 2.0 * 32 * 512**2 * 16 * 128
    # aiter counts causal FLOPs in full: its 2105 TFLOP/s is ~1052 in FlashAttention's terms
    aiter = by_id["aiter-mi355x-d128-s8k-gqa-causal-bwd"]
    assert cases.fa_forward_flops(aiter) == 4.0 * 8 * 8192**2 * 64 * 128
    assert cases.attention_shape(aiter)["kv_heads"] == 8  # GQA, from the row's notes


def test_tpu_and_gqa_row_conventions() -> None:
    by_id = {r.id: r for r in cases.rows(KINDS)}
    # Ironwood's gemm_multiple_run: a JAX device is one of the chip's 2 TensorCores and
    # NO_SHARDING runs the whole GEMM on each, so the chip does groups=2 GEMMs in the device
    # time (the row's rate is 2x the printed per-device 956.38 TFLOP/s): compute-bound
    iw = by_id["ironwood-gemm-tpu7x-32768-bf16"]
    assert cases.kernel_ratio(iw) == pytest.approx(2 * 956.3824592 / 2307, rel=1e-3)
    # the JAX Pallas guide's v5e times include host dispatch (timeit around
    # block_until_ready): still under the 197 TFLOP/s roof
    assert cases.kernel_ratio(by_id["jax-xla-matmul-tpuv5e-8192-bf16"]) == pytest.approx(
        181.823 / 197, rel=1e-3)
    # aiter's README table: a kv_heads column makes the row GQA (64 query heads over 8 K/V),
    # and its causal figures are FlashAttention's halved count
    fwd = by_id["aiter-asm-mi300x-b8-h64kv8-s8k-causal-fwd"]
    assert cases.attention_shape(fwd)["kv_heads"] == 8
    assert cases.fa_forward_flops(fwd) == 4.0 * 8 * 8192**2 * 64 * 128 / 2
    tpu = [r for r in cases.rows(KINDS) if r.chip.startswith("tpu")]
    assert len(tpu) >= 9 and all(cases.kernel_ratio(r) <= 1.0 for r in tpu)


def test_backward_reuses_the_query_side_in_l2() -> None:
    # FA3 / FA4 backward at 8k-16k tokens: charging every Q/dO/dQ re-read to HBM put the bound
    # below the measured speed (FA3 d128 on H100 1.27x, FA4 on B200 1.37x); served by L2
    # where the query side of the heads in flight fits, every row holds
    long = [r for r in cases.rows(("attention_bwd",)) if cases.attention_shape(r)["q_len"] >= 8192]
    assert len(long) >= 8
    for row in long:
        chip = cases.kernel_chips(row)[0]
        cost = cases.backward_cost(row, chip)
        if "l2" in cost.bytes:
            assert cost.bytes["l2"] >= cost.bytes["hbm"]
        assert cases.kernel_ratio(row) <= 1.0


DECODE_SIZES = {"mla_decode": ("batch", "s_q", "s_k", "h_q"),
                "attention_decode": ("batch", "s_q", "s_k", "heads", "kv_heads", "head_dim")}


def _decode_work(row: Row, sizes: dict[str, int]) -> tuple[Any, tuple[float, float]]:
    if row.kind == "mla_decode":
        return cases.mla_decode_cost(row, sizes), cases.mla_source_work(row, sizes)
    return cases.attention_decode_cost(row, sizes), cases.gqa_source_work(row, sizes)


def test_decode_bounds_charge_the_bytes_and_flops_their_sources_count() -> None:
    # FlashMLA, FlashInfer and nvbench count the cache once, Q in and O out: the decode
    # bound's HBM bytes, at every reading; FLOPs alike (a causal s_q > 1 row scores
    # s_q·s_k - s_q(s_q-1)/2 pairs where the sources count s_q·s_k). Sparse MLA rows read
    # their FP8 cache (656 B a token) as 576 B, fewer bytes: a looser bound.
    checked = 0
    for row in cases.rows(("mla_decode", "attention_decode")):
        if "topk" in row.params:
            continue
        for sizes in cases.decode_readings(row, DECODE_SIZES[row.kind]):
            cost, (flops, nbytes) = _decode_work(row, sizes)
            assert cost.bytes["hbm"] == pytest.approx(nbytes, rel=1e-12), row.id
            # causal s_q > 1: the bound drops the s_q(s_q - 1)/2 masked pairs of s_q·s_k
            counted, masked = sum(cost.flops.values()), sizes["s_q"] / (2 * sizes["s_k"])
            assert flops * (1 - masked) * (1 - 1e-9) <= counted <= flops * (1 + 1e-3), row.id
            checked += 1
    assert checked >= 60


def test_decode_row_conventions() -> None:
    by_id = {r.id: r for r in cases.rows(("mla_decode", "attention_decode"))}
    # FlashMLA README: "up to 3000 GB/s" on H800 with no config: the script's 16-point sweep
    # is read, and its memory-bound points give exactly 3000 GB/s over the 3.35 TB/s roof
    row = by_id["flashmla-h800-dense-decode-3000gbps"]
    assert len(cases.decode_readings(row, DECODE_SIZES["mla_decode"])) == 16
    assert cases.kernel_ratio(row) == pytest.approx(3000e9 / 3.35e12, rel=1e-9)
    # FlashMLA's tests/test_flash_mla.py: FLOPS = s_q·total_seqlens·h_q·(d + dv)·2, bytes =
    # (total_seqlens·h_kv·d + b·s_q·h_q·d + b·s_q·h_q·dv)·2 at d = 576, dv = 512
    flops, nbytes = cases.mla_source_work(row, dict(batch=128, s_q=2, s_k=4096, h_q=128))
    assert flops == 2 * 128 * 4096 * 128 * (576 + 512) * 2
    assert nbytes == (128 * 4096 * 576 + 128 * 2 * 128 * 576 + 128 * 2 * 128 * 512) * 2
    # 660 TFLOPS is compute-bound at h_q·s_q = 256: two thirds of the 989 TFLOP/s roof
    assert cases.kernel_ratio(by_id["flashmla-h800-dense-decode-660tflops"]) == \
        pytest.approx(660 / 989.4, rel=1e-3)
    # B200 cute-dsl decode, b = 64, 16k tokens, GQA 64/8, d = 128: 598.255 us for the
    # 4.3 GB cache streams 7.18 TB/s, 0.90 of the 8 TB/s roof
    b200 = by_id["cute-dsl-decode-b200-b64-sq1-s16k-g8-d128"]
    cache = 2 * 64 * 16384 * 8 * 128 * 2 + 2 * 64 * 64 * 128 * 2
    assert cases.kernel_ratio(b200) == pytest.approx(cache / 598.255e-6 / 8.0e12, rel=1e-9)
    # an unnamed Hopper part is read as every Hopper SKU: the loosest is GH200's 4.9 TB/s
    hopper = by_id["flashinfer-mla-hopper-b768-s8k-h64"]
    _, (_, io) = _decode_work(hopper, dict(batch=768, s_q=1, s_k=8192, h_q=64))
    assert cases.kernel_ratio(hopper) == pytest.approx(3126.37e9 / 4.9e12, rel=1e-9)
    assert io == (768 * 64 * 576 + 768 * 8192 * 576 + 768 * 64 * 512) * 2


def test_gated_deltanet_prefill_by_hand() -> None:
    # FlashInfer PR #3866 on H100 SXM: Qwen3.5-397B's GDN heads at TP8 (2 query/key heads, 8
    # value heads, d = 128), one 65536-token sequence with an fp32 initial state, 0.399 ms
    by_id = {r.id: r for r in cases.rows(("linear_attention",))}
    row = by_id["gdn-flashinfer-h100-hq2-hv8-65536-pr3866"]
    tokens, heads, key_heads, d, chunk, t_measured = 65536, 8, 2, 128, 64, 0.399e-3
    # the source's own count, 4·T·h_v·d² (bench_gdn_prefill._gdn_tflops), gives its 86.1
    assert cases.gdn_source_flops(row) / t_measured / 1e12 == pytest.approx(86.1, abs=0.05)
    # the tool's: 3 products with the state, the dense intra-chunk tiles (C = 64), and the
    # 1-channel width-1 convolution standing for none; q, k, v, two gates in and o out in
    # fp16, the fp32 state read and written once
    flops = (2 * 3 * d * d + 2 * chunk * (3 * d + 2 * d)) * tokens * heads + 2 * tokens
    nbytes = tokens * (2 * key_heads * d + heads * d + 2 * heads + heads * d) * 2 \
        + 2 * heads * d * d * 4
    cost = cases.linear_attention_cost(row)
    assert sum(cost.flops.values()) == pytest.approx(flops, rel=1e-12)
    assert cost.bytes["hbm"] == pytest.approx(nbytes, rel=1e-12)
    chip = load_chip("h100-sxm")
    t_bound = max(flops / chip.peak_flops("fp16"), nbytes / chip.level("hbm").bandwidth_Bps)
    assert cases.kernel_ratio(row) == pytest.approx(t_bound / t_measured, rel=1e-9)
    # varlen labels: 8192x8 is eight sequences of 8192, 4096+4096 two of 4096
    assert cases.packed_seqlens(by_id["gdn-flashinfer-h100-hq16-hv64-8192x8-pr3481"]) == {8192: 8}
    assert cases.packed_seqlens(
        by_id["gdn-flashinfer-h100-hq16-hv64-4096p4096-pr3481"]) == {4096: 2}
    # FlashInfer's FLA/Triton baseline column ran q and k at h_v heads (bench_fla: h = h_v)
    fla = [r for r in by_id.values() if r.params["impl"] == "fla" and "flashinfer" in
           r.source.lower()]
    assert len(fla) >= 4 and all(r.params["h_qk"] == r.params["h_v"] for r in fla)


def test_weight_only_gemm_streams_its_quantized_weights() -> None:
    from roofline.expect import expected
    from roofline.ops.matmul import matmul

    # MLX's CUTLASS QMM on an H100 of unstated form (PR #3160): fp16 x int4 with group 64,
    # M = 1, N = K = 16384 at 6.0 TFLOP/s (2·M·N·K) is 89.5 us. The weights stream at 4.25
    # bits (int4 + an fp16 scale per 64; MLX's zero points left out: looser); the loosest
    # H100 is the NVL's 3.9 TB/s
    by_id = {r.id: r for r in cases.rows(("gemm",))}
    row = by_id["mlx-qmm-sm90-h100-fp16xint4-g64-m1-n16384-k16384"]
    n = k = 16384
    t_measured = 2 * n * k / 6.0e12
    nbytes = k * n * (4 + 16 / 64) / 8 + 2 * k + 2 * n
    assert cases.kernel_ratio(row) == pytest.approx(nbytes / 3.9e12 / t_measured, rel=1e-9)
    # the expected time (H100 SXM, the first SKU) streams at the int4 dequant fraction
    cost = matmul(1, k, n, "fp16", weight_dtype="int4-g64", out_dtype="bf16")
    t_expected = expected(cost, "h100-sxm", dequant="int4").t_s
    assert cases.kernel_ratio(row, True) == pytest.approx(t_expected / t_measured, rel=1e-9)
    assert t_expected > expected(cost, "h100-sxm").t_s
    # Marlin's channelwise int8 on the same H100s: 1 byte a weight
    marlin = by_id["marlin-h100-fp16xint8-channelwise-m1-n8192-k8192"]
    t_marlin = 2 * 8192 * 8192 / 3.46e12
    assert cases.kernel_ratio(marlin) == pytest.approx(
        (8192 * 8192 + 4 * 8192) / 3.9e12 / t_marlin, rel=1e-9)
