"""Strategies over stochastic hosts: scipy.stats frozen values and a small mixture."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import given, settings
from hypothesis import strategies as hst

from scheduler import (
    STRATEGIES,
    Infeasible,
    LinearHost,
    StochasticHost,
    balance,
    predict_times,
    schedule,
    simulate_makespans,
)
from scheduler.synthetic import Mixture, Normal, Point

R = 1000


class OpaqueMixture:
    """A mixture that hides its components: only reachable through the protocol's methods."""

    def __init__(self, inner: Mixture) -> None:
        self._m = inner

    def mean(self) -> float:
        return self._m.mean()

    def std(self) -> float:
        return self._m.std()

    def ppf(self, q: Any) -> Any:
        return self._m.ppf(q)

    def rvs(self, size: int = 1, random_state: Any = None) -> Any:
        return self._m.rvs(size, random_state)

    def interval(self, confidence: float) -> tuple[float, float]:
        return self._m.interval(confidence)


def two_hosts(std_low: float, std_high: float) -> list[StochasticHost]:
    return [
        StochasticHost("steady", st.norm(1.0, std_low), 0.0),
        StochasticHost("noisy", st.norm(1.0, std_high), 0.0),
    ]


def test_mean_balances_the_means() -> None:
    hosts = [
        StochasticHost("h1", st.norm(1.0, 0.1), st.norm(10.0, 1.0)),
        StochasticHost("h2", st.norm(2.0, 0.1), 4.0),
    ]
    s = schedule(hosts, 300, "mean")
    assert s.rows == {"h1": 198, "h2": 102}  # the hand-solved A = (1, 2), B = (10, 4) case
    assert s.strategy == "mean"


def test_conservative_gives_less_to_the_noisy_host_and_more_so_as_k_grows() -> None:
    hosts = two_hosts(0.05, 0.3)
    gaps = []
    for k in (0.0, 1.0, 2.0, 3.0):
        s = schedule(hosts, R, "conservative", k=k)
        gaps.append(s.rows["steady"] - s.rows["noisy"])
        # mean + k std per row: rows in inverse proportion to (1 + 0.05 k) and (1 + 0.3 k)
        share = (1 / (1 + 0.05 * k)) / (1 / (1 + 0.05 * k) + 1 / (1 + 0.3 * k))
        assert abs(s.rows["steady"] - R * share) <= 1
    assert gaps[0] == 0
    assert all(later > earlier for earlier, later in zip(gaps, gaps[1:], strict=False))
    assert schedule(hosts, R, "conservative").params == {"k": 2.0}


def test_conservative_cuts_the_predicted_tail() -> None:
    hosts = two_hosts(0.05, 0.3)
    mean, cons = schedule(hosts, R, "mean"), schedule(hosts, R, "conservative")
    assert cons.makespan.interval[1] < mean.makespan.interval[1]


def test_block_and_static() -> None:
    hosts = [
        StochasticHost("h1", st.norm(1.0, 0.1), 0.0, a_dedicated=0.5),
        StochasticHost("h2", st.norm(5.0, 0.1), 0.0, a_dedicated=1.5),
        StochasticHost("h3", st.norm(5.0, 0.1), 0.0, a_dedicated=1.0, max_rows=300),
    ]
    assert list(schedule(hosts[:2], 1001, "block").rows.values()) == [501, 500]
    assert list(schedule(hosts, 1000, "block").rows.values()) == [350, 350, 300]  # h3 is full
    # dedicated speeds 2 : 2/3 : 1 -> 545.5, 181.8, 272.7; the two leftover rows would all
    # end at 273, ties go in host order -> 546, 182, 272
    static = schedule(hosts, 1000, "static").rows
    assert (
        static
        == balance(
            [
                LinearHost("h1", 0.5, 0),
                LinearHost("h2", 1.5, 0),
                LinearHost("h3", 1.0, 0, max_rows=300),
            ],
            1000,
        ).rows
    )
    assert static == {"h1": 546, "h2": 182, "h3": 272}
    with pytest.raises(ValueError, match="a_dedicated"):
        schedule([StochasticHost("h", st.norm(1, 0.1))], 10, "static")


def test_block_respects_memory_bounds() -> None:
    hosts = [
        StochasticHost("h1", 1.0, max_rows=100),
        StochasticHost("h2", 1.0),
        StochasticHost("h3", 1.0),
    ]
    assert schedule(hosts, 900, "block").rows == {"h1": 100, "h2": 400, "h3": 400}


