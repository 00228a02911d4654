"""Forecaster configuration: which predictors run, how the winner is chosen, how intervals are made.

Defaults are expressed in *samples* (the battery is sample-indexed, as in NWS) and were chosen on
general grounds, not fitted to any trace set:

- sliding windows of 5..31 samples and exponential gains 0.05..0.75 span the usual NWS range, from
  "follow the last value" to "average the last few hours" at a 5-minute cadence;
- the discounted selection error forgets with a half-life of one day of 5-minute samples (288), long
  enough to average out single spikes, short enough to follow load epochs that last days;
- intervals use the winner's last 250 residuals: at 95 % the bounds are the 6th smallest and 6th
  largest of them, a stable order statistic, while the window still follows the load regime;
- autoregressive members are refitted every hour (12 samples) on the last day (288 samples);
- the seasonal-change member repeats the change of the same sample one period (a day of 5-minute
  samples) back, the median over up to 5 past days (chosen on the odd-numbered shared traces, see
  docs/architecture.md 4.7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Selection = Literal["cumulative", "discounted"]
ErrorKind = Literal["squared", "absolute"]


def decay_from_half_life(half_life: float) -> float:
    """Per-sample decay factor whose weight halves after ``half_life`` samples."""
    if half_life <= 0:
        raise ValueError("half_life must be positive")
    return float(0.5 ** (1.0 / half_life))


@dataclass(frozen=True)
class ForecasterConfig:
    """Everything that shapes a forecaster; one config gives the same forecasts on both paths."""

    mean_widths: tuple[int, ...] = (5, 10, 20, 30)
    median_widths: tuple[int, ...] = (5, 11, 21, 31)
    #: (window, trimmed from each end) pairs.
    trimmed: tuple[tuple[int, int], ...] = ((11, 2), (31, 5))
    gains: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75)
    #: candidate windows for the adaptive-window mean (median uses the odd value nearest each).
    adaptive_widths: tuple[int, ...] = (3, 5, 9, 17, 33, 65)
    adaptive_half_life: float = 24.0
    ar_orders: tuple[int, ...] = (1, 3)
    ar_window: int = 288
    ar_refit: int = 12
    ar_min_fit: int = 24
    #: seasonal-change member: period in samples and past periods whose changes are medianed
    #: (0 days: no such member).
    seasonal_period: int = 288
    seasonal_days: int = 5
    #: how the battery's winner is chosen: NWS's cumulative error or a discounted one.
    selection: Selection = "discounted"
    selection_error: ErrorKind = "absolute"
    selection_half_life: float = 288.0
    interval_window: int = 250
    #: fewest samples :func:`forecaster.forecast_series` accepts (below it: ``InsufficientData``).
    min_samples: int = 5

    def __post_init__(self) -> None:
        for w in self.median_widths:
            if w < 1 or w % 2 == 0:
                raise ValueError(f"median widths must be odd and positive, got {w}")
        for w in (*self.mean_widths, *self.adaptive_widths):
            if w < 1:
                raise ValueError(f"window widths must be positive, got {w}")
        for w, k in self.trimmed:
            if k < 1 or w - 2 * k < 1:
                raise ValueError(f"trimmed mean ({w}, {k}) leaves no values")
        for g in self.gains:
            if not 0.0 < g <= 1.0:
                raise ValueError(f"smoothing gains must be in (0, 1], got {g}")
        for p in self.ar_orders:
            if p < 1 or self.ar_min_fit < 2 * p + 2 or self.ar_window < self.ar_min_fit:
                raise ValueError(f"AR({p}) needs ar_min_fit >= 2p+2 and ar_window >= ar_min_fit")
        if self.seasonal_period < 1 or self.seasonal_days < 0:
            raise ValueError("seasonal_period must be >= 1 and seasonal_days >= 0")
        if self.ar_refit < 1 or self.interval_window < 1 or self.min_samples < 2:
            raise ValueError("ar_refit, interval_window must be >= 1 and min_samples >= 2")

    @property
    def selection_decay(self) -> float:
        return decay_from_half_life(self.selection_half_life)

    @property
    def adaptive_decay(self) -> float:
        return decay_from_half_life(self.adaptive_half_life)

    @property
    def adaptive_median_widths(self) -> tuple[int, ...]:
        """Odd windows for the adaptive-window median (a median of an odd count is one sample)."""
        return tuple(sorted({w if w % 2 else w + 1 for w in self.adaptive_widths}))


DEFAULT_CONFIG = ForecasterConfig()
