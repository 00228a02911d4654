"""co_movement: which hosts change load together, from the past only."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from forecaster import co_movement
from ppe.traces import Trace

STEP = 300.0
DAYS = 6


def _switching(rng: np.random.Generator, switches: np.ndarray, size: int) -> np.ndarray:
    """Idle (about 0.97) or saturated (about 0.02), toggling at the given sample indices."""
    state = np.zeros(size, dtype=bool)
    for s in switches:
        state[s:] = ~state[s:]
    return np.where(state, 0.02, 0.97) + rng.normal(0.0, 0.01, size)


def _series() -> tuple[list[tuple[np.ndarray, np.ndarray]], float]:
    rng = np.random.default_rng(0)
    size = int(DAYS * 86400 / STEP)
    ts = 1.0e9 + STEP * np.arange(size)
    shared = np.sort(rng.choice(size, 40, replace=False))
    own = np.sort(rng.choice(size, 40, replace=False))
    a = _switching(rng, shared, size)
    b = _switching(rng, shared, size)  # same application as a: switches with it
    c = _switching(rng, own, size)  # another application
    d = np.full(size, 0.5)  # never changes
    return [(ts, a), (ts, b), (ts, c), (ts, d)], float(ts[-1] + STEP)


def test_hosts_that_switch_together_are_correlated_and_others_are_not() -> None:
    series, now = _series()
    corr = co_movement(series, now, 3600.0)
    assert corr.shape == (4, 4)
    np.testing.assert_allclose(np.diag(corr), 1.0)
    np.testing.assert_allclose(corr, corr.T)
    assert np.linalg.eigvalsh(corr).min() >= -1e-10
    assert corr[0, 1] > 0.8
    assert abs(corr[0, 2]) < 0.2 and abs(corr[1, 2]) < 0.2
    assert corr[0, 3] == pytest.approx(0.0, abs=1e-9)  # a host that never moves: no dependence


def test_only_the_past_is_used() -> None:
    series, now = _series()
    base = co_movement(series, now - 86400.0, 3600.0)
    rng = np.random.default_rng(1)
    changed = [
        (ts, np.where(ts >= now - 86400.0, rng.uniform(0.01, 1.0, ts.size), xs))
        for ts, xs in series
    ]
    np.testing.assert_array_equal(co_movement(changed, now - 86400.0, 3600.0), base)
    assert not np.array_equal(co_movement(changed, now, 3600.0), co_movement(series, now, 3600.0))


def test_too_little_shared_history_means_independent() -> None:
    series, now = _series()
    short = [(ts[-10:], xs[-10:]) for ts, xs in series]
    np.testing.assert_allclose(co_movement(short, now, 3600.0), np.eye(4))
    assert co_movement(series[:1], now, 3600.0).shape == (1, 1)
    with pytest.raises(ValueError, match="shrink"):
        co_movement(series, now, 3600.0, shrink=1.5)


def test_real_traces_show_the_application_groups(traces: dict[str, Trace]) -> None:
    """VMs 41-53 belong to one application and change load together; 56/58/59 to another; the
    others move on their own. (The sample in tests/data has 41 and 45 of the first group, none
    of the second.)"""
    groups: list[list[str]] = [
        [n for n in g if n in traces] for g in (("41", "45", "53"), ("56", "59"))
    ]
    assert len(groups[0]) >= 2
    loners = [n for n in ("236", "65", "392") if n in traces]
    names = [n for g in groups for n in g] + loners
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    now = 1372629600.0 + 20 * 86400.0
    series = [(traces[n].timestamps, traces[n].availability) for n in names]
    corr = co_movement(series, now, 3600.0)
    for (p, a), (q, b) in combinations(enumerate(names), 2):
        together = a in group_of and group_of.get(a) == group_of.get(b)
        assert corr[p, q] > 0.7 if together else abs(corr[p, q]) < 0.3, (a, b, corr[p, q])
