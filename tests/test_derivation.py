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


def test_call():
    e = Call("ceil", np.ceil, Sym("N", 10.0) / Sym("b", 4.0))
    assert e.value == 3.0
    assert e.formula() == "ceil(N / b)"


def test_power():
    e = Sym("E", 256.0) * (1 - (1 - Sym("k", 8.0) / Sym("E", 256.0)) ** Sym("T", 64.0))
    assert e.formula() == "E·(1 - (1 - k / E)^T)"
    assert e.value == 256 * (1 - (1 - 8 / 256) ** 64)
