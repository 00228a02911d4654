"""Scheduling strategies over stochastic hosts, and the schedule they produce.

Each strategy picks integer rows; every schedule is then reported the same way, on the same
common random numbers: per host the time ``a * rows + b`` (exact normal when a and b are normal,
exact moments plus a sampled interval otherwise) and the makespan ``max_p`` of those times,
sampled jointly.

- ``block``: equal strips (bounds respected).
- ``static``: strips by dedicated speed only (``a_dedicated``), AppLeS's compile-time partition.
- ``mean``: balance the means of a and b.
- ``conservative``: balance mean + k std of a and of b; high-variance hosts get less work.
- ``quantile``: balance the q-quantiles of a and of b, read with each value's true ``ppf``
  (so a bimodal mixture's slow mode counts, unlike mean + k std).
- ``expected``: minimise the expected makespan by Monte Carlo (scheduler.search).
- ``quantile-makespan``: minimise the q-quantile of the makespan by Monte Carlo.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scheduler import search
from scheduler.laws import Law
from scheduler.problem import REPORT_STREAM, Problem, StochasticHost, sample_times
from scheduler.stats import TimeStats, check_confidence, row_intervals

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
Strategy = Callable[[Problem], IntArray]


@dataclass(frozen=True)
class Schedule:
    """Rows per host (input order) with predicted times, as a strategy chose them."""

    strategy: str
    rows: dict[str, int]
    per_host: dict[str, TimeStats]
    makespan: TimeStats
    confidence: float
    samples: int
    seed: int
    params: dict[str, float]

    @property
    def used(self) -> list[str]:
        return [name for name, r in self.rows.items() if r > 0]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: DESIGN.md's allocation list and stochastic-value shapes."""
        return {
            "strategy": self.strategy,
            "allocation": [
                {"host": name, "rows": r, "time": self.per_host[name].to_dict()}
                for name, r in self.rows.items()
            ],
            "makespan": self.makespan.to_dict(),
            "samples": self.samples,
            "seed": self.seed,
            "params": dict(self.params),
        }


def _block(p: Problem) -> IntArray:
    n = len(p.hosts)
    return p.balanced(np.ones(n), np.zeros(n), "block")


def _static(p: Problem) -> IntArray:
    missing = [h.name for h in p.hosts if h.a_dedicated is None]
    if missing:
        raise ValueError(f"static needs a_dedicated on every host; missing on {missing}")
    a = np.array([h.a_dedicated for h in p.hosts], dtype=np.float64)
    return p.balanced(a, np.zeros(len(p.hosts)), "static")


def _mean(p: Problem) -> IntArray:
    return p.balanced(*p.shifted(0.0), "mean")


def _conservative(p: Problem) -> IntArray:
    return p.balanced(*p.shifted(p.k), "conservative")


def _quantile(p: Problem) -> IntArray:
    a = np.array([law.ppf(p.quantile) for law in p.a])
    b = np.array([law.ppf(p.quantile) for law in p.b])
    return p.balanced(a, b, f"quantile {p.quantile}")


def _expected(p: Problem) -> IntArray:
    return search.minimise(p, "mean")


def _quantile_makespan(p: Problem) -> IntArray:
    return search.minimise(p, "quantile")


_STRATEGIES: dict[str, Strategy] = {
    "block": _block,
    "static": _static,
    "mean": _mean,
    "conservative": _conservative,
    "quantile": _quantile,
    "expected": _expected,
    "quantile-makespan": _quantile_makespan,
}
STRATEGIES: tuple[str, ...] = tuple(_STRATEGIES)
MONTE_CARLO_STRATEGIES: frozenset[str] = frozenset({"expected", "quantile-makespan"})


