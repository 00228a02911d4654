"""forecast_series: quality information, bounds, too little data, horizon aggregation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from forecaster import (
    InsufficientData,
    block_means,
    fit_distribution,
    forecast_series,
    horizon_distribution,
)
from ppe.traces import Trace


def test_insufficient_data() -> None:
    ts = np.arange(4, dtype=np.float64) * 300.0
    with pytest.raises(InsufficientData) as err:
        forecast_series(ts, [0.5, 0.6, 0.5, 0.6])
    assert err.value.n == 4 and err.value.minimum == 5
    ts = np.arange(10, dtype=np.float64) * 300.0
    with pytest.raises(InsufficientData):  # only 3 samples strictly before now
        forecast_series(ts, np.full(10, 0.5), now=900.0)
    assert forecast_series(ts, np.full(10, 0.5)).n == 10


def test_quality_information_and_bounds(traces: dict[str, Trace]) -> None:
    tr = traces["41"]
    ts, x = tr.timestamps[:2000], tr.availability[:2000]
    now = float(ts[-1]) + 450.0
    f = forecast_series(ts, x, now=now, confidence=0.9, bounds=(0.0, 1.0))
    assert f.n == 2000 and f.age_s == pytest.approx(450.0) and f.last_timestamp == ts[-1]
    assert f.predictor and f.mse > 0 and f.mae > 0 and f.mae <= math.sqrt(f.mse)
    assert 0.0 <= f.lower <= f.value <= f.upper <= 1.0
    assert 0.0 <= f.interval[0] <= f.mean <= f.interval[1] <= 1.0
    assert f.horizon_s == pytest.approx(300.0, abs=2)  # one sample when no horizon is asked
    d = f.to_dict()
    json.dumps(d)
    assert d["kind"] == f.distribution.kind and d["predictor"] == f.predictor
    assert {"mean", "std", "interval", "confidence", "distribution", "age_s", "n"} <= set(d)
    # as of the newest sample when no `now` is given
    assert forecast_series(ts, x).age_s == 0.0


def test_unsorted_and_duplicate_samples_are_tolerated() -> None:
    ts = np.array([0.0, 600.0, 300.0, 900.0, 900.0, 1200.0, 1500.0])
    x = np.array([0.5, 0.7, 0.6, 0.8, 0.1, 0.9, 1.0])
    f = forecast_series(ts, x)
    assert f.n == 6 and f.last_timestamp == 1500.0


def test_block_means() -> None:
    ts = np.arange(0, 3600, 300.0)  # 12 samples, 5 minutes apart
    x = np.arange(12, dtype=float)
    means = block_means(ts, x, horizon_s=1200.0, now=3600.0, stride_s=1200.0)
    np.testing.assert_allclose(means, [1.5, 5.5, 9.5])
    gap = ts < 1200  # a gap in the middle block: blocks without samples are dropped
    means = block_means(ts[gap | (ts >= 2400)], x[gap | (ts >= 2400)], 1200.0, 3600.0, 1200.0)
    np.testing.assert_allclose(means, [1.5, 9.5])


def test_horizon_averages_shrink_iid_noise() -> None:
    rng = np.random.default_rng(0)
    ts = np.arange(20000, dtype=np.float64) * 300.0
    x = 0.6 + rng.normal(0, 0.1, ts.size)
    now = float(ts[-1]) + 300.0
    one = horizon_distribution(ts, x, 300.0, now)
    hour = horizon_distribution(ts, x, 3600.0, now)  # 12 samples per block
    assert one.std == pytest.approx(0.1, rel=0.1)
    assert hour.std == pytest.approx(0.1 / math.sqrt(12), rel=0.25)
    assert hour.mean == pytest.approx(0.6, abs=0.01)
    # with less history than 30 horizons the blocks overlap but stay inside the history
    day = horizon_distribution(ts[-600:], x[-600:], 86400.0, now)
    assert day.n >= 30 and day.std < 0.1 / math.sqrt(100)


def test_horizon_keeps_slow_modes_and_uses_only_the_past(traces: dict[str, Trace]) -> None:
    tr = traces["41"]
    now = float(tr.timestamps[5000])
    d = horizon_distribution(tr.timestamps, tr.availability, 3600.0, now, lookback_s=10 * 86400.0)
    assert d.multimode  # idle/saturated epochs last longer than an hour
    x = tr.availability.copy()
    x[5000:] = 0.5
    assert horizon_distribution(tr.timestamps, x, 3600.0, now, lookback_s=10 * 86400.0) == d
    with pytest.raises(ValueError):
        horizon_distribution(tr.timestamps, tr.availability, 0.0, now)
    short = horizon_distribution(
        tr.timestamps[:5], tr.availability[:5], 86400.0, float(tr.timestamps[5])
    )
    assert short == fit_distribution(tr.availability[:5])
