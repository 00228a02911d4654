"""Per-series history cache that feeds the forecaster, shared by every endpoint of one worker.

Each worker keeps the recent history of the series it has been asked about and catches up from
the store with one small query (rows after the newest it holds) when its copy is older than
`fresh_s`. Forecast results are memoised on (series, newest sample, sample count, horizon,
confidence), so repeated schedules over the same hosts cost dictionary look-ups, and any new
measurement — from this worker or another — changes the key.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Engine

from forecaster import InsufficientData, SeriesForecast, forecast_series
from ppe.service.store.measurements import read_series

CPU_BOUNDS = (0.0, 1.0)
NONNEGATIVE = (0.0, float("inf"))


def bounds_for(metric: str) -> tuple[float, float]:
    return CPU_BOUNDS if metric == "cpu" else NONNEGATIVE


@dataclass
class _History:
    timestamps: np.ndarray = field(default_factory=lambda: np.empty(0))
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    checked_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ForecastCache:
    def __init__(self, engine: Engine, history_limit: int = 20_000, fresh_s: float = 1.0) -> None:
        self.engine = engine
        self.history_limit = history_limit
        self.fresh_s = fresh_s
        self._histories: dict[int, _History] = {}
        self._results: dict[tuple[Any, ...], SeriesForecast] = {}
        self._lock = threading.Lock()

    def invalidate(self, series_ids: set[int] | None = None) -> None:
        """Called after this worker stored new rows so its next read catches up at once."""
        with self._lock:
            targets = self._histories.values() if series_ids is None else [
                self._histories[s] for s in series_ids if s in self._histories
            ]
            for h in targets:
                h.checked_at = 0.0

    def history(self, series_id: int) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            h = self._histories.setdefault(series_id, _History())
        with h.lock:
            now = time.monotonic()
            if now - h.checked_at >= self.fresh_s:
                after = float(h.timestamps[-1]) if h.timestamps.size else None
                ts, vals = read_series(
                    self.engine, series_id, after=after, limit=self.history_limit
                )
                if ts:
                    h.timestamps = np.concatenate([h.timestamps, ts])[-self.history_limit :]
                    h.values = np.concatenate([h.values, vals])[-self.history_limit :]
                h.checked_at = now
            return h.timestamps, h.values

    def history_before(self, series_id: int, at: float) -> tuple[np.ndarray, np.ndarray]:
        """History strictly before `at`, read from the store (evaluations as of a past time)."""
        ts, vals = read_series(self.engine, series_id, before=at, limit=self.history_limit)
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
        """Raises forecaster.InsufficientData when the series is too short to say anything."""
        if at is None:
            ts, vals = self.history(series_id)
        else:
            ts, vals = self.history_before(series_id, at)
        newest = float(ts[-1]) if ts.size else None
        key = (series_id, ts.size, newest, horizon_s, confidence, at)
        with self._lock:
            hit = self._results.get(key)
        if hit is not None:
            return hit
        result = forecast_series(
            ts, vals, now=at, horizon_s=horizon_s, confidence=confidence, bounds=bounds_for(metric)
        )
        with self._lock:
            if len(self._results) > 50_000:
                self._results.clear()
            self._results[key] = result
        return result


__all__ = ["ForecastCache", "InsufficientData", "bounds_for"]
