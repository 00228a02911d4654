"""Nothing may look at the future: changing values at or after t leaves forecasts for <= t alone."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import SeriesForecaster, batch_forecasts, forecast_series
from ppe.traces import Trace

LENGTH = 1200


def perturbed(x: np.ndarray, cut: int, seed: int) -> np.ndarray:
    """Same values before ``cut``, different ones from ``cut`` on."""
    rng = np.random.default_rng(seed)
    y = x.copy()
    y[cut:] = rng.uniform(0.01, 1.0, size=x.size - cut)
    return y


@pytest.mark.parametrize("name", ["41", "392", "198"])  # bimodal, variable, steady
def test_batch_is_causal(traces: dict[str, Trace], name: str) -> None:
    x = traces[name].availability[:LENGTH]
    base = batch_forecasts(x)
    for seed, cut in enumerate((1, 2, 30, 290, 301, 700, LENGTH - 1)):
        other = batch_forecasts(perturbed(x, cut, seed))
        # row t forecasts x[t] from x[:t]: rows 0..cut may not move
        keep = slice(0, cut + 1)
        np.testing.assert_array_equal(other.members[keep], base.members[keep])
        np.testing.assert_array_equal(other.forecast[keep], base.forecast[keep])
        np.testing.assert_array_equal(other.winner[keep], base.winner[keep])
        np.testing.assert_array_equal(other.lower[keep], base.lower[keep])
        np.testing.assert_array_equal(other.upper[keep], base.upper[keep])
        np.testing.assert_array_equal(other.mse[keep], base.mse[keep])
        # and the perturbation is visible right after (the test can fail)
        assert not np.array_equal(other.members[cut + 1], base.members[cut + 1])


def test_online_is_causal(traces: dict[str, Trace]) -> None:
    tr = traces["45"]
    ts, x = tr.timestamps[:400], tr.availability[:400]
    cut = 250
    y = perturbed(x, cut, 7)
    a, b = SeriesForecaster(), SeriesForecaster()
    for i in range(x.size):
        a.update(float(ts[i]), float(x[i]))
        b.update(float(ts[i]), float(y[i]))
        if 2 <= i + 1 <= cut:  # forecasts of x[i+1] made from x[:i+1], all before the cut
            assert a.forecast() == b.forecast()
    assert a.forecast() != b.forecast()


def test_forecast_series_uses_only_samples_before_now(traces: dict[str, Trace]) -> None:
    tr = traces["233"]
    ts, x = tr.timestamps[:3000], tr.availability[:3000]
    now = float(ts[2000])  # the sample *at* now is future too
    base = forecast_series(ts, x, now=now, horizon_s=3600)
    other = forecast_series(ts, perturbed(x, 2000, 3), now=now, horizon_s=3600)
    assert base == other
    assert base.n == 2000 and base.last_timestamp == float(ts[1999])
    changed = forecast_series(ts, perturbed(x, 1999, 3), now=now, horizon_s=3600)
    assert changed.value != base.value
