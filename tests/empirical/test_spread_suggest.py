"""The spread model's quantiles and coverage; the choice of the next runs."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.errors import EmpiricalError, TooFewPointsError
from ppe.empirical.spread import SpreadModel, fit_spread, spread_coverage
from ppe.empirical.suggest import suggest_next


def runs(seed: int, reps: int = 8) -> Measurements:
    rng = np.random.default_rng(seed)
    x = np.repeat(2.0 ** np.arange(3, 10), reps)
    mu = 2 + 0.01 * x**2
    return Measurements.from_arrays(["n"], x, mu + 0.05 * mu * rng.standard_normal(x.size))


def test_spread_quantiles_outside_the_range() -> None:
    sp = fit_spread(runs(11))
    mu, sd = 2 + 0.01 * 2048**2, 0.05 * (2 + 0.01 * 2048**2)
    assert sp.quantile({"n": 2048}, 0.5) == pytest.approx(mu, rel=0.1)
    assert sp.std.predict({"n": 2048}).mean == pytest.approx(sd, rel=0.5)
    # The quantile adds the mean model's own uncertainty 4x beyond the range: wider, not absurd.
    q90 = sp.quantile({"n": 2048}, 0.9) - sp.quantile({"n": 2048}, 0.5)
    assert 1.2816 * sd * 0.7 < q90 < 1.2816 * sd * 3
    assert SpreadModel.from_dict(sp.to_dict()).quantile({"n": 2048}, 0.9) == pytest.approx(
        sp.quantile({"n": 2048}, 0.9)
    )


def test_spread_coverage_is_stated_and_sensible() -> None:
    data = runs(12)
    cov = spread_coverage(data, fit_spread(data))
    assert cov[0.8] <= cov[0.9] <= cov[0.95]
    assert cov[0.95] >= 0.8


def test_spread_needs_repetitions() -> None:
    with pytest.raises(TooFewPointsError):
        fit_spread(Measurements.from_arrays(["n"], [2, 4, 8, 16, 32], [1, 2, 3, 4, 5]))


def test_suggested_runs_shrink_the_target_interval_more_than_others() -> None:
    data = runs(13, reps=3)
    target = {"n": 4096.0}
    picked = suggest_next(data, 3, [target], by_cost=False)
    assert len(picked) == 3

    def width_after(extra: list[dict[str, float]]) -> float:
        from ppe.empirical.model import fit_terms
        from ppe.empirical.search import search

        model = search(data)
        x = np.vstack([data.points] + [[[p["n"]]] for p in extra])
        mu = model.predict_arrays(extra, "mean")[0] if extra else np.array([])
        y = np.concatenate([np.concatenate(data.values), mu])
        xs = np.concatenate(
            [np.repeat(data.points[:, 0], data.counts.astype(int)), x[data.n_points :, 0]]
        )
        refit = fit_terms(Measurements.from_arrays(["n"], xs, y), model.terms, noise=model.noise)
        return refit.predict(target, what="mean").std / refit.predict(target).mean

    smallest = [{"n": 8.0}] * 3
    assert width_after(picked) < width_after(smallest)


def test_suggest_needs_a_budget_and_targets() -> None:
    with pytest.raises(EmpiricalError):
        suggest_next(runs(14), 0, [{"n": 100.0}])
    with pytest.raises(EmpiricalError):
        suggest_next(runs(14), 1, [])
