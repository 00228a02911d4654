"""Vectorised replay of a whole series; row for row identical to :class:`SeriesForecaster`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from forecaster.config import DEFAULT_CONFIG, ForecasterConfig
from forecaster.history import FloatArray
from forecaster.members import batch_member_forecasts, discounted_scores, member_names
from forecaster.online import OneStep
from forecaster.selection import interval_ranks, selection_loss

IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class BatchResult:
    """Forecasts for every step of a series.

    Every array has ``n + 1`` rows: row ``t`` is what the online forecaster answers after seeing
    ``x[:t]`` -- the forecast of ``x[t]`` -- and row ``n`` the forecast of the next, unseen value.
    Row 0 (nothing seen) is NaN / -1.
    """

    names: list[str]
    members: FloatArray  # (n + 1, K) member forecasts
    winner: IntArray  # (n + 1,) index into names, -1 in row 0
    forecast: FloatArray
    lower: FloatArray
    upper: FloatArray
    mse: FloatArray  # winner's cumulative MSE at forecast time (NaN before the first error)
    mae: FloatArray
    confidence: float

    @property
    def n(self) -> int:
        return int(self.forecast.size - 1)

    def errors(self, values: FloatArray) -> FloatArray:
        """One-step errors ``x[t] - forecast[t]`` for t = 1..n-1 (what an evaluation scores)."""
        x = np.asarray(values, dtype=np.float64)
        err: FloatArray = x[1:] - self.forecast[1 : self.n]
        return err

    def member_errors(self, values: FloatArray) -> FloatArray:
        """``(n - 1, K)`` one-step errors of every member for t = 1..n-1."""
        x = np.asarray(values, dtype=np.float64)
        err: FloatArray = x[1:, None] - self.members[1 : self.n]
        return err


def batch_forecasts(
    values: FloatArray, config: ForecasterConfig | None = None, confidence: float = 0.95
) -> BatchResult:
    """Replay a whole series through the battery and the selection, vectorised over time."""
    cfg = config or DEFAULT_CONFIG
    x = _series(values)
    return select_batch(x, batch_member_forecasts(x, cfg), cfg, confidence)


def _series(values: FloatArray) -> FloatArray:
    """``values`` as a contiguous float array, refused unless 1-D and finite."""
    x = np.ascontiguousarray(values, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError("values must be a 1-D array of finite numbers")
    return x


def select_batch(
    values: FloatArray, members: FloatArray, config: ForecasterConfig, confidence: float = 0.95
) -> BatchResult:
    """Selection, errors and intervals over a member forecast matrix ``(n + 1, K)``.

    Split from :func:`batch_forecasts` so an evaluation can compare selection rules without
    recomputing the battery; ``members`` must come from ``batch_member_forecasts`` with a config
    having the same battery.
    """
    sel = _select(values, members, config)
    lower, upper = _intervals(sel.err, sel.winner, sel.forecast, config.interval_window, confidence)
    return BatchResult(
        sel.names, members, sel.winner, sel.forecast, lower, upper, sel.mse, sel.mae, confidence
    )


def next_step(
    values: FloatArray, config: ForecasterConfig | None = None, confidence: float = 0.95
) -> OneStep:
    """Row ``n`` of :func:`batch_forecasts` (the forecast of the next, unseen value) alone.

    A cold forecast needs only that row; the order statistics of every earlier row's residual
    window were half the cost of a cold horizon forecast (session 38)."""
    cfg = config or DEFAULT_CONFIG
    x = _series(values)
    sel = _select(x, batch_member_forecasts(x, cfg), cfg)
    n = int(x.size)
    lower, upper = _interval_row(
        sel.err, sel.winner, sel.forecast, cfg.interval_window, confidence, n
    )
    return OneStep(
        value=float(sel.forecast[n]),
        lower=lower,
        upper=upper,
        confidence=confidence,
        predictor=sel.names[int(sel.winner[n])],
        mse=float(sel.mse[n]),
        mae=float(sel.mae[n]),
        n=n,
        last_timestamp=math.nan,
        members={},
    )


class _Selection(NamedTuple):
    names: list[str]
    err: FloatArray  # (n + 1, K) one-step errors of every member (row t: x[t] - forecast)
    winner: IntArray
    forecast: FloatArray
    mse: FloatArray
    mae: FloatArray


def _select(values: FloatArray, members: FloatArray, config: ForecasterConfig) -> _Selection:
    """Every row's winner by the selection rule, its forecast and its cumulative errors."""
    cfg = config
    x = np.ascontiguousarray(values, dtype=np.float64)
    n = int(x.size)
    names = member_names(cfg)
    F = members
    k = F.shape[1]
    if F.shape != (n + 1, len(names)):
        raise ValueError("member matrix does not match the values and the config's battery")
    err = np.zeros((n + 1, k))
    if n > 1:
        err[1:n] = x[1:, None] - F[1:n]
    cum_se, cum_ae = _cumulative(err * err, n), _cumulative(np.abs(err), n)
    if cfg.selection == "discounted":
        score = discounted_scores(selection_loss(err, cfg), cfg.selection_decay)
    else:
        score = cum_ae if cfg.selection_error == "absolute" else cum_se
    winner = np.full(n + 1, -1, dtype=np.intp)
    forecast = np.full(n + 1, np.nan)
    rows = np.arange(1, n + 1)
    if n:
        winner[1:] = np.argmin(score[1:], axis=1)
        forecast[1:] = F[rows, winner[1:]]
    counts = np.maximum(rows - 1, 1)
    mse, mae = np.full(n + 1, np.nan), np.full(n + 1, np.nan)
    if n > 1:
        mse[2:] = cum_se[rows[1:], winner[2:]] / counts[1:]
        mae[2:] = cum_ae[rows[1:], winner[2:]] / counts[1:]
    return _Selection(names, err, winner, forecast, mse, mae)


