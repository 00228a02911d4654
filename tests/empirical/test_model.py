"""Fitted models: storage round trip, PPE values, intervals that widen and cover."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppe.core.stochastic import Mixture, Normal
from ppe.empirical.data import Measurements
from ppe.empirical.model import EmpiricalModel
from ppe.empirical.search import search


def runs(seed: int, xs: np.ndarray, cv: float = 0.03, reps: int = 5) -> Measurements:
    rng = np.random.default_rng(seed)
    x = np.repeat(xs, reps)
    mu = 2 + 0.01 * x**2
    return Measurements.from_arrays(["n"], x, mu * (1 + cv * rng.standard_normal(x.size)))


def test_stored_model_predicts_the_same() -> None:
    model = search(runs(1, 2.0 ** np.arange(2, 9)))
    back = EmpiricalModel.from_dict(json.loads(json.dumps(model.to_dict())))
    for n in (3.0, 100.0, 2000.0):
        a, b = model.predict({"n": n}), back.predict({"n": n})
        assert a.mean == pytest.approx(b.mean, rel=1e-12)
        assert a.interval == pytest.approx(b.interval, rel=1e-12)
    assert back.formula == model.formula


def test_interval_widens_outside_the_measured_range() -> None:
    model = search(runs(2, 2.0 ** np.arange(2, 9)))
    rel = [
        model.predict({"n": n}, what="mean").std / model.predict({"n": n}).mean
        for n in (128, 512, 2048, 8192)
    ]
    assert rel == sorted(rel) and rel[-1] > 3 * rel[0]


def test_stochastic_value_matches_the_interval() -> None:
    model = search(runs(3, 2.0 ** np.arange(2, 9)))
    pred = model.predict({"n": 400})
    value = model.to_stochastic({"n": 400})
    assert isinstance(value, Normal)
    assert value.interval(0.95) == pytest.approx(pred.interval, rel=1e-9)
    t = model.to_stochastic({"n": 400}, shape="t")
    assert isinstance(t, Mixture)
    assert t.interval(0.95) == pytest.approx(pred.interval, rel=2e-3)


def test_95_percent_intervals_cover_held_out_runs() -> None:
    """Fit on n = 4..128, predict fresh runs at 128 (inside) and 256, 512 (outside)."""
    covered = total = 0
    for seed in range(20):
        model = search(runs(500 + seed, 2.0 ** np.arange(2, 8)))
        fresh = runs(900 + seed, np.array([128.0, 256.0, 512.0]))
        for k in range(fresh.n_points):
            lo, hi = model.predict({"n": float(fresh.points[k, 0])}).interval
            covered += int(np.sum((fresh.values[k] >= lo) & (fresh.values[k] <= hi)))
            total += fresh.values[k].size
    assert 0.9 <= covered / total <= 1.0
