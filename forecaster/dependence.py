"""How hosts' availability moves *together*: the dependence between their horizon inputs.

Each host's horizon distribution (``forecaster.analog``) is a marginal. A schedule's makespan
is a max over hosts, so whether their slowdowns come together matters as much as how likely
each one is: under independence, eight hosts with a 5 % risk each stall a run 34 % of the
time; if they are VMs of one application that saturate together, 5 %. On the Bitbrains traces
that is the rule, not the exception: VMs 41-53 change load together (correlation of their
one-hour changes 0.84-0.91), 56/58/59 at 0.98, 61-69 and 71-79 at 0.8-0.9, while hosts of
different groups are at 0.0-0.1. Treated as independent, a set with four idle VMs of one
group saw a 20 % chance of a stall that was really 5 %, and the schedule avoided all four.

:func:`co_movement` measures it causally (samples before ``now`` only): over the lookback,
each host's *change* over a window of the horizon's length (window mean minus the value just
before it), on a common time grid; the Pearson correlation of those changes, host by host.
Changes, not levels: a shared daily pattern or two hosts that are both idle say nothing
about switching together. The matrix is made positive semi-definite and shrunk slightly
toward the identity, so a few coincidences in a short history do not become a rule. The
scheduler uses it as a Gaussian copula over the marginals (``scheduler.couple``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from forecaster.history import FloatArray
from forecaster.horizon import sample_spacing

#: Share of weight moved to the identity (regularises a short or coincidental history).
SHRINK = 0.05
#: Fewest windows two hosts must share for their correlation to count (else 0).
MIN_COMMON = 48
#: Most grid points per host (fast sensors are read on a coarser grid than their spacing).
MAX_POINTS = 4096
#: A grid point takes the newest sample within this many spacings, else it is missing.
MAX_STALE = 3


def snap_dependence_horizon(horizon_s: float | None) -> float | None:
    """Horizons on a doubling grid: dependence changes slowly with the window, so plans whose
    run lengths differ by less than 2x share one matrix (the service caches it per bucket)."""
    if horizon_s is None:
        return None
    return float(2.0 ** round(math.log2(max(horizon_s, 1.0))))


def co_movement(
    series: Sequence[tuple[FloatArray, FloatArray]],
    now: float,
    horizon_s: float | None,
    lookback_s: float = 14 * 86400.0,
    shrink: float = SHRINK,
) -> FloatArray:
    """Correlation matrix of the hosts' changes over ``horizon_s`` (see module docstring).

    ``series``: one ``(timestamps, values)`` pair per host; samples at or after ``now`` are
    ignored. Hosts with too little common history, or that never change, get correlation 0
    with the others. Always symmetric, positive semi-definite, unit diagonal.
    """
    if not 0.0 <= shrink <= 1.0:
        raise ValueError(f"shrink must be in [0, 1], got {shrink}")
    n = len(series)
    if n < 2:
        return np.eye(n)
    past = [_before(ts, xs, now, lookback_s) for ts, xs in series]
    spacings = [sample_spacing(ts) for ts, _ in past if ts.size > 1]
    if not spacings:
        return np.eye(n)
    begin = max(now - lookback_s, min((float(ts[0]) for ts, _ in past if ts.size), default=now))
    step = max(float(np.median(spacings)), (now - begin) / MAX_POINTS)
    grid = np.arange(begin, now, step)
    width = 1 if horizon_s is None else max(1, int(round(horizon_s / step)))
    changes = np.array([_changes(_on_grid(ts, xs, grid, step), width) for ts, xs in past])
    corr = _pairwise(changes)
    return _regularised(corr, shrink)


def _before(
    ts: FloatArray, xs: FloatArray, now: float, lookback_s: float
) -> tuple[FloatArray, FloatArray]:
    t = np.asarray(ts, dtype=np.float64)
    x = np.asarray(xs, dtype=np.float64)
    keep = (t < now) & (t >= now - lookback_s - 86400.0) & np.isfinite(x)
    return t[keep], x[keep]


def _on_grid(ts: FloatArray, xs: FloatArray, grid: FloatArray, step: float) -> FloatArray:
    """Newest sample at or before each grid point (NaN when none is recent enough)."""
    out = np.full(grid.size, np.nan)
    if ts.size == 0:
        return out
    i = np.searchsorted(ts, grid, side="right") - 1
    ok = i >= 0
    ok[ok] = grid[ok] - ts[i[ok]] <= MAX_STALE * step
    out[ok] = xs[i[ok]]
    return out


def _changes(v: FloatArray, width: int) -> FloatArray:
    """Mean of ``v[j : j + width]`` minus ``v[j - 1]``, for every j whose window is complete."""
    out = np.full(v.size, np.nan)
    if v.size <= width + 1:
        return out
    missing = np.concatenate(([0], np.cumsum(np.isnan(v))))
    csum = np.concatenate(([0.0], np.cumsum(np.nan_to_num(v))))
    j = np.arange(1, v.size - width + 1)
    ok = (missing[j + width] == missing[j]) & ~np.isnan(v[j - 1])
    jj = j[ok]
    out[jj] = (csum[jj + width] - csum[jj]) / width - v[jj - 1]
    return out


def _pairwise(d: FloatArray) -> FloatArray:
    """Pearson correlation of rows of ``d`` over their common non-missing columns.

    All pairs at once by matrix products over the masked rows (64 hosts in a few ms)."""
    have = (~np.isnan(d)).astype(np.float64)
    x = np.nan_to_num(d)
    count = have @ have.T
    sums = x @ have.T  # [p, q]: sum of p's changes where q is present too
    squares = (x * x) @ have.T
    cross = x @ x.T
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / count
        var = squares / count - mean**2
        cov = cross / count - mean * mean.T
        corr = cov / np.sqrt(var * var.T)
    usable = (count >= MIN_COMMON) & (var > 1e-24) & (var.T > 1e-24) & np.isfinite(corr)
    out: FloatArray = np.where(usable, np.clip(corr, -1.0, 1.0), 0.0)
    np.fill_diagonal(out, 1.0)
    return out


def _regularised(corr: FloatArray, shrink: float) -> FloatArray:
    """Nearest-ish correlation matrix: negative eigenvalues clipped, unit diagonal restored,
    then ``shrink`` of the weight moved to the identity."""
    vals, vecs = np.linalg.eigh((corr + corr.T) / 2)
    psd = (vecs * np.clip(vals, 0.0, None)) @ vecs.T
    d = np.sqrt(np.clip(np.diag(psd), 1e-12, None))
    psd = psd / d[:, None] / d[None, :]
    out: FloatArray = (1.0 - shrink) * psd + shrink * np.eye(corr.shape[0])
    np.fill_diagonal(out, 1.0)
    return out