def _cumulative(loss: FloatArray, n: int) -> FloatArray:
    """Row t: sum of the losses of rows 1..t-1, added in order (as the online ``+=`` does)."""
    out = np.zeros_like(loss)
    if n > 1:
        out[2:] = np.cumsum(loss[1:n], axis=0)
    return out


def _intervals(
    err: FloatArray, winner: IntArray, forecast: FloatArray, window: int, confidence: float
) -> tuple[FloatArray, FloatArray]:
    """Rows t: forecast + order statistics of the winner's last ``window`` residuals."""
    n = forecast.size - 1
    lower, upper = forecast.copy(), forecast.copy()
    for t in range(2, min(window, n) + 1):  # warm-up: fewer residuals than the window
        lower[t], upper[t] = _interval_row(err, winner, forecast, window, confidence, t)
    if n >= window + 1:
        lo, hi = interval_ranks(window, confidence)
        views = sliding_window_view(err[1:n], window, axis=0)  # (n - window, K, window)
        rows = np.arange(window + 1, n + 1)
        windows = views[rows - window - 1, winner[rows]]
        part = np.partition(windows, (lo, hi), axis=1)
        lower[rows] = forecast[rows] + part[:, lo]
        upper[rows] = forecast[rows] + part[:, hi]
    return lower, upper


def _interval_row(
    err: FloatArray, winner: IntArray, forecast: FloatArray, window: int, confidence: float, t: int
) -> tuple[float, float]:
    """Row t of :func:`_intervals`: the winner's last ``min(t - 1, window)`` residuals (the
    forecast itself before the first)."""
    m = min(t - 1, window)
    if m < 1:
        return float(forecast[t]), float(forecast[t])
    lo, hi = interval_ranks(m, confidence)
    col = np.partition(err[t - m : t, winner[t]], (lo, hi))
    return float(forecast[t] + col[lo]), float(forecast[t] + col[hi])