def test_mixture_ppf_is_the_true_mixture_quantile() -> None:
    mix = Mixture((0.8, 0.2), (1.0, 3.0), (0.05, 0.05))
    # P(X <= x) = 0.8 + 0.2 Phi((x - 3) / 0.05) = 0.95  ->  x = 3 + 0.05 * Phi^-1(0.75)
    assert mix.ppf(0.95) == pytest.approx(3.0 + 0.05 * st.norm.ppf(0.75), abs=1e-9)
    qs = np.array([0.05, 0.5, 0.9, 0.99])
    assert np.allclose(mix.cdf(mix.ppf(qs)), qs, atol=1e-10)
    draws = mix.rvs(200_000, random_state=1)
    assert np.allclose(np.quantile(draws, qs), mix.ppf(qs), atol=0.01)
    assert mix.mean() == pytest.approx(1.4)
    assert mix.std() == pytest.approx(
        math.sqrt(0.8 * 0.0025 + 0.2 * 0.0025 + 0.16 * 4 * 0.8 * 0.2 / 0.16), rel=1e-9
    )


def test_quantile_reads_the_mixture_not_a_normal_approximation() -> None:
    mix = Mixture((0.8, 0.2), (1.0, 3.0), (0.05, 0.05))
    hosts = [StochasticHost("bimodal", mix, 0.0), StochasticHost("normal", st.norm(2.0, 0.1))]
    s = schedule(hosts, R, "quantile", quantile=0.95)
    expected = balance(
        [
            LinearHost("bimodal", float(mix.ppf(0.95)), 0.0),
            LinearHost("normal", float(st.norm(2.0, 0.1).ppf(0.95)), 0.0),
        ],
        R,
    )
    assert s.rows == expected.rows
    assert s.params == {"quantile": 0.95}
    # mean + 1.645 std, the normal reading of the same 95 %, would give the bimodal host more
    normal_reading = schedule(hosts, R, "conservative", k=float(st.norm.ppf(0.95)))
    assert s.rows["bimodal"] < normal_reading.rows["bimodal"] - 20
    # the same answer when the mixture is only reachable through ppf/rvs
    opaque = [StochasticHost("bimodal", OpaqueMixture(mix), 0.0), hosts[1]]
    assert schedule(opaque, R, "quantile").rows == s.rows


def test_deterministic_hosts_have_point_predictions() -> None:
    hosts = [StochasticHost("h1", 1.0, 10.0), StochasticHost("h2", Point(2.0), Point(4.0))]
    s = schedule(hosts, 300, "conservative")
    assert s.rows == {"h1": 198, "h2": 102}
    assert s.makespan.kind == "point" and s.makespan.std == 0.0
    assert s.makespan.mean == pytest.approx(208.0)
    assert s.per_host["h1"].interval == (208.0, 208.0)
    for name in STRATEGIES:
        if name not in ("static", "block"):
            assert schedule(hosts, 300, name).rows == s.rows, name


def test_per_host_stats_are_exact_for_normal_inputs() -> None:
    hosts = [
        StochasticHost("h1", st.norm(1.0, 0.1), st.norm(5.0, 2.0)),
        StochasticHost("h2", Normal(2.0, 0.3), 3.0),
    ]
    s = schedule(hosts, 300, "mean", confidence=0.9)
    r1, r2 = s.rows["h1"], s.rows["h2"]
    h1 = s.per_host["h1"]
    assert h1.kind == "normal"
    assert h1.mean == pytest.approx(r1 * 1.0 + 5.0)
    assert h1.std == pytest.approx(math.hypot(r1 * 0.1, 2.0))
    assert h1.interval == pytest.approx(st.norm(h1.mean, h1.std).interval(0.9))
    assert s.per_host["h2"].std == pytest.approx(r2 * 0.3)
    assert s.makespan.confidence == 0.9
    # the makespan is the max of the two: above each mean, and matches brute sampling
    assert s.makespan.mean > max(h1.mean, s.per_host["h2"].mean)
    rng = np.random.default_rng(7)
    brute = np.maximum(
        rng.normal(1.0, 0.1, 400_000) * r1 + rng.normal(5, 2, 400_000),
        rng.normal(2.0, 0.3, 400_000) * r2 + 3.0,
    )
    assert abs(s.makespan.mean - brute.mean()) < 4 * brute.std() / math.sqrt(s.samples)
    assert s.makespan.std == pytest.approx(brute.std(), rel=0.1)
    lo, hi = np.quantile(brute, [0.05, 0.95])
    assert s.makespan.interval == pytest.approx((lo, hi), rel=0.01)


