"""The horizon loop on real core predictions: forecasts whose spread shrinks with the horizon
settle where the predicted run length matches the horizon it was predicted with."""

from __future__ import annotations

import numpy as np

from ppe.core import HostInputs, Normal, Prediction, predict
from ppe.pipeline import (
    HistoryForecasts,
    HostMeta,
    SeriesHistory,
    plan,
    run_length,
    settle_horizon,
)


def hosts(k: int, cv: float) -> list[HostInputs]:
    rng = np.random.default_rng(4)
    return [
        HostInputs(
            f"h{p}",
            float(rng.uniform(1.5e-8, 4e-8)),
            Normal(m := float(rng.uniform(0.4, 0.95)), cv * m),
            Normal(1.25e7, 0.08 * 1.25e7) if p < k - 1 else None,
            Normal(1.1e7, 0.08 * 1.1e7) if p > 0 else None,
            5e-4,
        )
        for p in range(k)
    ]


def test_horizon_loop_settles_on_core_predictions() -> None:
    calls: list[float | None] = []

    def step(horizon: float | None) -> tuple[float, Prediction]:
        calls.append(horizon)
        spread = 0.1 if horizon is None else 0.1 / np.sqrt(1.0 + horizon / 10.0)
        pred = predict("sor", {"n": 4000, "I": 100}, hosts(4, spread), [1000] * 4)
        return run_length(pred.makespan), pred

    out = settle_horizon(step, None, tol=0.01, max_iter=8)
    assert out.converged and out.rounds <= 4
    assert out.horizon_s is not None
    assert abs(out.value.makespan.median() - out.horizon_s) <= 0.01 * out.horizon_s
    assert calls[0] is None and [h for h, _ in out.history] == calls
    stuck = settle_horizon(step, 1.0, tol=1e-12, max_iter=2)
    assert not stuck.converged and stuck.rounds == 2


def test_a_new_host_with_one_outlier_is_not_starved() -> None:
    """Two new sensors, eight one-second samples each; one sample of host a caught other work
    (0.6). The run lasts longer than either history, so both fall back to a widened
    forecast. Before the spread cap, a's availability was 0.95 +/- 1.04 and `mean` gave it 47
    of 1000 rows; its mean is 5 % below b's, so its share may be somewhat smaller, not 20x."""
    ts = np.arange(8.0)
    quiet = np.array([1.0, 0.99, 1.0, 1.0, 1.0, 0.98, 1.0, 1.0])
    outlier = quiet.copy()
    outlier[3] = 0.6
    fc = HistoryForecasts(
        {"a": SeriesHistory(ts, outlier), "b": SeriesHistory(ts, quiet)},
        8.0,
        bandwidth=1.25e8,
        latency=5e-4,
    )
    hosts = [HostMeta("a", 1e-8), HostMeta("b", 1e-8)]
    got = plan("sor", {"n": 1000, "iterations": 2000}, hosts, fc, "mean")
    assert got.horizon_s is not None and got.horizon_s > 8.0  # the widened fallback was used
    assert 0.85 * 500 <= got.rows["a"] < got.rows["b"]
