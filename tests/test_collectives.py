"""Communication roofline: collectives, hierarchy, sharded matmul, TP layer (seed 001 §2.5)."""

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import Cost, RooflineError, evaluate, load_chip
from roofline.expect import expected
from roofline.hardware.catalog import CATALOG_DIR as CATALOG
from roofline.models import tp_layer
from roofline.ops.collectives import (
    COLLECTIVES,
    busbw_factor,
    choose_algorithm,
    collective,
    latency_crossover_bytes,
)
from roofline.ops.parallel import sharded_matmul
from roofline.solve import critical_shard_dim

H100 = load_chip("h100")
NVLINK = H100.link("scale-up")


def busbw(kind, nbytes, ranks, chip=H100, **kw):
    est = evaluate(collective(kind, nbytes, ranks, **kw), chip)
    return nbytes / est.t_lower_s * busbw_factor(kind, ranks), est


# --- seed 001 §2.5 ---------------------------------------------------------------------------


def test_seed_001_critical_shard_dims():
    assert critical_shard_dim(H100, "scale-up") == pytest.approx(2199, abs=1)  # ≈ 2222 w/ 1e15
    assert critical_shard_dim(H100, "scale-out") == pytest.approx(19788, abs=1)  # ≈ 20000


def test_seed_001_hidden_8192_over_two_chips():
    # D = 8192 split over 2 chips: D/2 = 4096 > 2200 inside a node, < 20000 across nodes
    inside = evaluate(sharded_matmul(4096, 8192, 8192, 2), H100)
    across = evaluate(sharded_matmul(4096, 8192, 8192, 2, link="scale-out"), H100)
    assert inside.bound == "compute"
    assert across.bound == "scale-out"
    # the batch cancels: the verdict is the same at any M (large enough to ignore alpha)
    for m in [256, 1024, 16384]:
        assert evaluate(sharded_matmul(m, 8192, 8192, 2), H100).time_s["compute"] > \
            evaluate(sharded_matmul(m, 8192, 8192, 2), H100).time_s["scale-up"]


def test_critical_dim_agrees_with_the_sharded_matmul():
    d_star = critical_shard_dim(H100, "scale-up")
    for shard, bound in [(0.9 * d_star, "scale-up"), (1.1 * d_star, "compute")]:
        est = evaluate(sharded_matmul(65536, 2 * shard, 65536, 2), H100)
        times = {r: t for r, t in est.time_s.items() if r in ("compute", "scale-up")}
        assert max(times, key=times.get) == bound


# --- collectives -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4, 8, 64, 512])
def test_ring_vs_tree_steps(n):
    ring = collective("all-reduce", 1e6, n, "ring")
    tree = collective("all-reduce", 1e6, n, "tree")
    assert ring.link_steps["scale-up"] == 2 * (n - 1)
    assert tree.link_steps["scale-up"] == 2 * np.ceil(np.log2(n))
    assert ring.link_bytes["scale-up"] == pytest.approx(2 * (n - 1) / n * 1e6)
    assert collective("broadcast", 1e6, n, "tree").link_steps["scale-up"] == np.ceil(np.log2(n))


def test_8_rank_8gib_ring_allreduce_busbw_is_link_bandwidth():
    # alpha-beta: 14 steps of alpha, then 2·7/8·S per direction over the link
    bw, est = busbw("all-reduce", 8 * 2**30, 8)
    moved = 2 * 7 / 8 * 8 * 2**30
    t = 14 * NVLINK.latency_s + NVLINK.base_latency_s + moved / NVLINK.bandwidth_Bps
    assert bw == pytest.approx(moved / t, rel=1e-9)
    assert bw == pytest.approx(NVLINK.bandwidth_Bps, rel=1e-3)
    assert est.bound == "scale-up"


@given(st.sampled_from(COLLECTIVES), st.integers(2, 256), st.floats(1e3, 1e11))
def test_busbw_never_above_link_without_in_switch_reduction(kind, n, nbytes):
    for algo in ["ring", "tree"]:
        try:
            bw, _ = busbw(kind, nbytes, n, algo=algo)
        except RooflineError:
            continue  # tree does not implement every collective
        assert bw <= NVLINK.bandwidth_Bps * (1 + 1e-9)


def test_nvls_exceeds_link_bandwidth_in_busbw_terms():
    bw, _ = busbw("all-reduce", 8 * 2**30, 8, algo="nvls")
    assert bw == pytest.approx(2 * 7 / 8 * NVLINK.bandwidth_Bps, rel=1e-3)


def test_alpha_dominates_below_crossover():
    n = 8
    cost = collective("all-reduce", 1e6, n)
    m_star = latency_crossover_bytes(cost, 1e6, NVLINK.latency_s, NVLINK.bandwidth_Bps,
                                     "scale-up", NVLINK.base_latency_s)
    # 14 alphas and one call's base latency against 2·7/8·m over the link (~5.9 MB)
    latency = 2 * (n - 1) * NVLINK.latency_s + NVLINK.base_latency_s
    assert m_star == pytest.approx(latency * NVLINK.bandwidth_Bps / (2 * (n - 1) / n))
    sizes = np.array([m_star / 10, m_star / 1.01, m_star * 1.01, m_star * 10])
    est = evaluate(collective("all-reduce", sizes, n), H100)
    assert list(est.bound) == ["latency", "latency", "scale-up", "scale-up"]


