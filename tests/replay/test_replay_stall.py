"""``expected`` under synchronisation: a partial share of a host that may stall holds up
every iteration while it stalls (scheduler.search._stall_aware), judged by the replay
simulator, which knows nothing of the scheduler's model."""

from __future__ import annotations

import pytest

import scheduler.search
from ppe.replay.simulate import SimConfig, simulate_one
from scheduler import StochasticHost, schedule
from scheduler.synthetic import Mixture, Normal, Point

N, ITERATIONS, BENCHMARK = 2000, 100, 1e-6
PER_ROW = ITERATIONS * N * BENCHMARK  # seconds per row over the run on an idle host


def _hosts() -> list[StochasticHost]:
    # 90 %: idle; 7 %: a stall that triples its time; 3 %: one that costs 30x
    risky = Mixture((0.9, 0.07, 0.03), (PER_ROW, 3 * PER_ROW, 30 * PER_ROW),
                    (0.01 * PER_ROW, 0.1 * PER_ROW, PER_ROW))
    return [StochasticHost("risky", risky, Point(0.5))] + [
        StochasticHost(f"h{i}", Normal(PER_ROW, 0.01 * PER_ROW), Point(0.5)) for i in range(7)]


def _actual(rows: dict[str, int], stall: bool) -> float:
    """SOR on the simulator: every host idle, except the risky one at 1 % for 100 s from 10 s."""
    risky = ([0.0, 10.0, 110.0], [1.0, 0.01, 1.0]) if stall else ([0.0], [1.0])
    hosts = _hosts()
    return simulate_one([risky[0]] + [[0.0]] * 7, [risky[1]] + [[1.0]] * 7,
                        [rows[h.name] for h in hosts], [BENCHMARK] * 8, 0.0,
                        SimConfig("sor", N, ITERATIONS))


def test_a_hedged_host_gets_a_share_that_keeps_pace_through_a_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stall_aware = schedule(_hosts(), N, "expected").rows
    monkeypatch.setattr(scheduler.search, "_stall_aware", lambda problem, start, rows: rows)
    linear = schedule(_hosts(), N, "expected").rows
    assert 0 < stall_aware["risky"] < linear["risky"] < 0.1 * N / 8
    assert sum(stall_aware.values()) == N
    # while the risky host stalls, its partial share holds up every iteration ...
    assert _actual(stall_aware, True) < 0.7 * _actual(linear, True)
    # ... and the rows it gave up cost next to nothing when it does not
    assert _actual(stall_aware, False) < 1.01 * _actual(linear, False)
    mean_new = 0.9 * _actual(stall_aware, False) + 0.1 * _actual(stall_aware, True)
    mean_old = 0.9 * _actual(linear, False) + 0.1 * _actual(linear, True)
    assert mean_new < 0.95 * mean_old


def test_hosts_without_stalls_are_left_alone() -> None:
    hosts = [StochasticHost(f"h{i}", Normal(PER_ROW * (1 + i / 10), 0.05 * PER_ROW), Point(0.5))
             for i in range(6)]
    rows = schedule(hosts, N, "expected").rows
    mean = schedule(hosts, N, "mean").rows
    assert all(abs(rows[h] - mean[h]) <= 0.05 * mean[h] for h in rows)
