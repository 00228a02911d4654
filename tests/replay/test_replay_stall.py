"""``expected`` under synchronisation: a partial share of a host that may stall holds up
every iteration while it stalls (scheduler.search._stall_aware), judged by the replay
simulator, which knows nothing of the scheduler's model."""

from __future__ import annotations

import numpy as np

from ppe.replay.simulate import RateBank, RunSpec, SimConfig, simulate
from scheduler import Stochastic, StochasticHost
from scheduler.problem import Problem
from scheduler.search import _stall_aware
from scheduler.synthetic import Mixture, Normal, Point

N, ITERATIONS, BENCHMARK = 2000, 100, 1e-6
PER_ROW = ITERATIONS * N * BENCHMARK  # seconds per row over the run on an idle host
DEPTH = 40.0  # the risky host's stall: 1/40 of the CPU


def _problem(risky_a: Stochastic | float) -> tuple[Problem, np.ndarray, np.ndarray]:
    """The risky host first, then 7 quiet ones; ``rows`` keeps the risky host on 30 % of
    its balanced share (what the solver's linear model does with such a host)."""
    hosts = [StochasticHost("risky", risky_a, Point(0.5))] + [
        StochasticHost(f"h{i}", Normal(PER_ROW, 0.01 * PER_ROW), Point(0.5)) for i in range(7)
    ]
    problem = Problem(tuple(hosts), N, samples=2000, seed=5)
    start = problem.balanced(*problem.shifted(0.0), "mean")
    partial = int(0.3 * start[0])
    rows = np.array([partial] + [(N - partial) // 7] * 7)
    rows[1] += N - rows.sum()
    return problem, start, rows


def _actual(rows: np.ndarray, stall: bool) -> float:
    """SOR on the simulator: every host idle, except the risky one at 1/DEPTH for 100 s
    from 10 s on."""
    risky = ([0.0, 10.0, 110.0], [1.0, 1.0 / DEPTH, 1.0]) if stall else ([0.0], [1.0])
    bank = RateBank([risky] + [([0.0], [1.0])] * 7)
    run = RunSpec(list(range(8)), [int(r) for r in rows], [BENCHMARK] * 8, start=0.0)
    return float(simulate(bank, [run], SimConfig("sor", N, ITERATIONS)).makespan[0])


def test_a_partial_share_against_a_stall_is_cut_to_one_that_keeps_pace() -> None:
    # 10 % chance that the run meets a stall 40x deep
    stall = Mixture((0.9, 0.1), (PER_ROW, DEPTH * PER_ROW), (0.01 * PER_ROW, PER_ROW))
    problem, start, rows = _problem(stall)
    cut = _stall_aware(problem, start, rows)
    assert cut.sum() == N and 0 < cut[0] < 0.5 * rows[0]
    # while the risky host stalls, its partial share holds up every iteration ...
    assert _actual(cut, True) < 0.7 * _actual(rows, True)
    # ... and the rows it gave up cost little when it does not
    assert _actual(cut, False) < 1.06 * _actual(rows, False)
    mean_cut = 0.9 * _actual(cut, False) + 0.1 * _actual(cut, True)
    assert mean_cut < 0.95 * (0.9 * _actual(rows, False) + 0.1 * _actual(rows, True))


def test_a_host_that_varies_without_stalling_keeps_its_share() -> None:
    # slower or faster by up to ~2x but never a stall: the linear model is right about it
    problem, start, rows = _problem(Normal(PER_ROW, 0.25 * PER_ROW))
    assert np.array_equal(_stall_aware(problem, start, rows), rows)
