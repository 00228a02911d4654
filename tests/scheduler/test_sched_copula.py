"""Dependent hosts: the copula keeps each host's law and makes slowdowns come together."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler import StochasticHost, schedule, simulate_makespans
from scheduler.copula import check_dependence, couple
from scheduler.synthetic import Mixture, Normal


def _group_matrix(n: int, group: list[int], rho: float) -> np.ndarray:
    c = np.eye(n)
    for p in group:
        for q in group:
            if p != q:
                c[p, q] = rho
    return c


def test_coupling_keeps_every_hosts_draws_and_reaches_the_correlation() -> None:
    rng = np.random.default_rng(3)
    draws = np.vstack(
        [rng.standard_normal(20000), rng.exponential(size=20000), rng.standard_normal(20000)]
    )
    dep = _group_matrix(3, [0, 1], 0.8)
    out = couple(draws, dep, seed=5, stream=1)
    assert out.shape == draws.shape
    for p in range(3):  # same values per host, only their order changed
        np.testing.assert_array_equal(np.sort(out[p]), np.sort(draws[p]))
    ranks = np.argsort(np.argsort(out, axis=1), axis=1)
    rank_corr = np.corrcoef(ranks)
    assert isinstance(rank_corr, np.ndarray)  # 2-D input: a matrix, not a scalar
    assert rank_corr[0, 1] == pytest.approx(0.786, abs=0.03)  # Spearman of a 0.8 normal copula
    assert abs(rank_corr[0, 2]) < 0.03
    before = np.corrcoef(draws)
    assert isinstance(before, np.ndarray)
    assert abs(before[0, 1]) < 0.03  # they were independent before
    np.testing.assert_array_equal(couple(draws, dep, seed=5, stream=1), out)  # deterministic
    assert couple(draws, None, seed=5, stream=1) is draws


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.eye(3)[:2], "must be 3 x 3"),
        (np.array([[1, 0.5, 0], [0.4, 1, 0], [0, 0, 1]]), "symmetric"),
        (np.array([[2, 0, 0], [0, 1, 0], [0, 0, 1.0]]), "diagonal"),
        (np.array([[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1.0]]), "semi-definite"),
        (np.array([[1, np.nan, 0], [np.nan, 1, 0], [0, 0, 1.0]]), "non-finite"),
    ],
)
def test_bad_dependence_is_refused_with_its_reason(matrix: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_dependence(matrix, 3)
    hosts = [StochasticHost(f"h{i}", Normal(1.0, 0.1)) for i in range(3)]
    with pytest.raises(ValueError, match=message):
        schedule(hosts, 300, "expected", dependence=matrix)


def _risky_group(n_group: int) -> list[StochasticHost]:
    """n_group hosts with a 3 % chance of a 20x slowdown, plus two steady ones."""
    risky = Mixture((0.97, 0.03), (1.0, 20.0), (0.02, 1.0))
    hosts = [StochasticHost(f"g{i}", risky, 5.0) for i in range(n_group)]
    hosts += [StochasticHost(f"s{i}", Normal(1.0, 0.02), 5.0) for i in range(2)]
    return hosts


def test_a_group_that_stalls_together_is_given_more_work_than_independent_hosts() -> None:
    """Four hosts that stall together stop a run 3 % of the time, not 11.5 %: with the
    dependence known, ``expected`` keeps more of them in use, and its makespan, judged on
    dependent draws (the truth here), is better than the independent plan's."""
    hosts = _risky_group(4)
    dep = _group_matrix(len(hosts), [0, 1, 2, 3], 0.999)
    indep = schedule(hosts, 6000, "expected", samples=4000, seed=1)
    joint = schedule(hosts, 6000, "expected", samples=4000, seed=1, dependence=dep)
    group = [f"g{i}" for i in range(4)]
    assert sum(indep.rows[g] for g in group) < 1500  # independent: the group is avoided
    assert sum(joint.rows[g] for g in group) > 3000  # together: the group is used
    truth = {
        name: simulate_makespans(hosts, plan.rows, samples=40000, seed=99, dependence=dep)
        for name, plan in (("indep", indep), ("joint", joint))
    }
    assert truth["joint"].mean() < truth["indep"].mean()
    # the report of a schedule samples the hosts jointly too
    assert joint.makespan.mean < indep.makespan.mean
