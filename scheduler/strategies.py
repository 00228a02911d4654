"""Scheduling strategies over stochastic hosts, and the schedule they produce.

Each strategy picks integer rows; every schedule is then reported the same way, on the same
common random numbers: per host the time ``a * rows + b`` (exact when a and b are normals or
mixtures of normals; exact moments and a sampled interval otherwise) and the makespan
``max_p`` of those times, sampled jointly. Hosts given no rows take no time.

- ``block``: equal strips (bounds respected).
- ``static``: strips by dedicated speed only (``a_dedicated``), AppLeS's compile-time partition.
- ``mean``: balance the means of a and b.
- ``conservative``: balance mean + k std of a and of b; high-variance hosts get less work.
- ``quantile``: balance the q-quantiles of a and of b, the true quantiles (of the whole
  mixture, for mixtures), so a bimodal host's slow mode counts, unlike mean + k std.
- ``expected``: minimise the expected makespan on Monte Carlo draws, exactly (scheduler.search).
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
from scheduler.laws import Law, affine, components, mixture_quantiles, quantiles, scratch
from scheduler.problem import REPORT_STREAM, Problem, StochasticHost, sample_times
from scheduler.stats import TimeStats, check_confidence, row_interval

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
        """JSON-ready: docs/architecture.md's allocation list and stochastic-value shapes."""
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
    return p.balanced(
        quantiles(p.a, p.quantile), quantiles(p.b, p.quantile), f"quantile {p.quantile}"
    )


def _expected(p: Problem) -> IntArray:
    return search.minimise_expected(p)


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


def schedule(
    hosts: Sequence[StochasticHost],
    total_rows: int,
    strategy: str = "mean",
    *,
    k: float = 2.0,
    quantile: float = 0.95,
    samples: int = 4000,
    seed: int = 0,
    confidence: float = 0.95,
    dependence: FloatArray | None = None,
) -> Schedule:
    """Rows per host by ``strategy`` (one of ``STRATEGIES``), with predicted times.

    ``dependence``: correlation of the hosts' slowdowns (``scheduler.copula``); the Monte Carlo
    strategies and the makespan's report sample hosts jointly with it. None: independent.

    Raises ``Infeasible`` when the row bounds cannot hold ``total_rows``, ``ValueError`` on bad
    input (unknown strategy, non-positive time per row under the strategy, ...).
    """
    check_confidence(confidence)
    problem, rows = _choose(hosts, total_rows, strategy, k, quantile, samples, seed, dependence)
    per_host, makespan = _report(problem, rows, confidence)
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


def schedule_rows(
    hosts: Sequence[StochasticHost],
    total_rows: int,
    strategy: str = "mean",
    *,
    k: float = 2.0,
    quantile: float = 0.95,
    samples: int = 4000,
    seed: int = 0,
    dependence: FloatArray | None = None,
) -> dict[str, int]:
    """The rows :func:`schedule` would choose, without its Monte Carlo report of the times.

    For callers that predict the chosen allocation themselves (``ppe.pipeline``): the report
    samples every host and is most of a fast strategy's cost.
    """
    problem, rows = _choose(hosts, total_rows, strategy, k, quantile, samples, seed, dependence)
    return {name: int(r) for name, r in zip(problem.names, rows, strict=True)}


def _choose(
    hosts: Sequence[StochasticHost],
    total_rows: int,
    strategy: str,
    k: float,
    quantile: float,
    samples: int,
    seed: int,
    dependence: FloatArray | None,
) -> tuple[Problem, IntArray]:
    if strategy not in _STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    problem = Problem(
        tuple(hosts),
        total_rows,
        k=k,
        quantile=quantile,
        samples=samples,
        seed=seed,
        dependence=dependence,
    )
    return problem, _STRATEGIES[strategy](problem)


def predict_times(
    hosts: Sequence[StochasticHost],
    rows: Mapping[str, int],
    *,
    samples: int = 4000,
    seed: int = 0,
    confidence: float = 0.95,
    dependence: FloatArray | None = None,
) -> tuple[dict[str, TimeStats], TimeStats]:
    """Per-host and makespan predictions for given rows (hosts missing from ``rows``: 0)."""
    check_confidence(confidence)
    problem, arr = _fixed(hosts, rows, samples, seed, dependence)
    return _report(problem, arr, confidence)


