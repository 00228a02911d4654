"""The analogues' kernel floor follows the host's spread (forecaster.analog, sixth pass)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from forecaster.analog import CPU_ANALOG, _spread_floor, analog_horizon

DAY = 86400.0


def steady(std: float, days: float = 10.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ts = 1.7e9 + 300.0 * np.arange(int(days * 288))
    return ts, np.clip(0.6 + rng.normal(0.0, std, ts.size), 0.0, 1.0)


def narrowest(ts: np.ndarray, xs: np.ndarray, floor_spread: float) -> float:
    now = float(ts[-1]) + 300.0
    dist = analog_horizon(ts, xs, now, 3600.0, replace(CPU_ANALOG, floor_spread=floor_spread))
    assert dist is not None and dist.fallback is None
    return min(sd for _, _, sd in dist.components)


@pytest.mark.parametrize(("std", "floor"), [(0.0, 0.002), (0.001, 0.002), (0.03, 0.003)])
def test_a_steady_hosts_floor_is_a_tenth_of_its_spread(std: float, floor: float) -> None:
    ts, xs = steady(std)
    now = float(ts[-1]) + 300.0
    week = xs[ts >= now - 7 * DAY]
    expected = max(0.002, 0.1 * float(week.std()))
    assert expected == pytest.approx(floor, abs=2e-4)
    assert _spread_floor(ts, xs, now, CPU_ANALOG).floor_std == expected
    # the kernel's narrowest component is the floor when the analogues agree (std 0) and
    # never below it; without the rule every host gets 0.005
    got = narrowest(ts, xs, 0.1)
    assert got >= expected - 1e-12
    if std == 0.0:
        assert got == pytest.approx(expected)
        assert narrowest(ts, xs, 0.0) == pytest.approx(0.005)


def test_a_variable_host_keeps_the_full_floor() -> None:
    ts, xs = steady(0.0)
    xs = np.where((np.arange(ts.size) // 36) % 2 == 0, 0.3, 0.9)  # 3-hour spells, std 0.3
    now = float(ts[-1]) + 300.0
    assert _spread_floor(ts, xs, now, CPU_ANALOG).floor_std == CPU_ANALOG.floor_std == 0.005
    assert narrowest(ts, xs, 0.1) >= CPU_ANALOG.floor_std - 1e-12
    # only the window before `now` is read: a calm future does not lower the floor
    calm = np.where(ts >= now - DAY, 0.6, xs)
    assert _spread_floor(ts, calm, now - DAY, CPU_ANALOG).floor_std == 0.005


def test_floor_options_are_checked() -> None:
    with pytest.raises(ValueError, match="floor_spread"):
        replace(CPU_ANALOG, floor_spread=-0.1)
