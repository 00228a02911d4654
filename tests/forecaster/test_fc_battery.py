"""Battery members compute what their names say; selection and intervals behave as designed."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import ForecasterConfig, batch_forecasts, batch_member_forecasts, member_names
from forecaster.members import ar_fit
from forecaster.selection import interval_ranks

CFG = ForecasterConfig()


def column(values: np.ndarray, name: str, cfg: ForecasterConfig = CFG) -> np.ndarray:
    return batch_member_forecasts(values, cfg)[:, member_names(cfg).index(name)]


def test_members_match_naive_definitions() -> None:
    x = np.random.default_rng(3).uniform(0, 1, 200)
    for t in (1, 3, 5, 17, 100, 200):
        past = x[:t]
        assert column(x, "last")[t] == past[-1]
        assert column(x, "mean")[t] == pytest.approx(past.mean())
        assert column(x, "mean10")[t] == pytest.approx(past[-10:].mean())
        assert column(x, "median11")[t] == pytest.approx(np.median(past[-11:]))
        window = np.sort(past[-11:])
        trimmed = window[2:-2].mean() if t >= 11 else past.mean()
        assert column(x, "trim11_2")[t] == pytest.approx(trimmed)
    # exponential smoothing: s = g x + (1 - g) s, started at x[0]
    s = x[0]
    for t in range(1, 50):
        assert column(x, "exp0.3")[t] == pytest.approx(s)
        s = 0.3 * x[t] + 0.7 * s
    assert np.isnan(column(x, "last")[0])


def test_ar_member_learns_ar1() -> None:
    rng = np.random.default_rng(5)
    x = np.empty(3000)
    x[0] = 0.5
    for t in range(1, x.size):
        x[t] = 0.5 + 0.8 * (x[t - 1] - 0.5) + rng.normal(0, 0.05)
    mean, coef, lo, hi = ar_fit(x[None, -288:], 1)
    assert coef[0, 0] == pytest.approx(0.8, abs=0.08)
    assert mean[0] == pytest.approx(0.5, abs=0.05)
    f = column(x, "ar1")
    err_ar = np.abs(x[300:] - f[300:-1]).mean()
    err_mean = np.abs(x[300:] - column(x, "mean")[300:-1]).mean()
    assert err_ar < 0.9 * err_mean
    # constant window (idle host): coefficients 0, forecast the level
    _, c, _, _ = ar_fit(np.full((1, 100), 0.99), 3)
    assert np.allclose(c, 0.0)


def test_selection_follows_the_series() -> None:
    rng = np.random.default_rng(2)
    noise = 0.6 + rng.normal(0, 0.05, 4000)  # iid: an average wins over the last value
    res = batch_forecasts(noise)
    assert res.names[res.winner[-1]] not in ("last", "exp0.75", "ar1", "ar3")
    walk = np.clip(0.5 + np.cumsum(rng.normal(0, 0.01, 4000)), 0.01, 1)  # random walk: last
    res = batch_forecasts(walk)
    assert res.names[res.winner[-1]] in ("last", "exp0.75", "ar1", "ar3", "adapt_mean")
    # the reported errors are the winner's cumulative errors
    err = walk[1:-1] - res.members[1:-2, res.winner[-2]]
    assert res.mse[-2] == pytest.approx(np.mean(err**2))
    assert res.mae[-2] == pytest.approx(np.mean(np.abs(err)))


def test_discounted_selection_adapts_to_a_new_epoch() -> None:
    rng = np.random.default_rng(4)
    iid = 0.5 + rng.normal(0, 0.05, 3000)
    walk = np.clip(0.5 + np.cumsum(rng.normal(0, 0.02, 1500)), 0.01, 1)
    x = np.concatenate([iid, walk])
    disc = batch_forecasts(x, ForecasterConfig(selection="discounted"))
    cum = batch_forecasts(x, ForecasterConfig(selection="cumulative"))
    late = slice(3000 + 600, None)
    assert (
        np.abs(x[late] - disc.forecast[late][:-1]).mean()
        < np.abs(x[late] - cum.forecast[late][:-1]).mean()
    )


def test_interval_covers_iid_noise() -> None:
    x = 0.5 + np.random.default_rng(9).normal(0, 0.1, 6000)
    res = batch_forecasts(x, confidence=0.9)
    rows = slice(500, x.size)
    covered = (x[rows] >= res.lower[rows]) & (x[rows] <= res.upper[rows])
    assert covered.mean() == pytest.approx(0.9, abs=0.02)
    assert np.all(res.lower[2:] <= res.upper[2:])


def test_interval_ranks() -> None:
    assert interval_ranks(250, 0.95) == (5, 244)  # the 6th from each end
    assert interval_ranks(39, 0.95) == (0, 38)
    assert interval_ranks(1, 0.95) == (0, 0)
    lo, hi = interval_ranks(99, 0.5)
    assert (lo, hi) == (24, 74)
    with pytest.raises(ValueError):
        interval_ranks(0, 0.95)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="odd"):
        ForecasterConfig(median_widths=(4,))
    with pytest.raises(ValueError, match="gains"):
        ForecasterConfig(gains=(1.5,))
    with pytest.raises(ValueError, match="trimmed"):
        ForecasterConfig(trimmed=((4, 2),))
    small = ForecasterConfig(
        mean_widths=(),
        median_widths=(3,),
        trimmed=(),
        gains=(0.5,),
        adaptive_widths=(),
        ar_orders=(),
    )
    assert member_names(small) == ["last", "mean", "median3", "exp0.5"]
    res = batch_forecasts(np.array([0.2, 0.4, 0.6]), small)
    assert res.forecast.shape == (4,) and np.isfinite(res.forecast[1:]).all()
