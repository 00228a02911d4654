"""Horizon forecasts fall back honestly when too few analogues have that much future (issue 17)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from forecaster import CPU_ANALOG, Distribution, forecast_series
from forecaster.analog import (
    LEGACY_ANALOG,
    _analogues,
    _combined,
    _episodes,
    _past_windows,
    _state_tier,
    _widening,
    analog_horizon,
    prior_weight,
    spread_cap,
)
from ppe.traces import Trace

DAY = 86400.0
SATURATED, IDLE = 0.02, 0.99


def long_idle_after_saturated_week() -> tuple[np.ndarray, np.ndarray]:
    """A week in which the host was saturated half of the time, in spells of 5 to 31 hours,
    then idle for the last 28 hours (the case of issue 17)."""
    rng = np.random.default_rng(3)
    spells = [("idle", 6)]
    for sat, idle in zip((5, 31, 12, 20, 8, 9), (6, 10, 14, 8, 16, 28), strict=True):
        spells += [("sat", sat), ("idle", idle)]
    x = np.concatenate(
        [
            np.clip(
                (SATURATED if kind == "sat" else IDLE) + rng.normal(0, 0.005, hours * 12),
                0.01,
                1.0,
            )
            for kind, hours in spells
        ]
    )
    return 1.7e9 + 300.0 * np.arange(x.size), x


def test_long_idle_host_with_saturated_past_keeps_its_saturated_level() -> None:
    ts, x = long_idle_after_saturated_week()
    now = float(ts[-1]) + 300.0
    week = x[ts >= now - 7 * DAY]
    saturated_share = float(np.mean(week < 0.5))
    assert 0.45 < saturated_share < 0.55 and np.all(x[ts >= now - 28 * 3600] > 0.9)

    fc = forecast_series(ts, x, now=now, horizon_s=3 * DAY, bounds=(0.0, 1.0), analog=CPU_ANALOG)
    lo, hi = fc.interval
    assert lo <= SATURATED + 0.03 and hi >= IDLE - 0.03  # both levels inside the interval
    # the saturated level weighs in proportion to the history, not "stays idle"
    assert fc.distribution.cdf(0.5) == pytest.approx(saturated_share, abs=0.15)
    assert fc.mean == pytest.approx(float(week.mean()), abs=0.15)
    # and the forecast says it rests on little
    assert fc.distribution.fallback in ("blend", "unconditional")
    assert fc.distribution.support is not None and fc.distribution.support < 10
    body = fc.to_dict()
    assert (
        body["fallback"] == fc.distribution.fallback and body["support"] == fc.distribution.support
    )

    # the analogue method as it was put most of the weight on "stays idle"
    legacy = forecast_series(
        ts, x, now=now, horizon_s=3 * DAY, bounds=(0.0, 1.0), analog=LEGACY_ANALOG
    )
    assert float(legacy.distribution.cdf(0.5)) < saturated_share - 0.2
    assert legacy.distribution.fallback is None


def test_supported_short_horizon_is_the_analogue_forecast(traces: dict[str, Trace]) -> None:
    """With enough independent analogues nothing changes but the reported support."""
    t = traces["41"]
    now = float(t.timestamps[0]) + 12.3 * DAY
    new = analog_horizon(t.timestamps, t.availability, now, 3600.0, CPU_ANALOG)
    old = analog_horizon(t.timestamps, t.availability, now, 3600.0, LEGACY_ANALOG)
    assert new is not None and old is not None
    assert new.support is not None and new.support >= CPU_ANALOG.min_support
    assert new.fallback is None and old.support is None
    assert new.components == old.components


def test_prior_weight_is_the_predictive_of_the_support_tapered_to_nothing() -> None:
    c, reach = CPU_ANALOG.prior_strength, CPU_ANALOG.prior_reach
    assert c > 0 and reach > CPU_ANALOG.min_support
    weights = [prior_weight(s, CPU_ANALOG) for s in range(CPU_ANALOG.min_support, reach + 5)]
    assert weights[0] == pytest.approx(
        c / (c + CPU_ANALOG.min_support) * (1 - CPU_ANALOG.min_support / reach)
    )
    live = reach - CPU_ANALOG.min_support
    assert np.all(np.diff(weights[:live]) < 0) and weights[live - 1] > 0
    assert weights[live:] == [0.0] * 5
    assert prior_weight(12, LEGACY_ANALOG) == 0.0
    assert prior_weight(12, replace(CPU_ANALOG, prior_reach=0)) == 0.0


def test_a_thinly_supported_forecast_leaves_room_for_a_switch(traces: dict[str, Trace]) -> None:
    """An idle bimodal host whose 6-hour analogues rest on a dozen independent episodes: the
    past windows, saturated ones too, get the prior's share (seventh pass, issue 17)."""
    t = traces["41"]
    now, horizon = float(t.timestamps[0]) + 15.7 * DAY, 6 * 3600.0
    without = replace(CPU_ANALOG, prior_strength=0.0)
    new = analog_horizon(t.timestamps, t.availability, now, horizon, CPU_ANALOG)
    old = analog_horizon(t.timestamps, t.availability, now, horizon, without)
    past = _past_windows(t.timestamps, t.availability, now, horizon, CPU_ANALOG)
    assert new is not None and old is not None and past is not None
    support = new.support
    assert support is not None and CPU_ANALOG.min_support <= support < CPU_ANALOG.prior_reach
    assert new.fallback is None and old.support == support
    w = prior_weight(support, CPU_ANALOG)
    assert w > 0.02
    for x in (0.1, 0.5, 0.9):
        mixed = (1 - w) * float(old.cdf(x)) + w * float(past[1].cdf(x))
        assert float(new.cdf(x)) == pytest.approx(mixed, abs=1e-6)
    # the saturated windows of the past weigh in: more mass on the other mode, a lower end
    assert float(past[1].cdf(0.5)) > 0.3
    assert float(new.cdf(0.5)) > float(old.cdf(0.5)) + 0.5 * w * float(past[1].cdf(0.5))
    assert new.interval(0.95, (0.0, 1.0))[0] < old.interval(0.95, (0.0, 1.0))[0]


