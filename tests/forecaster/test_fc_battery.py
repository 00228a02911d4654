"""Battery members compute what their names say; selection and intervals behave as designed."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import (
    ForecasterConfig,
    SeriesForecaster,
    batch_forecasts,
    batch_member_forecasts,
    member_names,
)
from forecaster.batch import next_step
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
        seasonal_days=0,
    )
    assert member_names(small) == ["last", "mean", "median3", "exp0.5"]
    res = batch_forecasts(np.array([0.2, 0.4, 0.6]), small)
    assert res.forecast.shape == (4,) and np.isfinite(res.forecast[1:]).all()


SEASONAL = ForecasterConfig(
    mean_widths=(),
    median_widths=(),
    trimmed=(),
    gains=(),
    adaptive_widths=(),
    ar_orders=(),
    seasonal_period=4,
    seasonal_days=3,
)


def test_seasonal_change_by_hand() -> None:
    """x[t-1] + median of the changes one, two, three periods back, clipped to their values."""
    x = np.array([0.5, 0.5, 0.9, 0.5, 0.5, 0.5, 0.8, 0.5, 0.5, 0.5, 0.7, 0.5, 0.5, 0.5, 0.2, 0.5])
    assert member_names(SEASONAL) == ["last", "mean", "seasonal4x3"]
    f = column(x, "seasonal4x3", SEASONAL)
    # fewer than one period behind t: the last value
    assert f[1:5].tolist() == x[0:4].tolist()
    # t = 6: one period, change x[2] - x[1] = +0.4 -> 0.5 + 0.4, clipped to max(x[5], x[2], x[1]) = 0.9
    assert f[6] == pytest.approx(0.9)
    # t = 7: change x[3] - x[2] = -0.4 -> 0.1, clipped up to min(x[6], x[3], x[2]) = 0.5
    assert f[7] == pytest.approx(0.5)
    # t = 11 (two periods): changes x[7]-x[6] = -0.3, x[3]-x[2] = -0.4, median -0.35 -> 0.35
    #   clipped to min(x[10], x[7], x[6], x[3], x[2]) = 0.5
    assert f[11] == pytest.approx(0.5)
    # t = 10: changes x[6]-x[5] = +0.3, x[2]-x[1] = +0.4 -> 0.5 + 0.35 = 0.85
    assert f[10] == pytest.approx(0.85)
    # t = 14 (three periods): changes +0.2, +0.3, +0.4 -> median 0.3 -> 0.8 (a jump on time)
    assert f[14] == pytest.approx(0.8)
    # t = 16: last value 0.5 plus the median of -0.2, -0.3, -0.4 at that phase -> 0.2
    #   (clip range: min(0.5, x[12], x[11], x[8], x[7], x[4], x[3]) = 0.5) -> 0.5
    assert f[16] == pytest.approx(0.5)
    # t = 15: median of x[11]-x[10] = -0.2, x[7]-x[6] = -0.3, x[3]-x[2] = -0.4 is -0.3;
    #   last x[14] = 0.2 -> -0.1, clipped up to the smallest value involved, 0.2
    assert f[15] == pytest.approx(0.2)


def test_seasonal_change_ignores_a_one_off_day() -> None:
    """With three past days, one day's jump is outvoted by two quiet days (median)."""
    period = 4
    x = np.full(4 * period + 1, 0.5)
    x[2 * period + 2] = 0.9  # one day, at phase 2
    f = column(x, "seasonal4x3", SEASONAL)
    t = 3 * period + 2  # same phase, three days of history
    assert f[t] == pytest.approx(0.5)
    y = x.copy()
    y[period + 2] = 0.9  # a second day agrees: the jump is forecast
    assert column(y, "seasonal4x3", SEASONAL)[t] == pytest.approx(0.9)


def test_seasonal_change_online_equals_batch() -> None:
    """Every phase of the warm-up (1, 2 and 3 periods, even and odd medians), bit for bit."""
    rng = np.random.default_rng(11)
    x = np.round(rng.uniform(0.0, 1.0, 60), 2)
    batch = batch_member_forecasts(x, SEASONAL)
    online = SeriesForecaster(SEASONAL)
    for i, v in enumerate(x.tolist()):
        online.update(float(i), v)
        np.testing.assert_array_equal(online.member_forecasts(), batch[i + 1])


def test_seasonal_change_is_causal() -> None:
    """Changing x[cut:] leaves every forecast of x[t], t <= cut, alone; it moves later ones.

    A member reading x[t] (or later) for the forecast of x[t] fails the first assertion.
    """
    rng = np.random.default_rng(12)
    x = rng.uniform(0.0, 1.0, 40)
    base = column(x, "seasonal4x3", SEASONAL)
    moved = 0
    for cut in range(1, x.size):
        y = x.copy()
        y[cut:] = 1.0 - y[cut:]
        other = column(y, "seasonal4x3", SEASONAL)
        np.testing.assert_array_equal(other[: cut + 1], base[: cut + 1])
        moved += int(other[cut + 1] != base[cut + 1])
    # the next forecast reads x[cut] (a clip to the other values involved may hide it)
    assert moved >= 0.8 * (x.size - 1)


@pytest.mark.parametrize(
    "n", [1, 2, 3, 40, CFG.interval_window, CFG.interval_window + 1, CFG.interval_window + 2, 1500]
)
def test_next_step_is_the_last_row_of_the_batch_replay(n: int) -> None:
    """A cold forecast computes only the last row; it must be the batch replay's, exactly."""
    rng = np.random.default_rng(n)
    x = np.clip(0.6 + np.cumsum(rng.normal(0, 0.02, n)) + rng.normal(0, 0.05, n), 0.01, 1.0)
    whole = batch_forecasts(x)
    step = next_step(x)
    assert step.n == whole.n == n
    assert step.value == whole.forecast[n]
    assert (step.lower, step.upper) == (whole.lower[n], whole.upper[n])
    assert step.predictor == whole.names[int(whole.winner[n])]
    np.testing.assert_array_equal([step.mse, step.mae], [whole.mse[n], whole.mae[n]])
    if n >= 40:  # residuals of both signs by then
        assert step.lower < step.value < step.upper