def test_mixture_host_time_is_an_exact_mixture() -> None:
    mix = Mixture((0.8, 0.2), (1.0, 3.0), (0.05, 0.05))
    hosts = [StochasticHost("m", mix, 2.0), StochasticHost("n", Normal(1.4, 0.1), Normal(1, 0.5))]
    s = schedule(hosts, 200, "mean", samples=20000)
    r = s.rows["m"]
    stats = s.per_host["m"]
    assert stats.kind == "mixture"
    assert stats.mean == pytest.approx(r * 1.4 + 2.0)
    assert stats.std == pytest.approx(r * mix.std())
    true = (r * mix.ppf(0.025) + 2.0, r * mix.ppf(0.975) + 2.0)
    assert stats.interval == pytest.approx(true, rel=1e-9)
    np.testing.assert_allclose(
        stats.components, [(0.8, r + 2.0, 0.05 * r), (0.2, 3 * r + 2.0, 0.05 * r)]
    )
    assert [c["weight"] for c in stats.to_dict()["components"]] == pytest.approx([0.8, 0.2])
    # a mixture a plus a normal b: every pair of components, interval exact
    both = schedule([StochasticHost("m", mix, Normal(2.0, 1.0))], 100, "mean").per_host["m"]
    inner = Mixture((0.8, 0.2), (102.0, 302.0), (float(np.hypot(5, 1)), float(np.hypot(5, 1))))
    assert both.interval == pytest.approx(inner.interval(0.95), rel=1e-9)
    # the generic path (rvs only) samples the same law
    opaque = schedule([StochasticHost("m", OpaqueMixture(mix), 2.0)], 100, "mean", samples=20000)
    o = opaque.per_host["m"]
    assert o.kind == "samples" and o.mean == pytest.approx(142.0)
    assert o.interval == pytest.approx(
        (100 * mix.ppf(0.025) + 2, 100 * mix.ppf(0.975) + 2), rel=0.01
    )
    se = 100 * mix.std() / math.sqrt(20000)
    assert abs(opaque.makespan.mean - 142.0) < 4 * se  # one host: its time, sampled


def test_generic_scipy_distributions_work() -> None:
    hosts = [
        StochasticHost("g", st.gamma(4.0, scale=0.25), st.uniform(1.0, 2.0)),
        StochasticHost("n", st.norm(1.0, 0.1), 0.0),
    ]
    for name in ("mean", "conservative", "quantile", "expected"):
        s = schedule(hosts, 500, name, samples=2000)
        assert sum(s.rows.values()) == 500
    s = schedule(hosts, 500, "mean", samples=20000)
    g = s.per_host["g"]
    assert g.mean == pytest.approx(s.rows["g"] * 1.0 + 2.0)
    assert g.interval[0] < g.mean < g.interval[1]


def test_scipy_norm_and_own_normal_give_identical_schedules() -> None:
    a = schedule(
        [
            StochasticHost("h1", st.norm(1, 0.2), st.norm(3, 1)),
            StochasticHost("h2", st.norm(2, 0.1)),
        ],
        400,
        "expected",
    )
    b = schedule(
        [StochasticHost("h1", Normal(1, 0.2), Normal(3, 1)), StochasticHost("h2", Normal(2, 0.1))],
        400,
        "expected",
    )
    assert a == b


def test_same_seed_same_schedule_and_seed_matters() -> None:
    hosts = two_hosts(0.05, 0.3)
    assert schedule(hosts, R, "expected", seed=3) == schedule(hosts, R, "expected", seed=3)
    assert (
        schedule(hosts, R, "mean", seed=3).makespan != schedule(hosts, R, "mean", seed=4).makespan
    )


def test_expected_moves_rows_off_the_noisy_host_and_beats_mean_on_fresh_draws() -> None:
    hosts = two_hosts(0.05, 0.3)
    mean, exp = schedule(hosts, R, "mean"), schedule(hosts, R, "expected")
    assert exp.rows["noisy"] < mean.rows["noisy"]
    a = simulate_makespans(hosts, exp.rows, samples=20000, seed=99)
    b = simulate_makespans(hosts, mean.rows, samples=20000, seed=99)
    assert a.mean() < b.mean()


