"""Batched and grouped (MoE) matmuls: seed Problem 4, routing relations, Monte Carlo oracles."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import RooflineError, evaluate, matmul
from roofline.ops.moe import batched_matmul, grouped_matmul

SIZES = {"bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp32": 4}

# --- batched_matmul ---------------------------------------------------------------------------


def test_seed_problem_4_batched_int8_intensity_is_about_2():
    # int8[B, D] x int8[B, D, F] -> int8[B, F]: AI = 2BDF / (BD + BDF + BF) ≈ 2
    b, d, f = 64, 8192, 16384
    c = batched_matmul(b, 1, d, f, dtype="int8")
    assert c.flops == {"int8": 2 * b * d * f}
    assert c.bytes == {"hbm": b * d + b * d * f + b * f}
    est = evaluate(c, "h100")
    assert est.intensity["hbm"] == pytest.approx(2 * b * d * f / (b * d + b * d * f + b * f))
    assert est.intensity["hbm"] == pytest.approx(2.0, rel=1e-3)
    assert est.bound == "hbm"


@pytest.mark.parametrize(("weight", "expected"), [("bf16", 1.0), ("int8", 2.0), ("int4", 4.0)])
def test_batched_intensity_is_2_over_s_w_whatever_the_batch(weight, expected):
    batches = np.array([1, 8, 64, 1024])
    est = evaluate(batched_matmul(batches, 1, 8192, 8192, weight_dtype=weight), "h100")
    np.testing.assert_allclose(est.intensity["hbm"], expected, rtol=1e-3)
    assert np.ptp(est.intensity["hbm"]) < 1e-9  # batching does not help


@given(st.integers(1, 512), st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096))
def test_batched_is_batch_times_matmul(b, m, k, n):
    c, one = batched_matmul(b, m, k, n, weight_dtype="int8"), matmul(m, k, n, weight_dtype="int8")
    assert c.flops["bf16"] == pytest.approx(b * one.flops["bf16"], rel=1e-15)
    assert c.bytes["hbm"] == pytest.approx(b * one.bytes["hbm"], rel=1e-15)


def reference_batched(b, m, k, n, sx, sw, so):
    """Y[b,i,j] += X[b,i,p] · W[b,p,j], looped; count multiply-adds and distinct elements."""
    macs = 0
    x_seen, w_seen, y_seen = set(), set(), set()
    for bi in range(b):
        for i in range(m):
            for j in range(n):
                for p in range(k):
                    macs += 1
                    x_seen.add((bi, i, p))
                    w_seen.add((bi, p, j))
                y_seen.add((bi, i, j))
    return 2 * macs, len(x_seen) * sx + len(w_seen) * sw + len(y_seen) * so


def test_batched_matches_loop_on_seeded_random_shapes():
    rng = np.random.default_rng(7)
    for _ in range(30):
        b, m, k, n = (int(v) for v in rng.integers(1, 7, size=4))
        x, w, o = rng.choice(list(SIZES), size=3)
        flops, traffic = reference_batched(b, m, k, n, SIZES[x], SIZES[w], SIZES[o])
        c = batched_matmul(b, m, k, n, dtype=x, weight_dtype=w, out_dtype=o)
        assert c.flops == {x: flops}
        assert c.bytes["hbm"] == traffic


# --- grouped_matmul: golden and relations -------------------------------------------------


def touched(tokens, experts, top_k):
    return experts * (1 - (1 - top_k / experts) ** tokens)


UNIFORM = "touched experts, uniform routing (expected time)"


def uniform(c):
    """The expected time's touched experts (uniform routing) from the derivation."""
    return next(t.expr.value for t in c.terms if t.name == UNIFORM)


