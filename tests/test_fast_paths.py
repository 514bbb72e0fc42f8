"""The fast paths give the full analysis's numbers: cached catalogs and parameter counts, the
summary-only step a sweep runs, chunked sweeps, and a derivation text that did not move.

Seeded random configurations (models, phases, tp/pp/dp/ep, dtypes, batch/length arrays),
compared to 1e-9 relative (in fact bit for bit: the same code computes both).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import roofline as rl
from roofline.models import Parallel, Precision, analyze, decode, prefill, train
from roofline.models.catalog import load_model
from roofline.models.memory import local_param_split
from roofline.models.params import param_counts
from roofline.models.summary import step_summary
from roofline.sweep import Frontier, ModelSweep, sweep_model

MODELS = ["llama-3-8b", "llama-3-70b", "mixtral-8x7b", "deepseek-v3", "gemma-3-27b",
          "qwen3-next-80b-a3b"]
CHIPS = ["h100", "a100", "mi300x", "b200"]


def random_case(rng: np.random.Generator):
    model = str(rng.choice(MODELS))
    spec = load_model(model)
    kind = str(rng.choice(["decode", "prefill", "train"]))
    tp = int(rng.choice([t for t in (1, 2, 4, 8) if spec.heads % t == 0]))
    dp = int(rng.choice([1, 2]))
    moe = spec.moe is not None
    ep = int(rng.choice([e for e in (1, 2, 4) if moe and spec.moe.experts % e == 0
                         and e <= dp * tp] or [1]))
    pp = int(rng.choice([1, 2]))
    batch = dp * rng.integers(1, 64, size=(int(rng.integers(1, 5)), 1)).astype(float)
    length = rng.integers(1, 32, size=(1, int(rng.integers(1, 5)))).astype(float) * 256
    phase = {"decode": decode(batch, length), "prefill": prefill(batch, length),
             "train": train(batch, length)}[kind]
    weights = str(rng.choice(["bf16", "fp8", "int4"])) if kind != "train" else "bf16"
    kv = str(rng.choice(["bf16", "fp8"]))
    return (model, str(rng.choice(CHIPS)), phase, Parallel(tp=tp, pp=pp, dp=dp, ep=ep),
            Precision(weights=weights, activations="bf16", kv_cache=kv))


def close(a, b) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.all((a == b) | (np.abs(a - b) <= 1e-9 * np.abs(b))))


@pytest.mark.parametrize("seed", range(12))
def test_the_summary_path_equals_the_full_analysis(seed):
    rng = np.random.default_rng(seed)
    args = random_case(rng)
    full = analyze(*args)
    fast = step_summary(*args)
    for name in ("t_lower_s", "t_upper_s", "tokens_per_s", "mfu"):
        assert close(getattr(fast, name), getattr(full, name)), name
    assert close(fast.memory_bytes, full.memory.total_bytes)
    assert np.array_equal(fast.fits, full.memory.fits)
    assert np.array_equal(np.asarray(fast.bound_names)[fast.bound_index], full.bound)


@pytest.mark.parametrize("seed", range(6))
def test_scalar_analyses_equal_the_vectorized_one_point_by_point(seed):
    rng = np.random.default_rng(100 + seed)
    model, chip, phase, par, prec = random_case(rng)
    grid = analyze(model, chip, phase, par, prec)
    bb, nn = np.broadcast_arrays(phase.batch, phase.kv_len)
    i, j = int(rng.integers(bb.shape[0])), int(rng.integers(bb.shape[1]))
    one = type(phase)(phase.kind, float(bb[i, j]), phase.q_len if np.ndim(phase.q_len) == 0
                      else float(np.broadcast_to(phase.q_len, bb.shape)[i, j]),
                      float(nn[i, j]), phase.recompute)
    scalar = analyze(model, chip, one, par, prec)
    assert close(scalar.t_lower_s, np.broadcast_to(grid.t_lower_s, bb.shape)[i, j])
    assert scalar.bound == np.broadcast_to(grid.bound, bb.shape)[i, j]


def test_cached_counts_equal_a_fresh_computation():
    spec = load_model("deepseek-v3")
    cached = param_counts(spec)
    assert param_counts.__wrapped__(spec) == cached  # type: ignore[attr-defined]
    par = Parallel(tp=8, ep=8, dp=8)
    assert local_param_split.__wrapped__(spec, par) == local_param_split(spec, par)


@pytest.mark.parametrize("chunk", [1, 3, 7, 50])
def test_a_chunked_sweep_equals_the_one_shot_sweep(chunk):
    args = ("mixtral-8x7b", ["h100", "mi300x"], "decode", [2, 16, 64, 256, 1024],
            [512, 4096, 32768])
    kw = dict(tp=[2, 4], dp=[1, 2], ep=[1, 2], kv_dtypes=["bf16", "fp8"])
    whole = sweep_model(*args, **kw)
    sweep = ModelSweep(*args, chunk_points=chunk, **kw)
    reduce = Frontier(0.05)
    parts = []
    for part in sweep:
        reduce.add(part)
        parts.append(part)
    assert len(parts) > 1 or chunk == 50
    for key in whole.columns:
        assert np.array_equal(np.concatenate([p.columns[key] for p in parts]),
                              whole.columns[key]), key
    assert sweep.bound_changes == whole.bound_changes
    assert reduce.result(sweep.bound_changes) == whole.frontier(0.05)


def test_sweep_points_equal_analyses_at_random():
    rng = np.random.default_rng(7)
    r = sweep_model("llama-3-70b", ["h100", "b200"], "prefill", [1, 8, 64], [1024, 8192],
                    tp=[4, 8], weight_dtypes=["bf16", "fp8"])
    for i in rng.choice(len(r), 6, replace=False):
        row = r.row(int(i))
        a = analyze("llama-3-70b", row["hardware"], prefill(row["batch"], row["length"]),
                    Parallel(tp=row["tp"]), Precision(weights=row["weight_dtype"]))
        assert close(row["t_lower_s"], a.t_lower_s) and row["bound"] == a.bound
        assert close(row["memory_bytes"], a.memory.total_bytes)


def _streamed_peak(batches: int, chunk: int) -> tuple[int, int]:
    sweep = ModelSweep("llama-3-8b", ["h100"], "decode", np.arange(1.0, batches + 1),
                       np.geomspace(128, 131072, 100).round(), chunk_points=chunk)
    tracemalloc.start()
    reduce = Frontier()
    for part in sweep:
        reduce.add(part)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert reduce.points == sweep.points
    return peak, sweep.points


def test_sweep_memory_is_bounded_by_the_chunk_not_the_grid():
    """Eight times the points in chunks of the same size: about the same peak (one chunk's
    working set), where a one-shot evaluation would take eight times the memory. Both run
    several chunks (one chunk alone peaks lower: no previous chunk is still held)."""
    small, n_small = _streamed_peak(100, 5_000)
    large, n_large = _streamed_peak(800, 5_000)
    assert n_large == 8 * n_small
    assert large < 1.5 * small, (small, large)
    one_shot, _ = _streamed_peak(400, 40_000)  # the whole grid in one chunk
    assert one_shot > 4 * small  # the measurement sees the chunk size


def test_explain_text_is_unchanged():
    cost = rl.matmul(128, 8192, 8192)
    assert cost.explain() == ["FLOPs = 2·M·N·K = 2·128·8192·8192 = 1.718e+10",
                              "HBM bytes = M·K·s_x + K·N·s_w + M·N·s_o = "
                              "128·8192·2 + 8192·8192·2 + 128·8192·2 = 1.384e+08"]
    layer = analyze("llama-3-8b", "h100", decode(8, 1024)).ops[0].cost
    assert layer.explain() and all(" = " in line for line in layer.explain())


@pytest.mark.parametrize("seed", range(6))
def test_a_grid_analysis_gives_every_point_figure_in_the_grid_shape(seed):
    """The sweep-oriented shortcuts (small per-sequence terms, figures summed at their own
    shape) must not leak into the outputs: the JSON of a batch x length analysis has each
    per-point figure as a full grid, and its op rows add up to the step's t_lower."""
    args = random_case(np.random.default_rng(100 + seed))
    a = analyze(*args)
    shape = np.broadcast_shapes(np.shape(args[2].batch), np.shape(args[2].kv_len))
    d = a.to_dict()
    for key in ("t_lower_s", "t_upper_s", "t_floor_s", "exposed_comm_s", "hidden_comm_s",
                "mfu"):
        assert np.shape(d[key]) == shape, key
    for key in ("kv_cache_bytes", "activations_bytes", "state_bytes", "total_bytes", "fits",
                "max_batch"):
        assert np.shape(d["memory"][key]) == shape, key
    rows = sum(np.asarray(op.t_lower_s) for op in a.ops)
    assert close(rows, a.t_lower_s)
    assert np.all(np.asarray(a.t_floor_s) <= np.asarray(a.t_lower_s) * (1 + 1e-12))