def schedule(hosts: Sequence[StochasticHost], total_rows: int, strategy: str = "mean", *,
             k: float = 2.0, quantile: float = 0.95, samples: int = 4000, seed: int = 0,
             confidence: float = 0.95) -> Schedule:
    """Rows per host by ``strategy`` (one of ``STRATEGIES``), with predicted times.

    Raises ``Infeasible`` when the row bounds cannot hold ``total_rows``, ``ValueError`` on bad
    input (unknown strategy, non-positive time per row under the strategy, ...).
    """
    if strategy not in _STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    check_confidence(confidence)
    problem = Problem(tuple(hosts), total_rows, k=k, quantile=quantile, samples=samples,
                      seed=seed)
    rows = _STRATEGIES[strategy](problem)
    per_host, makespan = _report(problem.a, problem.b, problem.names, rows, samples, seed,
                                 confidence)
    params = {"k": k} if strategy == "conservative" else {}
    if strategy in ("quantile", "quantile-makespan"):
        params = {"quantile": quantile}
    return Schedule(
        strategy=strategy,
        rows={name: int(r) for name, r in zip(problem.names, rows, strict=True)},
        per_host=per_host,
        makespan=makespan,
        confidence=confidence,
        samples=samples,
        seed=seed,
        params=params,
    )


def predict_times(hosts: Sequence[StochasticHost], rows: Mapping[str, int], *,
                  samples: int = 4000, seed: int = 0,
                  confidence: float = 0.95) -> tuple[dict[str, TimeStats], TimeStats]:
    """Per-host and makespan predictions for given rows (hosts missing from ``rows``: 0)."""
    check_confidence(confidence)
    problem, arr = _fixed(hosts, rows, samples, seed)
    return _report(problem.a, problem.b, problem.names, arr, samples, seed, confidence)


def simulate_makespans(hosts: Sequence[StochasticHost], rows: Mapping[str, int], *,
                       samples: int = 4000, seed: int = 0) -> FloatArray:
    """Makespan draws for given rows: Monte Carlo "actuals" when ``seed`` differs from the plan's.

    Draw i of a host depends only on (seed, host position, i), so allocations evaluated with
    the same seed are compared on common random numbers.
    """
    problem, arr = _fixed(hosts, rows, samples, seed)
    t = sample_times(problem.a, problem.b, arr, samples, seed, REPORT_STREAM)
    return t.max(axis=0) if len(problem.hosts) else np.zeros(samples)


def _fixed(hosts: Sequence[StochasticHost], rows: Mapping[str, int], samples: int,
           seed: int) -> tuple[Problem, IntArray]:
    problem = Problem(tuple(hosts), int(sum(rows.values())), samples=samples, seed=seed)
    unknown = set(rows) - set(problem.names)
    if unknown:
        raise ValueError(f"rows given for unknown hosts {sorted(unknown)}")
    arr = np.array([int(rows.get(name, 0)) for name in problem.names], dtype=np.int64)
    if np.any(arr < 0):
        raise ValueError("rows must be >= 0")
    return problem, arr


def _report(a: Sequence[Law], b: Sequence[Law], names: Sequence[str], rows: IntArray,
            samples: int, seed: int,
            confidence: float) -> tuple[dict[str, TimeStats], TimeStats]:
    if not names:
        return {}, TimeStats.point(0.0, confidence)
    t = sample_times(a, b, rows, samples, seed, REPORT_STREAM)
    sampled = [p for p in range(len(names)) if rows[p] > 0 and not (a[p].normal and b[p].normal)]
    bounds = row_intervals(t[sampled], confidence) if sampled else np.zeros((0, 2))
    interval = {p: (float(lo), float(hi)) for p, (lo, hi) in zip(sampled, bounds, strict=True)}
    per_host = {
        name: _host_stats(a[p], b[p], int(rows[p]), interval.get(p), confidence)
        for p, name in enumerate(names)
    }
    return per_host, TimeStats.from_samples(t.max(axis=0), confidence)


def _host_stats(a: Law, b: Law, rows: int, interval: tuple[float, float] | None,
                confidence: float) -> TimeStats:
    """Exact moments of ``a * rows + b``; exact interval too when both are normal."""
    if rows == 0:
        return TimeStats.point(0.0, confidence)
    mean = rows * a.mean + b.mean
    std = math.hypot(rows * a.std, b.std)
    if interval is None:
        return TimeStats.normal(mean, std, confidence)
    return TimeStats(mean, std, interval, confidence, "samples")
