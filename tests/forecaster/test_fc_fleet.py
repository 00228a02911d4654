"""The fleet prior: a settled-high host's fallback borrows what followed other hosts' idle
states (issue 17; forecaster.fleet)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from forecaster import CPU_ANALOG, Distribution, series_distribution
from forecaster.fleet import (
    FLEET,
    HostWindows,
    fleet_outcomes,
    settled_high,
    with_fleet,
)
from ppe.traces import Trace

DAY = 86400.0
STEP = 300.0
RANGE = (0.0, 1.0)
T0 = 1_700_006_400.0  # a multiple of the 3-hour grid


def series(days: float, value: float = 0.98) -> tuple[np.ndarray, np.ndarray]:
    ts = T0 + STEP * np.arange(int(days * DAY / STEP))
    return ts, np.full(ts.size, value)


def test_settled_high_counts_the_samples_below_the_level_in_the_last_week() -> None:
    now = T0 + 10 * DAY
    ts = now - 7 * DAY + 302.4 * (np.arange(2000, dtype=np.float64) + 0.5)  # all in the week
    x = np.full(ts.size, 0.98)
    x[:100] = 0.5  # exactly 5 %: allowed
    assert settled_high(ts, x, now, RANGE)
    x[100] = 0.5  # one more
    assert not settled_high(ts, x, now, RANGE)
    x[:101] = 0.98
    x[-1] = 0.9  # at the level is not below it
    assert settled_high(ts, x, now, RANGE)
    # only the last 7 days count: a busy spell before them does not
    long_ts, _ = series(10)
    y = np.where(long_ts < T0 + 2.5 * DAY, 0.1, 0.98)
    end = float(long_ts[-1]) + STEP
    assert settled_high(long_ts, y, end, RANGE)
    assert not settled_high(long_ts, y, end - 2 * DAY, RANGE)
    assert not settled_high(long_ts, y, float(long_ts[0]), RANGE)  # nothing before: not settled


def test_outcomes_by_hand() -> None:
    """Idle for 3 days, then at 0.2: the start 0.75 days before the change sees
    0.75 d at 0.98 and 0.25 d at 0.2 over the next day."""
    ts, x = series(5)
    x[ts >= T0 + 3 * DAY] = 0.2
    host = HostWindows.of(ts, x, RANGE)
    start = T0 + 2.25 * DAY
    now = start + DAY  # that window has just ended
    out = host.outcomes(DAY, now)
    # starts on the grid from 12 h after the first sample; the last is `start`
    first = T0 + 0.5 * DAY
    assert out.size == int((start - first) / FLEET.grid_s) + 1
    assert out[-1] == pytest.approx(0.25 * (0.2 - 0.98))
    assert out[-2] == pytest.approx(0.125 * (0.2 - 0.98))  # 3 hours earlier: 3 busy hours
    assert np.allclose(out[:-2], 0.0, atol=1e-12)  # windows ended by day 3 stayed idle
    # a moment earlier the window had not ended: it is not an outcome yet
    assert host.outcomes(DAY, now - 1.0).size == out.size - 1


def test_outcomes_only_from_starts_where_the_host_was_settled_high() -> None:
    ts, x = series(6)
    x[ts < T0 + 2 * DAY] = 0.3  # busy for two days, then idle
    host = HostWindows.of(ts, x, RANGE)
    now = float(ts[-1]) + STEP
    out = host.outcomes(3 * 3600.0, now)
    # a start is settled once at most 5 % of the week before it is busy: the busy stretch
    # (576 samples) must be at most 5 % of everything seen, so none of these 6 days qualifies
    assert out.size == 0
    x[:] = 0.98
    assert HostWindows.of(ts, x, RANGE).outcomes(3 * 3600.0, now).size > 0


def test_outcomes_never_read_data_after_now() -> None:
    ts, x = series(8)
    rng = np.random.default_rng(1)
    x = np.clip(0.97 + rng.normal(0, 0.01, ts.size), 0, 1)
    now = T0 + 5.3 * DAY
    base = HostWindows.of(ts, x, RANGE).outcomes(DAY, now)
    later = x.copy()
    later[ts >= now] = 0.05  # a different future
    assert np.array_equal(HostWindows.of(ts, later, RANGE).outcomes(DAY, now), base)
    assert base.size > 0


def test_fleet_halves_the_horizon_until_enough_windows_have_ended() -> None:
    hosts = [HostWindows.of(*series(2.5), RANGE) for _ in range(3)]
    now = T0 + 2.5 * DAY
    sample, h = fleet_outcomes(hosts, 3 * DAY, now)
    # no 3-day or 1.5-day window has ended; 0.75-day windows have (from 12 h to 1.75 d)
    assert h == pytest.approx(0.75 * DAY)
    assert sample.size == 3 * 11
    empty, h_empty = fleet_outcomes(hosts[:1], 3 * DAY, T0 + 0.6 * DAY)
    assert empty.size == 0 and h_empty == 3 * DAY


def fallback(mean: float = 0.98, sd: float = 0.004) -> Distribution:
    return Distribution(
        "mixture", [(1.0, mean, sd)], mean, sd, False, 100, support=0, fallback="unconditional"
    )


def busy_fleet(hosts: int = 4) -> list[HostWindows]:
    """Hosts that sat idle and then, from day 10, turned busy (availability 0.3)."""
    out = []
    for k in range(hosts):
        ts, x = series(16)
        x[ts >= T0 + (10 + k * 0.5) * DAY] = 0.3
        out.append(HostWindows.of(ts, x, RANGE))
    return out


def test_a_settled_host_borrows_at_the_weight_of_six_of_its_own_windows() -> None:
    ts, x = series(16)
    now = float(ts[-1]) + STEP
    dist = fallback()
    fleet = busy_fleet()
    out = with_fleet(dist, ts, x, now, DAY, lambda: fleet, CPU_ANALOG)
    sample, _ = fleet_outcomes(fleet, DAY, now)
    assert out.fleet == sample.size > 0
    # the borrowed components weigh strength / (strength + own windows): 6 / (6 + 14)
    borrowed = sum(w for w, _, _ in out.components[len(dist.components) :])
    assert borrowed == pytest.approx(6 / (6 + 14))
    assert out.support == 0 and out.fallback == "unconditional"  # its own labels kept
    # what followed the fleet's idle states, shifted to this host's level, is the share of
    # the borrowed weight below 0.9: the hosts that turned busy within the window
    busy = float(np.mean(0.98 + sample < 0.9))
    assert busy > 0.05
    assert float(out.cdf(0.9)) == pytest.approx(6 / 20 * busy, abs=0.006)  # kernel blur
    assert float(dist.cdf(0.9)) < 1e-9
    # a host with three days of its own sees it at 6 / (6 + 3)
    short = with_fleet(dist, ts[-864:], x[-864:], now, DAY, lambda: fleet, CPU_ANALOG)
    assert sum(w for w, _, _ in short.components[1:]) == pytest.approx(6 / 9)


def test_no_borrowing_without_a_fallback_or_a_settled_host() -> None:
    ts, x = series(16)
    now = float(ts[-1]) + STEP

    def never() -> list[HostWindows]:
        raise AssertionError("the fleet was asked for")

    supported = replace(fallback(), support=12, fallback=None)
    assert with_fleet(supported, ts, x, now, DAY, never, CPU_ANALOG) is supported
    busy = x.copy()
    busy[-300:] = 0.4  # 15 % of the last week below 0.9
    assert with_fleet(fallback(), ts, busy, now, DAY, never, CPU_ANALOG) == fallback()
    # a metric without a range (bandwidth) never borrows
    links = replace(CPU_ANALOG, value_range=None)
    assert with_fleet(fallback(), ts, x, now, DAY, never, links) == fallback()
    # too few outcomes: unchanged
    assert with_fleet(fallback(), ts, x, now, DAY, lambda: [], CPU_ANALOG) == fallback()


def test_idle_real_host_borrows_from_the_other_real_hosts(traces: dict[str, Trace]) -> None:
    """Trace 4 sat idle all month; among the other traces are idle hosts that turned busy.
    Its 3-day forecast 8 days in falls back and borrows their outcomes at weight 6 / (6 + n):
    the share of the forecast below 0.9 is that weight times the share of the fleet's outcomes
    (at this host's level) below 0.9. Nothing any host did after the forecast time changes it."""
    idle = traces["4"]
    now = float(idle.timestamps[0]) + 8.3 * DAY
    ts, x = idle.timestamps, idle.availability
    keep = ts < now
    others = [t for name, t in traces.items() if name != "4"]
    fleet = [HostWindows.of(t.timestamps, t.availability, RANGE) for t in others]
    alone = series_distribution(ts[keep], x[keep], now=now, horizon_s=3 * DAY)
    borrowed = series_distribution(
        ts[keep], x[keep], now=now, horizon_s=3 * DAY, fleet=lambda: fleet
    )
    sample, h = fleet_outcomes(fleet, 3 * DAY, now)
    assert alone.fallback is not None and alone.fleet is None
    assert borrowed.fleet == sample.size >= FLEET.min_outcomes and h == 3 * DAY
    level = float(x[keep][ts[keep] >= now - FLEET.level_s].mean())
    busy = float(np.mean(np.clip(level + sample, 0.0, 1.0) < 0.9))
    assert busy > 0  # some of the fleet's idle spells ended within three days
    eps = FLEET.strength / (FLEET.strength + (now - float(ts[0])) / (3 * DAY))
    assert float(alone.cdf(0.9)) < 1e-6
    assert float(borrowed.cdf(0.9)) == pytest.approx(eps * busy, abs=0.005)
    assert borrowed.interval()[0] < alone.interval()[0]
    # causality: the other hosts' samples from `now` on are replaced; same answer
    cut = [
        HostWindows.of(
            t.timestamps,
            np.where(t.timestamps >= now, 1.0 - t.availability, t.availability),
            RANGE,
        )
        for t in others
    ]
    again = series_distribution(ts[keep], x[keep], now=now, horizon_s=3 * DAY, fleet=lambda: cut)
    assert again == borrowed
