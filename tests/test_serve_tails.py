"""Tail latency over requests (serve/tails.py): the queue against Erlang's exact M/D/1 and a
seeded M/G/1 simulation, hand-calculated quantiles, and the relations that must hold."""

from __future__ import annotations

import json
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest

from roofline.serve import Load, Space, Targets, Workload, plan
from roofline.serve.queueing import mg1_wait_s
from roofline.serve.tails import (
    PERCENTILES,
    Wait,
    chunked_prefill,
    correlation_factor,
    cramer_lundberg,
    decode_spread,
    representative,
    tpot_quantiles,
    ttft_quantiles,
)


def erlang_md1_cdf(x: float, rho: float, d: float = 1.0) -> float:
    """Erlang's (1909) exact M/D/1 waiting-time distribution (Crommelin 1932):
    P(W <= x) = (1 - rho) sum_{k=0}^{floor(x/d)} (lam (k d - x))^k / k! exp(-lam (k d - x))."""
    getcontext().prec = 80  # the alternating sum cancels: exact decimals, not floats
    lam, xd = Decimal(rho) / Decimal(d), Decimal(x)
    total = sum((lam * (k * Decimal(d) - xd)) ** k / math.factorial(k)
                * (-lam * (k * Decimal(d) - xd)).exp() for k in range(int(x // d) + 1))
    return float((1 - Decimal(rho)) * total)


def exact_quantile(q: float, rho: float) -> float:
    lo, hi = 0.0, 100.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if erlang_md1_cdf(mid, rho) >= q else (mid, hi)
    return hi


def wait_quantiles(rho: float, shape: tuple[float, ...] = (1.0,), service: float = 1.0
                   ) -> dict[str, float]:
    out = ttft_quantiles(np.zeros((1, 1)), Wait(rho=np.array([rho]),
                                                service_s=np.array([service])), shape)
    return {k: float(v[0]) for k, v in out.items()}


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.9])
def test_md1_wait_quantiles_match_erlangs_exact_formula(rho: float) -> None:
    got = wait_quantiles(rho)
    for p in (90, 99):
        assert got[f"ttft_s_p{p}"] == pytest.approx(exact_quantile(p / 100, rho), rel=0.01)
    assert got["ttft_s_p50"] == pytest.approx(exact_quantile(0.5, rho), rel=0.01, abs=1e-9)


def test_cramer_lundberg_by_hand() -> None:
    # M/D/1 at rho 0.5: 0.5 (e^v - 1) = v has v = 1.25643; C = 0.5 / (0.5 e^v - 1) = 0.66100
    v, c = cramer_lundberg(np.array([0.5]), np.ones(1))
    assert float(v[0]) == pytest.approx(1.25643, abs=1e-5)
    assert float(c[0]) == pytest.approx(0.5 / (0.5 * math.exp(1.25643) - 1), rel=1e-4)
    # TTFT = a 0.3 s prefill + the wait at service 0.2 s: p99 = 0.3 + 0.2 ln(C / 0.01) / v
    got = ttft_quantiles(np.array([[0.3]]), Wait(rho=np.array([0.5]),
                                                  service_s=np.array([0.2])), (1.0,))
    assert float(got["ttft_s_p99"][0]) == pytest.approx(
        0.3 + 0.2 * math.log(0.66100 / 0.01) / 1.25643, rel=1e-4)
    assert float(got["ttft_s_p50"][0]) == 0.3  # half the requests do not wait (rho 0.5)


def test_mg1_wait_quantiles_match_a_seeded_simulation() -> None:
    # services 0.5 or 2.5 (mean 1.5) at rho 0.7: Lindley's recursion W' = max(0, W + S - A)
    # as a reflected random walk, 2 million customers
    rng = np.random.default_rng(1)
    n, rho = 2_000_000, 0.7
    service = np.where(rng.random(n) < 0.5, 0.5, 2.5)
    gaps = rng.exponential(1.5 / rho, n)
    walk = np.concatenate([[0.0], np.cumsum(service[:-1] - gaps[1:])])
    wait = walk - np.minimum.accumulate(np.minimum(walk, 0.0))
    got = wait_quantiles(rho, (0.5 / 1.5, 2.5 / 1.5), 1.5)
    for p in (90, 99):
        assert got[f"ttft_s_p{p}"] == pytest.approx(np.quantile(wait, p / 100), rel=0.03)
    # the mean: Pollaczek-Khinchine with the services' squared coefficient of variation
    scv = np.var(service) / np.mean(service) ** 2
    assert float(mg1_wait_s(rho, 1.5, scv)) == pytest.approx(np.mean(wait), rel=0.03)


def test_no_queue_at_low_load_gives_the_prefill_quantiles() -> None:
    prefill = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]])
    shape = prefill[0] / prefill.mean()
    low = ttft_quantiles(prefill, Wait(rho=np.array([1e-4]), service_s=np.array([0.1])),
                         shape)
    closed = ttft_quantiles(prefill, Wait(), shape)
    for got in (low, closed):  # the least t with P(TTFT <= t) >= p
        assert [float(got[f"ttft_s_p{p}"][0]) for p in PERCENTILES] == \
            pytest.approx([0.5, 0.9, 1.0], rel=1e-5)


