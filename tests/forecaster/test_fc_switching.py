"""The semi-Markov switching model (tried against the analogues, issue 17)."""

from __future__ import annotations

import numpy as np

from forecaster.distribution import mixed
from forecaster.switching import spells, switching_horizon


def test_spells_absorb_short_runs() -> None:
    modes, lengths = spells(np.array([0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0]))
    assert modes.tolist() == [0, 1, 0]
    assert lengths.tolist() == [7, 4, 3]


def test_switching_host_keeps_both_modes_and_steady_host_has_none() -> None:
    rng = np.random.default_rng(0)
    hours = [10, 6, 20, 8, 12, 5, 15, 9, 7, 14]
    x = np.concatenate(
        [
            np.clip((0.02 if i % 2 else 0.98) + rng.normal(0, 0.005, h * 12), 0.01, 1)
            for i, h in enumerate(hours)
        ]
    )
    ts = np.arange(x.size, dtype=np.float64) * 300.0
    now = float(ts[-1]) + 300
    dist = switching_horizon(ts, x, now, 86400.0)
    assert dist is not None
    lo, hi = dist.interval(0.95)
    assert lo < 0.5 < hi  # a day is long enough to switch, or not
    assert dist == switching_horizon(ts, x, now, 86400.0)  # seeded
    short = switching_horizon(ts, x, now, 300.0)
    assert short is not None and short.interval(0.95)[1] < 0.1  # saturated now, and next
    steady = np.clip(0.6 + rng.normal(0, 0.01, x.size), 0, 1)
    assert switching_horizon(ts, steady, now, 86400.0) is None
    both = mixed(short, dist)
    assert abs(sum(w for w, _, _ in both.components) - 1) < 1e-12
    assert both.mean == (short.mean + dist.mean) / 2
