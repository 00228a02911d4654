"""Per-series forecaster state, shared by every endpoint of one worker.

Each worker keeps, for the series it has been asked about, the recent history and the NWS
battery's online state, and catches up from the store with one small query (rows after the
newest it holds) when its copy is older than `fresh_s` or this worker just stored new rows.
The online state makes a new sample cost one incremental update instead of a replay; fitted
distributions are cached per (data, horizon), and horizons are snapped to the forecaster's
5 % grid (as replay does) so the horizon loop of many requests lands on the same fits.
Results are memoised per series on (horizon, confidence) until the series gains a sample, so
repeated schedules over the same hosts cost dictionary look-ups; a new sample drops every memo of
its series at once (they all describe data that is no longer the newest). The worker keeps at most
`max_series` series (least recently used go first, read again from the store when next asked),
so its memory is bounded by that count and the history limit, whatever the traffic.
Forecasts `at` a past time are computed from the store, from rows strictly before it.
Other figures computed from a series' history (the dashboard's calibration of its past horizon
forecasts) are memoised the same way, per series version (:meth:`ForecastCache.derived`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
from cachetools import LRUCache, TTLCache
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
from forecaster.fleet import FLEET, FleetSource, HostWindows
from ppe.core.stochastic import StochasticValue, from_components
from ppe.service.store.measurements import (
    host_series_latest,
    latest_timestamps,
    read_many,
    read_series,
    window_versions,
)

#: How long a worker reuses the measured dependence between hosts (see co_movement).
DEPENDENCE_TTL_S = 600.0
#: Memoised (horizon, confidence) answers per series before they are dropped wholesale: horizons
#: snap to a 5 % grid, so a series is rarely asked for more than a few dozen.
MAX_MEMOS_PER_SERIES = 128
#: Derived figures (:meth:`ForecastCache.derived`) kept per series, dropped wholesale beyond.
MAX_DERIVED_PER_SERIES = 8
#: How long a worker reuses the other hosts' histories as the fleet prior reads them
#: (forecaster.fleet): their windows end on a 3-hour grid, so minutes of staleness change nothing.
FLEET_TTL_S = 300.0
#: How much of each other host the fleet prior reads: its starts' look-back and the history
#: before each start that says whether the host was settled high there.
FLEET_SPAN_S = FLEET.lookback_s + FLEET.settled_window_s
#: Fleet tables as of a past time a worker keeps besides the live one (each holds every CPU
#: host's rows over its span, three arrays of 8 bytes a row: 59 hosts of three weeks are 8.5
#: MB, a dashboard card's span up to the history limit more): an evaluation asks several
#: horizons at one time, then moves on; a calibration card reads one as of its newest sample.
FLEET_TABLES = 3
CPU_BOUNDS = (0.0, 1.0)
NONNEGATIVE = (0.0, float("inf"))


def bounds_for(metric: str) -> tuple[float, float]:
    return CPU_BOUNDS if metric == "cpu" else NONNEGATIVE


def analog_for(metric: str) -> AnalogOptions:
    """CPU availability lives in [0, 1]; link figures need a kernel floor relative to the mean."""
    return CPU_ANALOG if metric == "cpu" else BANDWIDTH_ANALOG


_T = TypeVar("_T")

#: A memoised forecast and, once asked for, its model input and that input's JSON.
_Memo = tuple[SeriesForecast, tuple[StochasticValue, dict[str, Any]] | None]


@dataclass
class _History:
    """One series as this worker holds it: recent samples, the battery's online state, and
    everything memoised on exactly these samples (dropped whenever a sample arrives)."""

    timestamps: np.ndarray = field(default_factory=lambda: np.empty(0))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    online: SeriesForecaster | None = None
    fits: dict[Hashable, Distribution] = field(default_factory=dict)
    memos: dict[tuple[float | None, float], _Memo] = field(default_factory=dict)
    derived: dict[Hashable, Any] = field(default_factory=dict)
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
        self.fits.clear()  # keyed on the old (size, newest): none can be hit again
        self.memos.clear()
        self.derived.clear()

    def remember(self, key: tuple[float | None, float], memo: _Memo) -> None:
        if len(self.memos) >= MAX_MEMOS_PER_SERIES:
            self.memos.clear()
        self.memos[key] = memo


def within(
    ts: list[float], vals: list[float], window_s: float | None
) -> tuple[list[float], list[float]]:
    """The samples no older than ``window_s`` before the newest: retention downsamples rows
    past its raw window, and coarser rows would skew the forecaster's sample spacing."""
    if window_s is None or not ts or ts[0] >= ts[-1] - window_s:
        return ts, vals
    start = int(np.searchsorted(ts, ts[-1] - window_s))
    return ts[start:], vals[start:]