def test_grouped_counts_by_hand():
    # DeepSeek-V3-like: 256 experts, top-8, 64 tokens, expert weight 7168 x 2048. The bound
    # reads the 8 experts every token may share: 64·8·(7168 + 2048)·2 + 8·7168·2048·2
    # = 9,437,184 + 234,881,024 = 244,318,208 B; the expected time the 222.4 uniform routing
    # touches: 9,437,184 + 222.44·29,360,128 = 6.540e9 B (26.8x)
    t, k, n, e, top = 64, 7168, 2048, 256, 8
    c = grouped_matmul(t, k, n, e, top)
    e_t = touched(t, e, top)
    assert c.flops == c.runs.flops == {"bf16": 2 * t * top * k * n}  # active experts only
    assert c.bytes["hbm"] == 244_318_208
    assert c.runs.bytes["hbm"] == pytest.approx(9_437_184 + e_t * 29_360_128, rel=1e-15)
    assert c.runs.bytes["hbm"] == pytest.approx(6.540e9, rel=1e-3)
    assert [t.name for t in c.terms] == ["FLOPs", "touched experts, any routing", "HBM bytes",
                                         UNIFORM, "HBM bytes, uniform routing (expected time)"]
    assert c.explain()[1] == "touched experts, any routing = top_k·min_1(T) = 8·min_1(64) = 8"
    assert c.explain()[3] == (f"{UNIFORM} = E·(1 - (1 - top_k / E)^T) = "
                              "256·(1 - (1 - 8 / 256)^64) = 222.4")
    # the typed record keeps the uniform spread: 222.4 GEMMs of 64·8/222.4 tokens each
    assert c.op.groups == pytest.approx(e_t) and c.op.m == pytest.approx(t * top / e_t)


def test_over_ep_ranks_the_slowest_rank_reads_at_least_the_mean_rank():
    # DeepSeek-V3's experts over EP 8 and 16, 512 tokens in the group: the slowest rank
    # reads at least a ranks-th of the 8 experts every token may share and of the 512·8
    # routed pairs; the expected time spreads the uniform 256 touched experts evenly (32 a
    # rank at EP 8)
    t, k, n, e, top = 512, 7168, 2048, 256, 8
    pair = (k + n) * 2
    for ranks in (8, 16):
        c = grouped_matmul(t, k, n, e, top, ranks=ranks)
        assert c.bytes["hbm"] == pytest.approx(t * top * pair / ranks + 8 / ranks * k * n * 2,
                                               rel=1e-15)
        assert c.flops == {"bf16": 2 * t * top * k * n / ranks}
        whole = grouped_matmul(t, k, n, e, top)
        assert c.runs.bytes["hbm"] == whole.runs.bytes["hbm"] * (1 / ranks)
        assert c.explain()[2] == ("a rank's experts, any routing = top_k·min_1(T) / ranks = "
                                  f"8·min_1(512) / {ranks} = {8 / ranks:g}")
    # one token over 16 ranks: the uniform spread's mean rank, 8/16 of an expert, is the
    # floor's too
    one = grouped_matmul(1, 64, 64, 256, 8, ranks=16)
    assert one.runs.bytes["hbm"] == pytest.approx(one.bytes["hbm"], rel=1e-12)


def test_one_expert_is_plain_matmul():
    for t in [1, 17, 4096]:
        g = grouped_matmul(t, 4096, 1024, 1, 1, weight_dtype="int4")
        mm = matmul(t, 4096, 1024, weight_dtype="int4")
        assert g.flops == mm.flops
        assert g.bytes["hbm"] == pytest.approx(mm.bytes["hbm"], rel=1e-15)


def test_top_k_equal_to_experts_touches_all():
    c = grouped_matmul(3, 64, 64, experts=8, top_k=8)
    assert uniform(c) == 8 and c.terms[1].expr.value == 8
    assert c.bytes["hbm"] == c.runs.bytes["hbm"]


def test_single_token_touches_exactly_top_k():
    c = grouped_matmul(1, 64, 64, 64, 6)
    assert uniform(c) == pytest.approx(6) and c.terms[1].expr.value == 6
    assert c.runs.bytes["hbm"] == pytest.approx(c.bytes["hbm"], rel=1e-12)


def test_a_fraction_of_a_token_reads_that_fraction_of_top_k_experts():
    # an average over steps below one token: the bound scales the one-token read down, and
    # stays below uniform routing's (1 - (1 - p)^T >= T·p for T in [0, 1], Bernoulli)
    tokens = np.array([0.25, 0.5, 1.0, 2.0])
    c = grouped_matmul(tokens, 64, 64, 64, 6)
    np.testing.assert_allclose(c.terms[1].expr.value, [1.5, 3, 6, 6])
    assert np.all(c.terms[1].expr.value <= uniform(c) * (1 + 1e-12))


def test_many_tokens_touch_every_expert():
    values = uniform(grouped_matmul(np.array([10, 100, 1e3, 1e4]), 4096, 4096, 128, 2))
    assert np.all(np.diff(values) >= 0) and values[0] < values[1] < values[2]
    assert values[-1] == pytest.approx(128, rel=1e-12)


