"""Fitting one series of runs and reporting the fit, for ``ppe model fit`` and the API.

A *series* is the runs of one application's kernel, one metric, on one system: what a
model describes.  :func:`select_series` picks it out of a file's or the store's runs (and
says which choice is missing when several series remain); :func:`series_measurements`
turns it into :class:`~.data.Measurements`, holding fixed the parameters that take one
value in every run (a model says nothing about them, so a prediction must keep them at that
value); :func:`fit_series` fits the requested type.  :meth:`Fit.report` is the one JSON
document both ``ppe model fit --json`` and ``POST /api/v1/models/empirical`` answer.
Only completed runs count: a failed run's time says nothing about the kernel's cost.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppe.core.stochastic import StochasticValue

from .crossval import loo_residuals
from .data import Measurements
from .errors import EmpiricalError, NonFiniteValueError, SingleValueError
from .model import EmpiricalModel, default_noise, fit_weights
from .prophecy import PROPHECY_TYPES, fit_graph_type, one_parameter
from .runs import RunRecord
from .search import relative_losses, search
from .spread import SpreadModel, fit_spread
from .suggest import suggest_next

SEARCH = "search"
#: What ``type`` may ask for: the normal-form search, Prophecy's 12 graph types and "unknown".
FIT_TYPES: tuple[str, ...] = (SEARCH, *PROPHECY_TYPES)
#: Predictions are 95 % intervals of a new run.
CONFIDENCE = 0.95
#: The series' fields, in the order a choice among several series is asked for.
SERIES_FIELDS = ("app", "kernel", "metric", "system")
#: Choices listed at most in one message.
MAX_LISTED = 10


class NoRunsError(EmpiricalError):
    """No completed run matches the application, kernel, metric and system asked for."""

    kind = "no_runs"


class AmbiguousSeriesError(EmpiricalError):
    """The runs hold several series; ``name`` is the field (kernel, metric...) to choose."""

    kind = "ambiguous"


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What a model describes: an application's kernel, a metric, a system (None: unnamed)."""

    app: str
    kernel: str
    metric: str
    system: str | None

    def label(self) -> str:
        where = f" on {self.system}" if self.system else ""
        return f"{self.app}/{self.kernel} ({self.metric}{where})"

    def to_dict(self) -> dict[str, str | None]:
        return {
            "app": self.app,
            "kernel": self.kernel,
            "metric": self.metric,
            "system": self.system,
        }


def key_of(record: RunRecord) -> SeriesKey:
    return SeriesKey(record.app, record.kernel, record.metric, record.system)


def select_series(
    records: Sequence[RunRecord], **wanted: str | None
) -> tuple[SeriesKey, list[RunRecord]]:
    """The completed runs of the one series matching ``wanted`` (fields of :class:`SeriesKey`;
    None or absent: any).  Raises :class:`NoRunsError` or :class:`AmbiguousSeriesError`."""
    unknown = set(wanted) - set(SERIES_FIELDS)
    if unknown:
        raise ValueError(f"unknown series fields {sorted(unknown)}")
    given = {k: v for k, v in wanted.items() if v is not None}
    completed = [r for r in records if r.status == "completed"]
    matching = [r for r in completed if all(getattr(r, k) == v for k, v in given.items())]
    if not matching:
        asked = ", ".join(f"{k} {v!r}" for k, v in given.items()) or "any series"
        held = sorted({key_of(r).label() for r in completed})
        have = f"; the runs hold {_listed(held)}" if held else "; there are no completed runs"
        raise NoRunsError(
            f"no completed runs of {asked}{have}", name=_first_unmatched(completed, given)
        )
    keys = sorted({key_of(r) for r in matching}, key=lambda k: k.label())
    if len(keys) > 1:
        for field in SERIES_FIELDS:
            values = sorted({str(getattr(k, field)) for k in keys})
            if len(values) > 1:
                raise AmbiguousSeriesError(
                    f"the runs hold {len(values)} {field}s ({_listed(values)}); name one",
                    name=field,
                )
    return keys[0], matching


def _first_unmatched(records: Sequence[RunRecord], given: Mapping[str, str]) -> str:
    """The first field (app, kernel, metric, system) after which no run is left."""
    left = list(records)
    for field in SERIES_FIELDS:
        if field in given:
            left = [r for r in left if getattr(r, field) == given[field]]
            if not left:
                return field
    return "app"


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else "")