def test_quantiles_are_ordered_and_rise_with_the_load() -> None:
    prefill = np.array([[0.1, 0.15, 0.2, 0.6]])
    shape = prefill[0] / prefill.mean()
    last = None
    for rho in (0.05, 0.3, 0.6, 0.8, 0.95):
        got = ttft_quantiles(prefill, Wait(rho=np.array([rho]), service_s=np.array([0.1])),
                             shape)
        values = [float(got[f"ttft_s_p{p}"][0]) for p in PERCENTILES]
        assert values == sorted(values)
        if last is not None:
            assert all(v >= w for v, w in zip(values, last, strict=True))
        last = values
    never = ttft_quantiles(prefill, Wait(rho=np.array([1.0]), service_s=np.array([0.1])),
                           shape)
    assert np.isinf(never["ttft_s_p50"][0])


def test_a_burst_of_clients_waits_uniformly() -> None:
    # 9 prompts of 0.1 s arrive together: the p-quantile waits p x 8 of them, the mean 4
    got = ttft_quantiles(np.array([[0.5]]), Wait(service_s=np.array([0.1]),
                                                  fixed_s=np.array([0.2]),
                                                  burst=np.array([9.0])), (1.0,))
    assert float(got["ttft_s_p50"][0]) == pytest.approx(0.5 + 0.2 + 0.4)
    assert float(got["ttft_s_p99"][0]) == pytest.approx(0.5 + 0.2 + 0.99 * 0.8)


def test_tpot_spread_by_hand() -> None:
    # two requests: prompts 1000 and 3000, 101 outputs each: contexts 1050.5 and 3050.5,
    # step-weighted mean 2050.5; attention half of a 10 ms step of 4 sequences
    w = Workload.from_lengths([1000, 3000], [101, 101])
    shift, var = decode_spread(w, np.array([0.01]), np.array([4.0]), np.array([0.5]))
    assert shift[0] == pytest.approx([0.5 * -1000 / (4 * 2050.5), 0.5 * 1000 / (4 * 2050.5)])
    var_c = 1000.0 ** 2 + 101 ** 2 / 12  # between requests + within one (uniform growth)
    assert var[0] == pytest.approx([0.25 * 3 * var_c / (4 * 2050.5) ** 2
                                    * (1 - 1 / 3)] * 2)  # r(D, D) = 2/3
    got = tpot_quantiles(np.array([0.01]), shift, var)
    values = [float(got[f"tpot_s_p{p}"][0]) for p in PERCENTILES]
    assert values == sorted(values)
    # the mixture's median lies between the two requests' means
    assert 0.01 * (1 + shift[0][0]) < values[0] < 0.01 * (1 + shift[0][1])


