"""What the predictors read: the recent values of one series, online and as a whole array.

Both views expose the same quantities -- cumulative sums ``C[t] = x[0] + ... + x[t-1]`` (added in
order, so ``np.cumsum`` and a running ``+=`` give the same bits) and sorted windows -- so each
predictor can compute its online and batch forecasts with the same arithmetic in the same order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def series_before(
    timestamps: Sequence[float] | FloatArray,
    values: Sequence[float] | FloatArray,
    now: float | None,
) -> tuple[FloatArray, FloatArray]:
    """Finite samples strictly before ``now``, in time order, one per timestamp (first kept)."""
    ts = np.asarray(timestamps, dtype=np.float64)
    xs = np.asarray(values, dtype=np.float64)
    if ts.shape != xs.shape or ts.ndim != 1:
        raise ValueError("timestamps and values must be 1-D and of equal length")
    keep = np.isfinite(ts) & np.isfinite(xs)
    if now is not None:
        keep &= ts < now
    ts, xs = ts[keep], xs[keep]
    order = np.argsort(ts, kind="stable")
    ts, xs = ts[order], xs[order]
    first = np.ones(ts.size, dtype=bool)
    first[1:] = ts[1:] != ts[:-1]
    return ts[first], xs[first]


class OnlineHistory:
    """The last ``keep`` values, their cumulative sums, and sorted windows of chosen widths.

    One ``push`` costs O(w) memmove per sorted window and O(1) otherwise.
    """

    def __init__(self, keep: int, sorted_widths: Iterable[int]) -> None:
        self.n = 0
        self.total = 0.0
        self.values: deque[float] = deque(maxlen=keep)
        self.csums: deque[float] = deque([0.0], maxlen=keep + 1)
        self.sorted: dict[int, list[float]] = {w: [] for w in sorted(set(sorted_widths))}

    def push(self, x: float) -> None:
        values = self.values
        count = len(values)
        for w, window in self.sorted.items():
            if count >= w:
                del window[bisect_left(window, values[-w])]
            insort(window, x)
        values.append(x)
        self.n += 1
        self.total += x
        self.csums.append(self.total)

    @property
    def last(self) -> float:
        return self.values[-1]

    def window_sum(self, w: int) -> float:
        """``C[n] - C[n - min(n, w)]`` (the sum of the last ``min(n, w)`` values)."""
        back = min(self.n, w)
        return self.total - self.csums[-1 - back]

    def recent(self, count: int) -> FloatArray:
        """A fresh array of the last ``min(n, count)`` values, oldest first."""
        take = min(count, len(self.values))
        return np.array(list(self.values)[len(self.values) - take :], dtype=np.float64)


class BatchHistory:
    """A whole series, with its cumulative sums and (cached) sorted sliding windows."""

    def __init__(self, values: FloatArray) -> None:
        self.x = np.ascontiguousarray(values, dtype=np.float64)
        self.n = int(self.x.size)
        self.csum = np.concatenate(([0.0], np.cumsum(self.x)))
        self.t = np.arange(1, self.n + 1)  # forecast times with at least one value seen
        self._sorted: dict[int, FloatArray] = {}

    def window_sum(self, w: int) -> FloatArray:
        """For t = 1..n: ``C[t] - C[t - min(t, w)]``."""
        t = self.t
        return self.csum[t] - self.csum[t - np.minimum(t, w)]

    def sorted_windows(self, w: int) -> FloatArray:
        """Row j holds ``sorted(x[j:j+w])``, the window seen when forecasting x[j+w]."""
        if w not in self._sorted:
            if w > self.n:
                self._sorted[w] = np.empty((0, w), dtype=np.float64)
            else:
                self._sorted[w] = np.sort(sliding_window_view(self.x, w), axis=1)
        return self._sorted[w]