def series_measurements(records: Sequence[RunRecord]) -> tuple[Measurements, dict[str, float]]:
    """The runs' repetitions by point over the parameters that vary, and those held fixed.

    Every run of a series must name the same parameters.  A parameter with one value in
    every run is held fixed (it cannot be modelled); if every parameter is, nothing varies.
    """
    names = sorted({p for r in records for p in r.params})
    if not names:
        raise EmpiricalError("the runs name no parameters: a model needs one that varies")
    for r in records:
        missing = [p for p in names if p not in r.params]
        if missing:
            raise EmpiricalError(
                f"a run at {_point_text(r.params)} lacks parameter {missing[0]!r}; "
                "every run of a series names the same parameters",
                name=missing[0],
            )
    for name in names:
        if not all(math.isfinite(float(r.params[name])) for r in records):
            raise NonFiniteValueError(f"parameter {name!r} has a NaN or infinite value", name=name)
    distinct = {p: {float(r.params[p]) for r in records} for p in names}
    fixed = {p: next(iter(v)) for p, v in distinct.items() if len(v) == 1}
    varying = [p for p in names if p not in fixed]
    if not varying:
        raise SingleValueError(
            f"every parameter takes a single value ({_point_text(fixed)}): "
            "a model needs runs at two values of a parameter or more",
            name=names[0],
        )
    runs = [(r.params, float(v)) for r in records for v in r.values]
    return Measurements.from_runs(varying, runs), fixed


def _point_text(point: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={float(v):g}" for k, v in point.items()) or "no parameters"


def fit_model(data: Measurements, kind: str = SEARCH, x: str | None = None) -> EmpiricalModel:
    """The model of type ``kind`` (see :data:`FIT_TYPES`), over ``x`` alone when given.

    Prophecy's types fit one parameter: ``x``, or the only one that varies.  The search fits
    every varying parameter, or ``x`` alone (the others must then be held fixed).
    """
    if kind not in FIT_TYPES:
        raise EmpiricalError(f"unknown model type {kind!r}; one of {', '.join(FIT_TYPES)}")
    if kind == SEARCH:
        return search(data if x is None else one_parameter(data, x))
    return fit_graph_type(data, kind, x)


def cv_error(model: EmpiricalModel, data: Measurements) -> float | None:
    """The model's mean leave-one-point-out error, relative to the measured mean.

    The search's own score when it has one; for Prophecy's types the same score of the
    fitted terms (all repetitions of a point leave together), so the types compare.
    """
    if model.cv_error is not None:
        return model.cv_error
    cols = {p: data.column(p) for p in model.params}
    columns = (
        np.column_stack([t.evaluate(cols) for t in model.terms])
        if model.terms
        else np.empty((data.n_points, 0))
    )
    hyps = np.arange(len(model.terms), dtype=np.intp)[None, :]
    loo, _ = loo_residuals(columns, data.means, fit_weights(data, model.noise), hyps)
    score = float(relative_losses(loo, data.means, default_noise(data)).mean())
    return score if math.isfinite(score) else None


@dataclass(frozen=True)
class Prediction:
    """A new run's mean and ``confidence`` interval at ``point`` (every parameter, fixed too).

    ``std`` and ``interval`` are None when the fit has no residual degrees of freedom.
    ``spread`` (when the fit has a spread model) is the calibrated interval of a run and the
    std of the normal ``empirical(...)`` reads there.
    """

    point: dict[str, float]
    mean: float
    std: float | None
    interval: tuple[float, float] | None
    confidence: float
    extrapolated: bool
    spread: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "point": self.point,
            "mean": self.mean,
            "std": self.std,
            "interval": None if self.interval is None else list(self.interval),
            "confidence": self.confidence,
            "extrapolated": self.extrapolated,
        }
        if self.spread is not None:
            out["spread"] = self.spread
        return out


