"""Per-series forecaster state, shared by every endpoint of one worker.

Each worker keeps, for the series it has been asked about, the recent history and the NWS
battery's online state, and catches up from the store with one small query (rows after the
newest it holds) when its copy is older than `fresh_s` or this worker just stored new rows.
The online state makes a new sample cost one incremental update instead of a replay; fitted
distributions are cached per (data, horizon), and horizons are snapped to the forecaster's
5 % grid (as replay does) so the horizon loop of many requests lands on the same fits.
Results are memoised on (series, newest sample, sample count, horizon, confidence), so repeated
schedules over the same hosts cost dictionary look-ups; any new measurement changes the key.
Forecasts `at` a past time are computed from the store, from rows strictly before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from cachetools import TTLCache
from sqlalchemy import Engine

from forecaster import (
    BANDWIDTH_ANALOG,
    CPU_ANALOG,
    AnalogOptions,
    Distribution,
    InsufficientData,
    SeriesForecast,
    SeriesForecaster,
    co_movement,
    forecast_series,
    snap_dependence_horizon,
    snap_horizon,
)
from ppe.core.stochastic import StochasticValue, from_components
from ppe.service.store.measurements import latest_timestamps, read_series

#: How long a worker reuses the measured dependence between hosts (see co_movement).
DEPENDENCE_TTL_S = 600.0
CPU_BOUNDS = (0.0, 1.0)
NONNEGATIVE = (0.0, float("inf"))


def bounds_for(metric: str) -> tuple[float, float]:
    return CPU_BOUNDS if metric == "cpu" else NONNEGATIVE


def analog_for(metric: str) -> AnalogOptions:
    """CPU availability lives in [0, 1]; link figures need a kernel floor relative to the mean."""
    return CPU_ANALOG if metric == "cpu" else BANDWIDTH_ANALOG


@dataclass
class _History:
    timestamps: np.ndarray = field(default_factory=lambda: np.empty(0))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    online: SeriesForecaster | None = None
    fits: dict[Hashable, Distribution] = field(default_factory=dict)
    checked_at: float = 0.0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def extend(self, ts: list[float], vals: list[float], limit: int) -> None:
        if self.online is None:
            self.online = SeriesForecaster.from_history(ts, vals)
        else:
            for t, v in zip(ts, vals, strict=True):
                self.online.update(t, v)
        self.timestamps = np.concatenate([self.timestamps, ts])[-limit:]
        self.values = np.concatenate([self.values, vals])[-limit:]
        if len(self.fits) > 256:
            self.fits.clear()


def within(
    ts: list[float], vals: list[float], window_s: float | None
) -> tuple[list[float], list[float]]:
    """The samples no older than ``window_s`` before the newest: retention downsamples rows
    past its raw window, and coarser rows would skew the forecaster's sample spacing."""
    if window_s is None or not ts or ts[0] >= ts[-1] - window_s:
        return ts, vals
    start = int(np.searchsorted(ts, ts[-1] - window_s))
    return ts[start:], vals[start:]