def test_lazily_built_parts_pickle():
    """The tables, memory limits and derivation steps built on first read hold no closures:
    an analysis crosses a process boundary (multiprocessing) before or after they are read."""
    import pickle

    for phase in (prefill(2, 2048), decode(8, 4096), train(8, 2048)):
        a = analyze("llama-3-8b", "h100", phase, Parallel(tp=2))
        b = pickle.loads(pickle.dumps(a))
        assert b.t_lower_s == a.t_lower_s and b.memory.max_batch == a.memory.max_batch
        assert [op.t_lower_s for op in b.ops] == [op.t_lower_s for op in a.ops]
        assert [t.render() for op in b.ops for t in op.cost.terms] == \
            [t.render() for op in a.ops for t in op.cost.terms]
        est = rl.evaluate(rl.attention(1, 2048, 2048, 32, block_q=128), "h100")
        assert pickle.loads(pickle.dumps(est)).ridge == est.ridge


@pytest.mark.parametrize(("phase", "model"), [("prefill", "qwen3-next-80b-a3b"),
                                              ("train", "mixtral-8x7b"),
                                              ("decode", "gemma-3-27b")])
@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_chunks_add_in_the_whole_grids_order(phase, model, chunk):
    """Sums add (batch, 1) terms before (batch, length) ones; pieces of one or two columns
    must not change that order (bit-identical columns), in every phase."""
    args = (model, ["h100"], phase, [2, 16, 64], [512, 4096, 32768])
    whole = sweep_model(*args, tp=[2], dp=[1, 2])
    parts = list(ModelSweep(*args, chunk_points=chunk, tp=[2], dp=[1, 2]))
    for key in whole.columns:
        assert np.array_equal(np.concatenate([p.columns[key] for p in parts]),
                              whole.columns[key]), key


