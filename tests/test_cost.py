import numpy as np
import pytest

from roofline import Cost, matmul
from roofline.derivation import Term


def test_add_merges_per_key():
    a = Cost(flops={"bf16": 10.0}, bytes={"hbm": 4.0}, name="a")
    b = Cost(flops={"bf16": 5.0, "fp8": 2.0}, bytes={"l2": 1.0}, link_bytes={"scale-up": 3.0},
             link_steps={"scale-up": 2.0}, name="b")
    c = a + b
    assert dict(c.flops) == {"bf16": 15.0, "fp8": 2.0}
    assert dict(c.bytes) == {"hbm": 4.0, "l2": 1.0}
    assert dict(c.link_bytes) == {"scale-up": 3.0}
    assert dict(c.link_steps) == {"scale-up": 2.0}
    assert c.total_flops == 17.0
    assert c.name == "a + b"


def test_sum_and_scale():
    layer = matmul(16, 64, 64)
    total = sum([layer, layer, layer])
    scaled = 3 * layer
    assert total.total_flops == scaled.total_flops == 3 * layer.total_flops
    assert total.bytes["hbm"] == pytest.approx(scaled.bytes["hbm"])
    assert (layer * 2).explain()[0] == "FLOPs = n·2·M·N·K = 2·2·16·64·64 = 2.621e+05"
    assert layer.scaled(80, "layers").explain()[1].startswith(
        "HBM bytes = layers·(M·K·s_x + K·N·s_w + M·N·s_o) = 80·(16·64·2")


def test_scale_by_array_broadcasts():
    c = matmul(16, 64, 64) * np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(c.flops["bf16"], np.array([1, 2, 4]) * 2 * 16 * 64 * 64)


def test_negative_scale_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        matmul(1, 1, 1) * -1.0


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), np.array([1.0, np.nan])])
def test_nan_or_infinite_scale_rejected(factor):
    # these gave nan / inf times that looked like answers
    with pytest.raises(ValueError, match=r"finite, non-negative factor, got (nan|inf)"):
        matmul(1, 1, 1) * factor


@pytest.mark.parametrize(("fields", "needle"), [
    ({"flops": {"bf16": -1.0}}, r"flops\['bf16'\] must be finite and non-negative, got -1.0"),
    ({"bytes": {"hbm": float("nan")}}, r"bytes\['hbm'\] .* got nan"),
    ({"link_bytes": {"scale-up": np.array([1.0, -2.0])}}, r"link_bytes\['scale-up'\] .* -2.0"),
    ({"link_steps": {"scale-out": np.inf}}, r"link_steps\['scale-out'\] .* got inf"),
])
def test_negative_or_nan_costs_rejected(fields, needle):
    with pytest.raises(ValueError, match=needle):
        Cost(**fields)


def test_overflowing_sizes_rejected():
    # 2·M·N·K overflows to inf: an op may not return an infinite cost
    with pytest.raises(ValueError, match=r"Cost matmul: flops\['bf16'\] .* got inf"):
        matmul(1e200, 1e200, 1e200)
    ok = Cost(flops={"bf16": np.array([0.0, 1e30])}, bytes={"hbm": 0})  # zero is fine
    assert ok.total_flops[1] == 1e30


def test_costs_do_not_alias():
    a = Cost(flops={"bf16": 1.0})
    _ = a + a
    assert dict(a.flops) == {"bf16": 1.0}


def test_cost_is_a_frozen_record_whose_missing_counts_are_read_only():
    # Cost writes only the fields it is given (cheaper than the generated __init__): it must
    # still be frozen, its missing counts empty and impossible to write into (they are shared
    # by every Cost), and it rebuilds through replace()
    import dataclasses

    a, b = Cost(), Cost(name="b")
    assert not a.flops and not b.link_calls and a.steps == () and a.least is None
    with pytest.raises(TypeError):
        a.flops["bf16"] = 1.0  # type: ignore[index]
    assert not b.flops and "flops" not in vars(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "x"  # type: ignore[misc]
    c = dataclasses.replace(Cost(flops={"bf16": 2.0}, bytes={"hbm": 3.0}, name="m"), name="n")
    assert (dict(c.flops), dict(c.bytes), c.name, c.least) == ({"bf16": 2.0}, {"hbm": 3.0},
                                                               "n", None)
    with pytest.raises(TypeError):  # by keyword only: ten fields read badly by position
        Cost({"bf16": 1.0}, {"hbm": 2.0})  # type: ignore[misc]
    with pytest.raises(ValueError, match="must be finite"):
        dataclasses.replace(c, bytes={"hbm": -1.0})


def test_hand_written_inits_set_every_field():
    # Cost, Estimate and OpCost write their fields themselves (cheaper than the generated
    # __init__): a field added to the class must be added to its __init__ too
    import dataclasses
    import inspect

    from roofline import evaluate
    from roofline.evaluate import Estimate
    from roofline.models.graph import OpCost
    from roofline.opid import EMBEDDING

    # (with a link: an Estimate leaves out an empty chain_s, as a Cost its empty counts)
    est = evaluate(Cost(flops={"bf16": 1e9}, link_bytes={"scale-up": 1e6}), "h100")
    counts = {k: {"x": 1.0} for k in ("flops", "bytes", "link_bytes", "link_steps",
                                      "vector_flops", "special_ops", "link_calls")}
    full = Cost(**counts, steps=(Term("t", 1.0),), name="n", algorithm="ring", least=Cost(),
                runs=Cost(), op=EMBEDDING)  # every field given: every field written
    for obj in (full, est, OpCost("g", "n", 1.0, Cost())):
        cls = type(obj)
        names = [f.name for f in dataclasses.fields(cls)]
        assert set(names) <= set(vars(obj)), cls
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        assert params == names, cls
        assert dataclasses.replace(obj) is not obj
    assert isinstance(est, Estimate)
