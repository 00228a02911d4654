"""A prior borrowed from the other hosts, for a host whose own history never left the top.

A host idle for two weeks has nothing in its history that says it may turn busy, so neither its
analogues nor its fallback to its own past windows can put a busy spell into a forecast of the
next day or three (issue 17: idle hosts covered 0.92 at 1 d and 0.87 at 3 d). Other hosts'
histories can: what followed *their* idle states is the best evidence there is about what
follows this one.

The rule (measured in docs/architecture.md §4.7, ``benchmarks/horizon_fleet_prior.py``):

- only a host whose recent history is **settled high** (at most 5 % of the last 7 days' samples
  below 90 % of the metric's range: the evaluation's "idle" category) and only where its own
  forecast fell back for want of support borrows; a host whose own history already spans the
  range has better evidence of its own, and borrowing made those over-cover (0.97–0.997);
- the borrowed **outcomes** are, for every other host, the mean over ``horizon_s`` after each
  start on a ``grid_s`` grid in the ``lookback_s`` before the forecast time at which that host
  was settled high, minus its level just before the start, the whole window ended before the
  forecast time (causal); when they are fewer than ``min_outcomes`` (a fleet that started
  recently holds no 3-day window yet) the horizon is halved until enough windows have ended,
  a conservative stand-in (shorter means spread more);
- shifted to this host's present level, their kernel density is mixed into the forecast at
  weight ``strength / (strength + n)``, ``n`` the host's own independent windows of the horizon
  (its history over ``horizon_s``, at least 1): the fleet counts as ``strength`` (6) windows of
  the host's own history, so a new host leans on it and a long-idle one less.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from forecaster.analog import DAY_S, AnalogOptions, kernel_distribution
from forecaster.distribution import Distribution, mixed
from forecaster.history import FloatArray, series_before
from forecaster.horizon import sample_spacing


@dataclass(frozen=True)
class FleetOptions:
    """Knobs of the fleet prior (module docstring)."""

    grid_s: float = 3 * 3600.0  # spacing of the other hosts' starts (absolute grid)
    lookback_s: float = 14 * DAY_S  # starts this far before the forecast time are used
    level_s: float = 600.0  # a start's level: the mean of the samples this long before it
    settled_window_s: float = 7 * DAY_S  # the history the "settled high" test reads
    settled_level: float = 0.9  # ... as a share of the metric's range
    settled_share: float = 0.05  # ... at most this share of the window below that level
    min_history_s: float = 12 * 3600.0  # a start needs this much history before it
    min_outcomes: int = 20  # fewer borrowed outcomes than this: halve the horizon
    min_horizon_s: float = 3600.0  # ... but not below this
    strength: float = 6.0  # the fleet's weight, in windows of the host's own history

    def __post_init__(self) -> None:
        if not (self.grid_s > 0 and self.lookback_s > 0 and self.strength > 0):
            raise ValueError("grid_s, lookback_s and strength must be > 0")
        if not 0.0 <= self.settled_share < 1.0:
            raise ValueError(f"settled_share must be in [0, 1), got {self.settled_share!r}")


FLEET = FleetOptions()


def settled_threshold(value_range: tuple[float, float], opts: FleetOptions = FLEET) -> float:
    low, high = value_range
    return low + opts.settled_level * (high - low)


def _settled(
    below: NDArray[np.int64], seen: NDArray[np.int64], opts: FleetOptions
) -> NDArray[np.bool_]:
    """The rule itself: some samples seen, at most ``settled_share`` of them below the level."""
    out: NDArray[np.bool_] = (seen > 0) & (below <= opts.settled_share * seen)
    return out


def _level(timestamps: FloatArray, values: FloatArray, now: float, opts: FleetOptions) -> float:
    """Mean of the samples in the ``level_s`` before ``now`` (the newest before it if none)."""
    before = timestamps < now
    recent = values[before & (timestamps >= now - opts.level_s)]
    return float(recent.mean()) if recent.size else float(values[before][-1])


def settled_high(
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    value_range: tuple[float, float],
    opts: FleetOptions = FLEET,
) -> bool:
    """Whether at most ``settled_share`` of the samples in the ``settled_window_s`` before
    ``now`` lie below ``settled_level`` of the range (False with no samples there)."""
    ts = np.asarray(timestamps, dtype=np.float64)
    recent = np.asarray(values, dtype=np.float64)[(ts < now) & (ts >= now - opts.settled_window_s)]
    below = np.count_nonzero(recent < settled_threshold(value_range, opts))
    return bool(_settled(np.array([below]), np.array([recent.size]), opts)[0])


@dataclass(frozen=True)
class HostWindows:
    """One other host's history, prepared so that any window's mean and any start's state are
    two look-ups (cumulative sums of the values and of the samples below the settled level)."""

    timestamps: FloatArray
    csum: FloatArray  # csum[i] = sum of the first i values
    below: NDArray[np.int64]  # below[i] = how many of the first i values are below the level
    opts: FleetOptions  # the settled level ``below`` counts against, and the grid

    @classmethod
    def of(
        cls,
        timestamps: FloatArray,
        values: FloatArray,
        value_range: tuple[float, float],
        opts: FleetOptions = FLEET,
    ) -> HostWindows:
        ts, xs = series_before(timestamps, values, None)
        low = (xs < settled_threshold(value_range, opts)).astype(np.int64)
        return cls(
            timestamps=ts,
            csum=np.concatenate(([0.0], np.cumsum(xs))),
            below=np.concatenate(([0], np.cumsum(low))),
            opts=opts,
        )

    def outcomes(self, horizon_s: float, now: float) -> FloatArray:
        """Mean over ``horizon_s`` after each grid start at which this host was settled high,
        minus its level before the start; only windows that ended by ``now`` (nothing at or
        after ``now`` is read, the sample spacing included)."""
        opts = self.opts
        past = int(np.searchsorted(self.timestamps, now))
        ts = self.timestamps[:past]
        if ts.size < 2:
            return np.empty(0)
        spacing = sample_spacing(ts)
        first = max(now - opts.lookback_s, float(ts[0]) + opts.min_history_s)
        last = min(now, float(ts[-1]) + spacing) - horizon_s
        if last < first:
            return np.empty(0)
        starts = opts.grid_s * np.arange(
            np.ceil(first / opts.grid_s), np.floor(last / opts.grid_s) + 1
        )
        if starts.size == 0:
            return np.empty(0)
        at = np.searchsorted(ts, starts)
        w0 = np.searchsorted(ts, starts - opts.settled_window_s)
        l0 = np.searchsorted(ts, starts - opts.level_s)
        end = np.searchsorted(ts, starts + horizon_s)
        settled = _settled(self.below[at] - self.below[w0], at - w0, opts)
        whole = (end - at) >= 0.5 * horizon_s / spacing
        leveled = at > l0
        ok = settled & whole & leveled
        if not ok.any():
            return np.empty(0)
        at, end, l0 = at[ok], end[ok], l0[ok]
        mean = (self.csum[end] - self.csum[at]) / (end - at)
        level = (self.csum[at] - self.csum[l0]) / (at - l0)
        out: FloatArray = mean - level
        return out


#: What a forecast asks for when it needs the fleet: the other hosts, built only then.
FleetSource = Callable[[], Sequence[HostWindows]]


def fleet_outcomes(
    hosts: Sequence[HostWindows], horizon_s: float, now: float, opts: FleetOptions = FLEET
) -> tuple[FloatArray, float]:
    """The pooled outcomes over ``horizon_s`` (halved until ``min_outcomes`` have ended) and
    the horizon they are over; empty when even the shortest holds too few."""
    h = horizon_s
    while True:
        parts = [host.outcomes(h, now) for host in hosts]
        sample = np.concatenate(parts) if parts else np.empty(0)
        if sample.size >= opts.min_outcomes or h / 2 < opts.min_horizon_s:
            break
        h /= 2
    if sample.size < opts.min_outcomes:
        return np.empty(0), horizon_s
    return sample, h


def with_fleet(
    dist: Distribution,
    timestamps: FloatArray,
    values: FloatArray,
    now: float,
    horizon_s: float,
    fleet: FleetSource,
    analog: AnalogOptions,
    opts: FleetOptions = FLEET,
) -> Distribution:
    """``dist`` (a fallback) mixed with the fleet's outcomes when the host is settled high
    (module docstring); ``dist`` unchanged otherwise. ``timestamps``/``values``: the host's
    own history before ``now``, sorted."""
    value_range = analog.value_range
    if dist.fallback is None or value_range is None:
        return dist
    if not settled_high(timestamps, values, now, value_range, opts):
        return dist
    sample, _ = fleet_outcomes(fleet(), horizon_s, now, opts)
    if sample.size == 0:
        return dist
    shifted = np.clip(_level(timestamps, values, now, opts) + sample, *value_range)
    prior = kernel_distribution(shifted, replace(analog, unconditional_weight=0.0))
    own = max(min(now - float(timestamps[0]), analog.lookback_s) / horizon_s, 1.0)
    eps = opts.strength / (opts.strength + own)
    return replace(mixed(dist, prior, 1.0 - eps), fleet=int(sample.size))
