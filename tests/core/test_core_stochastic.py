"""Stochastic values: the scipy-shaped interface, arithmetic and dependence."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ppe.core import (
    Mixture,
    Normal,
    Point,
    Samples,
    StochasticError,
    from_components,
    smax,
    smin,
    ssum,
    use_engine,
)
from ppe.core.stochastic import as_stochastic


def test_normal_matches_scipy() -> None:
    x = Normal(3.0, 2.0)
    ref = stats.norm(3.0, 2.0)
    q = np.array([0.01, 0.5, 0.975])
    assert np.allclose(x.ppf(q), ref.ppf(q))
    assert x.interval(0.9) == pytest.approx(ref.interval(0.9))
    assert x.cdf(4.0) == pytest.approx(ref.cdf(4.0))
    draws = x.rvs(size=50_000, random_state=1)
    assert draws.shape == (50_000,)
    assert draws.mean() == pytest.approx(3.0, abs=0.05)
    assert x.rvs(size=(2, 3), random_state=np.random.default_rng(0)).shape == (2, 3)


def test_point_behaves_like_a_constant() -> None:
    p = Point(2.5)
    assert (p.mean(), p.std(), p.interval(0.95)) == (2.5, 0.0, (2.5, 2.5))
    assert np.all(p.sample(10, 0) == 2.5)
    assert isinstance(p + 1, Point) and (p * 2).mean() == 5.0


def test_mixture_ppf_inverts_cdf_and_moments() -> None:
    m = Mixture([0.3, 0.7], [0.3, 0.9], [0.02, 0.05])
    assert m.mean() == pytest.approx(0.3 * 0.3 + 0.7 * 0.9)
    second = 0.3 * (0.02**2 + 0.09) + 0.7 * (0.05**2 + 0.81)
    assert m.std() == pytest.approx(np.sqrt(second - m.mean() ** 2))
    q = np.array([0.05, 0.3, 0.5, 0.95])
    assert np.allclose(m.cdf(m.ppf(q)), q, atol=1e-9)
    lo, hi = m.interval(0.95)
    assert m.cdf(hi) - m.cdf(lo) == pytest.approx(0.95, abs=1e-9)
    draws = m.sample(100_000, 3)
    assert np.mean(draws < 0.6) == pytest.approx(0.3, abs=0.01)


def test_samples_quantiles_and_bootstrap() -> None:
    arr = np.random.default_rng(0).normal(10, 2, 50_000)
    s = Samples(arr, seed=0)
    assert s.ppf(0.5) == pytest.approx(np.median(arr))
    assert s.cdf(10.0) == pytest.approx(np.mean(arr <= 10.0))
    assert s.rvs(1000, 1).shape == (1000,)
    d = s.to_dict(0.9)
    assert d["kind"] == "samples" and d["samples"] == 50_000 and d["seed"] == 0


def test_to_dict_shape() -> None:
    d = Mixture([1, 1], [0, 10], [1, 1]).to_dict(0.9)
    assert set(d) == {"mean", "std", "interval", "confidence", "kind", "components"}
    assert d["kind"] == "mixture" and d["confidence"] == 0.9
    assert d["components"][0] == {"weight": 0.5, "mean": 0.0, "std": 1.0}
    assert len(d["interval"]) == 2


def test_from_components() -> None:
    assert isinstance(from_components("point", [(1, 0.5, 0)]), Point)
    n = from_components("normal", [{"weight": 1, "mean": 0.5, "std": 0.1}])
    assert isinstance(n, Normal) and n.std() == pytest.approx(0.1)
    m = from_components("mixture", [(0.5, 0.2, 0.01), (0.5, 0.8, 0.01)])
    assert isinstance(m, Mixture) and m.mean() == pytest.approx(0.5)
    with pytest.raises(ValueError):
        from_components("gamma", [(1, 0, 1)])
    with pytest.raises(ValueError):
        from_components("normal", [])


def test_scipy_frozen_normals_and_numbers_are_accepted() -> None:
    assert isinstance(as_stochastic(stats.norm(1, 2)), Normal)
    assert isinstance(as_stochastic(3), Point)
    with pytest.raises(TypeError):
        as_stochastic("3")


def test_sums_are_exact_and_keep_dependence() -> None:
    a, b = Normal(10, 3), Normal(5, 4)
    s = a + b
    assert (s.mean(), s.std()) == (15.0, pytest.approx(5.0))
    assert isinstance(a - a, Point) and (a - a).mean() == 0.0
    assert (s - b).std() == pytest.approx(3.0)  # b cancels exactly
    assert (2 * a + a).std() == pytest.approx(9.0)  # fully correlated, not sqrt(5)*3
    total = ssum([a, b, 1.0])
    assert total.mean() == 16.0 and total.std() == pytest.approx(5.0)


def test_quotient_shares_the_divisor() -> None:
    """a/f + b/f must be (a+b)/f: both quotients depend on the same f."""
    f = Normal(0.5, 0.02)
    left = 3.0 / f + 5.0 / f
    right = 8.0 / f
    assert left.mean() == pytest.approx(right.mean(), rel=1e-12)
    assert left.std() == pytest.approx(right.std(), rel=1e-12)


def test_auto_engine_hands_over_for_wide_divisors() -> None:
    assert isinstance(1.0 / Normal(1.0, 0.05), Normal)
    out = 1.0 / Normal(1.0, 0.2)  # sigma/mu above the delta-method threshold
    assert isinstance(out, Samples) and out.n == 20_000 and out.seed == 0
    with use_engine("analytic"):
        assert isinstance(1.0 / Normal(1.0, 0.2), Normal)
        with pytest.raises(StochasticError):
            _ = 1.0 / Normal(1.0, 0.5)


def test_mixture_arithmetic_uses_monte_carlo_with_reported_seed() -> None:
    m = Mixture([0.5, 0.5], [1.0, 3.0], [0.1, 0.1])
    with use_engine("auto", samples=5000, seed=7):
        out = 2 * m + Normal(1, 0.1)
    assert isinstance(out, Samples) and (out.n, out.seed) == (5000, 7)
    assert out.mean() == pytest.approx(5.0, abs=0.1)
    # the same input used twice is the same draw: m - m is exactly 0
    zero = m - m
    assert np.all(zero.array == 0.0)  # type: ignore[attr-defined]


def test_same_seed_same_numbers() -> None:
    m = Mixture([0.5, 0.5], [1.0, 3.0], [0.1, 0.1])
    with use_engine("mc", samples=2000, seed=3):
        a = (m * 2).array  # type: ignore[attr-defined]
    with use_engine("mc", samples=2000, seed=3):
        b = (m * 2).array  # type: ignore[attr-defined]
    assert np.array_equal(a, b)


def test_division_by_zero_is_an_error() -> None:
    with pytest.raises(StochasticError):
        _ = Normal(1, 1) / 0
    with pytest.raises(StochasticError):
        _ = Normal(1, 0.01) / Normal(0, 0.1)


def test_max_and_min_of_points_and_normals() -> None:
    assert smax([1.0, 3.0, 2.0]).mean() == 3.0
    assert smin([1.0, 3.0, 2.0]).mean() == 1.0
    x = Normal(0, 1)
    assert smax([x, x]).std() == pytest.approx(1.0)  # max(x, x) is x
    far = smax([Normal(100, 1), Normal(0, 1)])
    assert (far.mean(), far.std()) == (pytest.approx(100), pytest.approx(1))


def test_invalid_values_are_rejected() -> None:
    with pytest.raises(ValueError):
        Normal(0, -1)
    with pytest.raises(ValueError):
        Mixture([1], [0, 1], [1, 1])
    with pytest.raises(ValueError):
        Point(float("nan"))
    with pytest.raises(ValueError):
        Normal(0, 1).interval(1.0)
    with pytest.raises(ValueError):
        with use_engine("fast"):
            pass
