"""``expected``: the exact minimiser of the sampled mean makespan (scheduler.search)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from scheduler import Stochastic, StochasticHost, schedule, simulate_makespans
from scheduler.problem import SEARCH_STREAM, Problem
from scheduler.search import _mean_makespan, _solve, minimise, minimise_expected
from scheduler.synthetic import Mixture, Normal, Point


def _lp_optimum(a: np.ndarray, b: np.ndarray, total: int) -> float:
    """min mean_s max_p (a_ps r_p + b_ps), r >= 0, sum r = total, every host paying b: an LP."""
    p, n = a.shape
    b = np.broadcast_to(b, a.shape)
    k = np.arange(n * p)
    s, h = k // p, k % p
    m = sp.csr_matrix(
        (
            np.concatenate([a[h, s], -np.ones(n * p)]),
            (np.concatenate([k, k]), np.concatenate([h, p + s])),
        ),
        shape=(n * p, p + n),
    )
    res = linprog(
        np.concatenate([np.zeros(p), np.full(n, 1.0 / n)]),
        A_ub=m,
        b_ub=-b[h, s],
        A_eq=np.concatenate([np.ones(p), np.zeros(n)])[None],
        b_eq=[total],
        bounds=[(0, None)] * p + [(None, None)] * n,
        method="highs",
    )
    assert res.status == 0
    return float(res.fun)


def _hosts(seed: int, n: int) -> list[StochasticHost]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        mu = float(rng.uniform(0.5, 2.0))
        a: Stochastic
        if i % 3 == 0:  # bimodal: sometimes much slower
            a = Mixture((0.9, 0.1), (mu, 4 * mu), (0.05 * mu, 0.5 * mu))
        else:
            a = Normal(mu, float(rng.uniform(0.01, 0.3)) * mu)
        out.append(StochasticHost(f"h{i}", a, Normal(20.0, 2.0)))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_continuous_solution_matches_the_lp_and_beats_the_old_search(seed: int) -> None:
    hosts = _hosts(seed, 6)
    total = 3000
    problem = Problem(tuple(hosts), total, samples=600, seed=seed)
    a_s, b_s = problem.sample_ab(SEARCH_STREAM)
    lp = _lp_optimum(a_s, b_s, total)
    start = problem.balanced(*problem.shifted(0.0), "mean")
    rows = _solve(a_s, b_s, problem.lo, problem.hi, total, start)
    assert rows is not None and rows.sum() == total and (rows > 0).all()
    # integer rows cost at most ~one row per host over the continuous LP optimum
    assert _mean_makespan(a_s, b_s, rows) <= lp * (1 + 2e-3)
    assert _mean_makespan(a_s, b_s, rows) >= lp * (1 - 1e-9) - 1e-9
    old = minimise(problem, "mean")
    assert _mean_makespan(a_s, b_s, rows) <= _mean_makespan(a_s, b_s, old) + 1e-9


def test_a_host_with_a_small_chance_of_a_100x_stall_gets_almost_nothing() -> None:
    stall = Mixture((0.98, 0.02), (1.0, 100.0), (0.01, 1.0))
    hosts = [StochasticHost("risky", stall, 5.0)] + [
        StochasticHost(f"h{i}", Normal(1.0, 0.02), 5.0) for i in range(7)
    ]
    total = 8000
    exp, mean = schedule(hosts, total, "expected"), schedule(hosts, total, "mean")
    assert mean.rows["risky"] > 300  # its mean time per row is 2.98: balancing gives it 366
    assert exp.rows["risky"] <= 0.01 * total
    fresh_exp = simulate_makespans(hosts, exp.rows, samples=20000, seed=77)
    fresh_mean = simulate_makespans(hosts, mean.rows, samples=20000, seed=77)
    assert fresh_exp.mean() < 0.8 * fresh_mean.mean()  # 1177 vs 1813


def test_a_host_whose_fixed_time_outweighs_its_rows_is_dropped() -> None:
    # Slow host with a large fixed cost: any rows at all add its b to the makespan.
    hosts = [StochasticHost(f"h{i}", Normal(1.0, 0.01), 1.0) for i in range(4)] + [
        StochasticHost("far", Normal(5.0, 0.05), 200.0)
    ]
    rows = schedule(hosts, 400, "expected").rows
    assert rows["far"] == 0 and sum(rows.values()) == 400


def test_bounds_hold() -> None:
    hosts = _hosts(5, 5)
    hosts[0] = StochasticHost("h0", hosts[0].a, hosts[0].b, min_rows=700)
    hosts[1] = StochasticHost("h1", hosts[1].a, hosts[1].b, max_rows=100)
    problem = Problem(tuple(hosts), 2000, samples=500)
    rows = minimise_expected(problem)
    assert rows.sum() == 2000 and rows[0] >= 700 and rows[1] <= 100 and (rows >= 0).all()


def test_identical_quiet_hosts_stay_balanced() -> None:
    # The optimum on the draws shifts a row or two by noise only; held-out draws refuse that.
    hosts = [StochasticHost(f"h{i}", Normal(0.2, 0.01), Point(5.0)) for i in range(8)]
    assert set(schedule(hosts, 4000, "expected").rows.values()) == {500}


def test_stall_aware_cut_keeps_bounds_and_unused_hosts() -> None:
    """A risky host on a partial share is cut to a pacing share; the rows it gives up go to
    the others within their bounds, and a host without rows stays without."""
    from scheduler.search import _stall_aware

    risky = Mixture((0.9, 0.07, 0.03), (1.0, 3.0, 30.0), (0.01, 0.1, 1.0))
    hosts = (
        [
            StochasticHost("risky", risky, Point(0.5), min_rows=3),
            StochasticHost("full", Normal(1.0, 0.01), Point(0.5), max_rows=300),
        ]
        + [StochasticHost(f"h{i}", Normal(1.0, 0.01), Point(0.5)) for i in range(4)]
        + [StochasticHost("unused", Normal(1.0, 0.01), Point(0.5))]
    )
    problem = Problem(tuple(hosts), 2000, samples=2000, seed=3)
    start = problem.balanced(*problem.shifted(0.0), "mean")
    rows = np.array([60, 300, 410, 410, 410, 410, 0])
    out = _stall_aware(problem, start, rows)
    assert out.sum() == 2000
    assert 3 <= out[0] < 60  # cut, but not below its min_rows
    assert out[1] <= 300 and out[6] == 0
    assert (out[2:6] >= rows[2:6]).all()