def test_hierarchical_16_ranks_slower_by_the_inter_node_phase():
    m = 1 * 2**30
    eight = evaluate(collective("all-reduce", m, 8, domain_size=8), H100)
    sixteen = evaluate(collective("all-reduce", m, 16, domain_size=8), H100)
    out = H100.link("scale-out")
    inter = 2 * (2 - 1) / 2 * (m / 8) / out.bandwidth_Bps + 2 * out.latency_s \
        + out.base_latency_s  # the call's launch precedes the NIC phase too
    assert sixteen.t_upper_s - eight.t_upper_s == pytest.approx(inter)
    # the phases pipeline: the busier link's chain bounds it, never below the node's ring
    assert sixteen.t_lower_s == pytest.approx(max(sixteen.chain_s.values()))
    assert sixteen.t_lower_s >= eight.t_lower_s
    assert sixteen.time_s["scale-up"] == pytest.approx(eight.time_s["scale-up"])
    assert set(sixteen.cost.link_bytes) == {"scale-up", "scale-out"}


def test_hierarchical_all_to_all_splits_peers():
    c = collective("all-to-all", 64e6, 32, domain_size=8)
    assert c.link_bytes["scale-up"] == pytest.approx(7 / 32 * 64e6)
    assert c.link_bytes["scale-out"] == pytest.approx(24 / 32 * 64e6)


def test_group_inside_domain_is_flat_and_sweeps_vectorize():
    flat = collective("all-reduce", 1e8, 4, domain_size=8)
    assert set(flat.link_bytes) == {"scale-up"}
    sizes = np.array([1e3, 1e6, 1e9])
    vec = evaluate(collective("all-gather", sizes, 8), H100)
    for i, size in enumerate(sizes):
        one = evaluate(collective("all-gather", float(size), 8), H100)
        assert vec.t_lower_s[i] == pytest.approx(one.t_lower_s)
        assert vec.bound[i] == one.bound


@pytest.mark.parametrize(("call", "needle"), [
    (lambda: collective("gather", 1e6, 8), "unknown collective"),
    (lambda: collective("all-gather", 1e6, 8, "tree"), "does not implement"),
    (lambda: collective("all-reduce", 0, 8), "bytes"),
    (lambda: collective("all-reduce", 1e6, 8, link="pcie"), "unknown link"),
])
def test_bad_collectives(call, needle):
    with pytest.raises(RooflineError, match=needle):
        call()


# --- oracle: simulate the ring schedules with real arrays ------------------------------------


