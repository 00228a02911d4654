"""The spread of runs, not only their mean: quantiles at sizes never measured.

The repetitions' standard deviation at each point is fitted with the same search
as the mean (:func:`~.search.search`), so ``conservative`` and quantile
strategies get a run-time distribution anywhere: ``N(mean(x), std(x)^2 +
se_mean(x)^2)`` with ``mean`` from the mean model, ``std`` from the spread model
(floored at 0) and ``se_mean`` the mean model's uncertainty of its mean.

Coverage is stated, not assumed: :func:`spread_coverage` leaves each point out,
refits both models' coefficients (the chosen terms kept) and counts how many of
the left-out point's repetitions fall in the central intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ppe.core.stochastic import Normal

from .data import Measurements
from .errors import TooFewPointsError
from .model import EmpiricalModel, fit_terms
from .search import SearchConfig, search, search_all


@dataclass(frozen=True)
class SpreadModel:
    """A model of the mean and one of the standard deviation of runs."""

    mean: EmpiricalModel
    std: EmpiricalModel

    def moments(self, point: Mapping[str, float]) -> tuple[float, float]:
        """Mean and std of a run at ``point``."""
        m, se = self.mean.predict_arrays([point], what="mean")
        s = max(float(self.std.predict_arrays([point], what="mean")[0][0]), 0.0)
        se0 = float(se[0]) if np.isfinite(se[0]) else 0.0
        return float(m[0]), float(np.hypot(s, se0))

    def quantile(self, point: Mapping[str, float], q: float) -> float:
        """The ``q`` quantile of a run's value at ``point``."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q!r}")
        mu, sd = self.moments(point)
        return float(mu + stats.norm.ppf(q) * sd)

    def to_stochastic(self, point: Mapping[str, float]) -> Normal:
        mu, sd = self.moments(point)
        return Normal(mu, sd)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.to_dict(), "std": self.std.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpreadModel:
        return cls(EmpiricalModel.from_dict(data["mean"]), EmpiricalModel.from_dict(data["std"]))


def std_measurements(data: Measurements) -> Measurements:
    """The points with at least two repetitions, each with its sample std as the one value."""
    keep = data.counts >= 2
    if keep.sum() < 3:
        raise TooFewPointsError(
            f"{int(keep.sum())} points have repetitions; a spread model needs at least 3"
        )
    sub = data.select(keep)
    return Measurements.from_arrays(data.params, sub.points, sub.stds)


def fit_spread(data: Measurements, config: SearchConfig = SearchConfig()) -> SpreadModel:
    """Search a model of the mean and one of the repetitions' std.

    A sample std of ``n`` normal values has a relative standard error of about
    ``1 / sqrt(2 (n - 1))``: that is the std data's noise for the search's floors.
    """
    stds = std_measurements(data)
    reps = data.counts[data.counts >= 2]
    std_model = search_all(stds, config, noise_std=1.0 / np.sqrt(2.0 * (reps - 1.0))).model
    return SpreadModel(search(data, config), std_model)


def spread_coverage(
    data: Measurements, spread: SpreadModel, confidences: Sequence[float] = (0.8, 0.9, 0.95)
) -> dict[float, float]:
    """Leave-one-point-out coverage of the central intervals of :meth:`SpreadModel.quantile`."""
    hits = dict.fromkeys(confidences, 0)
    total = 0
    stds = std_measurements(data)
    for k in range(data.n_points):
        if data.counts[k] < 2:
            continue
        rest = data.select(np.arange(data.n_points) != k)
        same = (stds.points == data.points[k]).all(axis=1)
        try:
            mean = fit_terms(rest, spread.mean.terms, noise=spread.mean.noise)
            std = fit_terms(stds.select(~same), spread.std.terms, noise=spread.std.noise)
        except TooFewPointsError:
            continue
        loo = SpreadModel(mean, std)
        point = {p: float(data.points[k, j]) for j, p in enumerate(data.params)}
        for c in confidences:
            lo, hi = loo.quantile(point, 0.5 - c / 2), loo.quantile(point, 0.5 + c / 2)
            hits[c] += int(np.sum((data.values[k] >= lo) & (data.values[k] <= hi)))
        total += data.values[k].size
    if total == 0:
        raise TooFewPointsError("no point could be left out to check the coverage")
    return {c: hits[c] / total for c in confidences}