@dataclass(frozen=True)
class Fit:
    """A fitted model of a series: the model, the parameters held fixed, the type asked for."""

    key: SeriesKey
    requested: str
    model: EmpiricalModel
    fixed: dict[str, float]
    #: The measurements fitted (None for a stored model): what :meth:`suggest` plans from.
    data: Measurements | None = dataclasses.field(default=None, compare=False, repr=False)
    #: The calibrated model of the runs' spread (:mod:`.spread`), when the runs have
    #: repetitions at 3 points or more: a run's distribution in :meth:`to_stochastic`.
    spread: SpreadModel | None = None
    #: Why there is no spread model (None when there is one).
    spread_note: str | None = None

    def to_stochastic(self, point: Mapping[str, float]) -> StochasticValue:
        """The run time at ``point`` as a PPE value (what ``empirical(...)`` in a performance
        model reads), checked as :meth:`predict` checks it.  A negative mean is refused: runs
        are never negative, so the model does not hold there (a negative high-order term
        outgrowing the others far beyond the runs), and an engine that clips the value at
        zero would serve a number the model never said.

        With a spread model, a run is the normal of its calibrated 95 % interval (mean from
        the mean model, scale from the std model): heteroscedastic, so ``conservative`` and
        quantile strategies see the spread the runs show at each size; without one, the mean
        model's run interval."""
        self.check_point(point)
        mean = float(self.model.predict_arrays([point], "mean")[0][0])
        if mean < 0.0:
            ranges = ", ".join(f"{p} {lo:g}..{hi:g}" for p, (lo, hi) in self.model.ranges.items())
            raise EmpiricalError(
                f"the fit of {self.key.label()} predicts a negative value ({mean:.4g}) at "
                f"{_point_text(point)}: runs are never negative, so the model does not hold "
                f"there (measured: {ranges}); measure nearer that point, or save another fit",
                name=next(iter(point), None),
            )
        if self.spread is not None:
            return self.spread.to_stochastic(point)
        return self.model.to_stochastic(point)

    def check_point(self, point: Mapping[str, float]) -> None:
        """A point names finite values, a fixed parameter only at its value, and nothing the
        model does not know."""
        for name, value in point.items():
            if not math.isfinite(float(value)):
                raise NonFiniteValueError(f"parameter {name!r} is {value}", name=name)
            if name in self.fixed and float(value) != self.fixed[name]:
                raise SingleValueError(
                    f"parameter {name!r} was {self.fixed[name]:g} in every run: the model "
                    f"cannot predict at {name}={float(value):g}",
                    name=name,
                )
            if name not in self.fixed and name not in self.model.params:
                known = [*self.model.params, *self.fixed]
                raise EmpiricalError(
                    f"the model has no parameter {name!r}; it knows {', '.join(known)}",
                    name=name,
                )

    def predict(self, point: Mapping[str, float], confidence: float = CONFIDENCE) -> Prediction:
        """The prediction at ``point``, which names every parameter the model varies and may
        name a fixed one only at its fixed value."""
        self.check_point(point)
        pred = self.model.predict(point, confidence)
        if not math.isfinite(pred.mean):
            raise EmpiricalError(
                f"the prediction at {_point_text(point)} overflows", name=next(iter(point), None)
            )
        finite = math.isfinite(pred.std) and all(math.isfinite(v) for v in pred.interval)
        extrapolated = any(
            not lo <= pred.point[p] <= hi for p, (lo, hi) in self.model.ranges.items()
        )
        spread = None
        if self.spread is not None:
            lo, hi = self.spread.interval(point, confidence)
            sd = self.spread.to_stochastic(point).sigma
            if all(math.isfinite(v) for v in (lo, hi, sd)):
                spread = {"interval": [lo, hi], "std": sd}
        return Prediction(
            point={**pred.point, **self.fixed},
            mean=pred.mean,
            std=pred.std if finite else None,
            interval=pred.interval if finite else None,
            confidence=confidence,
            extrapolated=extrapolated,
            spread=spread,
        )

    def suggest(
        self, budget: int, targets: Sequence[Mapping[str, float]], by_cost: bool = False
    ) -> list[dict[str, float]]:
        """The ``budget`` runs to measure next that most narrow the intervals at ``targets``
        (:func:`~.suggest.suggest_next`; per run, or with ``by_cost`` per unit of predicted
        time, which favours cheap small runs), each with the fixed parameters at their
        values, so it can be run as it stands."""
        if self.data is None:
            raise EmpiricalError("a stored model keeps no runs to plan from: fit the runs")
        if not targets:
            raise EmpiricalError("name at least one target point (the sizes you care about)")
        varying = []
        for point in targets:
            self.check_point(point)
            missing = [p for p in self.model.params if p not in point]
            if missing:
                raise EmpiricalError(f"a target names no {missing[0]!r}", name=missing[0])
            varying.append({p: float(point[p]) for p in self.model.params})
        picked = suggest_next(self.data, budget, varying, model=self.model, by_cost=by_cost)
        return [{**p, **self.fixed} for p in picked]

    def report(self, points: Sequence[Mapping[str, float]] = ()) -> dict[str, Any]:
        """The fit and a prediction at each of ``points`` (raises on the first bad point)."""
        m = self.model
        return {
            "model": m.formula,
            "type": m.kind,
            "requested_type": self.requested,
            "cv_error": m.cv_error,
            **self.key.to_dict(),
            "params": list(m.params),
            "fixed": dict(self.fixed),
            "ranges": {p: list(r) for p, r in m.ranges.items()},
            "coefficients": [
                {"term": str(t), "value": c}
                for t, c in zip(("1", *m.terms), m.coefficients, strict=True)
            ],
            "residual_norm": m.residual_norm,
            "noise": m.noise,
            "sigma": math.sqrt(m.sigma2),
            "dof": m.dof,
            "n_points": m.n_points,
            "n_obs": m.n_obs,
            "spread": self.spread_report(),
            "predictions": [self.predict(p).to_dict() for p in points],
        }

    def spread_report(self) -> dict[str, Any]:
        """Which distribution ``empirical(...)`` reads, and the stated coverage of its
        intervals (nested leave-one-point-out: see :func:`~.spread.nested_coverage`)."""
        if self.spread is None:
            return {"used": False, "model": None, "reason": self.spread_note}
        std = self.spread.std
        out: dict[str, Any] = {
            "used": True,
            "model": std.formula,
            "type": std.kind,
            "params": list(std.params),
            "ranges": {p: list(r) for p, r in std.ranges.items()},
            "misfit": self.spread.misfit,
        }
        cal = self.spread.calibration
        if cal is not None:
            out["calibration"] = cal.to_dict()
            out["coverage"] = out["calibration"]["coverage"]
            out["width"] = out["calibration"]["width"]
            out["scale"] = self.spread.scale()
        return out

    def stored(self) -> dict[str, Any]:
        """The fit's model as stored (``save_as``): the mean model's JSON, with the spread
        model's std model and calibration under ``"spread"`` when there is one."""
        out = self.model.to_dict()
        if self.spread is not None:
            out["spread"] = {k: v for k, v in self.spread.to_dict().items() if k != "mean"}
        return out


