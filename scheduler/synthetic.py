"""Synthetic stochastic hosts and a replay-free strategy comparison.

Small values that follow the stochastic protocol (ppe.core has the full-featured ones; these keep
the scheduler testable on its own), a few host scenarios, and ``compare_strategies``: schedule with
each strategy, then draw Monte Carlo "actuals" from the same distributions with an independent
seed, the same draws for every strategy (common random numbers), and summarise the makespans.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from scheduler.problem import StochasticHost
from scheduler.strategies import schedule, simulate_makespans

FloatArray = NDArray[np.float64]


def _rng(random_state: np.random.Generator | int | None) -> np.random.Generator:
    return np.random.default_rng(random_state)


def _central(value: Any, confidence: float) -> tuple[float, float]:
    lo, hi = value.ppf(0.5 - confidence / 2), value.ppf(0.5 + confidence / 2)
    return float(lo), float(hi)


@dataclass(frozen=True)
class Point:
    """A value that does not vary."""

    value: float
    kind: str = "point"

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.value, 0.0)]

    def mean(self) -> float:
        return self.value

    def std(self) -> float:
        return 0.0

    def ppf(self, q: Any) -> Any:
        return np.full_like(np.asarray(q, dtype=np.float64), self.value)[()]

    def rvs(self, size: int = 1, random_state: Any = None) -> FloatArray:
        return np.full(size, self.value)

    def interval(self, confidence: float) -> tuple[float, float]:
        return (self.value, self.value)


@dataclass(frozen=True)
class Normal:
    """N(mu, sigma)."""

    mu: float
    sigma: float
    kind: str = "normal"

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.mu, self.sigma)]

    def mean(self) -> float:
        return self.mu

    def std(self) -> float:
        return self.sigma

    def ppf(self, q: Any) -> Any:
        return (self.mu + self.sigma * ndtri(np.asarray(q, dtype=np.float64)))[()]

    def rvs(self, size: int = 1, random_state: Any = None) -> FloatArray:
        return _rng(random_state).normal(self.mu, self.sigma, size)

    def interval(self, confidence: float) -> tuple[float, float]:
        return _central(self, confidence)


@dataclass(frozen=True)
class Mixture:
    """sum_k w_k N(mu_k, sigma_k); ``ppf`` is the true mixture quantile (root of the CDF)."""

    weights: tuple[float, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]
    kind: str = "mixture"

    def __post_init__(self) -> None:
        if not (len(self.weights) == len(self.means) == len(self.stds) > 0):
            raise ValueError("weights, means and stds must have the same, non-zero length")
        if min(self.stds) <= 0 or min(self.weights) < 0 or sum(self.weights) <= 0:
            raise ValueError("mixture stds must be > 0 and weights >= 0 with a positive sum")
        total = sum(self.weights)
        object.__setattr__(self, "weights", tuple(w / total for w in self.weights))

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return list(zip(self.weights, self.means, self.stds, strict=True))

    def mean(self) -> float:
        return float(np.dot(self.weights, self.means))

    def std(self) -> float:
        m = self.mean()
        second = sum(w * (s * s + (mu - m) ** 2) for w, mu, s in self.components)
        return math.sqrt(second)

    def cdf(self, x: Any) -> Any:
        x = np.asarray(x, dtype=np.float64)
        return sum(w * ndtr((x - mu) / s) for w, mu, s in self.components)

    def ppf(self, q: Any) -> Any:
        qs = np.asarray(q, dtype=np.float64)
        lo = min(mu - 12 * s for _, mu, s in self.components)
        hi = max(mu + 12 * s for _, mu, s in self.components)
        out = np.array([self._root(float(p), lo, hi) for p in qs.ravel()])
        return out.reshape(qs.shape)[()]

    def _root(self, p: float, lo: float, hi: float) -> float:
        if not 0.0 < p < 1.0:
            return -math.inf if p <= 0 else math.inf
        return float(brentq(lambda x: float(self.cdf(x)) - p, lo, hi, xtol=1e-12, rtol=1e-12))

    def rvs(self, size: int = 1, random_state: Any = None) -> FloatArray:
        rng = _rng(random_state)
        comp = rng.choice(len(self.weights), size=size, p=np.asarray(self.weights))
        return np.asarray(self.means)[comp] + np.asarray(self.stds)[comp] * rng.standard_normal(
            size
        )

    def interval(self, confidence: float) -> tuple[float, float]:
        return _central(self, confidence)


SCENARIOS = ("low-variance", "high-variance", "bimodal", "heterogeneous")


def synthetic_hosts(
    n: int, scenario: str, seed: int = 0, total_rows: int = 4000
) -> list[StochasticHost]:
    """``n`` hosts; the balanced makespan is about 100 s whatever ``n``.

    - low-variance: availability varies by 5 % on every host;
    - high-variance: equal speeds, half the hosts vary by 25 %, half by 3 %;
    - bimodal: 30 % of the hosts are sometimes (p = 0.25) loaded to 2.5x time per row;
    - heterogeneous: speeds differ 3x, variability 3-25 %, a quarter bimodal, noisy links.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose from {SCENARIOS}")
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    rows_each = total_rows / n
    hosts = []
    for p in range(n):
        speed = rng.uniform(0.5, 1.5) if scenario == "heterogeneous" else 1.0
        ded = 80.0 * speed / rows_each  # dedicated time per row: ~80 s of compute per host
        mean_a = ded / 0.85  # time per row at 85 % mean availability
        a: Normal | Mixture = Normal(mean_a, 0.05 * mean_a)
        if scenario == "high-variance":
            a = Normal(mean_a, (0.25 if p % 2 else 0.03) * mean_a)
        elif scenario == "bimodal" and rng.random() < 0.3:
            a = Mixture((0.75, 0.25), (mean_a, 2.5 * mean_a), (0.03 * mean_a, 0.1 * mean_a))
        elif scenario == "heterogeneous":
            cv = float(rng.uniform(0.03, 0.25))
            a = Normal(mean_a, cv * mean_a)
            if rng.random() < 0.25:
                a = Mixture((0.8, 0.2), (mean_a, 2.0 * mean_a), (cv * mean_a, 0.1 * mean_a))
        comm = float(rng.uniform(2.0, 8.0)) if scenario == "heterogeneous" else 5.0
        b = Normal(comm, 0.2 * comm) if scenario == "heterogeneous" else Point(comm)
        hosts.append(StochasticHost(f"h{p:02d}", a, b, a_dedicated=ded))
    return hosts