@given(st.integers(1, 10**6), st.integers(1, 512), st.data())
def test_touched_bounds(tokens, experts, data):
    top_k = data.draw(st.integers(1, experts))
    e_t = uniform(grouped_matmul(tokens, 128, 128, experts, top_k))
    assert top_k * (1 - 1e-9) <= e_t <= min(experts, tokens * top_k) * (1 + 1e-12)
    more = uniform(grouped_matmul(tokens + 1, 128, 128, experts, top_k))
    assert more >= e_t * (1 - 1e-12)  # more tokens never touch fewer experts


@given(st.integers(1, 4096), st.integers(2, 256), st.data())
def test_moe_bytes_between_dense_extremes(tokens, experts, data):
    # the bound: exactly top_k experts' worth (any routing); the expected time's: at least
    # that, at most all experts' worth; over ranks the same, a rank's share
    top_k = data.draw(st.integers(1, experts))
    ranks = data.draw(st.sampled_from([1, 2, 8, 64]))
    k, n = 1024, 512
    c = grouped_matmul(tokens, k, n, experts, top_k, ranks=ranks)
    acts = tokens * top_k * (k + n) * 2 / ranks
    assert c.bytes["hbm"] == pytest.approx(acts + top_k / ranks * k * n * 2, rel=1e-12)
    assert c.bytes["hbm"] <= c.runs.bytes["hbm"]
    assert c.runs.bytes["hbm"] <= (acts + experts * k * n * 2 / ranks) * (1 + 1e-12)


# --- oracle: simulate uniform routing --------------------------------------------------------


def route(rng, trials, tokens, experts, top_k):
    """Each token picks top_k distinct experts uniformly: the first top_k of a random order."""
    keys = rng.random((trials, tokens, experts))
    picks = np.argpartition(keys, top_k - 1, axis=-1)[..., :top_k]
    counts = np.zeros((trials, experts), dtype=int)
    for t in range(tokens):
        np.add.at(counts, (np.arange(trials)[:, None], picks[:, t]), 1)
    return counts


@pytest.mark.parametrize(("tokens", "experts", "top_k"),
                         [(1, 8, 2), (4, 8, 2), (16, 64, 6), (64, 256, 8), (3, 5, 5), (40, 16, 1)])