def test_correlation_factor() -> None:
    assert correlation_factor(10, 10) == pytest.approx(2 / 3)
    assert correlation_factor(0, 10) == pytest.approx(1.0)
    assert correlation_factor(40, 10) == pytest.approx(0.25 * (1 - 1 / 12))


def test_representative_keeps_real_requests_at_spread_ranks() -> None:
    ins = np.arange(1000.0) + 1
    outs = 2 + np.arange(1000.0) % 7
    sample = representative(ins, outs, 10)
    assert len(sample) == 10 and [s[0] for s in sample] == [51 + 100 * i for i in range(10)]
    assert all(outs[int(i) - 1] == o for i, o in sample)
    assert representative([5.0], [9.0]) == ((5.0, 9.0),)


@pytest.fixture(scope="module")
def spread_plan() -> object:
    rng = np.random.default_rng(3)
    ins = np.round(rng.lognormal(np.log(1500), 0.8, 400)) + 1
    outs = np.round(rng.lognormal(np.log(200), 0.6, 400)) + 2
    assert ins.mean() % 1  # a mean prompt that is not a whole number (disaggregated too)
    return plan("llama-3.1-8b", ["h100"], Workload.from_lengths(ins, outs),
                space=Space(tp=(1,), modes=("aggregated", "disaggregated")),
                load=Load(rate=8.0))


def test_plan_tails_are_ordered_and_right_skewed(spread_plan: object) -> None:
    c = spread_plan.columns  # type: ignore[attr-defined]
    for key in ("ttft_s", "tpot_s"):
        p50, p90, p99 = (c[f"{key}_p{p}"] for p in PERCENTILES)
        assert np.all(p50 <= p90) and np.all(p90 <= p99) and np.all(p50 > 0)
    # lognormal prompts and an M/G/1 queue: p99 TTFT above the mean everywhere
    assert np.all(c["ttft_s_p99"] >= c["ttft_s"])
    for mode in ("aggregated", "disaggregated"):
        assert np.any(c["mode"] == mode)


def test_p99_targets_are_checked(spread_plan: object) -> None:
    base = spread_plan  # type: ignore[assignment]
    c = base.columns  # type: ignore[attr-defined]
    limit = float(np.median(c["tpot_s_p99"][c["fits"] & c["feasible"]]))
    ttft = float(np.median(c["ttft_s_p99"][c["fits"] & c["feasible"]]))
    p = plan("llama-3.1-8b", ["h100"], base.workload,  # type: ignore[attr-defined]
             Targets(tpot_p99_s=limit, ttft_p99_s=ttft),
             Space(tp=(1,), modes=("aggregated", "disaggregated")), Load(rate=8.0))
    ok = p.columns["meets_targets"]
    assert np.any(ok) and not np.all(ok | ~(p.columns["fits"] & p.columns["feasible"]))
    assert np.all(p.columns["tpot_s_p99"][ok] <= limit)
    assert np.all(p.columns["ttft_s_p99"][ok] <= ttft)
    for i in p.frontier("tpot_s"):
        assert p.columns["tpot_s_p99"][i] <= limit


def test_the_cli_shows_and_writes_the_tails(run_cli, tmp_path) -> None:
    lengths = tmp_path / "requests.csv"
    lengths.write_text("input_len,output_len\n500,100\n4000,300\n1200,50\n800,800\n")
    out_csv = tmp_path / "points.csv"
    code, out, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--lengths",
                           str(lengths), "--rate", "4", "--tpot-p99", "1s", "--csv",
                           str(out_csv))
    assert code == 0 and "over requests: TTFT p50 / p90 / p99" in out and "p99 TPOT <=" in out
    header = out_csv.read_text().splitlines()[0].split(",")
    assert {f"{k}_p{p}" for k in ("ttft_s", "tpot_s") for p in PERCENTILES} <= set(header)
    code, out, _ = run_cli("serve", "llama-3.1-8b", "--hw", "h100", "--tp", "1", "--json")
    data = json.loads(out)
    best = data["best"]["h100-sxm"]
    assert best["ttft_s_p50"] <= best["ttft_s_p90"] <= best["ttft_s_p99"]
    assert "sample" not in data["workload"] and data["targets"]["tpot_p99_s"] is None


