"""The one call the service and the replay make: :func:`forecast_series`."""

from __future__ import annotations

import math
from collections.abc import Hashable, MutableMapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from forecaster.analog import CPU_ANALOG, AnalogOptions, analog_horizon, widened
from forecaster.batch import next_step
from forecaster.config import DEFAULT_CONFIG, ForecasterConfig
from forecaster.distribution import Distribution, FitOptions, clip, fit_distribution
from forecaster.fleet import FleetSource, with_fleet
from forecaster.history import FloatArray, series_before
from forecaster.horizon import DEFAULT_LOOKBACK_S, horizon_distribution, sample_spacing
from forecaster.online import OneStep, SeriesForecaster


class InsufficientData(ValueError):
    """Too few samples before ``now`` to forecast; the service answers 409 rather than invent."""

    def __init__(self, n: int, minimum: int) -> None:
        self.n = n
        self.minimum = minimum
        super().__init__(f"{n} samples before the forecast time; at least {minimum} are needed")


@dataclass(frozen=True)
class SeriesForecast:
    """One-step forecast, horizon distribution and the quality of information behind them.

    ``value``/``lower``/``upper``: the winning predictor's forecast of the next sample and its
    interval from the winner's recent residuals. ``distribution``: the average over ``horizon_s``
    (one sample's spacing when no horizon was asked); ``mean``, ``std``, ``interval`` are its
    summary. Everything is clipped to ``bounds`` when given (components are left as fitted).
    The distribution's ``support`` (independent analogues behind a horizon forecast) and
    ``fallback`` (``"blend"``/``"unconditional"`` when they were too few) and ``fleet`` (other
    hosts' outcomes a settled-high host's fallback borrowed, :mod:`forecaster.fleet`) are part
    of the forecast's quality of information, as ``n``, ``mse`` and ``age_s`` are.
    """

    value: float
    lower: float
    upper: float
    confidence: float
    predictor: str
    mse: float
    mae: float
    n: int
    age_s: float
    last_timestamp: float
    now: float
    horizon_s: float
    distribution: Distribution
    mean: float
    std: float
    interval: tuple[float, float]

    @property
    def multimode(self) -> bool:
        return self.distribution.multimode

    def to_dict(self) -> dict[str, object]:
        """JSON-ready view in docs/architecture.md's vocabulary."""
        return {
            "value": self.value,
            "value_interval": [self.lower, self.upper],
            "mean": self.mean,
            "std": self.std,
            "interval": list(self.interval),
            "confidence": self.confidence,
            "kind": self.distribution.kind,
            "distribution": self.distribution.to_dict(),
            "multimode": self.multimode,
            "predictor": self.predictor,
            "mse": _finite_or_none(self.mse),
            "mae": _finite_or_none(self.mae),
            "n": self.n,
            "age_s": self.age_s,
            "last_timestamp": self.last_timestamp,
            "horizon_s": self.horizon_s,
            "support": self.distribution.support,
            "fallback": self.distribution.fallback,
            "fleet": self.distribution.fleet,
        }


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def forecast_series(
    timestamps: Sequence[float] | FloatArray,
    values: Sequence[float] | FloatArray,
    *,
    now: float | None = None,
    horizon_s: float | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
    config: ForecasterConfig | None = None,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    fit_options: FitOptions | None = None,
    state: SeriesForecaster | None = None,
    fit_cache: MutableMapping[Hashable, Distribution] | None = None,
    analog: AnalogOptions | None = CPU_ANALOG,
    fleet: FleetSource | None = None,
) -> SeriesForecast:
    """Forecast a series as of ``now`` (default: just after its newest sample).

    Uses only samples with timestamp < ``now``. Raises :class:`InsufficientData` with fewer than
    ``config.min_samples`` (default 5) of them: below that the battery's errors, the interval and
    the distribution would all rest on one or two residuals.
    """
    cfg = config or DEFAULT_CONFIG
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    ts, xs = series_before(timestamps, values, now)
    if xs.size < cfg.min_samples:
        raise InsufficientData(int(xs.size), cfg.min_samples)
    last = float(ts[-1])
    at = last if now is None else float(now)
    step = _one_step(
        xs, cfg, confidence, state if state is not None and state.last_timestamp == last else None
    )
    spacing = sample_spacing(ts)
    horizon = spacing if horizon_s is None else float(horizon_s)
    key = (xs.size, last, horizon, now, lookback_s, fit_options, analog)
    dist = fit_cache.get(key) if fit_cache is not None else None
    if dist is None:
        dist = series_distribution(
            ts,
            xs,
            now=now,
            horizon_s=horizon,
            lookback_s=lookback_s,
            fit_options=fit_options,
            analog=analog,
            fleet=fleet,
        )
        if fit_cache is not None:
            fit_cache[key] = dist
    return SeriesForecast(
        value=clip(step.value, bounds),
        lower=clip(step.lower, bounds),
        upper=clip(step.upper, bounds),
        confidence=confidence,
        predictor=step.predictor,
        mse=step.mse,
        mae=step.mae,
        n=int(xs.size),
        age_s=max(0.0, at - last),
        last_timestamp=last,
        now=at,
        horizon_s=horizon,
        distribution=dist,
        mean=clip(dist.mean, bounds),
        std=dist.std,
        interval=dist.interval(confidence, bounds),
    )