def test_quantile_makespan_lowers_the_chosen_quantile() -> None:
    hosts = [StochasticHost(f"h{i}", Normal(1.0, 0.02 if i % 2 else 0.25), 5.0) for i in range(6)]
    qm = schedule(hosts, 600, "quantile-makespan", quantile=0.9)
    assert qm.params == {"quantile": 0.9}
    fresh = {
        name: np.quantile(
            simulate_makespans(
                hosts, schedule(hosts, 600, name, quantile=0.9).rows, samples=20000, seed=5
            ),
            0.9,
        )
        for name in ("mean", "conservative", "quantile-makespan")
    }
    assert fresh["quantile-makespan"] < fresh["mean"]
    assert fresh["quantile-makespan"] <= fresh["conservative"] * 1.01


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_respects_binding_bounds(strategy: str) -> None:
    hosts = [
        StochasticHost("fast", Normal(1.0, 0.3), 0.0, max_rows=200, a_dedicated=1.0),
        StochasticHost("mid", Normal(2.0, 0.1), 0.0, min_rows=100, a_dedicated=2.0),
        StochasticHost("slow", Normal(4.0, 0.1), 0.0, a_dedicated=4.0),
    ]
    s = schedule(hosts, 700, strategy, samples=2000)
    assert sum(s.rows.values()) == 700
    assert s.rows["fast"] <= 200 and s.rows["mid"] >= 100
    assert s.strategy == strategy


@settings(max_examples=25, deadline=None)
@given(
    hst.lists(
        hst.tuples(
            hst.floats(0.5, 5.0), hst.floats(0.0, 0.4), hst.floats(0.0, 20.0), hst.integers(0, 3)
        ),
        min_size=1,
        max_size=6,
    ),
    hst.integers(0, 3000),
    hst.sampled_from(STRATEGIES),
)
def test_rows_always_sum_to_the_total(
    specs: list[tuple[float, float, float, int]], total: int, strategy: str
) -> None:
    hosts = [
        StochasticHost(f"h{i}", Normal(m, cv * m), b, min_rows=lo, a_dedicated=m)
        for i, (m, cv, b, lo) in enumerate(specs)
    ]
    if sum(h.min_rows for h in hosts) > total:
        with pytest.raises(Infeasible):
            schedule(hosts, total, strategy, samples=500)
        return
    s = schedule(hosts, total, strategy, samples=500)
    assert sum(s.rows.values()) == total
    assert all(s.rows[h.name] >= h.min_rows for h in hosts)
    assert set(s.per_host) == set(s.rows)


def test_infeasible_and_bad_parameters() -> None:
    hosts = [StochasticHost("h1", Normal(1, 0.1), max_rows=10)]
    with pytest.raises(Infeasible, match="max_rows"):
        schedule(hosts, 11, "conservative")
    with pytest.raises(Infeasible):
        schedule(hosts, 11, "expected")
    good = [StochasticHost("h1", Normal(1, 0.1))]
    for kwargs in (
        {"k": -1.0},
        {"quantile": 1.0},
        {"samples": 1},
        {"seed": -1},
        {"confidence": 1.5},
    ):
        with pytest.raises(ValueError):
            schedule(good, 10, "mean", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown strategy"):
        schedule(good, 10, "fastest")
    with pytest.raises(ValueError, match="duplicate"):
        schedule(good * 2, 10, "mean")
    with pytest.raises(ValueError, match="must be > 0"):
        schedule([StochasticHost("neg", Normal(-1.0, 0.1))], 10, "mean")
    with pytest.raises(ValueError, match="bad a"):
        schedule([StochasticHost("nan", Normal(math.nan, 0.1))], 10, "mean")


def test_zero_rows_schedule() -> None:
    s = schedule([StochasticHost("h1", Normal(1, 0.1), 5.0)], 0, "expected")
    assert s.rows == {"h1": 0} and s.makespan.mean == 0.0


def test_predict_times_and_to_dict() -> None:
    hosts = [StochasticHost("h1", Normal(1, 0.1), 5.0), StochasticHost("h2", Normal(2, 0.1))]
    per_host, makespan = predict_times(hosts, {"h1": 100}, confidence=0.9)
    assert per_host["h2"].mean == 0.0 and per_host["h1"].mean == pytest.approx(105.0)
    assert makespan.mean == pytest.approx(105.0, rel=0.01)
    with pytest.raises(ValueError, match="unknown hosts"):
        predict_times(hosts, {"h9": 1})
    d = schedule(hosts, 300, "conservative").to_dict()
    assert d["strategy"] == "conservative"
    assert [x["host"] for x in d["allocation"]] == ["h1", "h2"]
    assert sum(x["rows"] for x in d["allocation"]) == 300
    assert set(d["makespan"]) == {"mean", "std", "interval", "confidence", "kind", "components"}


def test_thread_safe_common_random_numbers() -> None:
    hosts = [StochasticHost(f"h{i}", Normal(1 + i / 10, 0.1 + i / 50), 2.0) for i in range(12)]
    seeds = list(range(101, 109))
    serial = [schedule(hosts, 1200, "conservative", seed=s) for s in seeds]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda s: schedule(hosts, 1200, "conservative", seed=s), seeds))
    assert parallel == serial