def test_a_well_supported_forecast_has_no_prior(traces: dict[str, Trace]) -> None:
    t = traces["45"]
    now = float(t.timestamps[0]) + 20.2 * DAY
    new = analog_horizon(t.timestamps, t.availability, now, 3600.0, CPU_ANALOG)
    old = analog_horizon(
        t.timestamps, t.availability, now, 3600.0, replace(CPU_ANALOG, prior_strength=0.0)
    )
    assert new is not None and old is not None
    assert new.support is not None and new.support >= CPU_ANALOG.prior_reach
    assert new.components == old.components


def test_a_fallback_backs_off_to_the_present_level_first(traces: dict[str, Trace]) -> None:
    """An idle bimodal host whose 6-hour forecast rests on five independent analogues: the
    weight they lack goes first to the analogues of the idle level alone (any epoch age), whose
    falls keep the saturated mode, and only then to all past windows (ninth pass, issue 17)."""
    t = traces["41"]
    now, horizon = float(t.timestamps[0]) + 9.4 * DAY, 6 * 3600.0
    present = float(t.availability[t.timestamps < now][-1])
    old_way = replace(CPU_ANALOG, state_support=0)
    new = analog_horizon(t.timestamps, t.availability, now, horizon, CPU_ANALOG)
    old = analog_horizon(t.timestamps, t.availability, now, horizon, old_way)
    assert new is not None and old is not None and present > 0.99
    assert new.fallback == old.fallback == "blend" and new.support == old.support
    assert new.support is not None and 0 < new.support < CPU_ANALOG.min_support
    # nearer the present level, narrower, and the other mode still there
    assert abs(new.mean - present) < abs(old.mean - present) - 0.05
    assert new.std < old.std - 0.02
    assert 0.05 < float(new.cdf(0.5)) < float(old.cdf(0.5))

    level = _analogues(
        t.timestamps, t.availability, now, horizon, replace(CPU_ANALOG, epoch_band=0.0), True
    )
    assert level is not None
    known = level.only(level.complete)
    tier = _state_tier(known, level.width, now, CPU_ANALOG, CPU_ANALOG)
    assert tier is not None
    support = _episodes(known.positions, level.width)
    assert tier[0] == pytest.approx(
        min(1.0, support / CPU_ANALOG.state_support) * (1.0 - prior_weight(support, CPU_ANALOG))
    )
    assert tier[0] > 0.3
    # some of the idle level's known windows fell; weighted by recency and this hour's
    # chance of a fall they still keep mass on the saturated side
    assert 0.0 < float(np.mean(known.outcomes < 0.5)) < 0.5 and float(tier[1].cdf(0.5)) > 0.02
    empty = known.only(np.zeros(known.outcomes.size, dtype=bool))
    assert _state_tier(empty, level.width, now, CPU_ANALOG, CPU_ANALOG) is None
    with pytest.raises(ValueError, match="state_support"):
        replace(CPU_ANALOG, state_support=-1)


@pytest.mark.parametrize("name", ["41", "198"])
def test_long_horizon_on_short_history_falls_back(traces: dict[str, Trace], name: str) -> None:
    t = traces[name]
    now = float(t.timestamps[0]) + 5.2 * DAY
    dist = analog_horizon(t.timestamps, t.availability, now, 3 * DAY, CPU_ANALOG)
    assert dist is not None and dist.fallback in ("blend", "unconditional")
    assert dist.support is not None and dist.support <= 2  # 2.2 days of complete windows
    # history shorter than the horizon: block means of the recent values, said so
    short = forecast_series(
        t.timestamps, t.availability, now=float(t.timestamps[0]) + DAY, horizon_s=3 * DAY
    )
    assert short.distribution.fallback == "unconditional" and short.distribution.support == 0