def _one_step(
    xs: FloatArray, cfg: ForecasterConfig, confidence: float, state: SeriesForecaster | None
) -> OneStep:
    """The winner's next-value forecast: from live online state if given, else a batch replay."""
    if state is not None:
        return state.forecast(confidence)
    return next_step(xs, cfg, confidence)


def series_distribution(
    ts: FloatArray,
    xs: FloatArray,
    *,
    now: float | None,
    horizon_s: float | None,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    fit_options: FitOptions | None = None,
    analog: AnalogOptions | None = CPU_ANALOG,
    fleet: FleetSource | None = None,
) -> Distribution:
    """What the series will deliver: one sample's distribution (recent values, normal or
    mixture) up to one sample spacing; beyond, the average over ``horizon_s`` conditioned on
    the present by analogues (:mod:`forecaster.analog`), or unconditional block means when
    ``analog`` is None or the history is too short. Only samples before ``now`` count.
    ``fleet``: the other hosts, asked for only when a settled-high host's forecast falls back
    (:mod:`forecaster.fleet`).

    ``ts``/``xs`` must be sorted, finite and unique (as :func:`forecast_series` prepares them).
    """
    spacing = sample_spacing(ts)
    last = float(ts[-1])
    at = last if now is None else float(now)
    if horizon_s is None or horizon_s <= spacing:
        recent = xs[ts >= at - lookback_s]
        return fit_distribution(recent if recent.size else xs[-1:], fit_options)
    # "now" is exclusive; as of the newest sample means just after it.
    end = float(np.nextafter(last, math.inf)) if now is None else at
    if analog is not None:
        dist = analog_horizon(ts, xs, end, horizon_s, analog)
        if dist is not None:
            return (
                dist if fleet is None else with_fleet(dist, ts, xs, end, horizon_s, fleet, analog)
            )
    dist = horizon_distribution(ts, xs, horizon_s, end, lookback_s=lookback_s, options=fit_options)
    if analog is None or analog.min_support <= 0:
        return replace(dist, support=0, fallback="unconditional")
    # Analogues were asked for but no window of the horizon is complete: the recent values
    # say what the host did, not what it does over a whole horizon. Their distribution (of
    # single samples, wider than a window's mean would be) is widened as a new draw from
    # that many samples (Student-t: 1.42x for six); one window's factor (7.9x) made a new
    # sensor's few samples a forecast so wide that the planner starved or favoured the host
    # at random.
    seen = xs[ts >= end - analog.lookback_s]
    dist = widened(dist, dist.n, (float(seen.min()), float(seen.max())), analog)
    return dist if fleet is None else with_fleet(dist, ts, xs, end, horizon_s, fleet, analog)