def fit_from_stored(
    key: SeriesKey, requested: str, model: Mapping[str, Any], fixed: Mapping[str, float]
) -> Fit:
    """A stored fit (see :meth:`Fit.stored`), ready to predict."""
    mean = EmpiricalModel.from_dict(model)
    spread_data = model.get("spread")
    spread = None
    if spread_data is not None:
        spread = SpreadModel.from_dict({**spread_data, "mean": model})
    note = None if spread else "the stored model has no spread model"
    return Fit(key, requested, mean, dict(fixed), spread=spread, spread_note=note)


def spread_of(data: Measurements, model: EmpiricalModel) -> tuple[SpreadModel | None, str | None]:
    """The calibrated spread model around ``model`` (fitted to ``data``), or None and why:
    it needs repetitions at 3 points or more, and at least 19 left-out runs to calibrate a
    95 % interval."""
    try:
        spread = fit_spread(data, mean=model)
    except EmpiricalError as exc:
        return None, f"no spread model: {exc}"
    if not math.isfinite(spread.scale()):
        cal = spread.calibration
        n = 0 if cal is None else cal.n
        return None, f"no spread model: {n} left-out runs cannot calibrate a 95 % interval (19+)"
    return spread, None


def fit_series(
    key: SeriesKey, records: Sequence[RunRecord], kind: str = SEARCH, x: str | None = None
) -> Fit:
    """Fit one series' runs (see :func:`select_series`)."""
    data, fixed = series_measurements(records)
    if x is not None and x in fixed:
        raise SingleValueError(
            f"parameter {x!r} is {fixed[x]:g} in every run: a curve over it needs two values",
            name=x,
        )
    model = fit_model(data, kind, x)
    if model.cv_error is None:
        model = dataclasses.replace(model, cv_error=cv_error(model, data))
    if kind == SEARCH:
        spread, note = spread_of(data if x is None else one_parameter(data, x), model)
    else:
        spread, note = None, f"the spread model comes with the search, not type {kind!r}"
    return Fit(key, kind, model, fixed, data, spread, note)
