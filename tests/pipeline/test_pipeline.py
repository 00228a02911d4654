"""ppe.pipeline: horizon settling, analogue inputs, and plan() against the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forecaster.analog import CPU_ANALOG, AnalogOptions, analog_values, kernel_distribution
from ppe.core.stochastic import Point
from ppe.pipeline import (
    HistoryForecasts,
    HostForecasts,
    HostMeta,
    PlanOptions,
    SeriesHistory,
    plan,
    predict_allocation,
    replan,
    settle_horizon,
)
from ppe.replay.simulate import RateBank, RunSpec, SimConfig, simulate
from scheduler import ReplanPolicy


def test_settle_horizon_bisects_where_plain_iteration_oscillates() -> None:
    # f(H) = 1e6 / H: plain iteration jumps between H and 1e6/H forever; the fixed point
    # is 1000.
    seen: list[float | None] = []

    def step(h: float | None) -> tuple[float, str]:
        seen.append(h)
        return (1e6 / h if h else 50.0), f"at {h}"

    res = settle_horizon(step, None, tol=0.05, max_iter=30)
    assert res.converged
    assert res.horizon_s == pytest.approx(1000.0, rel=0.05)
    assert res.value == f"at {res.horizon_s}"
    assert res.rounds < 30


def test_settle_horizon_stops_at_once_for_a_constant_prediction() -> None:
    res = settle_horizon(lambda h: (1234.0, h), None)
    assert res.converged and res.rounds == 2 and res.horizon_s == 1234.0


def _bimodal(n: int = 4000, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Idle/saturated epochs of random length, 300 s apart."""
    rng = np.random.default_rng(seed)
    out: list[float] = []
    state = 1.0
    while len(out) < n:
        out.extend([state] * int(rng.integers(5, 60)))
        state = 0.01 if state == 1.0 else 1.0
    return np.arange(n) * 300.0, np.array(out[:n])


def test_analog_values_ignore_the_future_and_condition_on_now() -> None:
    ts, xs = _bimodal()
    now = float(ts[3000]) + 1.0
    base = analog_values(ts, xs, now, 3600.0)
    assert base is not None
    future = xs.copy()
    future[3001:] = np.random.default_rng(9).uniform(0.01, 1.0, future.size - 3001)
    np.testing.assert_array_equal(analog_values(ts, future, now, 3600.0), base)
    # the state now decides which past windows count: idle now -> mostly idle runs
    state_now = xs[2999:3001].mean()
    assert (np.median(base) > 0.5) == (state_now > 0.5)


def test_first_passage_sees_slow_epochs_a_window_mean_caps() -> None:
    # One analogue: idle for 2 samples, then saturated for 20, then idle. A run needing
    # 4 samples of idle work finishes after 2 + 2/0.01 samples -> far beyond the window.
    xs = np.array([1.0, 1.0] + [1.0, 1.0] + [0.01] * 20 + [1.0] * 30)
    ts = np.arange(xs.size, dtype=np.float64) * 300.0
    now = ts[-1] + 1.0
    opts = AnalogOptions(
        neighbours=0.0, min_neighbours=1, state_samples=2, unconditional_weight=0.0
    )
    fp = analog_values(ts, xs, now, 4 * 300.0, opts, conditional=False)
    window = analog_values(
        ts,
        xs,
        now,
        4 * 300.0,
        AnalogOptions(first_passage=False, state_samples=2),
        conditional=False,
    )
    assert fp is not None and window is not None
    # the start at index 2: window mean over 4 samples is (1+1+0.01+0.01)/4 ~ 0.5,
    # first passage: typical work 4 samples x 1.0 -> 2 samples idle + 20 saturated
    # (0.2 work) + 1.8 idle -> 23.8 samples -> 4/23.8
    assert window[0] == pytest.approx(0.505)
    assert fp[0] == pytest.approx(4 / 23.8, rel=1e-9)


def test_kernel_distribution_keeps_the_mean_and_has_a_floor() -> None:
    sample = np.random.default_rng(2).uniform(0.2, 0.9, 500)
    mix = kernel_distribution(sample)
    assert mix.mean == pytest.approx(sample.mean(), rel=1e-9)
    flat = kernel_distribution(np.full(100, 0.8), AnalogOptions(unconditional_weight=0.0))
    assert flat.mean == pytest.approx(0.8)
    assert flat.std == pytest.approx(CPU_ANALOG.floor_std, rel=1e-6)