@pytest.mark.parametrize("seed", range(6))
def test_time_by_resource_adds_up_to_the_bound_and_names_it(seed):
    args = random_case(np.random.default_rng(200 + seed))
    a = analyze(*args)
    split = a.time_by_resource
    assert close(sum(np.asarray(v) for v in split.values()), a.t_lower_s)
    names = list(split)
    top = np.argmax(np.stack(np.broadcast_arrays(*(np.asarray(v) for v in split.values()))),
                    axis=0)
    assert np.array_equal(np.asarray(names)[top], np.asarray(a.bound))
    by_op: dict[str, object] = {}  # the same split from the op table
    for op in a.ops:
        bound = np.asarray(op.bound)
        for r in np.unique(bound):
            by_op[str(r)] = by_op.get(str(r), 0.0) + np.where(bound == r, op.t_lower_s, 0.0)
    assert set(by_op) == set(split)
    assert all(close(by_op[k], split[k]) for k in split)


@pytest.mark.parametrize("seed", range(6))
def test_auto_collective_from_one_byte_costs_is_the_formula_at_the_size(seed):
    """"auto" builds each candidate once per group shape at one byte (memoised on the chip)
    and scales it: the named algorithm's formula at the real size, point by point, and a
    floor (`least`) that no candidate it weighed demands less than."""
    from roofline.hardware import load_chip
    from roofline.ops.collectives import collective
    from roofline.ops.collectives.auto import candidates as _candidates

    rng = np.random.default_rng(seed)
    chip = load_chip(str(rng.choice(["h100", "a100", "mi300x", "b200", "gb200-nvl72"])))
    fields = ("link_bytes", "link_steps", "link_calls")
    for _ in range(25):
        kind = str(rng.choice(["all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                               "broadcast"]))
        ranks = int(rng.choice([1, 2, 3, 4, 8, 16, 24, 64]))
        domain = None if rng.random() < 0.5 else int(rng.choice([4, 8, 9]))
        share = float(rng.choice([1.0, 0.5, 0.25]))
        group = dict(ranks=ranks, domain_size=domain, link_share=share)
        sizes = np.exp(rng.uniform(0, np.log(1e10), 3))
        sweep = collective(kind, sizes, algo="auto", **group, chip=chip)
        for i, nbytes in enumerate(sizes.tolist()):
            auto = collective(kind, nbytes, algo="auto", **group, chip=chip)
            assert auto.algorithm == np.broadcast_to(sweep.algorithm, sizes.shape)[i]
            named = collective(kind, nbytes, algo=auto.algorithm, **group)
            for field in fields:
                assert getattr(auto, field).keys() == getattr(named, field).keys()
                for key, want in getattr(named, field).items():
                    assert getattr(auto, field)[key] == pytest.approx(want, rel=1e-12)
                    assert np.ravel(getattr(sweep, field)[key])[i] == pytest.approx(
                        want, rel=1e-12)
            weighed = [collective(kind, nbytes, algo=algo, **group)
                       for algo in _candidates(kind, ranks, chip, "scale-up", domain)]
            assert (auto.least is None) == (len(weighed) == 1)
            for field in fields if auto.least is not None else ():
                for key, least in getattr(auto.least, field).items():
                    assert all(least <= getattr(c, field).get(key, 0.0) * (1 + 1e-12)
                               for c in weighed)
                    assert any(least >= getattr(c, field).get(key, 0.0) * (1 - 1e-12)
                               for c in weighed)


@pytest.mark.parametrize("seed", range(4))
def test_a_one_point_collective_is_bounded_as_the_array_path_bounds_it(seed):
    """`evaluate` bounds a one-point Cost with links in plain Python: the same times,
    alpha-beta chains, sums and first-of-equals bound as the general (array) path (whose
    arrays multiply by the reciprocal bandwidth: within an ulp)."""
    from roofline.cost import Cost
    from roofline.hardware import load_chip
    from roofline.ops.collectives import collective

    rng = np.random.default_rng(seed)
    chip = load_chip(str(rng.choice(["h100", "mi300x", "gb200-nvl72", "tpu-v5p"])))
    for _ in range(40):
        kind = str(rng.choice(["all-reduce", "all-gather", "all-to-all", "send-recv"]))
        ranks = int(rng.choice([2, 4, 8, 16, 64]))
        domain = None if rng.random() < 0.5 else int(rng.choice([4, 8]))
        nbytes = float(np.exp(rng.uniform(0, np.log(1e10))))
        ranks = 2 if kind == "send-recv" else ranks
        one = collective(kind, nbytes, ranks, domain_size=domain, chip=chip)
        if rng.random() < 0.3:  # with compute beside its links (a fused op)
            one = Cost(flops={"bf16": nbytes * 100}, bytes={"hbm": nbytes}) + one
        fields = ("flops", "bytes", "link_bytes", "link_steps", "link_calls")
        wide = Cost(**{f: {k: np.array([v]) for k, v in getattr(one, f).items()}
                       for f in fields})
        fast, general = rl.evaluate(one, chip), rl.evaluate(wide, chip)
        assert list(fast.time_s) == list(general.time_s)
        for key, t in fast.time_s.items():
            assert type(t) is float and close(t, np.ravel(general.time_s[key])[0]), key
        assert fast.chain_s.keys() == general.chain_s.keys()
        assert all(close(fast.chain_s[k], np.ravel(general.chain_s[k])[0])
                   for k in fast.chain_s)
        assert close(fast.t_lower_s, np.ravel(general.t_lower_s)[0])
        assert close(fast.t_upper_s, np.ravel(general.t_upper_s)[0])
        assert fast.bound == np.ravel(general.bound)[0]