def _decode_pool(ins: np.ndarray, outs: np.ndarray, rate: float, t0: float, g: float,
                 a: float, steps: int = 40_000) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                          np.ndarray]:
    """A seeded decode pool: Poisson arrivals of requests drawn from (ins, outs), every
    running sequence one token per step, the step t0 + g n + a (their contexts); returns
    each request's TPOT (its steps' mean time) and each step's time, count and context
    (after a warm-up fifth)."""
    rng = np.random.default_rng(7)
    cap = 4096
    ctx, left, acc, cnt = np.zeros(cap), np.zeros(cap), np.zeros(cap), np.zeros(cap)
    live, born = np.zeros(cap, dtype=bool), np.zeros(cap, dtype=int)
    t, arrival, warm = 0.0, rng.exponential(1 / rate), steps // 5
    tpot: list[float] = []
    seen: list[tuple[float, int, float]] = []
    for step in range(steps):
        while arrival <= t:
            i, k = int(np.flatnonzero(~live)[0]), int(rng.integers(ins.size))
            ctx[i], left[i], acc[i], cnt[i] = ins[k], outs[k] - 1, 0.0, 0.0
            live[i], born[i] = True, step
            arrival += rng.exponential(1 / rate)
        n = int(live.sum())
        if n == 0:
            t = arrival
            continue
        total = float(ctx[live].sum())
        dt = t0 + g * n + a * total
        t += dt
        acc[live] += dt
        cnt[live] += 1
        ctx[live] += 1
        left[live] -= 1
        done = live & (left <= 0)
        if step > warm:
            seen.append((dt, n, total))
            kept = done & (born > warm)
            tpot += (acc[kept] / cnt[kept]).tolist()
        live &= ~done
    times, count, context = (np.array(c) for c in zip(*seen, strict=True))
    return np.array(tpot), times, count, context


def test_tpot_tails_match_a_seeded_decode_pool() -> None:
    """The open loop's spread (Poisson batch, arrivals feeding back through the step time,
    the others' contexts, one's own) against a simulation of the scheduler it describes."""
    ins, outs = np.array([200.0, 1000, 4000, 8000]), np.array([32.0, 100, 200, 400])
    g, a = 2e-5, 1e-8
    tpot, times, count, context = _decode_pool(ins, outs, 30.0, 0.01, g, a)
    t_bar, n = times.mean(), count.mean()
    shift, var = decode_spread(Workload.from_lengths(ins, outs), np.array([t_bar]),
                               np.array([n]), np.array([a * context.mean() / t_bar]),
                               batch_slope_s=np.array([g + a * context.mean() / n]))
    got = tpot_quantiles(np.array([t_bar]), shift, var)
    want = np.quantile(tpot, [0.5, 0.9, 0.99])
    for p, w, rel in zip(PERCENTILES, want, (0.01, 0.01, 0.06), strict=True):
        assert float(got[f"tpot_s_p{p}"][0]) == pytest.approx(w, rel=rel)
    # the far tail is thinner than simulated (Gaussian per request): p99 - p50 2/3 of it
    spread = float(got["tpot_s_p99"][0] - got["tpot_s_p50"][0])
    assert 0.6 * (want[2] - want[0]) <= spread <= want[2] - want[0]


def test_chunked_prefill_by_hand() -> None:
    # mean prompt 2000 in one 2048-token chunk: the own-share iteration 60 ms, a full chunk
    # 61.2 ms, so beta = 1.2 ms / 48 tokens and the base 60 - 50 = 10 ms; a 1000-token
    # prompt takes 10 + 25 ms, a 3000-token one two iterations: 2 x 10 + 75 ms
    own, beta = chunked_prefill(np.array([1000.0, 3000.0]), np.array([2048.0]),
                                np.array([0.06]), np.array([0.0612]), np.array([0.06]))
    assert float(beta[0]) == pytest.approx(0.0012 / 48)
    assert own[0] == pytest.approx([0.035, 0.095])