def test_history_forecasts_refuse_data_at_or_after_now() -> None:
    h = SeriesHistory(np.array([0.0, 300.0, 600.0]), np.array([1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="only the past"):
        HistoryForecasts({"a": h}, 600.0, bandwidth=1e7, latency=0.0)


def _fixed(cpus: dict[str, float], bw: float = 1e6, lat: float = 1e-3):
    def forecasts_for(horizon: float | None) -> dict[str, HostForecasts]:
        return {
            n: HostForecasts(cpu=Point(c), default_bandwidth=Point(bw), latency=lat)
            for n, c in cpus.items()
        }

    return forecasts_for


@pytest.mark.parametrize("app", ["sor", "jacobi2d"])
def test_plan_prediction_equals_simulation_on_constant_load(app: str) -> None:
    cpus = {"a": 1.0, "b": 0.5, "c": 0.25}
    hosts = [HostMeta("a", 2e-6), HostMeta("b", 1e-6), HostMeta("c", 1e-6)]
    params = {"n": 600, "iterations": 40}
    res = plan(app, params, hosts, _fixed(cpus), "mean", PlanOptions(predict_samples=1000))
    assert sum(res.allocation()) == 600
    assert res.converged
    # a: 2e-6/1.0, b: 1e-6/0.5, c: 1e-6/0.25 -> time per row 2:2:4 -> rows 240, 240, 120,
    # less a few for b, the only host with two neighbours to talk to
    assert res.allocation() == pytest.approx([240, 240, 120], abs=6)
    assert res.allocation()[1] < res.allocation()[0]
    bank = RateBank([([0.0], [c]) for c in cpus.values()])
    run = RunSpec([0, 1, 2], res.allocation(), [2e-6, 1e-6, 1e-6], start=100.0)
    sim = simulate(bank, [run], SimConfig(app, 600, 40, bandwidth=1e6, latency=1e-3)).makespan[0]
    assert res.makespan.mean() == pytest.approx(sim, rel=1e-9)


def test_plan_block_and_static_baselines() -> None:
    hosts = [HostMeta("a", 1e-6), HostMeta("b", 3e-6)]
    fc = _fixed({"a": 0.2, "b": 1.0})
    block = plan("sor", {"n": 100, "iterations": 5}, hosts, fc, "block")
    static = plan("sor", {"n": 100, "iterations": 5}, hosts, fc, "static")
    assert block.allocation() == [50, 50]
    assert static.allocation() == [75, 25]  # dedicated speed only, load ignored


def test_predict_allocation_settles_and_reports_per_host() -> None:
    hosts = [HostMeta("a", 1e-6), HostMeta("b", 1e-6)]
    res = predict_allocation(
        "jacobi2d",
        {"n": 100, "iterations": 10},
        hosts,
        _fixed({"a": 1.0, "b": 0.5}),
        {"a": 60, "b": 40},
    )
    t_a = 10 * 60 * 100 * 1e-6 + 10 * (100 * 8 / 1e6 + 1e-3)
    t_b = 10 * 40 * 100 * 1e-6 / 0.5 + 10 * (100 * 8 / 1e6 + 1e-3)
    assert res.per_host["a"].mean() == pytest.approx(t_a)
    assert res.makespan.mean() == pytest.approx(max(t_a, t_b))
    assert math.isfinite(res.horizon_s or math.nan)
    with pytest.raises(ValueError, match="no rows"):
        predict_allocation(
            "sor", {"n": 10, "iterations": 1}, hosts, _fixed({"a": 1, "b": 1}), {"a": 10}
        )


def test_replan_looks_one_check_ahead_and_moves_only_when_it_pays() -> None:
    asked: list[float | None] = []
    fixed = _fixed({"a": 1.0, "b": 0.05}, lat=0.0)  # "b" has fallen since the last plan

    def forecasts_for(horizon: float | None) -> dict[str, HostForecasts]:
        asked.append(horizon)
        return fixed(horizon)

    hosts = [HostMeta("a", 1e-6), HostMeta("b", 1e-6)]
    params = {"n": 200, "iterations": 50}
    policy = ReplanPolicy(every_s=120.0)
    r = replan(
        "sor",
        params,
        hosts,
        forecasts_for,
        "mean",
        {"a": 100, "b": 100},
        policy,
        row_bytes=1600.0,
        bandwidth=1e6,
    )
    assert set(asked) == {120.0}  # forecasts up to the next check, in one round
    assert r.plan.rounds == 1 and r.plan.horizon_s == 120.0
    assert r.move and r.plan.rows["b"] < 20 < 100 < r.plan.rows["a"]
    # the a|b boundary moves by what "a" gains, at 1600 bytes a row over 1 MB/s
    assert r.migration_s == pytest.approx((r.plan.rows["a"] - 100) * 1600 / 1e6)
    assert r.keep.makespan.mean() > 5 * r.plan.makespan.mean()
    # already on the new plan's rows: nothing to move, nothing gained
    again = replan(
        "sor",
        params,
        hosts,
        forecasts_for,
        "mean",
        r.plan.rows,
        policy,
        row_bytes=1600.0,
        bandwidth=1e6,
    )
    assert not again.move and again.migration_s == 0.0


def test_epoch_ages_count_how_long_the_present_level_has_lasted() -> None:
    from forecaster.analog import _epoch_ages

    xs = np.array([0.01, 0.01, 1.0, 0.98, 1.0, 1.0, 0.5])
    ends = np.array([0, 2, 6, 7])
    level = np.array([1.0, 0.01, 1.0, 0.5])
    ages = _epoch_ages(xs, ends, level, band=0.1, cap=3)
    # end 0: nothing before; end 2: two saturated samples; end 6: four idle ones, capped at 3;
    # end 7: the 0.5 sample only
    np.testing.assert_array_equal(ages, [0, 2, 3, 1])


def _aging_series(n: int = 4000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Idle epochs that are either short (5 samples) or long (60); saturated epochs of 10.
    A host idle for 20 samples is in a long epoch: its next switch is >= 40 samples away."""
    rng = np.random.default_rng(seed)
    out: list[float] = []
    while len(out) < n:
        out.extend([1.0] * (5 if rng.random() < 0.5 else 60))
        out.extend([0.01] * 10)
    return np.arange(n) * 300.0, np.array(out[:n])


def test_matching_the_epoch_age_separates_fresh_from_settled_idle_hosts() -> None:
    ts, xs = _aging_series()
    # a present 20 samples into an idle epoch (so a long one), and one 2 samples in
    i = next(k for k in range(3000, 3900) if xs[k - 20 : k].min() == 1.0 and xs[k - 21] < 0.5)
    j = next(k for k in range(3000, 3900) if xs[k - 2 : k].min() == 1.0 and xs[k - 3] < 0.5)
    opts = AnalogOptions(relative=True, epoch_band=0.1, unconditional_weight=0.0)
    plain = AnalogOptions(relative=True, unconditional_weight=0.0)
    horizon = 10 * 300.0
    settled = analog_values(ts, xs, float(ts[i]), horizon, opts)
    fresh = analog_values(ts, xs, float(ts[j]), horizon, opts)
    blind = analog_values(ts, xs, float(ts[i]), horizon, plain)
    assert settled is not None and fresh is not None and blind is not None
    # 20 samples into an idle epoch the next 10 stay idle; 2 samples in, half the epochs end
    assert np.mean(settled < 0.9) < 0.05
    assert np.mean(fresh < 0.9) > 0.3
    assert np.mean(blind < 0.9) > np.mean(settled < 0.9) + 0.1


def test_relative_analogues_keep_the_present_level() -> None:
    # A steady host whose level drifts: analogues with nearby states are shifted to now's.
    ts = np.arange(3000, dtype=np.float64) * 300.0
    xs = np.linspace(0.2, 0.8, ts.size)
    now = float(ts[-1]) + 1.0
    shifted = analog_values(ts, xs, now, 3600.0, AnalogOptions(relative=True, first_passage=False))
    plain = analog_values(ts, xs, now, 3600.0, AnalogOptions(first_passage=False))
    assert shifted is not None and plain is not None
    assert abs(float(np.median(shifted)) - 0.8) < abs(float(np.median(plain)) - 0.8)
    assert shifted.max() <= xs.max()


def test_horizon_is_a_typical_run_not_one_pulled_up_by_rare_stalls() -> None:
    """A host with a 4 % chance of stalling makes the predicted *mean* makespan far longer
    than a typical run; the inputs are asked for the typical run's length (the median), since
    each input already carries its own stall (run_length)."""
    from ppe.core.stochastic import from_components

    asked: list[float | None] = []
    risky = from_components("mixture", [(0.96, 1.0, 0.01), (0.04, 0.02, 0.005)])

    def forecasts_for(horizon: float | None) -> dict[str, HostForecasts]:
        asked.append(horizon)
        return {
            "a": HostForecasts(cpu=risky, default_bandwidth=Point(1e6), latency=1e-3),
            "b": HostForecasts(cpu=Point(1.0), default_bandwidth=Point(1e6), latency=1e-3),
        }

    hosts = [HostMeta("a", 1e-6), HostMeta("b", 1e-6)]
    res = predict_allocation(
        "sor", {"n": 200, "iterations": 50}, hosts, forecasts_for, {"a": 100, "b": 100}
    )
    median, mean = res.makespan.median(), res.makespan.mean()
    assert mean > 1.5 * median  # the stall's weight in the mean
    assert res.converged
    assert res.horizon_s == pytest.approx(median, rel=0.05)
    assert asked[-1] is not None and asked[-1] < 0.8 * mean


def _office_hours_series(days: int = 14) -> tuple[np.ndarray, np.ndarray]:
    """Idle, except that on some days a job saturates the host from 10:00 for two hours."""
    rng = np.random.default_rng(4)
    ts = np.arange(days * 288) * 300.0
    hour = (ts % 86400.0) / 3600.0
    busy_day = rng.random(days) < 0.5
    xs = np.where((hour >= 10) & (hour < 12) & busy_day[(ts // 86400).astype(int)], 0.01, 0.98)
    return ts, xs + rng.normal(0.0, 0.005, ts.size)


def test_the_chance_of_a_fall_follows_the_hour_of_the_day() -> None:
    """A host that only ever gets loaded at 10:00: idle at 09:30 it may well fall within the
    hour, idle at 03:00 it is not going to; without the hour both look the same."""
    from dataclasses import replace

    from forecaster.analog import analog_horizon

    ts, xs = _office_hours_series()
    days = 13 * 86400.0
    night, morning = days + 3 * 3600.0, days + 9.5 * 3600.0
    clock = replace(CPU_ANALOG, clock_hazard=True)
    plain = replace(CPU_ANALOG, clock_hazard=False)

    def fall(now: float, opts: AnalogOptions) -> float:
        dist = analog_horizon(ts[ts < now], xs[ts < now], now, 3600.0, opts)
        assert dist is not None
        return float(dist.cdf(np.array([0.45]))[0])

    assert fall(morning, clock) > 3 * fall(night, clock)
    assert fall(night, clock) < 0.8 * fall(night, plain)
    assert fall(morning, clock) > fall(morning, plain)


def test_recent_habits_outweigh_old_ones() -> None:
    """A periodic job that ran every 3 h for ten days and every 6 h since: idle for 90 min
    now, the host had a fall within the hour ahead in the old rhythm, not in the new one.
    Weighing recent analogues more follows the new rhythm."""
    from dataclasses import replace

    from forecaster.analog import analog_horizon

    ts = np.arange(14 * 288, dtype=np.float64) * 300.0
    period = np.where(ts < 10 * 86400.0, 3 * 3600.0, 6 * 3600.0)
    busy = np.mod(ts, period) < 3600.0
    xs = np.where(busy, 0.01, 0.98) + np.random.default_rng(5).normal(0.0, 0.005, ts.size)
    now = 13 * 86400.0 + 2.5 * 3600.0  # 90 min into an idle spell of the 6-hour rhythm
    recent = CPU_ANALOG
    plain = replace(CPU_ANALOG, recency_s=0.0)

    def fall(opts: AnalogOptions) -> float:
        dist = analog_horizon(ts[ts < now], xs[ts < now], now, 3600.0, opts)
        assert dist is not None
        return float(dist.cdf(np.array([0.45]))[0])

    assert CPU_ANALOG.recency_s > 0
    assert fall(recent) < 0.8 * fall(plain)