def test_expected_touched_matches_simulation(tokens, experts, top_k):
    rng = np.random.default_rng(tokens * 1000 + experts)
    counts = route(rng, min(4000, 500 + 2_000_000 // (tokens * experts)), tokens, experts, top_k)
    assert np.all(counts.sum(axis=1) == tokens * top_k)
    hits = (counts > 0).sum(axis=1)
    formula = uniform(grouped_matmul(tokens, 64, 64, experts, top_k))
    stderr = hits.std() / np.sqrt(len(hits))
    assert abs(hits.mean() - formula) <= 5 * stderr + 1e-9


def test_given_counts_match_per_expert_matmuls():
    # an MoE layer is one matmul per touched expert over the tokens routed to it
    rng = np.random.default_rng(11)
    for _ in range(20):
        tokens, experts = int(rng.integers(1, 50)), int(rng.integers(1, 40))
        top_k = int(rng.integers(1, experts + 1))
        (counts,) = route(rng, 1, tokens, experts, top_k)
        k, n = (int(v) for v in rng.integers(1, 5000, size=2))
        g = grouped_matmul(tokens, k, n, experts, top_k, tokens_per_expert=counts,
                           weight_dtype="int8", out_dtype="fp32")
        parts = [matmul(int(c), k, n, weight_dtype="int8", out_dtype="fp32")
                 for c in counts if c > 0]
        assert g.flops["bf16"] == pytest.approx(sum(p.flops["bf16"] for p in parts), rel=1e-12)
        assert g.bytes["hbm"] == pytest.approx(sum(p.bytes["hbm"] for p in parts), rel=1e-12)
        assert g.runs.bytes["hbm"] == g.bytes["hbm"]  # counted: the same for both
        assert g.terms[1].expr.value == uniform(g) == np.count_nonzero(counts)


def test_counts_infer_tokens_and_experts():
    counts = [3, 0, 5, 2, 0, 0, 0, 0]
    g = grouped_matmul(None, 4096, 1024, None, 2, tokens_per_expert=counts)
    same = grouped_matmul(5, 4096, 1024, 8, 2, tokens_per_expert=counts)
    assert g.flops == same.flops == {"bf16": 2 * 5 * 2 * 4096 * 1024}
    assert g.bytes == same.bytes
    assert g.terms[1].expr.value == 3


def test_counts_last_axis_is_experts():
    counts = np.array([[3, 0, 5, 2, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 3]])
    g = grouped_matmul(5, 4096, 1024, 8, 2, tokens_per_expert=counts)
    assert g.bytes["hbm"].shape == (2,)
    for i in range(2):
        one = grouped_matmul(5, 4096, 1024, 8, 2, tokens_per_expert=counts[i])
        assert g.bytes["hbm"][i] == one.bytes["hbm"]
    np.testing.assert_array_equal(g.terms[1].expr.value, [3, 8])


def test_uniform_routing_is_vectorized():
    tokens = np.array([1, 16, 256])
    vec = grouped_matmul(tokens, 2048, 1408, 64, 6)
    for i, t in enumerate(tokens):
        one = grouped_matmul(int(t), 2048, 1408, 64, 6)
        assert vec.bytes["hbm"][i] == pytest.approx(one.bytes["hbm"], rel=1e-15)
        assert vec.runs.bytes["hbm"][i] == pytest.approx(one.runs.bytes["hbm"], rel=1e-15)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((4, 64, 64, 8, 2), {"tokens_per_expert": [3, 0, 5, 2, 0, 0, 0, 0]},
     r"tokens_per_expert: counts sum to 10 but tokens·top_k = 8"),
    ((5, 64, 64, 6, 2), {"tokens_per_expert": [3, 0, 5, 2, 0, 0, 0, 0]},
     "experts: 6 does not match the last axis of tokens_per_expert"),
    ((None, 64, 64, None, 2), {"tokens_per_expert": [3, -1, 5, 3]}, "finite and >= 0"),
    ((None, 64, 64, None, 2), {"tokens_per_expert": [0, 0, 0]}, "at least one token"),
    ((None, 64, 64, None, 2), {"tokens_per_expert": 5}, "1-D array of length E"),
    ((None, 64, 64, None, 2), {"tokens_per_expert": [4, 0]}, "more than `tokens`"),
    ((None, 64, 64, None, 3), {"tokens_per_expert": [3, 3]}, "top_k: at most the number"),
    ((4, 64, 64, 8, 9), {}, r"top_k: at most the number of experts \(8\)"),
    ((4, 64, 64, 8, 1.5), {}, "top_k: must be a whole number"),
    ((4, 64, 64, 0, 1), {}, "experts"),
    ((0, 64, 64, 8, 2), {}, "T"),
    ((None, 64, 64, 8, 2), {}, "tokens and experts are required"),
])
def test_bad_input_rejected(args, kwargs, match):
    with pytest.raises(RooflineError, match=match):
        grouped_matmul(*args, **kwargs)


def test_batched_bad_sizes_rejected():
    with pytest.raises(RooflineError, match="B"):
        batched_matmul(0, 1, 8, 8)


def test_an_ep_dispatch_sends_one_copy_per_destination_node():
    # DeepEP internode / HybridEP / MORI send a token once per remote node holding one of
    # its experts: (b - 1)·P(hit); exact for E experts, the many-experts limit never more
    import math

    from roofline.ops.moe import remote_domain_copies

    exact = remote_domain_copies(8, 4, 256)
    assert exact == pytest.approx(3 * (1 - math.comb(192, 8) / math.comb(256, 8)))
    assert remote_domain_copies(8, 4) == pytest.approx(3 * (1 - 0.75**8))
    assert remote_domain_copies(8, 4) <= exact <= 8 * 3 / 4  # never more than one per expert
    assert remote_domain_copies(8, 1) == 0.0
    assert remote_domain_copies(1, 2, 256) == pytest.approx(0.5)  # top-1: the other node half


