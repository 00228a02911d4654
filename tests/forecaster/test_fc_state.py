"""forecast_series with live online state or a fit cache answers exactly as without them."""

from __future__ import annotations

import numpy as np

from forecaster import SeriesForecaster, forecast_series
from ppe.traces import read_trace


def test_state_and_fit_cache_change_nothing(traces_dir) -> None:  # type: ignore[no-untyped-def]
    tr = read_trace(traces_dir / "1.csv.gz")
    ts, xs = tr.timestamps[:800], tr.availability[:800]
    state = SeriesForecaster.from_history(ts[:700], xs[:700])
    for t, x in zip(ts[700:], xs[700:], strict=True):
        state.update(float(t), float(x))
    cache: dict = {}
    for horizon in (None, 3600.0):
        plain = forecast_series(ts, xs, horizon_s=horizon, bounds=(0, 1))
        fast = forecast_series(
            ts, xs, horizon_s=horizon, bounds=(0, 1), state=state, fit_cache=cache
        )
        again = forecast_series(
            ts, xs, horizon_s=horizon, bounds=(0, 1), state=state, fit_cache=cache
        )
        assert fast == plain == again
    assert len(cache) == 2


def test_stale_state_is_ignored(traces_dir) -> None:  # type: ignore[no-untyped-def]
    tr = read_trace(traces_dir / "1.csv.gz")
    ts, xs = tr.timestamps[:300], tr.availability[:300]
    behind = SeriesForecaster.from_history(ts[:200], np.zeros(200))
    assert forecast_series(ts, xs, state=behind) == forecast_series(ts, xs)
