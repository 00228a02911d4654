"""The predictor battery, NWS style: each group of predictors has an online step and a batch replay.

Convention: for a series ``x[0..n-1]`` a batch replay returns an ``(n + 1, k)`` array ``F`` whose
row ``t`` is the forecast of ``x[t]`` made from ``x[:t]`` only (row 0 is NaN, row ``n`` is the
forecast of the next, unseen value). The online ``step`` after the ``t``-th value returns row ``t``.
Each group computes both with the same floating-point operations in the same order, so the two
paths agree bit for bit (``tests/forecaster`` checks it on the real traces).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter

from forecaster.config import ForecasterConfig
from forecaster.history import BatchHistory, FloatArray, OnlineHistory

IntArray = NDArray[np.intp]


def discount_step(score: FloatArray, loss: FloatArray, decay: float) -> FloatArray:
    """One step of the discounted error ``s <- (1 - decay) * loss + decay * s`` (online)."""
    result: FloatArray = (1.0 - decay) * loss + decay * score
    return result


def discounted_scores(loss: FloatArray, decay: float) -> FloatArray:
    """Batch mirror of :func:`discount_step`.

    ``loss`` is ``(n + 1, k)`` with row ``t`` the loss of the forecast of ``x[t]`` (row 0 unused).
    Returns ``(n + 1, k)`` scores where row ``t`` only involves losses of rows ``1..t-1`` -- what is
    known when forecasting ``x[t]``.
    """
    rows, k = loss.shape
    out = np.zeros((rows, k), dtype=np.float64)
    if rows > 2:
        b = [1.0 - decay]
        a = [1.0, -decay]
        out[2:] = lfilter(b, a, loss[1 : rows - 1], axis=0)
    return out


def _median_of_sorted(window: Sequence[float]) -> float:
    m = len(window)
    if m % 2:
        return float(window[m // 2])
    return (window[m // 2 - 1] + window[m // 2]) / 2.0


class Group(ABC):
    """A family of predictors sharing state; ``names`` lists its members in column order."""

    names: list[str]

    @abstractmethod
    def reset(self) -> None:
        """Forget everything (start of an online series)."""

    @abstractmethod
    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        """After ``h`` took its newest value, write this group's next forecasts to ``out[at:]``."""

    @abstractmethod
    def batch(self, b: BatchHistory) -> FloatArray:
        """The ``(n + 1, len(names))`` forecast matrix for the whole series."""

    def _empty(self, b: BatchHistory) -> FloatArray:
        out = np.full((b.n + 1, len(self.names)), np.nan)
        return out


class LastValue(Group):
    """Tomorrow looks like today: the newest value."""

    def __init__(self) -> None:
        self.names = ["last"]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        out[at] = h.last

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        out[1:, 0] = b.x
        return out


class RunningMean(Group):
    """Mean of everything seen: best for a stationary series, slow after a change."""

    def __init__(self) -> None:
        self.names = ["mean"]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        out[at] = h.total / h.n

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        out[1:, 0] = b.csum[1:] / b.t
        return out


class SlidingMeans(Group):
    """Means of the last w values (fewer while warming up)."""

    def __init__(self, widths: Sequence[int]) -> None:
        self.widths = list(widths)
        self.names = [f"mean{w}" for w in self.widths]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        n = h.n
        for i, w in enumerate(self.widths):
            out[at + i] = h.window_sum(w) / min(n, w)

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        for i, w in enumerate(self.widths):
            out[1:, i] = b.window_sum(w) / np.minimum(b.t, w)
        return out


class SlidingMedians(Group):
    """Medians of the last w values: robust to the isolated spikes CPU traces are full of."""

    def __init__(self, widths: Sequence[int]) -> None:
        self.widths = list(widths)
        self.names = [f"median{w}" for w in self.widths]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        for i, w in enumerate(self.widths):
            out[at + i] = _median_of_sorted(h.sorted[w])

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        for i, w in enumerate(self.widths):
            out[:, i] = batch_medians(b, w)
        return out


