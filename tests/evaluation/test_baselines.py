"""The statsmodels AR(1) peer of horizon forecasts (ppe.evaluation.baselines.ar1_horizon_mean)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.tsa.ar_model import AutoReg

from ppe.evaluation.baselines import ar1_horizon_mean


def _ar1(n: int, c: float, phi: float, sigma: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.empty(n)
    x[0] = c / (1 - phi)
    for t in range(1, n):
        x[t] = c + phi * x[t - 1] + rng.normal(0.0, sigma)
    return x


def test_two_steps_by_hand() -> None:
    """Two steps on: x1 = c + phi x0 + e1, x2 = c + phi c + phi^2 x0 + phi e1 + e2, so the
    average has mean (2c + phi c + (phi + phi^2) x0) / 2 and variance
    sigma^2 ((1 + phi)^2 + 1) / 4."""
    x = _ar1(3000, 0.2, 0.7, 0.05)
    res = AutoReg(x, lags=1, trend="c").fit()
    c, phi = (float(v) for v in res.params)
    s2 = float(res.sigma2)
    x0 = float(x[-1])
    mean, sd = ar1_horizon_mean(x, 2)  # type: ignore[misc]
    assert mean == pytest.approx((2 * c + phi * c + (phi + phi**2) * x0) / 2)
    assert sd == pytest.approx(math.sqrt(s2 * ((1 + phi) ** 2 + 1)) / 2)
    one = ar1_horizon_mean(x, 1)
    assert one == pytest.approx((c + phi * x0, math.sqrt(s2)))


def test_matches_simulated_paths() -> None:
    """The mean and spread of the average of 24 steps agree with 40 000 simulated paths of the
    fitted model."""
    x = _ar1(4000, 0.1, 0.9, 0.03, seed=1)
    res = AutoReg(x, lags=1, trend="c").fit()
    c, phi = (float(v) for v in res.params)
    sigma = math.sqrt(float(res.sigma2))
    rng = np.random.default_rng(2)
    level = np.full(40_000, x[-1])
    total = np.zeros_like(level)
    for _ in range(24):
        level = c + phi * level + rng.normal(0.0, sigma, level.size)
        total += level
    mean, sd = ar1_horizon_mean(x, 24)  # type: ignore[misc]
    assert mean == pytest.approx(float(np.mean(total / 24)), abs=3 * sd / 200)
    assert sd == pytest.approx(float(np.std(total / 24)), rel=0.02)


def test_long_horizons_revert_to_the_mean() -> None:
    x = _ar1(4000, 0.1, 0.8, 0.05, seed=3)
    mean, sd = ar1_horizon_mean(x, 5000)  # type: ignore[misc]
    assert mean == pytest.approx(0.5, abs=0.01)
    # sigma / (1 - phi) / sqrt(steps): the average of many nearly independent blocks
    assert sd == pytest.approx(0.05 / 0.2 / math.sqrt(5000), rel=0.1)


def test_a_constant_history_has_no_fit() -> None:
    assert ar1_horizon_mean(np.ones(500), 12) is None
    assert ar1_horizon_mean(np.array([0.5, 0.6]), 12) is None
    assert ar1_horizon_mean(_ar1(100, 0.1, 0.5, 0.1), 0) is None
