"""Online forecaster for one series: one measurement in, updated state, O(1)-ish per update."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from forecaster.config import DEFAULT_CONFIG, ForecasterConfig
from forecaster.history import FloatArray
from forecaster.members import OnlineBattery, discount_step
from forecaster.selection import interval_ranks, selection_loss


@dataclass(frozen=True)
class MemberError:
    """One predictor's cumulative one-step error so far."""

    mse: float
    mae: float


@dataclass(frozen=True)
class OneStep:
    """The forecast of the next value, its interval and the quality of information behind it."""

    value: float
    lower: float
    upper: float
    confidence: float
    predictor: str
    mse: float
    mae: float
    n: int
    last_timestamp: float
    members: dict[str, MemberError]

    @property
    def interval(self) -> tuple[float, float]:
        return (self.lower, self.upper)


class SeriesForecaster:
    """NWS-style adaptive forecaster for one series (see ``forecaster`` package docs)."""

    def __init__(self, config: ForecasterConfig | None = None) -> None:
        self.config = config or DEFAULT_CONFIG
        self._battery = OnlineBattery(self.config)
        k = len(self._battery.names)
        self._decay = self.config.selection_decay
        self._next: FloatArray | None = None
        self._cum_se = np.zeros(k)
        self._cum_ae = np.zeros(k)
        self._disc = np.zeros(k)
        self._resid = np.zeros((self.config.interval_window, k))
        self._resid_pos = 0
        self.n = 0
        self.n_errors = 0
        self.last_timestamp = -math.inf

    @property
    def names(self) -> list[str]:
        return list(self._battery.names)

    @classmethod
    def from_history(
        cls,
        timestamps: Sequence[float] | FloatArray,
        values: Sequence[float] | FloatArray,
        config: ForecasterConfig | None = None,
    ) -> SeriesForecaster:
        """Rebuild the state a forecaster would have after seeing this history (e.g. on restart)."""
        ts = np.asarray(timestamps, dtype=np.float64)
        xs = np.asarray(values, dtype=np.float64)
        if ts.shape != xs.shape:
            raise ValueError("timestamps and values differ in length")
        fc = cls(config)
        for t, x in zip(ts.tolist(), xs.tolist(), strict=True):
            fc.update(t, x)
        return fc

    def update(self, timestamp: float, value: float) -> None:
        """Take one measurement; timestamps must increase strictly, values must be finite."""
        if not math.isfinite(value) or not math.isfinite(timestamp):
            raise ValueError(f"non-finite measurement ({timestamp}, {value})")
        if timestamp <= self.last_timestamp:
            raise ValueError(
                f"timestamp {timestamp} is not after the previous one {self.last_timestamp}"
            )
        x = float(value)
        if self._next is not None:
            self._score(x - self._next)
        self._next = self._battery.push(x)
        self.n += 1
        self.last_timestamp = float(timestamp)

    def _score(self, err: FloatArray) -> None:
        self._cum_se = self._cum_se + err * err
        self._cum_ae = self._cum_ae + np.abs(err)
        self._disc = discount_step(self._disc, selection_loss(err, self.config), self._decay)
        self._resid[self._resid_pos] = err
        self._resid_pos = (self._resid_pos + 1) % self.config.interval_window
        self.n_errors += 1

    def winner(self) -> int:
        """Index of the member with the lowest selection score (first on ties)."""
        cfg = self.config
        if cfg.selection == "discounted":
            return int(np.argmin(self._disc))
        cum = self._cum_ae if cfg.selection_error == "absolute" else self._cum_se
        return int(np.argmin(cum))

    def member_forecasts(self) -> FloatArray:
        if self._next is None:
            raise ValueError("no measurement yet")
        return self._next.copy()

    def forecast(self, confidence: float = 0.95) -> OneStep:
        """The winner's forecast of the next value and its residual-quantile interval."""
        if self._next is None:
            raise ValueError("no measurement yet")
        w = self.winner()
        value = float(self._next[w])
        lower, upper = value, value
        m = min(self.n_errors, self.config.interval_window)
        if m:
            lo, hi = interval_ranks(m, confidence)
            col = np.partition(self._resid[:m, w], (lo, hi))
            lower, upper = value + float(col[lo]), value + float(col[hi])
        count = self.n_errors
        names = self._battery.names
        members = {
            name: MemberError(*_errors(self._cum_se[i], self._cum_ae[i], count))
            for i, name in enumerate(names)
        }
        mse, mae = _errors(self._cum_se[w], self._cum_ae[w], count)
        return OneStep(
            value=value,
            lower=lower,
            upper=upper,
            confidence=confidence,
            predictor=names[w],
            mse=mse,
            mae=mae,
            n=self.n,
            last_timestamp=self.last_timestamp,
            members=members,
        )


def _errors(cum_se: float, cum_ae: float, count: int) -> tuple[float, float]:
    if count == 0:
        return math.nan, math.nan
    return float(cum_se) / count, float(cum_ae) / count
