"""Resource selection: subsets and chain orders, with neighbour-dependent communication."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler import Infeasible, StochasticHost, schedule, select_resources
from scheduler.synthetic import Normal, Point

R = 4000
FAST_LINK = 1.0  # seconds of halo exchange per neighbour over a run
THIN_LINK = 60.0


def chain(
    speeds: dict[str, float],
    link: Callable[[str, str], float],
    cv: float = 0.05,
    max_rows: dict[str, int] | None = None,
) -> Callable[[list[str]], list[StochasticHost]]:
    """evaluate(order): a host's b is the halo time over its links to its chain neighbours."""
    calls: list[list[str]] = []

    def evaluate(order: list[str]) -> list[StochasticHost]:
        calls.append(list(order))
        hosts = []
        for i, name in enumerate(order):
            comm = sum(link(name, order[j]) for j in (i - 1, i + 1) if 0 <= j < len(order))
            a = speeds[name]
            hosts.append(
                StochasticHost(
                    name, Normal(a, cv * a), Point(comm), max_rows=(max_rows or {}).get(name)
                )
            )
        return hosts

    evaluate.calls = calls  # type: ignore[attr-defined]
    return evaluate


def thin_to(slow: str) -> Callable[[str, str], float]:
    return lambda p, q: THIN_LINK if slow in (p, q) else FAST_LINK


FAST = {"f1": 0.1, "f2": 0.1, "f3": 0.1, "f4": 0.1}


def test_slow_host_behind_a_thin_link_is_left_out() -> None:
    speeds = {**FAST, "slow": 0.5}
    evaluate = chain(speeds, thin_to("slow"))
    candidates = ["f1", "f2", "slow", "f3", "f4"]
    order, s = select_resources(candidates, evaluate, R, "mean")
    assert "slow" not in order and sorted(order) == ["f1", "f2", "f3", "f4"]
    assert sum(s.rows.values()) == R and list(s.rows) == order
    # using every candidate as given is clearly worse (the thin links hit both neighbours) ...
    naive = schedule(evaluate(candidates), R, "mean")
    assert naive.rows["slow"] > 0
    assert s.makespan.mean < 0.85 * naive.makespan.mean
    # ... and the candidate did not make the schedule worse than not offering it at all
    without_order, without = select_resources(["f1", "f2", "f3", "f4"], evaluate, R, "mean")
    assert s.makespan.mean <= without.makespan.mean * (1 + 1e-9)
    for name in order:  # balanced at T = (4000 + sum B/A) / sum 1/A = (4000 + 60) / 40
        assert s.per_host[name].mean == pytest.approx(101.5, abs=0.1)


@pytest.mark.parametrize("strategy", ["conservative", "quantile", "expected"])
def test_never_worse_for_every_strategy(strategy: str) -> None:
    evaluate = chain({**FAST, "slow": 0.5}, thin_to("slow"), cv=0.2)
    _, with_slow = select_resources(
        ["slow", "f1", "f2", "f3", "f4"], evaluate, R, strategy, samples=2000
    )
    _, without = select_resources(["f1", "f2", "f3", "f4"], evaluate, R, strategy, samples=2000)
    assert with_slow.strategy == strategy
    assert with_slow.makespan.mean <= without.makespan.mean * (1 + 1e-9)


def test_a_slow_host_with_good_links_is_kept() -> None:
    evaluate = chain({**FAST, "slowish": 0.2}, lambda p, q: FAST_LINK)
    order, s = select_resources(["slowish", "f1", "f2", "f3", "f4"], evaluate, R, "mean")
    assert "slowish" in order
    _, without = select_resources(["f1", "f2", "f3", "f4"], evaluate, R, "mean")
    assert s.makespan.mean < without.makespan.mean


def test_chain_order_avoids_slow_cross_links() -> None:
    # Two sites; links inside a site are fast, across sites thin. Interleaved as given, the
    # chain crosses sites three times; ordered by speed (site a is faster) it crosses once.
    speeds = {"a1": 0.1, "b1": 0.11, "a2": 0.1, "b2": 0.11}

    def link(p: str, q: str) -> float:
        return FAST_LINK if p[0] == q[0] else 20.0

    evaluate = chain(speeds, link)
    given = ["a1", "b1", "a2", "b2"]
    order, s = select_resources(given, evaluate, R, "mean")
    crossings = sum(order[i][0] != order[i + 1][0] for i in range(len(order) - 1))
    assert crossings <= 1
    assert s.makespan.mean < schedule(evaluate(given), R, "mean").makespan.mean - 5.0


def test_memory_bounds_force_enough_hosts() -> None:
    # Each host holds at most 1500 rows: at least three are needed, even behind thin links.
    speeds = {**FAST, "slow": 0.5}
    evaluate = chain(speeds, thin_to("slow"), max_rows={n: 1500 for n in speeds})
    order, s = select_resources(["slow", "f1", "f2"], evaluate, R, "mean")
    assert sorted(order) == ["f1", "f2", "slow"]
    assert sum(s.rows.values()) == R and max(s.rows.values()) <= 1500
    with pytest.raises(Infeasible, match="max_rows"):
        select_resources(["f1", "f2"], evaluate, R, "mean")


def test_hosts_left_without_rows_leave_the_chain() -> None:
    # "far" is so slow that balancing gives it nothing; its links must not burden others.
    speeds = {"f1": 0.1, "f2": 0.1, "far": 50.0}
    evaluate = chain(speeds, thin_to("far"))
    order, s = select_resources(["f1", "far", "f2"], evaluate, R, "mean")
    assert order == ["f1", "f2"]
    assert all(r > 0 for r in s.rows.values())


def test_bad_input() -> None:
    evaluate = chain(FAST, lambda p, q: FAST_LINK)
    with pytest.raises(ValueError, match="duplicate"):
        select_resources(["f1", "f1"], evaluate, R)
    with pytest.raises(ValueError, match="unknown strategy"):
        select_resources(["f1"], evaluate, R, "fastest")
    with pytest.raises(ValueError, match="criterion"):
        select_resources(["f1"], evaluate, R, criterion="median")
    with pytest.raises(Infeasible):
        select_resources([], evaluate, R)
    with pytest.raises(ValueError, match="returned hosts"):
        select_resources(["f1", "f2"], lambda order: evaluate(order[::-1]), R)


def test_upper_criterion_prefers_steady_hosts() -> None:
    # "wild" adds capacity on average but makes the makespan's upper bound worse.
    evaluate = chain({"f1": 0.1, "f2": 0.1, "wild": 0.1}, lambda p, q: FAST_LINK, cv=0.05)

    def with_wild(order: list[str]) -> list[StochasticHost]:
        hosts = evaluate(order)
        return [
            StochasticHost(h.name, Normal(0.12, 0.12) if h.name == "wild" else h.a, h.b)
            for h in hosts
        ]

    order_mean, _ = select_resources(["f1", "f2", "wild"], with_wild, R, "mean")
    order_upper, s = select_resources(["f1", "f2", "wild"], with_wild, R, "mean", criterion="upper")
    assert "wild" in order_mean and "wild" not in order_upper
    assert s.makespan.interval[1] <= schedule(with_wild(order_mean), R, "mean").makespan.interval[1]
