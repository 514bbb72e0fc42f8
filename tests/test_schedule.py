"""The schedule-aware lower bound of a step, by hand (models/schedule.py)."""

import pytest

from roofline import Cost, evaluate
from roofline.evaluate import Estimate
from roofline.models.schedule import Row, Schedule, step_times

H100 = "h100"


def est(flops=0.0, hbm=0.0, link=0.0, steps=0.0, where="scale-up"):
    cost = Cost(flops={"bf16": flops} if flops else {}, bytes={"hbm": hbm} if hbm else {},
                link_bytes={where: link} if link else {},
                link_steps={where: steps} if steps else {})
    return evaluate(cost, H100)


GEMM = est(flops=989.4e12 * 1e-3)  # 1 ms of tensor cores
TP = est(link=450e9 * 0.2e-3)  # 0.2 ms on NVLink
DP = est(link=50e9 * 3e-3, where="scale-out")  # 3 ms on the NIC


def split(pairs: list[tuple[Row, Estimate]]) -> tuple[list[Row], list[Estimate]]:
    """step_times' two arguments: the rows, and one evaluated occurrence of each."""
    return [row for row, _ in pairs], [e for _, e in pairs]


def test_bubble_slots_per_schedule():
    assert Schedule("1f1b").bubble_slots(8) == Schedule("gpipe").bubble_slots(8) == 7
    assert Schedule("interleaved", vpp=4).bubble_slots(8) == 7 / 4
    assert Schedule("zero-bubble").bubble_slots(8) == 0
    # llama-3-70b pp 8, 16 micro-batches: 1F1B bubble 7/16, interleaved v = 4: 7/64
    assert step_times([], [], Schedule("1f1b"), 16, 8, 10, 1, 0.0).bubble_fraction == 7 / 16
    assert step_times([], [], Schedule("interleaved", vpp=4), 16, 8, 10, 1,
                      0.0).bubble_fraction == 7 / 64


def test_tp_in_series_unless_overlapped():
    rows = [(Row("", 2, False), GEMM), (Row("tp", 2, False), TP)]
    serial = step_times(*split(rows), Schedule(), 1, 1, 1, 1, 0.0)
    assert serial.t_lower_s == pytest.approx(2 * 1e-3 + 2 * 0.2e-3)
    assert serial.exposed_comm_s == pytest.approx(0.4e-3)
    hidden = step_times(*split(rows), Schedule(tp_overlap=True), 1, 1, 1, 1, 0.0)
    assert hidden.t_lower_s == pytest.approx(2e-3) and hidden.hidden_comm_s == pytest.approx(
        0.4e-3)


def test_dp_gradients_hide_behind_the_backward_but_the_last_bucket():
    # 10 layers of 1 ms; 3 ms of gradient all-reduce on the NIC: the last bucket (a tenth)
    # is exposed, the rest hides
    rows = [(Row("", 10, False), GEMM), (Row("dp", 1, True), DP)]
    t = step_times(*split(rows), Schedule(), 1, 1, 10, 1, 0.0)
    assert t.t_lower_s == pytest.approx(10e-3 + 0.3e-3)
    assert t.exposed_comm_s == pytest.approx(0.3e-3) and t.hidden_comm_s == pytest.approx(2.7e-3)
    assert t.critical_s[1] == pytest.approx(0.3e-3) and t.not_hidden_s == pytest.approx(0)
    serial = step_times(*split(rows), Schedule(overlap=False), 1, 1, 10, 1, 0.0)
    assert serial.t_lower_s == pytest.approx(13e-3)


def test_a_link_busier_than_the_critical_path_sets_the_step():
    # 30 ms of gradients behind 10 ms of compute cannot hide: the NIC's total holds the step
    big = est(link=50e9 * 30e-3, where="scale-out")
    t = step_times(*split([(Row("", 10, False), GEMM), (Row("dp", 1, True), big)]),
                   Schedule(), 1, 1, 10, 1, 0.0)
    assert t.t_lower_s == pytest.approx(30e-3)
    assert t.not_hidden_s == pytest.approx(30e-3 - 13e-3) and t.not_hidden_link == "scale-out"
    assert sum(t.critical_s) + t.not_hidden_s == pytest.approx(t.t_lower_s)


def test_pipeline_slots_and_the_ordering_floor_lower_upper():
    rows = [(Row("", 4, False), GEMM), (Row("pp", 2, False), est(link=450e9 * 1e-4))]
    t = step_times(*split(rows), Schedule(), 8, 4, 4, 1, 0.0)
    # 8 micro-batches + 3 bubble slots of 4 ms; the hand-offs hide
    assert t.t_lower_s == pytest.approx(11 * 4e-3)
    gpipe = step_times(*split(rows), Schedule("zero-bubble"), 8, 4, 4, 1, 0.0)
    assert gpipe.t_lower_s == pytest.approx(8 * 4e-3)
