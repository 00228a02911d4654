"""Predicted times as stochastic summaries: mean, std and a central interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri


@dataclass(frozen=True)
class TimeStats:
    """A predicted time. ``kind``: "point", "normal", "mixture" (exact, with its normal
    ``components`` as (weight, mean, std)) or "samples" (Monte Carlo interval)."""

    mean: float
    std: float
    interval: tuple[float, float]
    confidence: float
    kind: str
    components: tuple[tuple[float, float, float], ...] = ()

    @classmethod
    def point(cls, value: float, confidence: float) -> TimeStats:
        return cls(float(value), 0.0, (float(value), float(value)), confidence, "point")

    @classmethod
    def normal(cls, mean: float, std: float, confidence: float) -> TimeStats:
        if std == 0.0:
            return cls.point(mean, confidence)
        half = std * float(ndtri(0.5 + confidence / 2))
        return cls(float(mean), float(std), (mean - half, mean + half), confidence, "normal")

    @classmethod
    def from_samples(
        cls,
        x: NDArray[np.float64],
        confidence: float,
        mean: float | None = None,
        std: float | None = None,
    ) -> TimeStats:
        """Empirical interval; exact moments may be passed in when they are known."""
        lo, hi = row_interval(x, confidence)
        m = float(x.mean()) if mean is None else mean
        s = float(x.std()) if std is None else std
        if s == 0.0 and lo == hi:
            return cls.point(m, confidence)
        return cls(m, s, (float(lo), float(hi)), confidence, "samples")

    def to_dict(self) -> dict[str, Any]:
        """docs/architecture.md's JSON shape for a stochastic value."""
        return {
            "mean": self.mean,
            "std": self.std,
            "interval": [self.interval[0], self.interval[1]],
            "confidence": self.confidence,
            "kind": self.kind,
            "components": [{"weight": w, "mean": m, "std": s} for w, m, s in self.components],
        }


def row_interval(x: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    """Central interval of samples by ``np.quantile``'s default (linear) rule, via a partial
    sort of the four order statistics it needs (several times faster than ``np.quantile``)."""
    pos = np.array([0.5 - confidence / 2, 0.5 + confidence / 2]) * (x.size - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, x.size - 1)
    part = np.partition(x, np.unique(np.concatenate([lo, hi])))
    ends = part[lo] + (part[hi] - part[lo]) * (pos - lo)
    return float(ends[0]), float(ends[1])


def check_confidence(confidence: float) -> None:
    if not (0.0 < confidence < 1.0) or math.isnan(confidence):
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
