"""The spread of runs, not only their mean: calibrated quantiles at sizes never measured.

The repetitions' standard deviation at each point is fitted with the same search as the
mean (:func:`~.search.search_all`), so ``conservative`` and quantile strategies get a
run-time distribution anywhere: centred on the mean model, with the scale
``sd(x) = sqrt(std(x)^2 + se_mean(x)^2 + (misfit * mean(x))^2)`` (``std`` from the spread
model, floored at 0; ``se_mean`` the mean model's uncertainty of its mean; ``misfit`` its
relative error at the measured points beyond the means' own noise, :func:`misfit`).

Calibration.  A normal with a modelled scale is not what the runs say: without the misfit
term a 95 % normal interval covered 54-80 % of left-out runs on the shipped kernels (inside
the measured range ``se_mean`` is only the least-squares error, while real kernels' means
are misspecified by more), and with it 85-98 %.  So the intervals are calibrated
split-conformally on the runs themselves: each point ``k`` is left out, both models'
coefficients (and the misfit) are refitted on the rest (the chosen terms kept), and every
repetition ``y`` at ``k`` gives a score ``|y - mean_k| / sd_k``.  The central ``c``
interval is ``mean +- q_c * sd`` with ``q_c`` the ``ceil((N + 1) c)``-th smallest of the
``N`` scores (infinite when that rank exceeds ``N``): the finite-sample conformal quantile,
in place of the normal's ``z_c``.

Coverage is stated, not assumed, and not the calibration's own fit: :func:`nested_coverage`
leaves each point ``k`` out, calibrates on the other points alone (each of them scored by a
model fitted without it *and* without ``k``) and counts the repetitions at ``k`` inside the
calibrated intervals.  With more than ``MAX_FOLDS`` points, interleaved groups of points
leave together instead of single points (:func:`folds`), which bounds the cost.  Leaving a
point out interpolates (or extrapolates one step at the edges), so the figure speaks for
sizes between and next to the measured ones; far beyond them the mean model's own edge
error widens ``sd``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from ppe.core.stochastic import Normal

from .data import Measurements
from .errors import EmpiricalError, TooFewPointsError
from .model import EmpiricalModel, FloatArray, fit_terms
from .search import SearchConfig, search, search_all

#: Confidences whose coverage is stated.
CONFIDENCES: tuple[float, ...] = (0.8, 0.9, 0.95)
#: The central interval the pipeline's normal reproduces (as the mean model's does).
PIPELINE_CONFIDENCE = 0.95
#: Order statistics kept with a stored calibration (more scores are thinned to these).
MAX_SCORES = 1000
#: Terms at most in the std model beside the constant (see :func:`std_config`).
STD_TERMS = 1
#: Folds at most: beyond this many points, points leave in this many interleaved groups (so
#: the nested test costs at most ``MAX_FOLDS^2`` refits however many points there are).
MAX_FOLDS = 25


@dataclass(frozen=True)
class Calibration:
    """The sorted leave-one-point-out scores and the coverage stated for them.

    ``scores`` are the order statistics of the ``n`` scores (all of them, or ``MAX_SCORES``
    at evenly spaced ranks); ``coverage`` and ``width`` (mean interval width relative to
    the measured mean) come from :func:`nested_coverage`, ``normal`` is the coverage of the
    uncalibrated normal intervals in the same leave-one-point-out test.
    """

    scores: tuple[float, ...]
    n: int
    coverage: dict[float, float] = field(default_factory=dict)
    width: dict[float, float] = field(default_factory=dict)
    normal: dict[float, float] = field(default_factory=dict)

    def multiplier(self, confidence: float) -> float:
        """``q_c``: the half-width of the central ``confidence`` interval in units of ``sd``."""
        return conformal_quantile(np.asarray(self.scores), confidence, self.n)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "scores": list(self.scores),
            "multipliers": {_key(c): _num(self.multiplier(c)) for c in CONFIDENCES},
            "coverage": {_key(c): v for c, v in self.coverage.items()},
            "width": {_key(c): _num(v) for c, v in self.width.items()},
            "normal_coverage": {_key(c): v for c, v in self.normal.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        def by_c(m: Mapping[str, Any]) -> dict[float, float]:
            return {float(c): math.inf if v is None else float(v) for c, v in m.items()}

        return cls(
            scores=tuple(float(s) for s in data["scores"]),
            n=int(data["n"]),
            coverage=by_c(data.get("coverage", {})),
            width=by_c(data.get("width", {})),
            normal=by_c(data.get("normal_coverage", {})),
        )


def _key(c: float) -> str:
    return f"{c:g}"


def _num(v: float) -> float | None:
    """JSON has no infinity: an unbounded interval is null."""
    return v if math.isfinite(v) else None


def conformal_quantile(sorted_scores: FloatArray, confidence: float, n: int | None = None) -> float:
    """The ``ceil((n + 1) c)``-th smallest of ``n`` scores (infinite past the largest).

    ``sorted_scores`` holds all ``n`` order statistics, or fewer at evenly spaced ranks
    (then interpolated linearly in rank).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    m = sorted_scores.size
    n = m if n is None else n
    if m == 0 or n == 0:
        return math.inf
    rank = math.ceil((n + 1) * confidence - 1e-9)
    if rank > n:
        return math.inf
    if m == n:
        return float(sorted_scores[rank - 1])
    pos = (rank - 1) / (n - 1) * (m - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, m - 1)
    return float(sorted_scores[lo] + (pos - lo) * (sorted_scores[hi] - sorted_scores[lo]))


