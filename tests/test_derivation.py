import numpy as np

from roofline.derivation import Call, Sym, Term


def test_renders_formula_and_numbers():
    M, N, K = Sym("M", 128.0), Sym("N", 8192.0), Sym("K", 8192.0)
    flops = 2 * M * N * K
    assert flops.value == 2 * 128 * 8192 * 8192
    assert Term("FLOPs", flops).render() == "FLOPs = 2·M·N·K = 2·128·8192·8192 = 1.718e+10"


def test_brackets_follow_precedence():
    a, b, c = Sym("a", 1.0), Sym("b", 2.0), Sym("c", 3.0)
    assert (a * (b + c)).formula() == "a·(b + c)"
    assert (a - (b + c)).formula() == "a - (b + c)"
    assert (a / (b * c)).formula() == "a / (b·c)"
    assert (a + b * c).formula() == "a + b·c"
    assert ((a + b) / c).value == 1.0


def test_arrays_broadcast_and_render_as_range():
    B = Sym("B", np.array([1.0, 8.0, 64.0]))
    e = 2 * B * Sym("D", 4.0)
    np.testing.assert_array_equal(e.value, [8.0, 64.0, 512.0])
    assert e.substituted() == "2·[1…64]·4"


def test_a_one_point_grid_renders_as_its_number():
    # a (1, 1) batch x length grid: float() refuses arrays with dimensions
    e = 2 * Sym("B", np.array([[3.0]]))
    assert Term("x", e).render() == "x = 2·B = 2·3 = 6"


def test_call():
    e = Call("ceil", np.ceil, Sym("N", 10.0) / Sym("b", 4.0))
    assert e.value == 3.0
    assert e.formula() == "ceil(N / b)"


def test_power():
    e = Sym("E", 256.0) * (1 - (1 - Sym("k", 8.0) / Sym("E", 256.0)) ** Sym("T", 64.0))
    assert e.formula() == "E·(1 - (1 - k / E)^T)"
    assert e.value == 256 * (1 - (1 - 8 / 256) ** 64)


def test_scalar_helpers_agree_with_numpy():
    from roofline.derivation import add_all, any_true, maximum, ratio, scaled_sum, where

    rng = np.random.default_rng(3)
    for _ in range(50):
        a, b = float(rng.random()), float(rng.random())
        assert where(a > b, a, b) == np.where(a > b, a, b)
        assert maximum(a, b) == np.maximum(a, b)
        assert any_true(a > b) == bool(np.any(a > b))
        assert ratio(a, b, np.inf) == a / b
    assert ratio(1.0, 0.0, np.inf) == np.inf
    assert np.array_equal(ratio(np.array([1.0, 2.0]), np.array([0.0, 4.0]), np.inf),
                          [np.inf, 0.5])
    # add_all: the same sum as adding everything, whatever the mix of shapes
    col, row, grid = rng.random((4, 1)), rng.random((1, 5)), rng.random((4, 5))
    parts = [1.5, col, grid, col * 2, row, 0.25, grid * 3, grid]
    copies = [np.copy(p) for p in parts]
    assert np.allclose(add_all(parts), sum(parts, 0.0), rtol=1e-15, atol=0)
    assert all(np.array_equal(p, c) for p, c in zip(parts, copies, strict=True))  # inputs kept
    assert add_all([grid]) is grid and np.array_equal(add_all([col, grid]), col + grid)
    assert add_all([]) == 0.0 and add_all([2.0, 3.0]) == 5.0
    # scaled_sum: sum of n·v, the products its own (summed into in place), inputs unwritten
    pairs = [(2.0, grid), (1, col), (3.0, col), (0.5, 1.5), (1, grid), (4.0, grid), (1, row)]
    copies = [np.copy(v) for _, v in pairs]
    expected = sum((n * v for n, v in pairs), 0.0)
    assert np.allclose(scaled_sum(pairs), expected, rtol=1e-15, atol=0)
    assert all(np.array_equal(v, c) for (_, v), c in zip(pairs, copies, strict=True))
    assert scaled_sum([(2.0, 1.5), (1, 0.25)]) == 3.25


def test_max_argmax_matches_stacked_argmax():
    from roofline.evaluate import max_argmax

    rng = np.random.default_rng(4)
    for _ in range(300):  # small integers: many ties, between every mix of shapes
        shapes = [(6, 1), (1, 7), (6, 7), ()]
        values = [rng.integers(0, 4, size=shapes[rng.integers(0, 4)]).astype(float)
                  for _ in range(int(rng.integers(1, 6)))]
        top, index = max_argmax(values)
        stacked = np.stack(np.broadcast_arrays(*values))
        assert np.array_equal(top, stacked.max(axis=0))
        assert np.array_equal(index, stacked.argmax(axis=0))  # ties: the first, like argmax
    assert max_argmax([1.0, 3.0, 3.0]) == (3.0, 1)


def test_an_op_runs_on_numbers_and_derives_on_first_read(monkeypatch):
    import pickle

    from roofline import derivation
    from roofline.ops import matmul

    made = []
    real = derivation.Sym.__init__

    def counting(self, name, value):
        made.append(name)
        real(self, name, value)

    monkeypatch.setattr(derivation.Sym, "__init__", counting)
    cost = matmul(128, 8192, 4096)
    twice = 2 * cost + cost
    assert made == [] and callable(cost.steps) and callable(twice.steps)  # nothing built
    assert cost.explain()[0] == "FLOPs = 2·M·N·K = 2·128·4096·8192 = 8.59e+09"
    assert made and cost.terms[0].expr.value == cost.flops["bf16"]
    assert [t.name for t in twice.terms] == ["FLOPs", "HBM bytes"] * 2
    assert twice.explain()[0].startswith("FLOPs = n·2·M·N·K = 2·2·128·4096·8192")
    fresh = pickle.loads(pickle.dumps(matmul(64, 1024, 1024)))  # a partial, no closure
    assert fresh.explain()[1].startswith("HBM bytes = M·K·s_x")


def test_a_formula_helper_on_its_own_gives_a_derivation():
    from roofline.ops.attention import score_pairs

    pairs = score_pairs(4, 16)  # outside any op: symbols, as before
    assert pairs.value == 4 * 16 - 4 * 3 / 2 and "Lq" in pairs.formula()