def test_an_ep_dispatch_inside_a_node_sends_one_copy_per_destination_rank():
    # DeepEP's intranode dispatch sends a token once to each rank holding any of its experts:
    # over EP 8 with DeepSeek-V3's 256 experts, top-8, 7·P(rank hit) = 4.6 remote copies of
    # the 8·7/8 = 7 the per-expert all-to-all charges (AWS p5en: 5.3 copies a token printed,
    # its own rank's included); top-1 sends exactly one copy per expert: nothing to save
    import math

    from roofline.ops.collectives import collective, one_copy_per_destination

    message = 4096 * 7168 * 8 * 2.0  # 4096 tokens x hidden x top-8, bf16
    flat = collective("all-to-all", message, 8, "direct")
    once = one_copy_per_destination(flat, 8, 8, None, 256)
    hit = 1 - math.comb(224, 8) / math.comb(256, 8)
    assert once.link_bytes["scale-up"] == pytest.approx(4096 * 7168 * 2.0 * 7 * hit)
    assert once.link_bytes["scale-up"] < flat.link_bytes["scale-up"]
    assert once.link_steps == flat.link_steps and once.runs is flat
    assert any("one copy per destination rank" in line for line in once.explain())
    assert one_copy_per_destination(flat, 1, 8, None, 256) is flat
    # without the expert count: the many-experts limit, fewer copies (a looser bound)
    limit = one_copy_per_destination(flat, 8, 8)
    assert limit.link_bytes["scale-up"] == pytest.approx(
        4096 * 7168 * 2.0 * 7 * (1 - (7 / 8) ** 8))
    assert limit.link_bytes["scale-up"] <= once.link_bytes["scale-up"]


def test_group_limited_routing_reaches_fewer_nodes():
    # DeepSeek-V3 over 8 nodes (one group of 32 experts each): a token picks 4 of the 8
    # groups, then 8 of their 128 experts. A node is hit when its group is chosen (4/8) and
    # one of the 8 lands in it: 1 - C(96, 8)/C(128, 8) = 0.9073; 7 other nodes x 0.5 x 0.9073
    # = 3.17 remote copies, not 4.63 as unrestricted routing gives, and never more than 4
    import math

    from roofline.ops.moe import remote_domain_copies

    hit = 1 - math.comb(96, 8) / math.comb(128, 8)
    assert hit == pytest.approx(0.9073, abs=1e-4)
    limited = remote_domain_copies(8, 8, 256, groups=8, topk_groups=4)
    assert limited == pytest.approx(7 * 0.5 * hit) == pytest.approx(3.175, abs=1e-3)
    assert limited < remote_domain_copies(8, 8, 256) == pytest.approx(4.633, abs=1e-3)
    # the many-experts limit: each of the 8 lands in one of the 4 chosen groups, never more
    limit = remote_domain_copies(8, 8, None, groups=8, topk_groups=4)
    assert limit == pytest.approx(7 * 0.5 * (1 - 0.75**8)) and limit <= limited
    # every group allowed: unrestricted routing
    assert remote_domain_copies(8, 8, 256, 8, 8) == remote_domain_copies(8, 8, 256)
    # a node holding 2 groups (4 nodes): j of its groups chosen, hypergeometric 15/40/15 of 70
    two = (40 * (1 - math.comb(96, 8) / math.comb(128, 8))
           + 15 * (1 - math.comb(64, 8) / math.comb(128, 8))) / 70
    assert remote_domain_copies(8, 4, 256, 8, 4) == pytest.approx(3 * two)
    with pytest.raises(RooflineError, match="topk_group"):
        remote_domain_copies(8, 8, 256, groups=8, topk_groups=9)


@pytest.mark.parametrize(("domains", "experts"), [(8, 256), (4, 256), (16, 256), (64, 256)])
def test_group_limited_copies_match_drawn_routing(domains, experts):
    # an independent reference: draw 4 of 8 groups uniformly, then 8 distinct experts among
    # their 128 uniformly, and count the domains hit (seeded; standard error < 0.02)
    from roofline.ops.moe import domain_hit

    rng = np.random.default_rng(0)
    n, per_group = 20000, experts // 8
    groups = np.argsort(rng.random((n, 8)), axis=1)[:, :4]
    pick = np.argsort(rng.random((n, 4 * per_group)), axis=1)[:, :8]
    expert = groups[np.arange(n)[:, None], pick // per_group] * per_group + pick % per_group
    hit = np.zeros((n, domains), dtype=bool)
    np.put_along_axis(hit, expert // (experts // domains), True, axis=1)
    drawn = hit.mean()
    assert domain_hit(8, domains, experts, 8, 4) == pytest.approx(drawn, abs=0.01)