def thin(sorted_scores: FloatArray, keep: int = MAX_SCORES) -> tuple[float, ...]:
    """At most ``keep`` order statistics at evenly spaced ranks (the first and last kept)."""
    if sorted_scores.size <= keep:
        return tuple(float(s) for s in sorted_scores)
    idx = np.round(np.linspace(0, sorted_scores.size - 1, keep)).astype(int)
    return tuple(float(s) for s in sorted_scores[idx])


@dataclass(frozen=True)
class SpreadModel:
    """A model of the mean and one of the standard deviation of runs, and their calibration."""

    mean: EmpiricalModel
    std: EmpiricalModel
    calibration: Calibration | None = None
    #: The mean model's relative misfit of the point means beyond their own noise
    #: (:func:`misfit`): a run's scale has ``misfit * |mean|`` in quadrature.
    misfit: float = 0.0

    def moments(self, point: Mapping[str, float]) -> tuple[float, float]:
        """Mean and (uncalibrated) scale ``sd`` of a run at ``point``."""
        m, se = self.mean.predict_arrays([point], what="mean")
        s = max(float(self.std.predict_arrays([point], what="mean")[0][0]), 0.0)
        se0 = float(se[0]) if np.isfinite(se[0]) else 0.0
        mu = float(m[0])
        return mu, float(np.sqrt(s**2 + se0**2 + (self.misfit * mu) ** 2))

    def multiplier(self, confidence: float) -> float:
        """Half-width of the central ``confidence`` interval in units of ``sd``: the
        calibrated ``q_c``, or the normal's ``z_c`` without a calibration."""
        if self.calibration is not None:
            return self.calibration.multiplier(confidence)
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        return float(stats.norm.ppf(0.5 + confidence / 2.0))

    def interval(self, point: Mapping[str, float], confidence: float) -> tuple[float, float]:
        """The central ``confidence`` interval of a run at ``point``."""
        mu, sd = self.moments(point)
        half = self.multiplier(confidence) * sd
        return mu - half, mu + half

    def quantile(self, point: Mapping[str, float], q: float) -> float:
        """The ``q`` quantile of a run's value at ``point`` (an end of the central
        ``|2q - 1|`` interval)."""
        if not 0.0 < q < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q!r}")
        mu, sd = self.moments(point)
        if q == 0.5:
            return mu
        return float(mu + math.copysign(self.multiplier(abs(2.0 * q - 1.0)) * sd, q - 0.5))

    def scale(self, confidence: float = PIPELINE_CONFIDENCE) -> float:
        """The factor on ``sd`` of the normal whose central ``confidence`` interval is the
        calibrated one (1 without a calibration)."""
        if self.calibration is None:
            return 1.0
        return self.multiplier(confidence) / float(stats.norm.ppf(0.5 + confidence / 2.0))

    def to_stochastic(self, point: Mapping[str, float]) -> Normal:
        """A run at ``point`` as a PPE normal: its central 95 % interval is the calibrated one
        (the analytic engine keeps a normal exact, as for the mean model's t interval)."""
        mu, sd = self.moments(point)
        lam = self.scale()
        if not math.isfinite(lam):
            raise TooFewPointsError(
                "too few left-out runs to calibrate a 95 % interval (at least 19 are needed)"
            )
        return Normal(mu, sd * lam)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mean": self.mean.to_dict(),
            "std": self.std.to_dict(),
            "misfit": self.misfit,
        }
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpreadModel:
        try:
            cal = data.get("calibration")
            return cls(
                EmpiricalModel.from_dict(data["mean"]),
                EmpiricalModel.from_dict(data["std"]),
                None if cal is None else Calibration.from_dict(cal),
                float(data.get("misfit", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EmpiricalError(f"malformed stored spread model: {exc}") from None


def std_measurements(data: Measurements) -> Measurements:
    """The points with at least two repetitions, each with its sample std as the one value."""
    keep = data.counts >= 2
    if keep.sum() < 3:
        raise TooFewPointsError(
            f"{int(keep.sum())} points have repetitions; a spread model needs at least 3"
        )
    sub = data.select(keep)
    return Measurements.from_arrays(data.params, sub.points, sub.stds)


def std_config(config: SearchConfig) -> SearchConfig:
    """The std model's search: one term beside the constant.  Sample stds of a few runs are
    noisy (about ``1 / sqrt(2 (n - 1))`` relative), and more terms fitted to them part ways
    far beyond the runs (a std ten times the mean at 4x the largest size, seen)."""
    return replace(config, max_terms=min(config.max_terms, STD_TERMS))


def fit_spread(
    data: Measurements,
    config: SearchConfig = SearchConfig(),
    mean: EmpiricalModel | None = None,
    calibrate: bool = True,
) -> SpreadModel:
    """Search a model of the repetitions' std (and of the mean, unless ``mean`` is given),
    calibrated on the runs unless ``calibrate`` is False.

    A sample std of ``n`` normal values has a relative standard error of about
    ``1 / sqrt(2 (n - 1))``: that is the std data's noise for the search's floors.
    """
    stds = std_measurements(data)
    reps = data.counts[data.counts >= 2]
    std_model = search_all(
        stds, std_config(config), noise_std=1.0 / np.sqrt(2.0 * (reps - 1.0))
    ).model
    mean = search(data, config) if mean is None else mean
    spread = SpreadModel(mean, std_model, misfit=misfit(data, mean))
    return calibrated(data, spread) if calibrate else spread


def misfit(data: Measurements, mean: EmpiricalModel) -> float:
    """RMS relative error of the mean model at the measured points beyond the noise of the
    point means themselves (``std_i^2 / n_i``).  Real kernels' runs cluster tightly around
    means the model misses by several of their stds: that error scales with the mean, not
    with the runs' std, and a scale without it leaves the calibration heavy-tailed."""
    points = [_point(data, k) for k in range(data.n_points)]
    fitted = mean.predict_arrays(points, what="mean")[0]
    if not np.all(np.abs(fitted) > 0):
        return 0.0
    excess = (data.means - fitted) ** 2 - data.stds**2 / data.counts
    return float(np.sqrt(max(float(np.mean(excess / fitted**2)), 0.0)))


def calibrated(
    data: Measurements, spread: SpreadModel, confidences: Sequence[float] = CONFIDENCES
) -> SpreadModel:
    """``spread`` with its calibration: the leave-one-point-out scores of every run, the
    nested coverage and width at ``confidences``, and the uncalibrated coverage beside."""
    scores = np.sort(loo_scores(data, spread))
    if scores.size == 0:
        raise TooFewPointsError("no point could be left out to calibrate the spread")
    coverage, width = nested_coverage(data, spread, confidences)
    normal = spread_coverage(data, replace(spread, calibration=None), confidences)
    cal = Calibration(thin(scores), int(scores.size), coverage, width, normal)
    return replace(spread, calibration=cal)


def _point(data: Measurements, k: int) -> dict[str, float]:
    return {p: float(data.points[k, j]) for j, p in enumerate(data.params)}


def folds(n_points: int) -> list[list[int]]:
    """What leaves together: each point alone, or with more than ``MAX_FOLDS`` points,
    ``MAX_FOLDS`` groups of every ``MAX_FOLDS``-th point (each spans the measured range, so a
    left-out group is still between and next to the others)."""
    if n_points <= MAX_FOLDS:
        return [[k] for k in range(n_points)]
    return [list(range(g, n_points, MAX_FOLDS)) for g in range(MAX_FOLDS)]


def _refit(data: Measurements, spread: SpreadModel, drop: Sequence[int]) -> SpreadModel | None:
    """Both models' coefficients refitted without the points ``drop`` (terms kept; None when
    the rest cannot fix them)."""
    keep = np.ones(data.n_points, dtype=bool)
    keep[list(drop)] = False
    rest = data.select(keep)
    reps = rest.counts >= 2
    try:
        mean = fit_terms(rest, spread.mean.terms, noise=spread.mean.noise)
        std_data = Measurements.from_arrays(data.params, rest.points[reps], rest.stds[reps])
        std = fit_terms(std_data, spread.std.terms, noise=spread.std.noise)
    except EmpiricalError:
        return None
    if mean.dof <= 0:
        return None
    return SpreadModel(mean, std, misfit=misfit(rest, mean) if spread.misfit > 0 else 0.0)


def _scores(values: FloatArray, mu: float, sd: float) -> FloatArray:
    dev = np.abs(values - mu)
    if sd > 0.0 and math.isfinite(sd):
        return np.asarray(dev / sd, dtype=np.float64)
    return np.where(dev > 0.0, math.inf, 0.0)


def loo_scores(data: Measurements, spread: SpreadModel, without: Sequence[int] = ()) -> FloatArray:
    """``|y - mean_k| / sd_k`` for every run ``y`` at every point ``k`` (but those in
    ``without``), both models refitted without ``k``'s fold (see :func:`folds`) and without
    ``without``."""
    out: list[FloatArray] = []
    gone = set(without)
    for fold in folds(data.n_points):
        fold = [k for k in fold if k not in gone]
        if not fold:
            continue
        loo = _refit(data, spread, [*fold, *gone])
        if loo is None:
            continue
        for k in fold:
            mu, sd = loo.moments(_point(data, k))
            out.append(_scores(data.values[k], mu, sd))
    return np.concatenate(out) if out else np.empty(0)


def nested_coverage(
    data: Measurements, spread: SpreadModel, confidences: Sequence[float] = CONFIDENCES
) -> tuple[dict[float, float], dict[float, float]]:
    """Coverage of single runs by the calibrated intervals, and their mean width relative to
    the measured mean, each fold (a point, see :func:`folds`) tested by a model and a
    calibration that never saw it."""
    hits = dict.fromkeys(confidences, 0)
    widths = dict.fromkeys(confidences, 0.0)
    total = 0
    for fold in folds(data.n_points):
        loo = _refit(data, spread, fold)
        if loo is None:
            continue
        scores = np.sort(loo_scores(data, spread, without=fold))
        for k in fold:
            mu, sd = loo.moments(_point(data, k))
            runs = data.values[k]
            own = _scores(runs, mu, sd)
            for c in confidences:
                q = conformal_quantile(scores, c)
                hits[c] += int(np.sum(own <= q))
                widths[c] += runs.size * 2.0 * q * sd / abs(float(data.means[k]))
            total += runs.size
    if total == 0:
        raise TooFewPointsError("no point could be left out to check the coverage")
    return {c: hits[c] / total for c in confidences}, {c: widths[c] / total for c in confidences}


def spread_coverage(
    data: Measurements, spread: SpreadModel, confidences: Sequence[float] = CONFIDENCES
) -> dict[float, float]:
    """Leave-one-point-out coverage of the central intervals of ``spread`` as it stands (its
    calibration, if any, is the one fitted on every point: for the honest figure of a
    calibrated model see :func:`nested_coverage`)."""
    hits = dict.fromkeys(confidences, 0)
    total = 0
    for fold in folds(data.n_points):
        loo = _refit(data, spread, fold)
        if loo is None:
            continue
        loo = replace(loo, calibration=spread.calibration)
        for k in fold:
            point = _point(data, k)
            for c in confidences:
                lo, hi = loo.interval(point, c)
                hits[c] += int(np.sum((data.values[k] >= lo) & (data.values[k] <= hi)))
            total += data.values[k].size
    if total == 0:
        raise TooFewPointsError("no point could be left out to check the coverage")
    return {c: hits[c] / total for c in confidences}
