"""Stochastic inputs: summaries, vectorised sampling and common random numbers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

from scheduler import StochasticHost, schedule, simulate_makespans
from scheduler.laws import affine, components, draw, draw_components, law_of, quantiles
from scheduler.stats import row_interval
from scheduler.synthetic import Mixture, Normal, Point


def test_law_summaries() -> None:
    assert law_of(3.0).std == 0.0 and law_of(3.0).normal
    n = law_of(st.norm(2.0, 0.5))
    assert (n.mean, n.std, n.normal) == (2.0, 0.5, True)
    m = law_of(Mixture((0.8, 0.2), (1.0, 3.0), (0.05, 0.05)))
    assert m.weights == pytest.approx((0.8, 0.2)) and not m.normal
    assert m.mean == pytest.approx(1.4)
    g = law_of(st.gamma(2.0))
    assert g.generic and g.mean == pytest.approx(2.0)
    assert law_of(Point(4.0)).std == 0.0
    # components as dicts (the JSON shape) are read too
    dict_mix = type(
        "D",
        (),
        {
            "kind": "mixture",
            "components": [
                {"weight": 1, "mean": 1.0, "std": 0.1},
                {"weight": 3, "mean": 2.0, "std": 0.1},
            ],
            "mean": lambda self: 1.75,
            "std": lambda self: 0.0,
        },
    )()
    assert law_of(dict_mix).weights == pytest.approx((0.25, 0.75))


def test_mixture_draws_follow_the_weights_and_skip_empty_components() -> None:
    mix = law_of(Mixture((0.5, 0.0, 0.5), (0.0, 100.0, 10.0), (1.0, 1.0, 1.0)))
    x = draw([mix], [0], 40000, seed=0, stream=0)[0]
    assert np.all(x < 50)
    assert np.mean(x > 5) == pytest.approx(0.5, abs=0.01)
    assert x[x > 5].mean() == pytest.approx(10.0, abs=0.05)


def test_affine_components_sample_the_time_law() -> None:
    a = [law_of(Mixture((0.7, 0.3), (1.0, 2.0), (0.1, 0.2)))]
    b = [law_of(Normal(5.0, 1.0))]
    rows = np.array([10.0])
    t = draw_components(
        affine(components(a), rows, components(b)), np.array([0]), 100_000, seed=1, stream=0
    )[0]
    rng = np.random.default_rng(2)
    brute = 10 * Mixture((0.7, 0.3), (1.0, 2.0), (0.1, 0.2)).rvs(100_000, rng) + rng.normal(
        5.0, 1.0, 100_000
    )
    assert t.mean() == pytest.approx(brute.mean(), rel=0.01)
    assert t.std() == pytest.approx(brute.std(), rel=0.02)
    assert np.quantile(t, [0.05, 0.5, 0.95]) == pytest.approx(
        np.quantile(brute, [0.05, 0.5, 0.95]), rel=0.01
    )


def test_a_host_keeps_its_draws_whatever_else_is_scheduled() -> None:
    h1 = StochasticHost("h1", Normal(1.0, 0.2), 3.0)
    h2 = StochasticHost("h2", Mixture((0.5, 0.5), (1.0, 2.0), (0.1, 0.1)), 0.0)
    alone = simulate_makespans([h1], {"h1": 100}, samples=1000, seed=4)
    with_idle = simulate_makespans([h1, h2], {"h1": 100}, samples=1000, seed=4)
    np.testing.assert_array_equal(alone, with_idle)
    # growing the cached block for many hosts does not change earlier draws
    many = [StochasticHost(f"x{i}", Normal(1.0, 0.1)) for i in range(40)]
    simulate_makespans([h1, *many], {"h1": 100}, samples=1000, seed=4)
    np.testing.assert_array_equal(
        alone, simulate_makespans([h1], {"h1": 100}, samples=1000, seed=4)
    )


def test_cache_growth_keeps_schedules_identical() -> None:
    hosts = [StochasticHost(f"h{i}", Normal(1.0 + i / 10, 0.1), 1.0) for i in range(3)]
    before = schedule(hosts, 300, "expected", seed=11)
    big = [StochasticHost(f"b{i}", Normal(1.0, 0.1)) for i in range(50)]
    schedule(big, 5000, "expected", seed=11)
    assert schedule(hosts, 300, "expected", seed=11) == before


@pytest.mark.parametrize(
    "mix",
    [
        Mixture((0.8, 0.2), (1.0, 3.0), (0.05, 0.05)),
        Mixture((0.3, 0.3, 0.4), (0.0, 0.1, 5.0), (1.0, 0.01, 2.0)),
        Mixture((0.99, 0.01), (1.0, 100.0), (0.1, 1.0)),
    ],
)
def test_vectorised_mixture_quantiles_match_a_root_search(mix: Mixture) -> None:
    law = law_of(mix)
    for q in (0.001, 0.05, 0.5, 0.95, 0.995, 0.999):
        assert quantiles([law, law_of(Normal(2.0, 0.5))], q)[0] == pytest.approx(
            float(mix.ppf(q)), rel=1e-9, abs=1e-9
        )
    assert quantiles([law_of(Normal(2.0, 0.5))], 0.975)[0] == pytest.approx(
        2.0 + 0.5 * st.norm.ppf(0.975)
    )
    assert quantiles([law_of(st.gamma(2.0))], 0.9)[0] == pytest.approx(st.gamma(2.0).ppf(0.9))


@pytest.mark.parametrize("n", [2, 3, 10, 4000, 4001])
@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99])
def test_row_interval_matches_numpy_quantile(n: int, confidence: float) -> None:
    x = np.random.default_rng(n).standard_normal(n)
    expected = np.quantile(x, [0.5 - confidence / 2, 0.5 + confidence / 2])
    assert row_interval(x, confidence) == pytest.approx(tuple(expected), abs=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_bad_values_are_rejected() -> None:
    with pytest.raises(ValueError):
        law_of(Normal(float("nan"), 1.0))
    with pytest.raises(ValueError):
        law_of(st.norm(1.0, float("inf")))
