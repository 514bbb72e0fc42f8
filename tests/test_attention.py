"""Attention: seed golden numbers, relations, and an explicit-numpy oracle on small shapes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import RooflineError, evaluate, load_chip
from roofline.ops.attention import (
    SOFTMAX_FLOPS_PER_SCORE,
    attention,
    kv_cache_bytes,
    score_pairs,
)
from roofline.ops.mla import mla_attention, mla_cache_elements

H100 = load_chip("h100")
M_H100 = H100.level("sram").unit_capacity_bytes


def matmul_flops(cost, batch, heads, pairs, d, dv):
    return cost.total_flops - SOFTMAX_FLOPS_PER_SCORE * batch * heads * pairs


# --- seed 003 §5: GQA decode, 64 query heads, 8 KV heads, d = 128, 4096 cached tokens ------


@pytest.mark.parametrize("batch", [1, 32])
def test_seed_003_decode_case(batch):
    cost = attention(batch, 1, 4096, heads=64, kv_heads=8, head_dim=128, impl="decode")
    kv = 2 * 8 * 4096 * 128 * 2
    assert kv == 16 * 2**20  # 16 MiB per layer per sequence
    assert cost.bytes["hbm"] == batch * (kv + 2 * 64 * 128 * 2)  # + Q and O, 16 KiB each
    assert matmul_flops(cost, batch, 64, 4096, 128, 128) == batch * 134_217_728  # 134 MFLOP
    est = evaluate(cost, H100)
    # ≈ 8 FLOP/byte, and batching 32 sequences does NOT raise it (DESIGN §4 item 3)
    assert est.intensity["hbm"] == pytest.approx(8.06, abs=0.01)
    assert est.bound == "hbm"
    # one layer: 16 MiB / 3.35 TB/s = 5.0 us (DESIGN §4 item 7: not 4.8 us)
    assert est.t_lower_s == pytest.approx(batch * 5.02e-6, rel=0.01)


def test_decode_intensity_grows_with_gqa_and_speculative_tokens_not_batch():
    def ai(**kw):
        args = dict(batch=1, q_len=1, kv_len=8192, heads=64, kv_heads=8, impl="decode")
        args.update(kw)
        return evaluate(attention(**args), H100).intensity["hbm"]

    base = ai()
    assert ai(batch=64) == pytest.approx(base)
    assert ai(kv_heads=1) == pytest.approx(8 * base, rel=0.02)  # MQA: 64 heads share one
    assert ai(kv_heads=64) == pytest.approx(base / 8, rel=0.02)  # MHA
    assert ai(q_len=4) == pytest.approx(4 * base, rel=0.02)  # speculative k = 4
    assert ai(kv_dtype="fp8") == pytest.approx(2 * base, rel=0.02)  # fp8 KV halves the bytes


def test_naive_intensity_about_d_over_s():
    # seed 000 §2.4.1 / seed 001: I_naive ≈ d/s = 64 for d = 128 in bf16, independent of N
    # once N >> d (the Q, K, V, O traffic is O(N·d) against O(N²) for S and P)
    for n in [8192, 32768, 131072]:
        est = evaluate(attention(1, n, n, 32, 32, 128, causal=False, impl="naive"), H100)
        assert est.intensity["hbm"] == pytest.approx(64, rel=0.03)
        assert est.bound == "hbm"


def test_flash_saves_about_m_over_d2():
    # seed 000 §2.4.2: flash traffic Θ(N²d²/M): below naive by ~M/d² (M in elements)
    n, d = 32768, 128
    naive = attention(1, n, n, 8, 8, d, causal=False, impl="naive").bytes["hbm"]
    flash = attention(1, n, n, 8, 8, d, causal=False, impl="flash", sram_bytes=M_H100)
    m_elements = M_H100 / 2
    assert naive / flash.bytes["hbm"] == pytest.approx(m_elements / d**2, rel=0.15)
    est = evaluate(flash, H100)
    assert est.bound == "compute"  # flash at long N is compute-bound on H100
    assert flash.explain()[-1].startswith("HBM bytes saved vs naive = naive - flash")


def test_flash_traffic_falls_with_sram_and_never_below_one_pass():
    sizes = np.array([16e3, 64e3, 228 * 1024, 1e6, 1e9])
    cost = attention(2, 4096, 4096, 16, 4, 128, impl="flash", sram_bytes=sizes)
    hbm = cost.bytes["hbm"]
    assert np.all(np.diff(hbm) <= 0)
    decode_like = attention(2, 4096, 4096, 16, 4, 128, impl="decode").bytes["hbm"]
    assert hbm[-1] == pytest.approx(decode_like)  # SRAM holding everything: one pass


# --- flash re-reads on L2: HBM sees Q, K, V, O once when the working set fits ----------------

L2_H100 = H100.level("l2").capacity_bytes
SMS_H100 = H100.level("sram").units


def test_flash_rereads_come_from_l2_when_a_heads_kv_fits():
    # FlashAttention-3's d = 256, N = 512 case on H100 (fp16, 32 x 8 heads): Br = 228 rows
    # (M = 228 KiB over 2·(256 + 256) B per row), so ceil(512 / 228) = 3 K/V passes per head;
    # one head's 512 keys x 1 KiB = 512 KiB fit the 50 MB L2 (FA3 runs sections of heads
    # whose K/V fit together).
    B, N, H, d, s = 32, 512, 8, 256, 2
    cost = attention(B, N, N, H, H, d, causal=False, impl="flash", dtype="fp16",
                     sram_bytes=M_H100, l2_bytes=L2_H100)
    q = k = v = o = B * N * H * d * s
    assert cost.bytes["hbm"] == q + k + v + o  # compulsory traffic only
    assert cost.bytes["l2"] == q + o + 3 * (k + v)  # every load and store passes L2
    all_hbm = attention(B, N, N, H, H, d, causal=False, impl="flash", dtype="fp16",
                        sram_bytes=M_H100)
    assert all_hbm.bytes == {"hbm": cost.bytes["l2"]}  # no L2 given: every re-read on HBM
    shown = "\n".join(cost.explain())
    assert "re-reads served by L2 (1 when S_ws <= L2) f = fits(S_ws / L2)" in shown
    assert "K/V re-reads a pair-at-a-time kernel spills to HBM" in shown and "L2 bytes" in shown
    assert cost.runs is None  # nothing spills: the expected time runs the bound's own Cost


def test_flash_bound_keeps_rereads_on_l2_past_one_heads_kv_the_expected_time_spills():
    # S_kv = Lkv·(d + d_v)·s bytes: one (batch, KV head) pair's keys and values. Past L2 a
    # kernel can still share each K/V load among a pair's query blocks running at once (or
    # stream K/V in L2-sized chunks): the bound's HBM is the compulsory traffic; a kernel
    # running one pair's re-reads through L2 at a time (the expected time: Cost.runs) sends
    # all n_blk - 1 re-reads to HBM once S_kv > L2
    B, N, H, d = 4, 4096, 16, 128
    n_blk = -(-N // 128)  # block_q = 128: 32 blocks per head
    s_kv = N * 2 * d * 2
    cost = attention(B, N, N, H, H, d, causal=False, impl="flash", block_q=128,
                     l2_bytes=np.array([s_kv - 1, s_kv]))
    once = B * H * N * 2 * d * 2
    q_o = 2 * B * N * H * d * 2
    np.testing.assert_allclose(cost.bytes["hbm"], [q_o + once, q_o + once])
    np.testing.assert_allclose(cost.bytes["l2"], q_o + n_blk * once)
    assert cost.runs is not None and cost.runs.flops == cost.flops
    np.testing.assert_allclose(cost.runs.bytes["hbm"], [q_o + n_blk * once, q_o + once])
    np.testing.assert_allclose(cost.runs.bytes["l2"], cost.bytes["l2"])
    # FlashAttention-4, head dim 256, 128K keys on B200 (fa4-b200-d256-s128k in ops.csv):
    # 1 x 16 heads, 134 MB of K/V per head past the 126 MB L2, ran at 0.857 of the bound
    # that charged the spill to HBM; its bound is the tensor cores' again
    from roofline.ops.attention import flash_tiling

    b200 = load_chip("b200")
    fa4 = attention(1, 131072, 131072, 16, 16, 256, causal=False, dtype="bf16",
                    **{k: v for k, v in flash_tiling(b200).items()
                       if k in ("sram_bytes", "block_q", "l2_bytes")})
    assert evaluate(fa4, b200).bound == "compute"
    assert evaluate(fa4.runs, b200).t_lower_s > evaluate(fa4, b200).t_lower_s


def test_flash_bound_never_falls_as_the_problem_grows():
    # A problem is part of one twice its size (compute it, drop half), so its bound may not
    # exceed the bigger one's. Charging the spill of every pair in flight (fewer blocks per
    # head, more heads at once) gave MI300X 0.317 ms for 2914 queries and 0.162 for 5828.
    from roofline.ops import run_op

    kw = dict(batch=5, kv_len=7079, heads=1, kv_heads=1, head_dim=256, causal=False)
    small = run_op("attention", "mi300x", q_len=2914, **kw).t_lower_s
    assert small <= run_op("attention", "mi300x", q_len=5828, **kw).t_lower_s
    back = dict(direction="backward", batch=5, q_len=6555, heads=32, kv_heads=16,
                kv_dtype="fp8")
    assert run_op("attention", "h100", kv_len=8074, **back).t_lower_s <= \
        run_op("attention", "h100", kv_len=16148, **back).t_lower_s
    rng = np.random.default_rng(7)
    for _ in range(200):
        chip = str(rng.choice(["h100", "mi300x", "b200", "h200"]))
        q = int(rng.integers(64, 8192))
        shape = dict(batch=int(rng.integers(1, 9)), heads=int(rng.choice([1, 8, 32])),
                     head_dim=int(rng.choice([64, 128, 256])), causal=bool(rng.integers(2)))
        kv = q + int(rng.integers(0, 8192))
        base = run_op("attention", chip, q_len=q, kv_len=kv, **shape).t_lower_s
        assert base <= run_op("attention", chip, q_len=2 * q, kv_len=kv + q,
                              **shape).t_lower_s * (1 + 1e-12)
        assert base <= run_op("attention", chip, q_len=q, kv_len=2 * kv,
                              **shape).t_lower_s * (1 + 1e-12)


def test_flash_l2_working_set_is_the_window():
    # a sliding window caps what one query streams: W keys, not the whole cache
    kw = dict(batch=1, q_len=8192, kv_len=8192, heads=8, kv_heads=8, impl="flash",
              block_q=128)
    window_set = 1024 * 2 * 128 * 2
    windowed = attention(**kw, window=1024, l2_bytes=window_set)
    full = attention(**kw, l2_bytes=window_set)
    assert windowed.bytes["hbm"] < windowed.bytes["l2"]  # the window fits: re-reads on L2
    assert windowed.runs is None
    # 8192 keys do not: a pair-at-a-time kernel spills them (the bound keeps them on L2)
    assert full.bytes["hbm"] == pytest.approx(windowed.bytes["hbm"])  # every key once
    assert full.runs.bytes["hbm"] == pytest.approx(full.bytes["l2"])


def test_op_attention_takes_the_chips_l2():
    from roofline.ops import resolve_op, run_op

    kwargs = resolve_op("attention", "h100", q_len=2048, heads=8, head_dim=256)
    assert kwargs["l2_bytes"] == 50e6
    est = run_op("attention", "h100", q_len=2048, heads=8, head_dim=256, batch=8,
                 causal=False, dtype="fp16")
    # FA3 d = 256 at 2k is compute-bound once the re-reads stay in L2 (it was "hbm")
    assert est.bound == "compute" and est.bytes["l2"] > est.bytes["hbm"]
    # a chip without an L2 level (TPU v5e): everything on HBM, as before
    tpu = run_op("attention", "tpu-v5e", q_len=2048, heads=8, head_dim=256)
    assert set(tpu.bytes) == {"hbm"}


def test_causal_halves_score_work():
    n = 8192
    full = attention(1, n, n, 8, 8, 128, causal=False, impl="naive").total_flops
    causal = attention(1, n, n, 8, 8, 128, causal=True, impl="naive").total_flops
    assert causal / full == pytest.approx((n + 1) / (2 * n))


def test_sliding_window_caps_keys():
    assert score_pairs(1, 100_000, True, window=4096).value == 4096
    long = attention(1, 1, 131072, 32, 8, 128, impl="decode", window=4096)
    short = attention(1, 1, 4096, 32, 8, 128, impl="decode")
    assert long.bytes["hbm"] == pytest.approx(short.bytes["hbm"])


def test_mla_cache_and_absorbed_decode():
    assert mla_cache_elements(512, 64) == 576  # DeepSeek-V3
    kv = 576 * 2 * 4096
    absorbed = mla_attention(1, 1, 4096, heads=128)
    assert absorbed.bytes["hbm"] == kv + 128 * (576 + 512) * 2  # cache read once + Q + O
    # 128 heads share one latent cache: intensity far above GQA decode
    assert evaluate(absorbed, H100).intensity["hbm"] > 200
    expanded = mla_attention(1, 4096, 4096, heads=128, form="expanded", sram_bytes=M_H100)
    pairs = 4096 * 4097 / 2
    assert expanded.total_flops == pytest.approx(128 * pairs * (2 * (192 + 128) + 5))
    assert kv_cache_bytes(4096, 1, 576, kv_shared=True) == kv


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"heads": 10, "kv_heads": 4}, "multiple of kv_heads"),
    ({"impl": "paged"}, "unknown attention impl"),
    ({"impl": "flash"}, "needs the on-chip SRAM size"),
    ({"q_len": 10, "kv_len": 5}, "must not exceed kv_len"),
    ({"head_dim": 0}, "head_dim"),
    ({"causal": False, "window": 64}, "applies to causal"),
])
def test_bad_attention_input(kwargs, needle):
    args = dict(batch=1, q_len=1, kv_len=128, heads=8, kv_heads=8, impl="decode")
    args.update(kwargs)
    with pytest.raises(RooflineError, match=needle):
        attention(**args)


# --- oracle: explicit numpy attention on small shapes ---------------------------------------


def oracle(b, lq, lkv, h, hkv, d, dv, causal, window, br):
    """Run attention with numpy, counting multiply-adds and element loads independently."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, lq, h, d))
    k = rng.standard_normal((b, lkv, hkv, d))
    v = rng.standard_normal((b, lkv, hkv, dv))
    qpos = np.arange(lkv - lq, lkv)[:, None]
    kpos = np.arange(lkv)[None, :]
    mask = np.ones((lq, lkv), bool)
    if causal:
        mask &= kpos <= qpos
    if window is not None:
        mask &= kpos > qpos - window
    g = h // hkv
    macs = 0
    out = np.zeros((b, lq, h, dv))
    for head in range(h):
        kh, vh = k[:, :, head // g], v[:, :, head // g]
        s = np.einsum("bqd,bkd->bqk", q[:, :, head], kh)
        s = np.where(mask, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        out[:, :, head] = np.einsum("bqk,bkd->bqd", p, vh)
        macs += b * int(mask.sum()) * (d + dv)  # one multiply-add per unmasked score element
    assert np.all(np.isfinite(out))
    # flash loads (non-causal, no window): packed GQA rows in blocks of br, K/V tile per block
    blocks = -(-(g * lq) // br)
    flash_kv = b * hkv * blocks * lkv * (d + dv)
    return 2 * macs, int(mask.sum()), flash_kv, q.size, out.size, k.size + v.size


shapes = st.tuples(st.integers(1, 3), st.integers(1, 24), st.integers(0, 24),
                   st.sampled_from([(4, 4), (4, 2), (4, 1), (6, 3)]), st.integers(1, 16),
                   st.integers(1, 16), st.booleans(), st.one_of(st.none(), st.integers(1, 30)),
                   st.integers(1, 40))


@given(shapes)
def test_attention_matches_numpy_oracle(shape):
    b, lq, extra, (h, hkv), d, dv, causal, window, br = shape
    window = window if causal else None
    lkv = lq + extra
    flops, pairs, flash_kv, q_el, o_el, kv_el = oracle(b, lq, lkv, h, hkv, d, dv, causal,
                                                        window, br)
    cost = attention(b, lq, lkv, h, hkv, d, dv, causal=causal, window=window, impl="naive",
                     dtype="fp32")
    assert score_pairs(lq, lkv, causal, window).value == pairs
    assert matmul_flops(cost, b, h, pairs, d, dv) == pytest.approx(flops)
    naive_bytes = 4 * (q_el + o_el + kv_el + 4 * b * h * lq * lkv)
    assert cost.bytes["hbm"] == pytest.approx(naive_bytes)
    if not causal and window is None:
        flash = attention(b, lq, lkv, h, hkv, d, dv, causal=False, impl="flash", dtype="fp32",
                          block_q=br)
        assert flash.bytes["hbm"] == pytest.approx(4 * (q_el + o_el + flash_kv))
        # an L2 that holds everything: HBM moves each tensor once, L2 every tile load
        cached = attention(b, lq, lkv, h, hkv, d, dv, causal=False, impl="flash",
                           dtype="fp32", block_q=br, l2_bytes=1e15)
        assert cached.bytes["hbm"] == pytest.approx(4 * (q_el + o_el + kv_el))
        assert cached.bytes["l2"] == pytest.approx(flash.bytes["hbm"])


def test_vectorized_attention_equals_scalar():
    kv = np.array([512, 4096, 32768])
    vec = attention(4, 1, kv, 32, 8, 128, impl="decode")
    for i, n in enumerate(kv):
        one = attention(4, 1, int(n), 32, 8, 128, impl="decode")
        assert vec.bytes["hbm"][i] == one.bytes["hbm"]
        assert vec.total_flops[i] == one.total_flops


def test_flash_is_never_a_slower_bound_than_naive_on_a_gpu():
    """A GPU whose chip file lacked its L2 (L4) sent every flash K/V re-read to memory: a
    bound slower than the naive kernel's (106 vs 103 ms)."""
    from roofline.hardware import list_chips
    from roofline.ops import run_op

    kw = dict(batch=11, q_len=3917, kv_len=10701, heads=8, head_dim=256)
    for chip in list_chips():
        spec = load_chip(chip)
        if spec.vendor != "NVIDIA" or "bf16" not in spec.peaks or not any(
                m.name == "sram" for m in spec.memory):
            continue
        flash = run_op("attention", chip, impl="flash", **kw).t_lower_s
        assert flash <= run_op("attention", chip, impl="naive", **kw).t_lower_s, chip


def test_cross_attention_may_have_more_queries_than_keys():
    # a decoder attending to a short encoder output: 128 queries x 32 keys, no mask
    c = attention(1, 128, 32, 4, head_dim=128, causal=False, impl="flash", block_q=64)
    pairs = 128 * 32
    assert c.flops["bf16"] == 2 * 4 * (128 + 128) * pairs
    with pytest.raises(RooflineError, match="causal attention: q_len must not exceed"):
        attention(1, 128, 32, 4, causal=True, impl="flash", block_q=64)


@pytest.mark.parametrize("impl", ["flash", "decode"])
def test_every_key_a_query_sees_is_read_at_least_once(impl):
    """Counting each block's average keys read a causal prefill's K/V half and a windowed
    one's almost not at all (32768 queries, window 128: 262 kB of a 67 MB cache)."""
    kv_row = 2 * 64 * 2  # K and V, d = 64, bf16
    q = 1 if impl == "decode" else 32768
    for window, kv in ((None, 32768), (128, 32768), (None, 4096)):
        c = attention(1, min(q, kv), kv, 64, 8, 64, impl=impl, window=window, block_q=128)
        seen = kv if window is None or impl != "decode" else window
        assert c.bytes["hbm"] >= 8 * seen * kv_row