def test_episodes_and_widening() -> None:
    assert _episodes(np.array([0, 1, 2, 10, 11, 25]), 10) == 3
    assert _episodes(np.array([5, 3, 1]), 1) == 3
    assert _episodes(np.array([], dtype=np.int64), 10) == 0
    # Student-t predictive factor: large for a few windows, near 1 for many, 1 when off
    assert _widening(4, CPU_ANALOG) == pytest.approx(3.182446 * np.sqrt(1.25) / 1.959964, rel=1e-5)
    assert 1.0 < _widening(200, CPU_ANALOG) < 1.02
    assert _widening(4, LEGACY_ANALOG) == 1.0


def test_spread_cap_is_bhatia_davis() -> None:
    assert spread_cap(0.5, (0.0, 1.0)) == pytest.approx(0.5)
    assert spread_cap(0.9, (0.0, 1.0)) == pytest.approx(0.3)
    assert spread_cap(3.0, (2.0, 6.0)) == pytest.approx(np.sqrt(3.0))
    assert spread_cap(1.2, (0.0, 1.0)) == 0.0  # a mean outside the range: no room at all
    with pytest.raises(ValueError, match="value_range"):
        replace(CPU_ANALOG, value_range=(1.0, 0.0))


def new_host_with_one_outlier() -> tuple[np.ndarray, np.ndarray]:
    """A sensor that started eight seconds ago; one of its samples caught other work."""
    return np.arange(8.0), np.array([1.0, 0.99, 1.0, 0.6, 1.0, 0.98, 1.0, 1.0])


@pytest.mark.parametrize("horizon", [20.0, 3600.0, 3 * DAY])
def test_a_new_hosts_widened_forecast_stays_a_possible_spread(horizon: float) -> None:
    """With less history than one window the recent values are widened as a new draw from
    that many samples (here eight: t with 7 degrees of freedom); wide, never wider than a
    distribution on [0, 1] with that mean can be (one window's 7.9x once made it 0.95 +/-
    1.04, and the planner starved the host)."""
    ts, x = new_host_with_one_outlier()
    dist = forecast_series(ts, x, now=8.0, horizon_s=horizon).distribution
    assert dist.fallback == "unconditional" and dist.support == 0
    assert dist.mean == pytest.approx(float(x.mean()))
    assert dist.std == pytest.approx(_widening(8, CPU_ANALOG) * float(x.std()), rel=1e-9)
    assert dist.std > 1.2 * float(x.std())  # still widened: eight samples say little
    assert dist.std <= spread_cap(dist.mean, (0.0, 1.0))


def test_a_stretch_beyond_the_range_is_capped() -> None:
    """One window's stretch (7.9x) of those samples, as the fallback of a single window
    gives it: capped at the Bhatia-Davis bound, and far wider without the cap."""
    _, x = new_host_with_one_outlier()
    fitted = Distribution("normal", [(1.0, float(x.mean()), float(x.std()))], 0.95, 0.13, False, 8)
    capped = _combined([(1.0, fitted)], _widening(1, CPU_ANALOG), (0.6, 1.0), 0, None, CPU_ANALOG)
    cap = spread_cap(capped.mean, (0.0, 1.0))
    assert capped.std == pytest.approx(cap, rel=1e-9)
    loose = replace(CPU_ANALOG, value_range=None)
    assert _combined([(1.0, fitted)], _widening(1, loose), (0.6, 1.0), 0, None, loose).std > 4 * cap


def test_a_cap_keeps_the_spread_between_modes() -> None:
    """Only the components' own spread shrinks: two clipped modes keep their means and weights."""
    parts = [(1.0, Distribution("mixture", [(0.5, 0.1, 0.2), (0.5, 0.9, 0.2)], 0.5, 0.45, True, 9))]
    out = _combined(parts, 3.0, (0.1, 0.9), 0, "unconditional", CPU_ANALOG)
    assert [c[1] for c in out.components] == pytest.approx([0.1, 0.9])
    assert [c[0] for c in out.components] == pytest.approx([0.5, 0.5])
    assert out.std == pytest.approx(spread_cap(0.5, (0.0, 1.0)))
    within = np.sqrt(np.mean([c[2] ** 2 for c in out.components]))
    assert within == pytest.approx(np.sqrt(0.25 - 0.16))


def test_an_idle_new_host_still_widens() -> None:
    """Eight samples of 1.0: the Bhatia-Davis bound at the range's edge is 0, but the cap
    never goes below the stretched kernel floor, so the forecast is not a certainty."""
    ts = np.arange(8.0)
    dist = forecast_series(ts, np.ones(8), now=8.0, horizon_s=3600.0).distribution
    assert dist.kind == "mixture" and dist.mean == pytest.approx(1.0)
    assert dist.std == pytest.approx(_widening(8, CPU_ANALOG) * CPU_ANALOG.floor_std)


def test_a_history_outside_the_range_is_capped_too() -> None:
    """Means pulled into [0, 1] first, so the cap holds even for values a store let past."""
    parts = [(1.0, Distribution("mixture", [(0.5, 0.0, 0.1), (0.5, 1.2, 0.1)], 0.6, 0.6, True, 9))]
    out = _combined(parts, 3.0, (0.0, 1.2), 0, "unconditional", CPU_ANALOG)
    assert max(c[1] for c in out.components) <= 1.0
    assert out.std <= spread_cap(out.mean, (0.0, 1.0)) + 1e-12