class Ring:
    """n ranks on a ring with real arrays; counts each rank's messages and elements sent."""

    def __init__(self, n, elements):
        rng = np.random.default_rng(n)
        self.n = n
        self.data = [rng.standard_normal(elements) for _ in range(n)]
        self.chunks = [np.array_split(d.copy(), n) for d in self.data]
        self.msgs = np.zeros(n, int)
        self.elems = np.zeros(n, int)
        self.rounds = 0  # message rounds: each pays one alpha, however many peers it reaches

    def _send(self, r, payload):
        self.msgs[r] += 1
        self.elems[r] += payload.size

    def reduce_scatter(self):  # afterwards rank r holds the sum of chunk (r + 1) % n
        n = self.n
        for step in range(n - 1):
            self.rounds += 1
            outgoing = [(r, (r - step) % n, self.chunks[r][(r - step) % n].copy())
                        for r in range(n)]
            for r, c, payload in outgoing:
                self.chunks[(r + 1) % n][c] += payload
                self._send(r, payload)

    def all_gather(self, owned):  # rank r starts with chunk owned(r), ends with all of them
        n = self.n
        for step in range(n - 1):
            self.rounds += 1
            outgoing = [(r, owned(r - step), self.chunks[r][owned(r - step)].copy())
                        for r in range(n)]
            for r, c, payload in outgoing:
                self.chunks[(r + 1) % n][c] = payload
                self._send(r, payload)

    def all_to_all(self, algo):
        """pairwise: at step s rank r sends its chunk for rank r + s; direct: every chunk in
        one round; ring: chunks hop between neighbours, each the short way round."""
        n = self.n
        received = [[None] * n for _ in range(n)]
        for r in range(n):
            received[r][r] = self.chunks[r][r]
        if algo == "ring":
            # (where the chunk is, its source, its destination, which way it goes)
            moving = [(src, src, dst, 1 if (dst - src) % n <= n // 2 else -1)
                      for src in range(n) for dst in range(n) if dst != src]
            while moving:
                self.rounds += 1
                still = []
                for at, src, dst, way in moving:
                    self._send(at, self.chunks[src][dst])
                    nxt = (at + way) % n
                    if nxt == dst:
                        received[dst][src] = self.chunks[src][dst].copy()
                    else:
                        still.append((nxt, src, dst, way))
                moving = still
            self.chunks = received
            return
        for step in range(1, n):
            if algo == "pairwise" or step == 1:
                self.rounds += 1
            for r in range(n):
                dst = (r + step) % n
                received[dst][r] = self.chunks[r][dst].copy()
                self._send(r, received[dst][r])
        self.chunks = received


def check(ring, kind, elements, algo="ring"):
    nbytes = elements * 4  # fp32
    expected = collective(kind, nbytes, ring.n, algo)
    assert ring.rounds == expected.link_steps["scale-up"]
    assert np.all(ring.elems * 4 == pytest.approx(expected.link_bytes["scale-up"]))


@pytest.mark.parametrize("n", [2, 3, 5, 6, 8])
def test_ring_collectives_match_a_simulated_ring(n):
    elements = 40 * n  # nccl-tests sizes: the full vector (all-gather: the gathered output)
    total = np.sum(Ring(n, elements).data, axis=0)

    ar = Ring(n, elements)
    ar.reduce_scatter()
    ar.all_gather(lambda r: (r + 1) % n)
    for r in range(n):
        np.testing.assert_allclose(np.concatenate(ar.chunks[r]), total)
    check(ar, "all-reduce", elements)

    rs = Ring(n, elements)
    rs.reduce_scatter()
    for r in range(n):
        c = (r + 1) % n
        np.testing.assert_allclose(rs.chunks[r][c], np.array_split(total, n)[c])
    check(rs, "reduce-scatter", elements)

    ag = Ring(n, elements)
    ag.all_gather(lambda r: r % n)
    mine = [ag.data[r][i] for r, i in enumerate(np.array_split(np.arange(elements), n))]
    for r in range(n):
        np.testing.assert_allclose(np.concatenate(ag.chunks[r]), np.concatenate(mine))
    check(ag, "all-gather", elements)

    for algo in ("direct", "pairwise", "ring"):
        a2a = Ring(n, elements)  # each rank's send buffer is the whole vector
        sent = [np.array_split(d, n) for d in a2a.data]
        a2a.all_to_all(algo)
        for r in range(n):
            for src in range(n):
                np.testing.assert_allclose(a2a.chunks[r][src], sent[src][r])
        check(a2a, "all-to-all", elements, algo)


# --- measured: nccl-tests all-reduce points (shared/reference/hw_specs.md §6.3) ---------------

GIB, MIB = 2**30, 2**20
MEASURED_ALL_REDUCE = [  # chip, algorithm, bytes, measured busbw GB/s, on 8 GPUs
    ("h200", "nvls", 16 * GIB, 482), ("h200", "nvls", 1 * GIB, 464),
    ("h200", "nvls", 128 * MIB, 402), ("h200", "nvls", 16 * MIB, 220),
    ("h200", "ring", 1 * MIB, 40), ("h200", "ring", 16 * GIB, 367.6),  # SHARP off
    ("h100", "ring", 10e9, 370), ("h100", "ring", 58e6, 150), ("mi300x", "ring", 4e9, 312.9),
]


@pytest.mark.parametrize("chip, algo, nbytes, busbw_GBps", MEASURED_ALL_REDUCE)
def test_all_reduce_bound_never_slower_than_measured(chip, algo, nbytes, busbw_GBps):
    measured_s = nbytes * busbw_factor("all-reduce", 8) / (busbw_GBps * 1e9)
    bound_s = evaluate(collective("all-reduce", nbytes, 8, algo=algo), load_chip(chip)).t_lower_s
    assert bound_s <= measured_s  # a bound: real hardware never beats it
    if nbytes >= 1e9:  # bandwidth-bound sizes reach 59-82% of the bound, never less than half
        assert bound_s > 0.5 * measured_s


# --- overlap and the TP layer ----------------------------------------------------------------


@given(st.floats(1e6, 1e16), st.floats(1e3, 1e12))
def test_two_resources_upper_at_most_twice_lower(flops, link_bytes):
    # seed 001 §2.1.3: T_math + T_comms <= 2·max(T_math, T_comms)
    est = evaluate(Cost(flops={"bf16": flops}, link_bytes={"scale-up": link_bytes}), H100)
    assert est.t_lower_s <= est.t_upper_s <= 2 * est.t_lower_s * (1 + 1e-12)


def test_tp_layer_inside_vs_across_nodes():
    kw = dict(batch=8, seq_len=4096, hidden=8192, ffn=28672, heads=64, kv_heads=8, tp=8,
              block_q=128)
    inside = evaluate(tp_layer(**kw), H100)
    across = evaluate(tp_layer(**kw, link="scale-out"), H100)
    assert inside.bound == "compute" and across.bound == "scale-out"
    tokens, hidden = 8 * 4096, 8192
    expected = 2 * (2 * 7 / 8 * tokens * hidden * 2)  # two all-reduces of bf16 activations
    assert inside.cost.link_bytes["scale-up"] == pytest.approx(expected)
    assert inside.cost.link_steps["scale-up"] == 2 * 14


def test_tp_layer_flops_split_evenly():
    kw = dict(batch=2, seq_len=2048, hidden=4096, ffn=14336, heads=32, kv_heads=8, block_q=128)
    one = tp_layer(**kw, tp=1)
    four = tp_layer(**kw, tp=4)
    # elementwise norms and residuals are replicated; everything else divides by tp
    assert four.total_flops < one.total_flops / 3.9
    assert "scale-up" not in one.link_bytes


def test_tp_layer_rejects_bad_split():
    with pytest.raises(RooflineError, match="must divide the 32 attention heads"):
        tp_layer(1, 128, 4096, 11008, 32, tp=3, block_q=128)
    with pytest.raises(RooflineError, match=r"hidden \(4095\) is not a multiple of heads"):
        tp_layer(1, 128, 4095, 11008, 32, tp=8, block_q=128)  # no silent head_dim = 127
    tp_layer(1, 128, 4095, 11008, 32, tp=8, block_q=128, head_dim=128)  # explicit: fine


def test_system_places_groups_on_links():
    from roofline import make_system

    system = make_system("h100", chips=32)
    assert (system.chips_per_domain, system.domains, system.chips) == (8, 4, 32)
    assert system.link_for(8) == "scale-up" and system.link_for(16) == "scale-out"
    est = evaluate(collective("all-reduce", 1e9, 32, domain_size=system.chips_per_domain),
                   system)
    assert est.hardware == "h100-sxm" and est.cost.link_steps["scale-out"] == 2 * 3
    assert make_system("gb200").chips_per_domain == 72  # NVL72
    assert make_system("l40s").chips_per_domain == 8  # PCIe cards, 8 to a server
    no_links = replace(load_chip("h100"), links={})
    assert make_system(no_links).chips_per_domain == 1  # no scale-up link
    with pytest.raises(RooflineError, match="does not fit"):
        system.link_for(64)
    with pytest.raises(RooflineError, match="multiple of the scale-up domain"):
        make_system("h100", chips=12)


def test_torus_groups_use_the_ports_along_their_axes():
    from roofline import make_system

    v5e = make_system("v5e")  # 2D torus, 4 ICI ports of 50 GB/s each way
    assert [v5e.link_share("scale-up", n) for n in (2, 4, 16, 64, 256)] == \
        [0.25, 0.5, 0.5, 1.0, 1.0]
    assert make_system("h100").link_share("scale-up", 8) == 1.0  # NVSwitch: every port
    np.testing.assert_allclose(v5e.link_share("scale-up", np.array([2, 16])), [0.25, 0.5])


def test_seed_001_v5e_sharded_matmul_uses_one_ici_link(run_cli):
    # seed 001 §2.5 puts 2 chips on one ICI link (~45-50 GB/s each way): d* = P·s/(2·W)
    code, out, _ = run_cli("critical-dim", "--hw", "v5e", "--json")
    assert code == 0
    assert json.loads(out)["critical_shard_dim"] == pytest.approx(197e12 * 2 / (2 * 50e9))
    code, out, _ = run_cli("op", "allreduce", "--hw", "v5e", "--bytes", "1GB", "--ranks", "16",
                           "--json")
    data = json.loads(out)  # one torus axis: 2 of the 4 ports, 100 GB/s each way
    assert data["time_s"]["scale-up"] == pytest.approx(2 * 15 / 16 * 1e9 / 100e9)


def test_torus_link_needs_its_ports(tmp_path):
    text = (CATALOG / "tpu-v5e.toml").read_text().replace("ports = 4", "")
    path = tmp_path / "chip.toml"
    path.write_text(text)
    with pytest.raises(RooflineError, match="torus_axis"):
        load_chip(str(path))


def test_torus_axis_is_at_least_two(tmp_path):
    text = (CATALOG / "tpu-v5e.toml").read_text()
    assert "torus_axis = 16" in text
    path = tmp_path / "chip.toml"
    path.write_text(text.replace("torus_axis = 16", "torus_axis = 1"))
    with pytest.raises(RooflineError, match=r"'link\.scale-up\.torus_axis': must be at least 2"):
        load_chip(str(path))


@pytest.mark.parametrize(("kind", "algo"), [(k, "ring") for k in COLLECTIVES]
                         + [("all-reduce", "tree"), ("broadcast", "tree"),
                            ("all-reduce", "nvls")])
def test_a_group_of_one_moves_nothing(kind, algo, run_cli):
    est = evaluate(collective(kind, 64 * 2**20, 1, algo=algo), H100)
    assert est.t_lower_s == 0 and est.t_upper_s == 0
    code, out, err = run_cli("op", kind, "--bytes", "64MiB", "--ranks", "1", "--algo", algo,
                             "--explain")
    assert code == 0 and "nothing to do" in out and err == ""  # no numpy warnings either
    # and a sweep that includes one rank keeps the others' costs
    both = evaluate(collective(kind, 64 * 2**20, np.array([1, 8]), algo=algo), H100)
    assert both.t_lower_s[0] == 0 and both.t_lower_s[1] == pytest.approx(
        evaluate(collective(kind, 64 * 2**20, 8, algo=algo), H100).t_lower_s)


def test_sharded_matmul_needs_a_row_per_shard():
    with pytest.raises(RooflineError, match=r"shards \(16384\) exceed the contraction dimension"):
        sharded_matmul(1024, 8192, 8192, 16384)
    with pytest.raises(RooflineError, match="exceed the output dimension"):
        sharded_matmul(1024, 8192, 64, 128, shard="output")
    sharded_matmul(1024, 8192, 8192, 8192)  # one row each is still a matmul


def test_a_group_that_does_not_fill_whole_domains_spreads_evenly():
    # 16 data-parallel ranks, 9 per NVL72 domain (tp 8): the fewest domains that hold them
    # is 2, with 8 each, so the cost is that of 16 ranks in domains of 8
    for kind in ("all-reduce", "all-gather", "all-to-all"):
        odd = collective(kind, 1e9, 16, domain_size=9)
        even = collective(kind, 1e9, 16, domain_size=8)
        assert odd.link_bytes == pytest.approx(even.link_bytes)
    # 12 ranks on 8-GPU nodes: 2 nodes of 6; by hand 2·5/6 GB inside, 2·1/2·(1 GB / 6) across
    twelve = collective("all-reduce", 1e9, 12, domain_size=8)
    assert twelve.link_bytes["scale-up"] == pytest.approx(2 * 5 / 6 * 1e9)
    assert twelve.link_bytes["scale-out"] == pytest.approx(1e9 / 6)


# --- calls, algorithm choice, all-to-all algorithms, full-mesh topology -----------------------


def test_a_collective_is_one_call_whose_launch_precedes_each_of_its_phases():
    flat = collective("all-reduce", 1e6, 8)
    assert flat.link_calls == {"scale-up": 1.0}
    est = evaluate(flat, H100)  # the call's base latency is charged once, with 14 alphas
    assert est.time_s["latency"] == pytest.approx(14 * NVLINK.latency_s + NVLINK.base_latency_s)
    across = collective("all-reduce", 1e6, 16, domain_size=8)
    assert across.link_calls == {"scale-up": 1.0, "scale-out": 1.0}
    sweep = collective("all-gather", 1e6, np.array([1, 4, 16]), domain_size=8)
    np.testing.assert_array_equal(sweep.link_calls["scale-up"], [0, 1, 1])  # one rank: no call
    np.testing.assert_array_equal(sweep.link_calls["scale-out"], [0, 0, 1])


@pytest.mark.parametrize("chip", ["h100", "a100", "mi300x", "v5e"])
def test_auto_picks_the_fastest_algorithm_at_every_size(chip):
    hw = load_chip(chip)
    sizes = np.logspace(2, 11, 40)
    for kind in ("all-reduce", "broadcast", "all-gather", "all-to-all"):
        auto = evaluate(collective(kind, sizes, 8, chip=hw), hw).t_lower_s
        up = hw.link("scale-up")
        algos = [a for a in ("ring", "tree", "nvls", "direct", "pairwise", "one-shot",
                             "two-shot")
                 if (a != "nvls" or up.in_switch_reduction)
                 and (a not in ("one-shot", "two-shot") or up.topology in ("switch", "mesh"))]
        each = []
        for algo in algos:
            try:
                each.append(evaluate(collective(kind, sizes, 8, algo), hw).t_lower_s)
            except RooflineError:
                continue  # an algorithm that does not implement this collective
        np.testing.assert_allclose(auto, np.min(each, axis=0), rtol=1e-12)
        for i in (0, 17, 39):  # a sweep chooses what single sizes choose
            one = evaluate(collective(kind, float(sizes[i]), 8, chip=hw), hw).t_lower_s
            assert one == pytest.approx(auto[i])


def test_one_shot_all_reduce_is_the_engines_small_message_kernel():
    # vLLM / SGLang / TensorRT-LLM custom all-reduce: every rank reads the 7 other buffers in
    # one step, no NCCL call; SGLang measured 5.7 us at 4 KiB on 8x H100 (sglang PR #2904),
    # below NCCL's 6.6 us base latency alone: the bound must allow it
    h100 = load_chip("h100")
    one = collective("all-reduce", 4096, 8, "one-shot")
    assert one.link_steps == {"scale-up": 1.0} and one.link_calls == {"scale-up": 0.0}
    assert one.link_bytes["scale-up"] == 7 * 4096
    assert choose_algorithm("all-reduce", 4096, 8, h100) == "one-shot"
    assert evaluate(collective("all-reduce", 4096, 8, chip=h100), h100).t_lower_s <= 5.7e-6
    assert choose_algorithm("all-reduce", 2**30, 8, h100) != "one-shot"  # (n-1)x the bytes
    with pytest.raises(RooflineError, match="fit one domain"):
        collective("all-reduce", 4096, 16, "one-shot", domain_size=8)


def test_auto_follows_the_latency_bandwidth_trade():
    # no in-switch reduction: one-shot, then two-shot (the engines' kernels) for the bound;
    # the library's own pick, tree then ring, is what the expected time assumes runs
    a100 = load_chip("a100")
    assert choose_algorithm("all-reduce", 4 * 2**10, 8, a100) == "one-shot"
    for size, library in [(2**20, "tree"), (2**30, "ring")]:
        auto = collective("all-reduce", size, 8, chip=a100)
        assert auto.algorithm == "two-shot" and auto.runs is not None
        assert auto.runs.algorithm == library
        named = collective("all-reduce", size, 8, library)
        assert expected(auto, a100).t_s == pytest.approx(expected(named, a100).t_s)
        assert expected(auto, a100).bound.t_lower_s == evaluate(auto, a100).t_lower_s
        in_graph = collective("all-reduce", size, 8, "two-shot")
        assert expected(auto, a100, cuda_graphs=True).t_s == pytest.approx(
            expected(in_graph, a100, cuda_graphs=True).t_s)
    assert choose_algorithm("all-reduce", 1 * 2**30, 8, H100) == "nvls"  # NVSwitch SHARP
    assert collective("all-reduce", 2**30, 8, chip=H100).runs is None  # the library's too
    assert choose_algorithm("all-to-all", 1e6, 8, H100) == "direct"
    assert choose_algorithm("all-to-all", 1e6, 64, H100, domain_size=8) == "direct"
    # the library default without a chip stays ring (all-to-all: direct, NCCL's)
    assert collective("all-reduce", 1e6, 8).name == "all-reduce (ring)"
    assert collective("all-to-all", 1e6, 8).name == "all-to-all (direct)"
    with pytest.raises(RooflineError, match="pass chip="):
        collective("all-reduce", 1e6, 8, "auto")


def test_all_to_all_algorithms():
    m, n = 64e6, 8
    direct = collective("all-to-all", m, n, "direct")
    pairwise = collective("all-to-all", m, n, "pairwise")
    ring = collective("all-to-all", m, n, "ring")
    assert direct.link_steps["scale-up"] == 1 and pairwise.link_steps["scale-up"] == n - 1
    assert direct.link_bytes["scale-up"] == pairwise.link_bytes["scale-up"] == \
        pytest.approx((n - 1) / n * m)
    # a relay between neighbours: chunks 1..4 hops away, the short way round
    assert ring.link_steps["scale-up"] == 4
    assert ring.link_bytes["scale-up"] == pytest.approx((1 + 2 + 3 + 4 + 3 + 2 + 1) / n * m)
    across = collective("all-to-all", m, 32, "direct", domain_size=8)
    assert across.link_steps == {"scale-up": 1.0, "scale-out": 1.0}
    assert collective("all-to-all", m, 32, "pairwise", domain_size=8).link_steps == \
        {"scale-up": 7.0, "scale-out": 24.0}
    with pytest.raises(RooflineError, match="spans scale-up domains"):
        collective("all-to-all", m, 32, "ring", domain_size=8)
    with pytest.raises(RooflineError, match="does not implement"):
        collective("all-reduce", m, n, "direct")


def test_a_full_mesh_gives_a_group_one_port_per_peer(run_cli):
    from roofline import make_system

    mi300x = make_system("mi300x")  # 7 Infinity Fabric ports of 64 GB/s each way
    port = mi300x.chip.link("scale-up").bandwidth_Bps / 7
    assert port == pytest.approx(64e9)
    shares = mi300x.link_share("scale-up", np.array([2, 3, 5, 8]))
    np.testing.assert_allclose(shares, np.array([1, 2, 4, 7]) / 7)
    # a pair gets one port: 1 GiB over 64 GB/s (issue 12: ~16.8 ms, not 2.4 ms)
    code, out, _ = run_cli("op", "sendrecv", "--hw", "mi300x", "--bytes", "1GiB", "--ranks",
                           "2", "--json")
    data = json.loads(out)
    assert code == 0 and data["t_lower_s"] == pytest.approx(2**30 / 64e9, rel=1e-3)
    assert data["t_lower_s"] == pytest.approx(16.8e-3, rel=0.01)
    # a send/recv has one peer however many ranks take part (sendrecv_perf -g 8)
    _, out, _ = run_cli("op", "sendrecv", "--hw", "mi300x", "--bytes", "1GiB", "--ranks", "8",
                        "--json")
    assert json.loads(out)["inputs"]["link_share"] == pytest.approx(1 / 7)
    # and all eight ranks of a ring use all seven ports; a switch gives any group everything
    _, out, _ = run_cli("op", "allreduce", "--hw", "mi300x", "--bytes", "1GiB", "--ranks", "8",
                        "--json")
    assert json.loads(out)["inputs"]["link_share"] == 1
    assert make_system("h100").link_share("scale-up", 2) == 1.0
    # Gaudi's box is a mesh too: 3 RoCE ports to each of its 7 peers
    assert make_system("gaudi3").link_share("scale-up", 2) == pytest.approx(1 / 7)


def test_cli_auto_echoes_its_choice_per_size(run_cli):
    code, out, _ = run_cli("op", "allreduce", "--hw", "a100", "--bytes", "1MiB", "--ranks",
                           "8", "--json")
    assert code == 0 and json.loads(out)["inputs"]["algo"] == "two-shot"
    _, out, _ = run_cli("op", "alltoall", "--hw", "h100", "--bytes", "1GiB", "--ranks", "8",
                        "--json")
    assert json.loads(out)["inputs"]["algo"] == "direct"


@pytest.mark.parametrize("chip", ["h100", "mi300x", "tpu-v5p", "b200"])
@pytest.mark.parametrize("op", ["allreduce", "allgather", "broadcast", "alltoall"])
def test_a_sweep_over_group_sizes_equals_each_size_alone(chip, op):
    """Group sizes inside and past a domain in one sweep: each point is its own collective
    (flat or hierarchical, its own link share and candidate algorithms), as if run alone."""
    from roofline.ops import run_op

    sizes, nbytes = np.array([[2.0], [8.0], [12.0], [16.0]]), np.array([1024.0, 2.0 ** 30])
    swept = run_op(op, chip, nbytes=nbytes, ranks=sizes)
    for i, r in enumerate(sizes.ravel()):
        for j, b in enumerate(nbytes):
            alone = run_op(op, chip, nbytes=b, ranks=float(r))
            assert swept.t_lower_s[i, j] == pytest.approx(alone.t_lower_s, rel=1e-12), (r, b)
            assert swept.bound[i, j] == alone.bound


def test_a_group_spread_over_domains_keeps_its_share_of_the_mesh():
    """12 ranks on MI300X (8-GPU full mesh): 6 per node use 5 of each GPU's 7 ports, so the
    node's phase alone is as slow as a flat 6-rank all-reduce; the hierarchy adds to it."""
    from roofline.ops import run_op

    flat6 = run_op("allreduce", "mi300x", nbytes=2.0 ** 30, ranks=6, algo="ring").t_lower_s
    spread12 = run_op("allreduce", "mi300x", nbytes=2.0 ** 30, ranks=12, algo="ring")
    assert spread12.t_lower_s >= flat6 * (1 - 1e-12)


def test_a_sweep_over_domain_sizes_equals_each_alone():
    from roofline.ops import run_op

    ranks, domains = np.array([[8.0], [16.0]]), np.array([4.0, 8.0])
    swept = run_op("allreduce", "h100", nbytes=2.0 ** 26, ranks=ranks, domain_size=domains)
    for i, r in enumerate(ranks.ravel()):
        for j, d in enumerate(domains):
            alone = run_op("allreduce", "h100", nbytes=2.0 ** 26, ranks=r, domain_size=d)
            assert swept.t_lower_s[i, j] == pytest.approx(alone.t_lower_s, rel=1e-12)


def test_sweep_op_takes_a_list_of_domain_sizes(run_cli):
    code, out, _ = run_cli("sweep", "op", "allreduce", "--bytes", "64MiB", "--ranks", "8",
                           "--domain-size", "4,8", "--json")
    assert code == 0 and json.loads(out)["points"]["domain_size"] == [4, 8]


H100_SRAM = load_chip("h100").level("sram").unit_capacity_bytes


def test_sweep_op_tp_layer_takes_the_link_share_and_domain(run_cli):
    base = ("sweep", "op", "tp-layer", "--seq-len", "2048", "--hidden", "4096", "--ffn",
            "14336", "--heads", "32", "--tp", "8", "--json")
    code, out, _ = run_cli(*base, "--link-share", "0.5")  # crashed: float() of an array
    assert code == 0
    code, out, _ = run_cli(*base, "--link-share", "0.25,1", "--domain-size", "4")
    swept = json.loads(out)["points"]["t_lower_s"]
    for share, t in zip((0.25, 1.0), swept, strict=True):
        alone = evaluate(tp_layer(1, 2048, 4096, 14336, 32, tp=8, domain_size=4,
                                  link_share=share, sram_bytes=H100_SRAM), "h100")
        assert t == pytest.approx(alone.t_lower_s, rel=1e-9)


def test_a_tp_layers_derivation_names_each_op_and_ends_in_the_layers_totals():
    layer = tp_layer(1, 2048, 4096, 14336, 32, 8, tp=4, block_q=128)
    names = [t.name for t in layer.terms]
    assert "qkv projection: FLOPs" in names and names[-2:] == ["layer FLOPs",
                                                              "layer HBM bytes"]
    assert layer.terms[-2].expr.value == pytest.approx(float(layer.total_flops), rel=1e-12)
    assert layer.terms[-1].expr.value == pytest.approx(layer.bytes["hbm"], rel=1e-12)


def test_a_sweep_of_bad_group_sizes_is_refused_in_one_line():
    from roofline.ops import run_op

    for ranks, needle in (([8.0, np.nan], "positive finite"), ([8.0, 2.5], "whole number")):
        with pytest.raises(RooflineError, match=needle):  # an IndexError split the sweep
            run_op("allreduce", "h100", nbytes=1e6, ranks=np.array(ranks))


def test_tree_all_reduce_moves_what_the_busiest_rank_of_a_double_binary_tree_moves():
    # each tree carries half the message; a rank is interior in at most one: over 2 ranks
    # m, 3 ranks 1.5·m (nccl#1801: 3 GB200 trays over IB move ~1.56x the message), 4+ 2·m
    m = 2.0**30
    for ranks, share in [(2, 1.0), (3, 1.5), (4, 2.0), (64, 2.0)]:
        tree = collective("all-reduce", m, ranks, "tree")
        assert tree.link_bytes["scale-up"] == pytest.approx(share * m), ranks
    swept = collective("all-reduce", m, np.array([1.0, 2.0, 3.0, 5.0]), "tree")
    np.testing.assert_allclose(swept.link_bytes["scale-up"], [0.0, m, 1.5 * m, 2 * m])
    # across 3 domains the NIC phase carries 1.5x the domain's shard (m / a)
    gb200 = load_chip("gb200")
    across = collective("all-reduce", m, 12, "tree", domain_size=4, chip=gb200)
    assert across.link_bytes["scale-out"] == pytest.approx(1.5 * m / 4)
    # never below what any all-reduce must send: 2(n-1)/n of the message
    for ranks in (2, 3, 4, 8):
        ring = collective("all-reduce", m, ranks, "ring").link_bytes["scale-up"]
        assert collective("all-reduce", m, ranks, "tree").link_bytes["scale-up"] >= ring


def test_two_shot_is_the_engines_kernel_and_bounds_auto():
    # vLLM / aiter custom all-reduce, two stages: reduce-scatter then all-gather, each rank
    # reading its peers directly (2 steps, the ring's bytes), no RCCL call. vllm#39080 on
    # 8x MI355X: 1.5 MiB in 12.9 us, faster than auto's pick (tree, with RCCL's base latency)
    mi355x = load_chip("mi355x")
    two = collective("all-reduce", 1.5 * 2**20, 8, "two-shot")
    ring = collective("all-reduce", 1.5 * 2**20, 8, "ring")
    assert two.link_steps == {"scale-up": 2.0} and two.link_calls == {"scale-up": 0.0}
    assert two.link_bytes == ring.link_bytes
    assert evaluate(two, mi355x).t_lower_s <= 12.9e-6
    auto = collective("all-reduce", 1.5 * 2**20, 8, chip=mi355x)
    assert auto.algorithm == "two-shot" and evaluate(auto, mi355x).t_lower_s <= 12.9e-6
    assert auto.runs is not None and auto.runs.algorithm == "tree"  # RCCL's
    with pytest.raises(RooflineError, match="fit one domain"):
        collective("all-reduce", 2**20, 16, "two-shot", domain_size=8)


def test_one_shot_all_gather_and_reduce_scatter_are_symmetric_memory_kernels():
    # NCCL 2.27+'s symmetric-memory kernels (and PyTorch's symmetric memory) store a shard
    # into every peer's buffer, or load one from every peer, at once: 1 step, the ring's
    # bytes, no NCCL base latency. Megatron-LM#5596 on 8x H100: 2 MiB all-gather in 10.9 us
    # and reduce-scatter in 10.8 us of device time, under the ring's bound (7 steps + the
    # base latency: 14.9 us); by hand the one-shot's is 0.6 us + (7/8)·2 MiB / 450 GB/s
    h100 = load_chip("h100")
    for kind, measured in (("all-gather", 10.9e-6), ("reduce-scatter", 10.8e-6)):
        one = collective(kind, 2 * 2**20, 8, "one-shot", chip=h100)
        ring = collective(kind, 2 * 2**20, 8, "ring", chip=h100)
        assert one.link_steps == {"scale-up": 1.0} and one.link_calls == {"scale-up": 0.0}
        assert one.link_bytes == ring.link_bytes
        t = evaluate(one, h100).t_lower_s
        assert t == pytest.approx(0.6e-6 + 7 / 8 * 2 * 2**20 / 450e9)
        assert t <= measured < evaluate(ring, h100).t_lower_s
        auto = collective(kind, 2 * 2**20, 8, chip=h100)
        # the bound weighs it; the expected time keeps NCCL's ring (plain buffers), in CUDA
        # graphs too (an engine's own kernel there is its all-reduce, not its all-gather)
        assert auto.algorithm == "one-shot" and auto.runs is not None
        assert auto.runs.algorithm == "ring"
        assert expected(auto, h100, cuda_graphs=True).t_s == pytest.approx(
            expected(ring, h100, cuda_graphs=True).t_s)
        # across domains there is no direct path: ring only
        assert collective(kind, 2 * 2**20, 16, chip=h100, domain_size=8).algorithm == "ring"
        with pytest.raises(RooflineError, match=f"one-shot {kind}.*use ring or auto"):
            collective(kind, 2**20, 8, "one-shot", link="scale-out")


def test_one_and_two_shot_need_peers_in_reach():
    # the engines' kernels read every peer's buffer directly: a switch or full mesh on the
    # scale-up link; a torus, a NIC or a send-recv has no such kernel
    for algo in ("one-shot", "two-shot"):
        with pytest.raises(RooflineError, match="switch or full mesh"):
            collective("all-reduce", 1e6, 16, algo, chip=load_chip("tpu-v5e"))
        with pytest.raises(RooflineError, match="switch or full mesh"):
            collective("all-reduce", 1e6, 8, algo, link="scale-out")
        with pytest.raises(RooflineError, match="does not implement send-recv"):
            collective("send-recv", 1e6, 2, algo)
        assert collective("all-reduce", 1e6, 8, algo, chip=load_chip("mi300x")).algorithm == algo


def test_pcie_cards_beyond_their_nvlink_bridge_use_pcie():
    # H100 NVL / PCIe and A100 PCIe come NVLink-bridged in pairs; TP 4 crosses each card's
    # PCIe link (63 GB/s Gen5, 31.5 Gen4), which failed as "no scale-out link" before
    from roofline.models import Parallel, analyze, decode

    for name, bw in (("h100-nvl", 63e9), ("h100-pcie", 63e9), ("a100-pcie-80gb", 31.5e9)):
        chip = load_chip(name)
        assert chip.link("scale-out").bandwidth_Bps == bw
        a = analyze("llama-3-70b", chip, decode(8, 1024), Parallel(tp=4))
        assert "scale-out" in a.link_bytes
