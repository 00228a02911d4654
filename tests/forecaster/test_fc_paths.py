"""The online and the batch path give identical answers, bit for bit, on real traces."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster import ForecasterConfig, OneStep, SeriesForecaster, batch_forecasts
from ppe.traces import Trace

# a bimodal, a variable, an idle, a steady and a short (formerly dead) trace
NAMES = ("41", "392", "2", "198", "195")
LENGTH = 1500


def online_rows(
    trace: Trace, cfg: ForecasterConfig, every: int
) -> list[tuple[int, OneStep, np.ndarray]]:
    fc = SeriesForecaster(cfg)
    rows = []
    for i, (t, v) in enumerate(
        zip(trace.timestamps[:LENGTH], trace.availability[:LENGTH], strict=True)
    ):
        fc.update(float(t), float(v))
        if i % every == 0 or i < 40:
            rows.append((i + 1, fc.forecast(0.9), fc.member_forecasts()))
    return rows


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    "cfg",
    [
        ForecasterConfig(),
        ForecasterConfig(
            selection="cumulative", selection_error="squared", interval_window=60, ar_refit=5
        ),
    ],
    ids=["default", "nws"],
)
def test_online_equals_batch(traces: dict[str, Trace], name: str, cfg: ForecasterConfig) -> None:
    trace = traces[name]
    x = trace.availability[:LENGTH]
    batch = batch_forecasts(x, cfg, confidence=0.9)
    for row, one, members in online_rows(trace, cfg, every=3):
        np.testing.assert_array_equal(members, batch.members[row])
        assert one.value == batch.forecast[row]
        assert one.predictor == batch.names[batch.winner[row]]
        assert (one.lower, one.upper) == (batch.lower[row], batch.upper[row])
        if row > 1:
            assert (one.mse, one.mae) == (batch.mse[row], batch.mae[row])


def test_from_history_rebuilds_state(traces: dict[str, Trace]) -> None:
    trace = traces["41"]
    ts, x = trace.timestamps[:800], trace.availability[:800]
    rebuilt = SeriesForecaster.from_history(ts[:500], x[:500])
    live = SeriesForecaster.from_history(ts[:500], x[:500])
    for t, v in zip(ts[500:], x[500:], strict=True):
        rebuilt.update(float(t), float(v))
        live.update(float(t), float(v))
    restarted = SeriesForecaster.from_history(ts, x)
    assert restarted.forecast() == live.forecast() == rebuilt.forecast()
    assert restarted.forecast().value == batch_forecasts(x).forecast[-1]


def test_online_rejects_bad_measurements() -> None:
    fc = SeriesForecaster()
    with pytest.raises(ValueError, match="no measurement"):
        fc.forecast()
    fc.update(10.0, 0.5)
    with pytest.raises(ValueError, match="not after"):
        fc.update(10.0, 0.6)
    with pytest.raises(ValueError, match="non-finite"):
        fc.update(11.0, float("nan"))
    one = fc.forecast()
    assert one.value == 0.5 and one.n == 1 and np.isnan(one.mse)


def replay_online(trace: Trace, every: int) -> tuple[np.ndarray, list[tuple[int, OneStep]]]:
    fc = SeriesForecaster()
    members, picks = [], []
    for i, (t, v) in enumerate(
        zip(trace.timestamps.tolist(), trace.availability.tolist(), strict=True)
    ):
        fc.update(t, v)
        members.append(fc.member_forecasts())
        if i % every == 0:
            picks.append((i + 1, fc.forecast()))
    return np.array(members), picks


def assert_same(trace: Trace, every: int) -> None:
    members, picks = replay_online(trace, every)
    batch = batch_forecasts(trace.availability)
    np.testing.assert_array_equal(members, batch.members[1:])
    for row, one in picks:
        assert (one.value, one.lower, one.upper) == (
            batch.forecast[row],
            batch.lower[row],
            batch.upper[row],
        )
        assert one.predictor == batch.names[batch.winner[row]]


def test_online_equals_batch_whole_trace(traces: dict[str, Trace]) -> None:
    assert_same(traces["233"], every=10)


@pytest.mark.slow
def test_online_equals_batch_every_trace(traces: dict[str, Trace]) -> None:
    for trace in traces.values():
        assert_same(trace, every=50)