def simulate_makespans(
    hosts: Sequence[StochasticHost],
    rows: Mapping[str, int],
    *,
    samples: int = 4000,
    seed: int = 0,
    dependence: FloatArray | None = None,
) -> FloatArray:
    """Makespan draws for given rows: Monte Carlo "actuals" when ``seed`` differs from the plan's.

    Draw i of a host depends only on (seed, host position, i) (with ``dependence``: on the
    seed and the matrix too), so allocations evaluated with the same seed are compared on
    common random numbers.
    """
    problem, arr = _fixed(hosts, rows, samples, seed, dependence)
    if not problem.hosts:
        return np.zeros(samples)
    with scratch(len(problem.hosts), samples) as buf:
        t = sample_times(
            problem.a,
            problem.b,
            arr,
            samples,
            seed,
            REPORT_STREAM,
            out=buf,
            dependence=problem.dependence,
        )
        return t.max(axis=0)


def _fixed(
    hosts: Sequence[StochasticHost],
    rows: Mapping[str, int],
    samples: int,
    seed: int,
    dependence: FloatArray | None,
) -> tuple[Problem, IntArray]:
    problem = Problem(
        tuple(hosts), int(sum(rows.values())), samples=samples, seed=seed, dependence=dependence
    )
    unknown = set(rows) - set(problem.names)
    if unknown:
        raise ValueError(f"rows given for unknown hosts {sorted(unknown)}")
    arr = np.array([int(rows.get(name, 0)) for name in problem.names], dtype=np.int64)
    if np.any(arr < 0):
        raise ValueError("rows must be >= 0")
    return problem, arr


def _report(
    problem: Problem, rows: IntArray, confidence: float
) -> tuple[dict[str, TimeStats], TimeStats]:
    """Per host: exact where the time's law is known (normal, or a mixture of normals: every
    pair of a's and b's components), sampled otherwise. Makespan: sampled jointly (coupled by
    the problem's dependence)."""
    a, b, names = problem.a, problem.b, problem.names
    samples, seed = problem.samples, problem.seed
    if not names:
        return {}, TimeStats.point(0.0, confidence)
    used = [p for p in range(len(names)) if rows[p] > 0]
    mixed = [
        p for p in used if not (a[p].normal and b[p].normal) and not (a[p].generic or b[p].generic)
    ]
    generic = [p for p in used if a[p].generic or b[p].generic]
    per_host = {name: TimeStats.point(0.0, confidence) for name in names}
    for p in used:
        if a[p].normal and b[p].normal:
            per_host[names[p]] = TimeStats.normal(*_moments(a[p], b[p], rows[p]), confidence)
    if mixed:
        per_host.update(_mixture_stats(a, b, names, rows, mixed, confidence))
    with scratch(len(names), samples) as buf:
        t = sample_times(
            a, b, rows, samples, seed, REPORT_STREAM, out=buf, dependence=problem.dependence
        )
        makespan = TimeStats.from_samples(t.max(axis=0), confidence)
        for p in generic:
            mean, std = _moments(a[p], b[p], rows[p])
            lo, hi = row_interval(t[p], confidence)
            per_host[names[p]] = TimeStats(mean, std, (lo, hi), confidence, "samples")
    return per_host, makespan


def _moments(a: Law, b: Law, rows: int | np.integer) -> tuple[float, float]:
    """Mean and std of ``a * rows + b`` for independent a and b."""
    return float(rows * a.mean + b.mean), math.hypot(float(rows) * a.std, b.std)


def _mixture_stats(
    a: Sequence[Law],
    b: Sequence[Law],
    names: Sequence[str],
    rows: IntArray,
    which: list[int],
    confidence: float,
) -> dict[str, TimeStats]:
    c = affine(
        components([a[p] for p in which]),
        rows[which].astype(np.float64),
        components([b[p] for p in which]),
    )
    ends = mixture_quantiles(c, [0.5 - confidence / 2, 0.5 + confidence / 2])
    out = {}
    for i, p in enumerate(which):
        keep = c.w[i] > 0
        comps = tuple(
            zip(c.w[i][keep].tolist(), c.m[i][keep].tolist(), c.s[i][keep].tolist(), strict=True)
        )
        mean, std = _moments(a[p], b[p], rows[p])
        out[names[p]] = TimeStats(
            mean, std, (float(ends[i, 0]), float(ends[i, 1])), confidence, "mixture", comps
        )
    return out