def batch_medians(b: BatchHistory, w: int) -> FloatArray:
    """Column of sliding medians of odd width ``w`` (row t from ``x[max(0, t-w):t]``)."""
    col = np.full(b.n + 1, np.nan)
    for t in range(1, min(w, b.n + 1)):
        col[t] = _median_of_sorted(sorted(b.x[:t].tolist()))
    if b.n >= w:
        col[w:] = b.sorted_windows(w)[:, w // 2]
    return col


class TrimmedMeans(Group):
    """Means of the last w values without the k smallest and k largest (running mean until w)."""

    def __init__(self, specs: Sequence[tuple[int, int]]) -> None:
        self.specs = list(specs)
        self.names = [f"trim{w}_{k}" for w, k in self.specs]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        for i, (w, k) in enumerate(self.specs):
            if h.n < w:
                out[at + i] = h.window_sum(w) / h.n
                continue
            window = h.sorted[w]
            acc = h.window_sum(w)
            for j in range(k):
                acc = acc - window[j]
            for j in range(k):
                acc = acc - window[w - 1 - j]
            out[at + i] = acc / (w - 2 * k)

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        for i, (w, k) in enumerate(self.specs):
            col = b.window_sum(w) / b.t  # running mean while fewer than w values
            if b.n >= w:
                s = b.sorted_windows(w)
                acc = b.csum[w:] - b.csum[: b.n + 1 - w]
                for j in range(k):
                    acc = acc - s[:, j]
                for j in range(k):
                    acc = acc - s[:, w - 1 - j]
                col[w - 1 :] = acc / (w - 2 * k)
            out[1:, i] = col
        return out


class ExpSmoothing(Group):
    """Exponential smoothing ``s <- g x + (1 - g) s`` for several gains g, started at ``x[0]``."""

    def __init__(self, gains: Sequence[float]) -> None:
        self.gains = np.asarray(gains, dtype=np.float64)
        self.keep = 1.0 - self.gains
        self.names = [f"exp{g:g}" for g in gains]
        self.state = np.zeros(len(gains))

    def reset(self) -> None:
        self.state = np.zeros(len(self.gains))

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        x = h.last
        if h.n == 1:
            self.state = np.full(len(self.gains), x)
        else:
            self.state = self.gains * x + self.keep * self.state
        out[at : at + len(self.gains)] = self.state

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        if b.n == 0:
            return out
        out[1, :] = b.x[0]
        for i, g in enumerate(self.gains):
            keep = self.keep[i]
            if b.n > 1:
                out[2:, i] = lfilter([g], [1.0, -keep], b.x[1:], zi=[keep * b.x[0]])[0]
        return out


class _AdaptiveWindow(Group):
    """Each step, the window with the lowest discounted squared error (NWS adaptive window)."""

    def __init__(self, name: str, widths: Sequence[int], decay: float) -> None:
        self.widths = list(widths)
        self.decay = decay
        self.names = [name]
        self.reset()

    def reset(self) -> None:
        self.score = np.zeros(len(self.widths))
        self.previous: FloatArray | None = None

    @abstractmethod
    def _candidates(self, h: OnlineHistory) -> FloatArray: ...

    @abstractmethod
    def _batch_candidates(self, b: BatchHistory) -> FloatArray: ...

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        if self.previous is not None:
            err = h.last - self.previous
            self.score = discount_step(self.score, err * err, self.decay)
        cand = self._candidates(h)
        self.previous = cand
        out[at] = cand[int(np.argmin(self.score))]

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        cand = self._batch_candidates(b)
        err = np.zeros_like(cand)
        err[1 : b.n] = b.x[1:, None] - cand[1 : b.n]
        score = discounted_scores(err * err, self.decay)
        choice = np.argmin(score[1:], axis=1)
        out[1:, 0] = cand[1:][np.arange(b.n), choice]
        return out


class AdaptiveMean(_AdaptiveWindow):
    def __init__(self, widths: Sequence[int], decay: float) -> None:
        super().__init__("adapt_mean", widths, decay)

    def _candidates(self, h: OnlineHistory) -> FloatArray:
        n = h.n
        return np.array([h.window_sum(w) / min(n, w) for w in self.widths])

    def _batch_candidates(self, b: BatchHistory) -> FloatArray:
        return SlidingMeans(self.widths).batch(b)


class AdaptiveMedian(_AdaptiveWindow):
    def __init__(self, widths: Sequence[int], decay: float) -> None:
        super().__init__("adapt_median", widths, decay)

    def _candidates(self, h: OnlineHistory) -> FloatArray:
        return np.array([_median_of_sorted(h.sorted[w]) for w in self.widths])

    def _batch_candidates(self, b: BatchHistory) -> FloatArray:
        return SlidingMedians(self.widths).batch(b)


ArFit = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def ar_fit(windows: FloatArray, order: int) -> ArFit:
    """Least-squares AR(order) on each demeaned row of ``windows`` (m, L).

    Returns per row: mean, coefficients (m, order), window min and max. Sums are row reductions
    and the solve is LAPACK per matrix, so a row gives the same bits whether it is fitted alone
    (online) or stacked with others (batch). A tiny ridge keeps constant windows (idle hosts) well
    posed: their coefficients come out 0 and the forecast is the window mean. Forecasts are later
    clipped to the window's range, which keeps a non-stationary fit from running away between
    refits.
    """
    m, length = windows.shape
    mean: FloatArray = windows.sum(axis=1) / length
    z = windows - mean[:, None]
    rows = length - order
    lag = [z[:, order - 1 - i : order - 1 - i + rows] for i in range(order)]
    target = z[:, order:]
    gram = np.empty((m, order, order))
    rhs = np.empty((m, order, 1))
    for i in range(order):
        rhs[:, i, 0] = (lag[i] * target).sum(axis=1)
        for j in range(i, order):
            gram[:, i, j] = gram[:, j, i] = (lag[i] * lag[j]).sum(axis=1)
    diag = np.arange(order)
    trace = gram[:, diag, diag].sum(axis=1)
    gram[:, diag, diag] += (1e-9 * (trace / order + 1e-12))[:, None]
    coef: FloatArray = np.asarray(np.linalg.solve(gram, rhs)[:, :, 0], dtype=np.float64)
    lo: FloatArray = windows.min(axis=1)
    hi: FloatArray = windows.max(axis=1)
    return mean, coef, lo, hi


class SlidingAR(Group):
    """AR(p) refitted every ``refit`` samples on the last ``window`` values; last value before."""

    def __init__(self, order: int, window: int, refit: int, min_fit: int) -> None:
        self.order, self.window, self.refit, self.min_fit = order, window, refit, min_fit
        self.names = [f"ar{order}"]
        self.reset()

    def reset(self) -> None:
        self.fit: tuple[float, list[float], float, float] | None = None

    def _refit_due(self, n: int) -> bool:
        return n >= self.min_fit and (n - self.min_fit) % self.refit == 0

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        if self._refit_due(h.n):
            mean, coef, lo, hi = ar_fit(h.recent(self.window)[None, :], self.order)
            self.fit = (float(mean[0]), coef[0].tolist(), float(lo[0]), float(hi[0]))
        if self.fit is None:
            out[at] = h.last
            return
        mu, phi, low, high = self.fit
        values = h.values
        acc = mu
        for i in range(self.order):
            acc = acc + phi[i] * (values[-1 - i] - mu)
        out[at] = min(max(acc, low), high)

    def _batch_fits(self, x: FloatArray) -> ArFit:
        """Fits at every refit time, windows of equal length stacked into one call."""
        fit_at = np.arange(self.min_fit, x.size + 1, self.refit)
        lengths = np.minimum(fit_at, self.window)
        parts: list[ArFit] = []
        for length in np.unique(lengths).tolist():
            ends = fit_at[lengths == length]
            idx = ends[:, None] - length + np.arange(length)[None, :]
            parts.append(ar_fit(x[idx], self.order))
        # np.unique sorts lengths ascending, and lengths grow with fit time: order is preserved.
        return (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
        )

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        out[1:, 0] = b.x  # last value until the first fit
        if b.n < self.min_fit:
            return out
        fit_mean, fit_coef, fit_lo, fit_hi = self._batch_fits(b.x)
        t = np.arange(self.min_fit, b.n + 1)
        seg = (t - self.min_fit) // self.refit
        mean, coef, lo, hi = fit_mean[seg], fit_coef[seg], fit_lo[seg], fit_hi[seg]
        acc = mean.copy()
        for i in range(self.order):
            acc = acc + coef[:, i] * (b.x[t - 1 - i] - mean)
        out[self.min_fit :, 0] = np.minimum(np.maximum(acc, lo), hi)
        return out


class SeasonalChange(Group):
    """The newest value plus the change the series made at this time of day on past days.

    Not one of NWS's predictors: CPU traces of hosts running scheduled jobs jump at the same
    time every day, and no smoothing or autoregression can see a jump coming. The forecast of
    ``x[t]`` is ``x[t-1] + median_d (x[t-dP] - x[t-dP-1])`` over the ``k = min(days, (t-1)//P)``
    past periods the history holds (the median ignores a one-off day), clipped to the range of
    the values it was made from (so it never leaves what was seen); the last value before one
    period of history. ``P`` is in samples (one day of 5-minute samples by default).
    """

    def __init__(self, period: int, days: int) -> None:
        self.period, self.days = period, days
        self.names = [f"seasonal{period}x{days}"]

    def reset(self) -> None:
        pass

    def step(self, h: OnlineHistory, out: FloatArray, at: int) -> None:
        p = self.period
        k = min(self.days, (h.n - 1) // p)
        last = h.last
        if k == 0:
            out[at] = last
            return
        values = h.values
        changes = [values[-d * p] - values[-d * p - 1] for d in range(1, k + 1)]
        low = high = last
        for d in range(1, k + 1):
            low = min(low, values[-d * p], values[-d * p - 1])
            high = max(high, values[-d * p], values[-d * p - 1])
        out[at] = min(max(last + _median_of_sorted(sorted(changes)), low), high)

    def batch(self, b: BatchHistory) -> FloatArray:
        out = self._empty(b)
        out[1:, 0] = b.x  # last value until one period is seen
        p = self.period
        for k in range(1, self.days + 1):
            # rows t whose history holds exactly k periods (all periods from days on)
            first = k * p + 1
            stop = b.n if k == self.days else min(b.n, (k + 1) * p)
            if first > stop:
                break
            t = np.arange(first, stop + 1)
            last = b.x[t - 1]
            now = np.stack([b.x[t - d * p] for d in range(1, k + 1)])
            before = np.stack([b.x[t - d * p - 1] for d in range(1, k + 1)])
            changes = np.sort(now - before, axis=0)
            if k % 2:
                med = changes[k // 2]
            else:
                med = (changes[k // 2 - 1] + changes[k // 2]) / 2.0
            low = np.minimum(last, np.minimum(now, before).min(axis=0))
            high = np.maximum(last, np.maximum(now, before).max(axis=0))
            out[t, 0] = np.minimum(np.maximum(last + med, low), high)
        return out


def build_groups(config: ForecasterConfig) -> list[Group]:
    """The battery a config asks for, in a fixed column order."""
    groups: list[Group] = [LastValue(), RunningMean()]
    if config.mean_widths:
        groups.append(SlidingMeans(config.mean_widths))
    if config.median_widths:
        groups.append(SlidingMedians(config.median_widths))
    if config.trimmed:
        groups.append(TrimmedMeans(config.trimmed))
    if config.gains:
        groups.append(ExpSmoothing(config.gains))
    if config.adaptive_widths:
        groups.append(AdaptiveMean(config.adaptive_widths, config.adaptive_decay))
        groups.append(AdaptiveMedian(config.adaptive_median_widths, config.adaptive_decay))
    for p in config.ar_orders:
        groups.append(SlidingAR(p, config.ar_window, config.ar_refit, config.ar_min_fit))
    if config.seasonal_days:
        groups.append(SeasonalChange(config.seasonal_period, config.seasonal_days))
    return groups


def sorted_widths(config: ForecasterConfig) -> set[int]:
    """Window widths the online history must keep sorted for this config."""
    widths = set(config.median_widths) | {w for w, _ in config.trimmed}
    if config.adaptive_widths:
        widths |= set(config.adaptive_median_widths)
    return widths


def history_keep(config: ForecasterConfig) -> int:
    """How many recent values the online history must remember."""
    widths = [*config.mean_widths, *sorted_widths(config), *config.adaptive_widths, 1]
    if config.ar_orders:
        widths.append(config.ar_window)
    if config.seasonal_days:
        widths.append(config.seasonal_days * config.seasonal_period + 1)
    return max(widths)


def member_names(config: ForecasterConfig) -> list[str]:
    return [name for g in build_groups(config) for name in g.names]


def batch_member_forecasts(values: FloatArray, config: ForecasterConfig) -> FloatArray:
    """All members' forecasts for a whole series, ``(n + 1, K)``."""
    b = BatchHistory(values)
    return np.hstack([g.batch(b) for g in build_groups(config)])


class OnlineBattery:
    """All members' online state; ``push(x)`` returns the K forecasts of the next value."""

    def __init__(self, config: ForecasterConfig) -> None:
        self.groups = build_groups(config)
        self.names = [name for g in self.groups for name in g.names]
        self.history = OnlineHistory(history_keep(config), sorted_widths(config))
        self._offsets: list[int] = []
        at = 0
        for g in self.groups:
            self._offsets.append(at)
            at += len(g.names)

    def push(self, x: float) -> FloatArray:
        self.history.push(x)
        out = np.empty(len(self.names))
        for g, at in zip(self.groups, self._offsets, strict=True):
            g.step(self.history, out, at)
        return out
