"""The makespan of many identical nodes without evaluating each: the max of independent copies.

A nodeset of 4096 nodes with i.i.d. load is, for the model, a handful of classes of nodes
that have the same inputs and the same rows (ends of the chain, nodes next to another
nodeset, the interior). Each class's time ``T_j`` is one distribution (from ``ppe.core``'s
numeric engine, exact), and the makespan of ``m_j`` independent copies of each is

    F(t) = prod_j F_j(t) ** m_j,

exact at any ``t``. :class:`IidMax` tabulates it once for the moments and the quantiles, and
answers ``cdf`` exactly; draws are exact too (``max_j F_j^-1(U_j ** (1/m_j))``). Measured in
tests/whatif against ``ppe.pipeline`` over the same hosts one by one: the same mean and
interval within 1e-4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ppe.core.montecarlo import Space
from ppe.core.stochastic import StochasticValue

__all__ = ["IidMax", "independent_classes", "on_trace"]

FloatArray = npt.NDArray[np.float64]

#: Probability left out at each end of the tabulation.
EPS = 1e-12
#: Grid points per class (at the probabilities the max would reach through that class alone)
#: and uniform points over the whole support.
POINTS_PER_CLASS = 400
UNIFORM_POINTS = 600
#: Rounds that refine a quantile on the exact CDF, each evaluating it at REFINE_POINTS inside
#: the bracket at once (one vectorised call per class instead of one per bisection step):
#: the bracket shrinks 64^7 = 2^42-fold.
REFINE_ROUNDS = 7
REFINE_POINTS = 64


class IidMax(StochasticValue):
    """``max`` over ``counts[j]`` independent copies of each ``values[j]`` (kind "numeric":
    mean and std from the tabulated exact CDF, ``cdf`` exact, draws exact)."""

    kind = "numeric"

    def __init__(self, values: Sequence[StochasticValue], counts: Sequence[int]) -> None:
        super().__init__()
        if len(values) != len(counts) or not values or any(c < 1 for c in counts):
            raise ValueError("IidMax needs one count >= 1 per value")
        self.values = list(values)
        self.counts = np.asarray(counts, dtype=np.float64)
        self._t, self._f = self._tabulate()
        self._mean, self._var = self._moments()

    def __repr__(self) -> str:
        sd = math.sqrt(self._var)
        return f"IidMax(mean={self._mean:.6g}, std={sd:.6g}, classes={len(self.values)})"

    # ---------------------------------------------------------------- tabulation

    def _class_ppf(self, j: int, q: FloatArray) -> FloatArray:
        return np.asarray(self.values[j].ppf(q), dtype=np.float64).reshape(q.shape)

    def _tabulate(self) -> tuple[FloatArray, FloatArray]:
        u = np.linspace(0.0, 1.0, POINTS_PER_CLASS)
        points = []
        for j, m in enumerate(self.counts):
            lo_q = EPS ** (1.0 / m)
            hi_q = min(1.0 - EPS / m, 1.0 - 1e-15)
            q = np.clip(u ** (1.0 / m), lo_q, hi_q)
            points.append(self._class_ppf(j, q))
        every = np.concatenate(points)
        lo = max(float(p[0]) for p in points)  # below: F <= EPS through that class
        hi = max(float(p[-1]) for p in points)
        t = np.unique(
            np.concatenate(
                [every[(every >= lo) & (every <= hi)], np.linspace(lo, hi, UNIFORM_POINTS)]
            )
        )
        return t, self.cdf(t)

    def _moments(self) -> tuple[float, float]:
        """F taken as linear between grid points (uniform mass in each gap), the mass below
        and above the grid at its ends."""
        t, f = self._t, self._f
        if t.size == 1:
            return float(t[0]), 0.0
        df = np.diff(f)
        a, b = t[:-1], t[1:]
        mean = f[0] * t[0] + float(np.sum(df * (a + b) / 2)) + (1 - f[-1]) * t[-1]
        second = (
            f[0] * t[0] ** 2
            + float(np.sum(df * (a * a + a * b + b * b) / 3))
            + (1 - f[-1]) * t[-1] ** 2
        )
        return float(mean), max(float(second - mean * mean), 0.0)

    # -------------------------------------------------------------- distribution

    def mean(self) -> float:
        return self._mean

    def std(self) -> float:
        return math.sqrt(self._var)

    def var(self) -> float:
        return self._var

    def cdf(self, x: Any) -> Any:
        arr = np.asarray(x, dtype=np.float64)
        logf = np.zeros(arr.shape)
        with np.errstate(divide="ignore"):
            for v, m in zip(self.values, self.counts, strict=True):
                logf += m * np.log(np.clip(np.asarray(v.cdf(arr), dtype=np.float64), 0.0, 1.0))
        out = np.exp(logf)
        return float(out) if out.ndim == 0 else out

    def ppf(self, q: Any) -> Any:
        qa = np.atleast_1d(np.asarray(q, dtype=np.float64))
        out = np.array([self._ppf_one(float(p)) for p in qa.ravel()]).reshape(qa.shape)
        return float(out[0]) if np.ndim(q) == 0 else out

    def _ppf_one(self, q: float) -> float:
        """The smallest grid bracket where F reaches q, refined on the exact CDF (each round
        evaluates it across the bracket and keeps the sub-bracket where F reaches q)."""
        t, f = self._t, self._f
        if not 0.0 <= q <= 1.0:
            return math.nan
        i = int(np.searchsorted(f, q, side="left"))
        if i == 0:
            return float(t[0])
        if i >= t.size:
            return float(t[-1])
        lo, hi = float(t[i - 1]), float(t[i])
        for _ in range(REFINE_ROUNDS):
            grid = np.linspace(lo, hi, REFINE_POINTS + 1)[1:-1]
            k = int(np.searchsorted(self.cdf(grid), q, side="left"))  # F is non-decreasing
            lo, hi = (
                (float(grid[k - 1]) if k > 0 else lo),
                (float(grid[k]) if k < grid.size else hi),
            )
        return hi

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        out = np.full(n, -np.inf)
        for j, m in enumerate(self.counts):
            u = rng.random(n) ** (1.0 / m)
            np.maximum(out, self._class_ppf(j, np.clip(u, EPS, 1.0 - 1e-15)), out=out)
        return out

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.mean(), self.std())]

    def _draw(self, space: Space) -> FloatArray:
        return space.leaf(self.uid, lambda rng, n: self._rvs(n, rng))


def on_trace(key: object) -> bool:
    """Whether a load key (``machine.load_key``) is a recorded trace, which every node
    assigned to it shares (those nodes move together)."""
    return isinstance(key, tuple) and bool(key) and key[0] == "trace"


def independent_classes(
    keys: Sequence[object], counts: Sequence[int], times: Sequence[StochasticValue]
) -> tuple[list[StochasticValue], list[int]]:
    """The host times the makespan is the max of, as independent classes with their counts;
    ``keys[j]`` is class j's load (``machine.load_key``).

    Nodes that share one recorded trace (files assigned round-robin) see the same load: they
    move together, as in the simulator. So all the hosts under one trace count once, by the
    slowest on average (under one load, the host with the most work or the slowest links is
    the slowest whatever the draw, up to which link is slower). Counting them as independent
    copies would put the max of thousands of draws in a trace's worst mode, several times the
    makespan the traces give."""
    values: list[StochasticValue] = []
    out_counts: list[int] = []
    shared: dict[object, StochasticValue] = {}
    for key, count, t in zip(keys, counts, times, strict=True):
        if not on_trace(key):
            values.append(t)
            out_counts.append(count)
        elif key not in shared or t.mean() > shared[key].mean():
            shared[key] = t
    return [*values, *shared.values()], [*out_counts, *([1] * len(shared))]
