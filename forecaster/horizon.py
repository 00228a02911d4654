"""Horizon aggregation: the distribution of a series' *average* over the next H seconds.

A run that lasts H seconds experiences the host's mean availability over H, not one sample; block
means over H are much less variable than samples (and a bimodal host's block means still show both
modes when the switching is slower than H). The distribution is fitted to block means of the
recent history -- the PPE approach of describing a parameter by the values it recently took.
"""

from __future__ import annotations

import math

import numpy as np

from forecaster.distribution import Distribution, FitOptions, fit_distribution
from forecaster.history import FloatArray

#: History looked at (seconds) when the horizon is short: two days of load, covering a daily cycle.
DEFAULT_LOOKBACK_S = 2 * 86400.0
#: Fewest blocks worth fitting; longer horizons look further back (and overlap blocks if needed).
MIN_BLOCKS = 30


def block_means(
    timestamps: FloatArray, values: FloatArray, horizon_s: float, now: float, stride_s: float
) -> FloatArray:
    """Means of ``values`` over windows ``[s, s + horizon_s)`` ending at or before ``now``.

    Windows start at ``now - horizon_s - j * stride_s`` (j = 0, 1, ...) while they start at or
    after the first timestamp; windows without samples (gaps) are dropped.
    """
    if values.size == 0:
        return np.empty(0)
    first = float(timestamps[0])
    count = int(math.floor((now - horizon_s - first) / stride_s)) + 1
    if count <= 0:
        return np.empty(0)
    starts = now - horizon_s - stride_s * np.arange(count)
    csum = np.concatenate(([0.0], np.cumsum(values)))
    lo = np.searchsorted(timestamps, starts, side="left")
    hi = np.searchsorted(timestamps, starts + horizon_s, side="left")
    filled = hi > lo
    means: FloatArray = (csum[hi[filled]] - csum[lo[filled]]) / (hi[filled] - lo[filled])
    return means[::-1].copy()


def horizon_distribution(
    timestamps: FloatArray,
    values: FloatArray,
    horizon_s: float,
    now: float,
    *,
    lookback_s: float = DEFAULT_LOOKBACK_S,
    options: FitOptions | None = None,
) -> Distribution:
    """Distribution of the average over the next ``horizon_s`` seconds, from history before ``now``.

    Looks back ``max(lookback_s, MIN_BLOCKS * horizon_s)``; blocks do not overlap when that span
    holds ``MIN_BLOCKS`` of them, otherwise they are spread evenly (overlapping) over what history
    there is. With less history than one horizon, the recent values themselves are fitted: wider
    than block means would be, so the answer errs on the cautious side.
    """
    if horizon_s <= 0 or not math.isfinite(horizon_s):
        raise ValueError("horizon_s must be a positive number of seconds")
    ts = np.asarray(timestamps, dtype=np.float64)
    xs = np.asarray(values, dtype=np.float64)
    start = now - max(lookback_s, MIN_BLOCKS * horizon_s)
    keep = (ts < now) & (ts >= start)
    ts, xs = ts[keep], xs[keep]
    if xs.size == 0:
        raise ValueError("no history before now")
    span = now - float(ts[0])
    if span < horizon_s:
        return fit_distribution(xs, options)
    stride = horizon_s
    if span < MIN_BLOCKS * horizon_s:
        stride = max((span - horizon_s) / (MIN_BLOCKS - 1), sample_spacing(ts))
    means = block_means(ts, xs, horizon_s, now, stride)
    return fit_distribution(means if means.size else xs, options)


def sample_spacing(ts: FloatArray) -> float:
    """Typical sampling interval (median spacing), 1 s when unknown."""
    if ts.size < 2:
        return 1.0
    return float(max(np.median(np.diff(ts)), 1e-9))


HORIZON_GRID = 0.05


def snap_horizon(horizon_s: float | None) -> float | None:
    """Round a horizon onto a 5 % geometric grid (at most ~2.5 % off).

    The horizon loop of every request asks for slightly different run lengths; snapping them
    lets the service and replay reuse fitted distributions across requests and strategies.
    """
    if horizon_s is None:
        return None
    step = math.log1p(HORIZON_GRID)
    return float(math.exp(round(math.log(max(horizon_s, 1.0)) / step) * step))