class ForecastCache:
    def __init__(
        self,
        engine: Engine,
        history_limit: int = 20_000,
        fresh_s: float = 1.0,
        window_s: float | None = None,
    ) -> None:
        self.engine = engine
        self.history_limit = history_limit
        self.window_s = window_s
        self.fresh_s = fresh_s
        self._histories: dict[int, _History] = {}
        self._results: dict[tuple[Any, ...], SeriesForecast] = {}
        self._inputs: dict[tuple[Any, ...], tuple[StochasticValue, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._dependence: TTLCache[tuple[Any, ...], np.ndarray] = TTLCache(
            maxsize=256, ttl=DEPENDENCE_TTL_S
        )

    def co_movement(
        self, series_ids: list[int], horizon_s: float | None, at: float | None = None
    ) -> np.ndarray:
        """How these CPU series move together over ``horizon_s`` (``forecaster.co_movement``).

        A property of two weeks of history, so live answers are kept for
        ``DEPENDENCE_TTL_S`` per (series, horizon bucket) rather than recomputed
        for every new sample: 64 hosts cost ~50 ms, a memoised plan 4 ms.
        """
        bucket = snap_dependence_horizon(horizon_s)
        if at is not None:
            series = [self.history_before(sid, at) for sid in series_ids]
            return co_movement(series, at, bucket, lookback_s=CPU_ANALOG.lookback_s)
        key = (tuple(series_ids), bucket)
        with self._lock:
            hit = self._dependence.get(key)
        if hit is not None:
            return hit
        series = [self.history(sid) for sid in series_ids]
        now = max((float(ts[-1]) for ts, _ in series if ts.size), default=time.time()) + 1e-3
        out = co_movement(series, now, bucket, lookback_s=CPU_ANALOG.lookback_s)
        with self._lock:
            self._dependence[key] = out
        return out

    def invalidate(self, series_ids: set[int] | None = None) -> None:
        """Called after this worker stored new rows so its next read catches up at once."""
        with self._lock:
            targets = (
                self._histories.values()
                if series_ids is None
                else [self._histories[s] for s in series_ids if s in self._histories]
            )
            for h in targets:
                h.checked_at = 0.0

    def refresh(self, series_ids: list[int]) -> None:
        """One grouped query for many series: those with nothing new are marked fresh, so a
        64-host plan does not pay 64 catch-up reads every `fresh_s`."""
        now = time.monotonic()
        with self._lock:
            stale = {
                sid: h
                for sid in series_ids
                if (h := self._histories.get(sid)) is not None
                and h.timestamps.size
                and now - h.checked_at >= self.fresh_s
            }
        if not stale:
            return
        newest = latest_timestamps(self.engine, list(stale))
        for sid, h in stale.items():
            with h.lock:
                if newest.get(sid) == float(h.timestamps[-1]):
                    h.checked_at = now

    def versions(self, series_ids: list[int]) -> tuple[tuple[int, int, float | None], ...]:
        """(series, sample count, newest timestamp) of each series, caught up with the store.

        Every forecast of a live series, at any horizon, is a function of these: a plan over
        the same versions is the same plan (the service memoises plans on them). Call
        :meth:`refresh` for the same series first: it checks them all in one query.
        """
        out = []
        for sid in series_ids:
            h = self._fresh(sid)
            with h.lock:
                size = int(h.timestamps.size)
                out.append((sid, size, float(h.timestamps[-1]) if size else None))
        return tuple(out)

    def _fresh(self, series_id: int) -> _History:
        """The series' state, caught up with the store (call with no lock held)."""
        with self._lock:
            h = self._histories.setdefault(series_id, _History())
        with h.lock:
            now = time.monotonic()
            if now - h.checked_at >= self.fresh_s:
                after = float(h.timestamps[-1]) if h.timestamps.size else None
                ts, vals = read_series(
                    self.engine, series_id, after=after, limit=self.history_limit
                )
                if after is None:
                    ts, vals = within(ts, vals, self.window_s)
                if ts:
                    h.extend(ts, vals, self.history_limit)
                h.checked_at = now
        return h

    def history(self, series_id: int) -> tuple[np.ndarray, np.ndarray]:
        h = self._fresh(series_id)
        with h.lock:
            return h.timestamps, h.values

    def history_before(self, series_id: int, at: float) -> tuple[np.ndarray, np.ndarray]:
        """History strictly before `at`, read from the store (evaluations as of a past time)."""
        ts, vals = read_series(self.engine, series_id, before=at, limit=self.history_limit)
        ts, vals = within(ts, vals, self.window_s)
        return np.asarray(ts, dtype=float), np.asarray(vals, dtype=float)

    def forecast(
        self,
        series_id: int,
        metric: str,
        *,
        horizon_s: float | None = None,
        confidence: float = 0.95,
        at: float | None = None,
    ) -> SeriesForecast:
        """Raises forecaster.InsufficientData when the series is too short to say anything.

        `age_s` of a live forecast is measured against the wall clock, so stale sensors show.
        """
        fc = self._forecast(series_id, metric, horizon_s, confidence, at)[1]
        return fc if at is not None else with_age(fc, time.time())

    def forecast_input(
        self,
        series_id: int,
        metric: str,
        *,
        horizon_s: float | None = None,
        confidence: float = 0.95,
        at: float | None = None,
    ) -> tuple[SeriesForecast, StochasticValue, dict[str, Any]]:
        """The forecast, its distribution as a model input, and that input's JSON form —
        memoised with the forecast, since a 64-host plan asks for them every round.

        The forecast's `age_s` is as of when it was computed: callers that report it take it
        from `last_timestamp` (:func:`with_age`)."""
        key, fc = self._forecast(series_id, metric, horizon_s, confidence, at)
        hit = self._inputs.get(key) if key is not None else None
        if hit is None:
            value = from_components(fc.distribution.kind, fc.distribution.components)
            hit = (value, value.to_dict(confidence))
            if key is not None:
                with self._lock:
                    if len(self._inputs) > 50_000:
                        self._inputs.clear()
                    self._inputs[key] = hit
        return fc, hit[0], hit[1]

    def _forecast(
        self,
        series_id: int,
        metric: str,
        horizon_s: float | None,
        confidence: float,
        at: float | None,
    ) -> tuple[tuple[Any, ...] | None, SeriesForecast]:
        horizon_s = snap_horizon(horizon_s)
        if at is not None:
            ts, vals = self.history_before(series_id, at)
            return None, forecast_series(
                ts,
                vals,
                now=at,
                horizon_s=horizon_s,
                confidence=confidence,
                bounds=bounds_for(metric),
                analog=analog_for(metric),
            )
        h = self._fresh(series_id)
        with h.lock:
            ts, vals = h.timestamps, h.values
            newest = float(ts[-1]) if ts.size else None
            key = (series_id, ts.size, newest, horizon_s, confidence)
            with self._lock:
                result = self._results.get(key)
            if result is None:
                result = forecast_series(
                    ts,
                    vals,
                    horizon_s=horizon_s,
                    confidence=confidence,
                    bounds=bounds_for(metric),
                    state=h.online,
                    fit_cache=h.fits,
                    analog=analog_for(metric),
                )
                with self._lock:
                    if len(self._results) > 50_000:
                        self._results.clear()
                    self._results[key] = result
        return key, result


def age_at(fc: SeriesForecast, now: float | None) -> float:
    """Seconds from the forecast's newest sample to ``now`` (wall clock), so stale sensors
    show; ``None``: its age as computed (forecasts as of a past ``at``)."""
    return fc.age_s if now is None else max(0.0, now - fc.last_timestamp)


def with_age(fc: SeriesForecast, now: float) -> SeriesForecast:
    """The forecast with its age measured at ``now``."""
    return replace(fc, age_s=age_at(fc, now))


__all__ = ["ForecastCache", "InsufficientData", "age_at", "bounds_for", "with_age"]