@dataclass(frozen=True)
class Outcome:
    """Makespans a strategy's schedule achieved on Monte Carlo actuals."""

    strategy: str
    rows: dict[str, int]
    predicted_mean: float
    mean: float
    p50: float
    p95: float
    actuals: FloatArray


def compare_strategies(
    hosts: Sequence[StochasticHost],
    total_rows: int,
    strategies: Sequence[str],
    *,
    k: float = 2.0,
    quantile: float = 0.95,
    plan_samples: int = 4000,
    plan_seed: int = 0,
    actual_samples: int = 20000,
    actual_seed: int = 1,
) -> dict[str, Outcome]:
    """Schedule with each strategy, then evaluate all on the same independent actual draws."""
    if actual_seed == plan_seed:
        raise ValueError("actual_seed must differ from plan_seed (actuals must be fresh draws)")
    out: dict[str, Outcome] = {}
    for name in strategies:
        s = schedule(
            hosts, total_rows, name, k=k, quantile=quantile, samples=plan_samples, seed=plan_seed
        )
        m = simulate_makespans(hosts, s.rows, samples=actual_samples, seed=actual_seed)
        p50, p95 = np.quantile(m, [0.5, 0.95])
        out[name] = Outcome(
            name, s.rows, s.makespan.mean, float(m.mean()), float(p50), float(p95), m
        )
    return out


def paired_difference(x: FloatArray, y: FloatArray) -> tuple[float, float]:
    """Mean of x - y over common draws, and its standard error."""
    d = np.asarray(x) - np.asarray(y)
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
