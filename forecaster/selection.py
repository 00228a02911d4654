"""Formulas shared by the online and batch paths: selection loss and interval order statistics."""

from __future__ import annotations

import math

import numpy as np

from forecaster.config import ForecasterConfig
from forecaster.history import FloatArray


def selection_loss(err: FloatArray, config: ForecasterConfig) -> FloatArray:
    """The per-member loss the selection accumulates: squared (NWS) or absolute error."""
    if config.selection_error == "absolute":
        return np.abs(err)
    result: FloatArray = err * err
    return result


def interval_ranks(m: int, confidence: float) -> tuple[int, int]:
    """0-based order statistics of ``m`` residuals bounding a central ``confidence`` interval.

    The lower rank is ``floor(alpha/2 * (m + 1))`` (1-based), the split-conformal choice that makes
    a new residual, exchangeable with the ``m`` seen, fall below it with probability at most
    ``alpha/2``; the upper rank mirrors it. With too few residuals the extremes are used.
    """
    if m < 1:
        raise ValueError("need at least one residual")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    alpha = 1.0 - confidence
    k_lo = max(1, math.floor(alpha / 2.0 * (m + 1)))
    k_lo = min(k_lo, (m + 1) // 2)
    return k_lo - 1, m - k_lo
