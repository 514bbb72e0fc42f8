"""A plan's operating points as typed records (serve.point.ServePoint): read from the columns
exactly, validated, and written back as the row --json prints."""

import dataclasses

import numpy as np
import pytest

from roofline.serialize import jsonable
from roofline.serve import Layout, ServePoint, Space, Targets, Workload, annotate, plan

W = Workload.from_lengths(2048, 256)


@pytest.fixture(scope="module")
def both():
    return plan("llama-3.1-8b", ["h100"], W, Targets(ttft_s=2.0, tpot_s=0.03),
                Space(tp=(1, 2), kv_dtypes=("fp8",), chunks=(512, 4096),
                      modes=("aggregated", "disaggregated")))


def test_every_field_is_its_columns_value_and_the_dict_is_the_row(both) -> None:
    c = both.columns
    for i in (0, len(both) // 2, len(both) - 1):
        p = both.point(i)
        for f in dataclasses.fields(ServePoint):
            if f.name in c:
                got, want = getattr(p, f.name), c[f.name][i].item()
                assert got == want or (got != got and want != want), f.name  # NaN: no price
        # what --json writes: the same keys in the same order, the same values
        assert list(jsonable(p).items()) == list(jsonable(both.row(i)).items())
        assert p.ttft_s_lo80 is None  # bounds carry no forecast interval


def test_the_declared_types_hold(both) -> None:
    p = both.point(0)
    assert isinstance(p.hardware, str) and isinstance(p.meets_targets, bool)
    for name in ("tp", "pp", "dp", "ep", "moe_tp", "prefill_tp", "prefill_ep"):
        assert type(getattr(p, name)) is int, name
    for name in ("ttft_s", "tpot_s", "ttft_s_p99", "tokens_per_joule"):
        assert type(getattr(p, name)) is float, name


def test_best_is_a_point_meeting_the_targets_and_annotate_adds_the_limit_last(both) -> None:
    best = both.best()["h100-sxm"]
    assert isinstance(best, ServePoint) and best.meets_targets
    assert best.ttft_s <= 2.0 and best.tpot_s <= 0.03
    explained = annotate(both, best)
    assert explained.limit and explained.what_would_move_it
    d = explained.to_dict()
    assert list(d)[-2:] == ["limit", "what_would_move_it"]
    assert jsonable(explained) == jsonable(d)
    # the explanation does not change the point
    assert dataclasses.replace(explained, limit=None, what_would_move_it=()) == best


def test_a_disaggregated_points_gpus_are_its_workers_layouts() -> None:
    p = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(1, 2), chunks=(2048,),
                                                      modes=("disaggregated",), gpus=8))
    for i in range(0, len(p), max(1, len(p) // 7)):
        r = p.point(i)
        decode, prefill = r.layout(), r.layout(prefill=True)
        assert decode == Layout(r.tp, r.pp, r.dp, r.ep, r.moe_tp)
        assert r.gpus == r.decode_workers * decode.gpus + r.prefill_workers * prefill.gpus
        assert r.gpus <= 8


def test_a_forecast_point_carries_its_80_percent_interval() -> None:
    p = plan("llama-3.1-8b", ["h100"], W, space=Space(tp=(1,), chunks=(2048,), batch=(32,)),
             expect=True)
    r = p.point(0)
    assert r.ttft_s_lo80 is not None and r.ttft_s_hi80 is not None
    assert r.ttft_s_lo80 <= r.ttft_s <= r.ttft_s_hi80


def test_a_missing_or_mistyped_column_is_named(both) -> None:
    c = dict(both.columns)
    del c["tpot_s"]
    with pytest.raises(ValueError, match="no column 'tpot_s'"):
        ServePoint.of(c, 0)
    c = {**both.columns, "tp": np.full(len(both), 1.5)}
    with pytest.raises(ValueError, match=r"tp is a whole number, got 1\.5"):
        ServePoint.of(c, 0)
    c = {**both.columns, "ttft_s": np.full(len(both), "fast")}
    with pytest.raises(ValueError, match="ttft_s is a number"):
        ServePoint.of(c, 0)
    c = {**both.columns, "running": np.full(len(both), -1.0)}
    with pytest.raises(ValueError, match="running is a count >= 0"):
        ServePoint.of(c, 0)


def test_the_api_pages_serve_example_runs() -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    (code,) = [b for b in re.findall(r"^```python\n(.*?)\n```", page, flags=re.M | re.S)
               if "ServePoint" in b]
    scope: dict = {}
    exec(compile(code, "docs/api.md", "exec"), scope)  # our own docs, not user input
    best = scope["best"]
    assert isinstance(best, ServePoint) and best.tpot_s <= 0.05 and best.hardware == "h200-sxm"
    assert all(isinstance(q, ServePoint) for q in scope["frontier"]) and scope["frontier"]


def test_a_forecast_prints_its_80_percent_interval(run_cli) -> None:
    """serve --expect shows each best plan's expected TTFT, TPOT and throughput with the
    interval; a plan of bounds shows none."""
    args = ("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--concurrency", "16")
    code, out, _ = run_cli(*args, "--expect", "--engine", "vllm")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("  expected: "))
    assert line.count("(80%: ") == 3 and "TTFT" in line and "TPOT" in line
    code, out, _ = run_cli(*args)
    assert code == 0 and "  expected: " not in out