@dataclass(frozen=True)
class CacheStats:
    """What a worker holds (for /metrics and for tests of its bounds)."""

    series: int
    samples: int
    memos: int
    fits: int


class ForecastCache:
    def __init__(
        self,
        engine: Engine,
        history_limit: int = 20_000,
        fresh_s: float = 1.0,
        window_s: float | None = None,
        max_series: int = 2048,
    ) -> None:
        self.engine = engine
        self.history_limit = history_limit
        self.window_s = window_s
        self.fresh_s = fresh_s
        self._histories: LRUCache[int, _History] = LRUCache(max_series)
        self._lock = threading.Lock()
        self._dependence: TTLCache[tuple[Any, ...], np.ndarray] = TTLCache(
            maxsize=256, ttl=DEPENDENCE_TTL_S
        )
        self._fleet_live: TTLCache[float, dict[int, HostWindows]] = TTLCache(
            maxsize=1, ttl=FLEET_TTL_S
        )
        self._fleet: TTLCache[Hashable, dict[int, HostWindows]] = TTLCache(
            maxsize=FLEET_TABLES, ttl=FLEET_TTL_S
        )
        self._fleet_lock = threading.Lock()

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

    def stats(self) -> CacheStats:
        with self._lock:
            held = list(self._histories.values())
        return CacheStats(
            series=len(held),
            samples=sum(int(h.timestamps.size) for h in held),
            memos=sum(len(h.memos) for h in held),
            fits=sum(len(h.fits) for h in held),
        )

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

        Every forecast of a live series, at any horizon, is a function of these and of the
        fleet a settled-high host borrows from, which a worker refreshes every
        ``FLEET_TTL_S`` (its windows end on a 3-hour grid): a plan over the same versions is
        the same plan (the service memoises plans on them). Call
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

    def derived(
        self, series_id: int, key: Hashable, compute: Callable[[np.ndarray, np.ndarray], _T]
    ) -> _T:
        """``compute(timestamps, values)`` of the series' history as this worker holds it,
        memoised under ``key`` until the series gains a sample. Computed outside the series'
        lock (it may take a second), so forecasts of the series are not held up meanwhile."""
        h = self._fresh(series_id)
        with h.lock:
            if key in h.derived:
                hit: _T = h.derived[key]
                return hit
            ts, vals = h.timestamps, h.values
        out = compute(ts, vals)
        with h.lock:
            if h.timestamps is ts:  # else the series moved on meanwhile: do not keep it
                if len(h.derived) >= MAX_DERIVED_PER_SERIES:
                    h.derived.clear()
                h.derived[key] = out
        return out

    def history_before(self, series_id: int, at: float) -> tuple[np.ndarray, np.ndarray]:
        """History strictly before `at`, read from the store (evaluations as of a past time)."""
        ts, vals = read_series(self.engine, series_id, before=at, limit=self.history_limit)
        ts, vals = within(ts, vals, self.window_s)
        return np.asarray(ts, dtype=float), np.asarray(vals, dtype=float)

    def fleet(
        self, series_id: int, metric: str, at: float | None = None, span_s: float = FLEET_SPAN_S
    ) -> FleetSource | None:
        """The other CPU hosts as the fleet prior reads them (``forecaster.fleet``), built when
        a forecast first asks (only a settled-high host's fallback does) and shared for
        ``FLEET_TTL_S``; as of ``at`` (rows strictly before it) for a forecast at a past time.
        ``span_s``: how much of each host, back from the newest sample (or ``at``); forecasts
        at many past times (the dashboard's calibration) need more than one forecast's.
        Read from the store (the hosts, then all their rows in one query), never through
        another series' lock: a forecast holds its own series' lock while it asks."""
        if metric != "cpu":
            return None

        def others() -> list[HostWindows]:
            hosts = self._fleet_windows(at, span_s)
            return [w for sid, w in hosts.items() if sid != series_id]

        return others

    def _fleet_windows(self, at: float | None, span_s: float) -> dict[int, HostWindows]:
        """Live: shared for ``FLEET_TTL_S`` (sensors post all the time; the windows the prior
        reads end on a 3-hour grid). As of ``at``: exact, keyed on what the store holds in
        the span before ``at`` (rows posted after it leave the key alone)."""
        with self._fleet_lock:
            if at is None and (hit := self._fleet_live.get(span_s)) is not None:
                return hit
            hosts = host_series_latest(self.engine, "cpu")
            ids = list(hosts)
            if at is None:
                newest = max(hosts.values(), default=0.0)
                key: Hashable = None
            else:
                newest = at
                key = (at, span_s, window_versions(self.engine, ids, since=at - span_s, before=at))
                if (hit := self._fleet.get(key)) is not None:
                    return hit
            rows = read_many(self.engine, ids, since=newest - span_s, before=at)
            out = {}
            for sid, (ts, vals) in rows.items():
                ts, vals = within(ts, vals, self.window_s)
                out[sid] = HostWindows.of(np.asarray(ts), np.asarray(vals), CPU_BOUNDS)
            if key is None:
                self._fleet_live[span_s] = out
            else:
                self._fleet[key] = out
            return out

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
        if at is not None:
            return self._forecast_at(series_id, metric, horizon_s, confidence, at)
        fc = self._live(series_id, metric, horizon_s, confidence)[2][0]
        return with_age(fc, time.time())

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
        if at is not None:
            fc = self._forecast_at(series_id, metric, horizon_s, confidence, at)
            return (fc, *_model_input(fc))
        h, key, (fc, made) = self._live(series_id, metric, horizon_s, confidence)
        if made is None:
            made = _model_input(fc)
            with h.lock:
                current = h.memos.get(key)
                if current is not None and current[0] is fc:  # else the series moved on
                    h.memos[key] = (fc, made)
        return fc, made[0], made[1]

    def _forecast_at(
        self, series_id: int, metric: str, horizon_s: float | None, confidence: float, at: float
    ) -> SeriesForecast:
        ts, vals = self.history_before(series_id, at)
        return forecast_series(
            ts,
            vals,
            now=at,
            horizon_s=snap_horizon(horizon_s),
            confidence=confidence,
            bounds=bounds_for(metric),
            analog=analog_for(metric),
            fleet=self.fleet(series_id, metric, at),
        )

    def _live(
        self, series_id: int, metric: str, horizon_s: float | None, confidence: float
    ) -> tuple[_History, tuple[float | None, float], _Memo]:
        """The forecast from this worker's copy of the series, memoised until it changes."""
        key = (snap_horizon(horizon_s), confidence)
        h = self._fresh(series_id)
        with h.lock:
            memo = h.memos.get(key)
            if memo is None:
                fc = forecast_series(
                    h.timestamps,
                    h.values,
                    horizon_s=key[0],
                    confidence=confidence,
                    bounds=bounds_for(metric),
                    state=h.online,
                    fit_cache=h.fits,
                    analog=analog_for(metric),
                    fleet=self.fleet(series_id, metric),
                )
                memo = (fc, None)
                h.remember(key, memo)
        return h, key, memo


def _model_input(fc: SeriesForecast) -> tuple[StochasticValue, dict[str, Any]]:
    """The forecast's distribution as a model input, and that input's JSON (its interval the
    one ``GET /forecasts`` answers: the shortest, of the value censored to the metric's range)."""
    value = from_components(fc.distribution.kind, fc.distribution.components)
    return value, {**value.to_dict(fc.confidence), "interval": list(fc.interval)}


def age_at(fc: SeriesForecast, now: float | None) -> float:
    """Seconds from the forecast's newest sample to ``now`` (wall clock), so stale sensors
    show; ``None``: its age as computed (forecasts as of a past ``at``)."""
    return fc.age_s if now is None else max(0.0, now - fc.last_timestamp)


def with_age(fc: SeriesForecast, now: float) -> SeriesForecast:
    """The forecast with its age measured at ``now``."""
    return replace(fc, age_s=age_at(fc, now))


__all__ = ["CacheStats", "ForecastCache", "InsufficientData", "age_at", "bounds_for", "with_age"]
