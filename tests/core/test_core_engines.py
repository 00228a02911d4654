"""The analytic and Monte Carlo engines agree on normal inputs.

Statistical soundness: every Monte Carlo run uses a fixed seed and hypothesis
runs derandomised, so the tests are deterministic; the sample counts make the
Monte Carlo error far smaller than the tolerances (means within 1 %, stds within
5 %).  For a mean or std of a well-behaved value from n draws the relative
standard error is below sigma/(mu sqrt(n)) and ~1/sqrt(2n): at n = 200 000 and
sigma/mu <= 0.5 that is 0.1 % and 0.16 %, i.e. the tolerance sits 10-30 standard
errors away.

Quotients: ``1/X`` for a normal X has a pole ``1/cv`` standard deviations below
the mean.  Its mean is insensitive to that, so means are checked for divisors up
to sigma/mu = 0.2.  Its *std* is not: at cv = 0.2 the pole is 5 sigma away and
the sample std of ``1/X`` from 200 000 draws has a heavy right tail (its 99th
percentile is 30 % above the median; measured over 100 seeds), so no practical
sample count pins it to 5 %.  Up to cv = 0.17 (pole 5.9 sigma away) the same
spread is +-1.3 %, and that is the range where stds are compared.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ppe.core import Normal, Point, Samples, smax, ssum, use_engine
from ppe.core.stochastic import StochasticValue

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)

means = st.floats(1.0, 100.0)
cvs = st.floats(0.0, 0.5)


def _normals(pairs: list[tuple[float, float]]) -> list[Normal]:
    return [Normal(m, m * c) for m, c in pairs]


def _both(build, n: int, seed: int = 12345) -> tuple[StochasticValue, StochasticValue]:  # type: ignore[no-untyped-def]
    with use_engine("analytic"):
        a = build()
    with use_engine("mc", samples=n, seed=seed):
        m = build()
    assert isinstance(m, Samples)
    return a, m


def _agree(a: StochasticValue, m: StochasticValue, std: bool = True) -> None:
    assert a.mean() == pytest.approx(m.mean(), rel=0.01)
    if std:
        # a spread below 2e-4 of the mean counts as none: the max of a point and a
        # normal more than 4 sigma below it has a std under that, carried by events
        # that 200 000 draws see a handful of times at most (4.8 sigma: ~0.2 times)
        assert a.std() == pytest.approx(m.std(), rel=0.05, abs=2e-4 * abs(m.mean()))


@SETTINGS
@given(st.lists(st.tuples(means, cvs), min_size=2, max_size=8), st.integers(0, 3))
def test_sums_agree(pairs: list[tuple[float, float]], repeats: int) -> None:
    def build() -> StochasticValue:
        xs = _normals(pairs)
        # reuse the first input: dependence must be kept by both engines
        return ssum(xs) + repeats * xs[0] + 2.5

    _agree(*_both(build, 200_000))


@SETTINGS
@given(st.floats(0.1, 10.0), st.floats(0.0, 0.2), st.floats(0.1, 100.0))
@example(1.0, 0.2, 1.0)
def test_quotient_means_agree(mu: float, cv: float, num: float) -> None:
    def build() -> StochasticValue:
        return num / Normal(mu, mu * cv)

    a, m = _both(build, 200_000)
    _agree(a, m, std=False)


@SETTINGS
@given(st.floats(0.1, 10.0), st.floats(0.0, 0.17), st.floats(0.1, 100.0), st.floats(0.0, 0.2))
@example(1.0, 0.17, 1.0, 0.2)
def test_quotient_stds_agree(mu: float, cv: float, num: float, num_cv: float) -> None:
    def build() -> StochasticValue:
        f = Normal(mu, mu * cv)
        return Normal(num, num * num_cv) / f + 1.0 / f

    _agree(*_both(build, 200_000))


@SETTINGS
@given(st.lists(st.tuples(means, st.floats(0.0, 0.2)), min_size=2, max_size=64))
@example([(10.0, 0.1)] * 64)  # equal means: a balanced schedule, Clark's worst case
@example([(10.0, 0.0), (9.0, 0.2), (10.0, 0.01)])  # a point mass on top
@example([(5.0, 0.125), (8.0, 0.0)])  # a point 4.8 sigma above a normal: the tail MC cannot see
@example([(1.0, 0.0), (10.0, 0.0625), (11.0, 0.0005)])  # the spread comes from a 5 % tail
def test_max_agrees(pairs: list[tuple[float, float]]) -> None:
    def build() -> StochasticValue:
        return smax(_normals(pairs))

    # 200 000 draws: when a host only rarely beats the rest (a 5 % tail), the spread of the
    # max comes from that tail, and 40 000 draws scatter its std by ~5 % (seen by hypothesis)
    _agree(*_both(build, 200_000))


@SETTINGS
@given(means, st.floats(0.0, 0.2), means, st.floats(0.0, 0.2))
def test_correlated_pair_max_agrees(m1: float, c1: float, m2: float, c2: float) -> None:
    """Clark's formulas for two values sharing an input."""

    def build() -> StochasticValue:
        shared = Normal(m1, m1 * c1)
        return smax([shared + Normal(m2, m2 * c2), 1.5 * shared])

    _agree(*_both(build, 100_000))


@SETTINGS
@given(means, st.floats(0.0, 0.2), means, st.floats(0.0, 0.2))
def test_products_agree(m1: float, c1: float, m2: float, c2: float) -> None:
    def build() -> StochasticValue:
        return Normal(m1, m1 * c1) * Normal(m2, m2 * c2)

    _agree(*_both(build, 100_000))


def test_auto_engine_hands_over_for_correlated_many_way_max() -> None:
    shared = Normal(10, 1)
    values = [shared + Normal(10, 1) for _ in range(5)]
    assert isinstance(smax(values), Samples)
    with use_engine("analytic"):
        assert isinstance(smax(values), Normal)


def test_point_inputs_stay_exact() -> None:
    assert smax([Point(1.0), Point(2.0)]).std() == 0.0
    x = ssum([Point(1.0), 2.0, Point(3.0)])
    assert isinstance(x, Point) and x.mean() == 6.0
    assert float(np.asarray(x.ppf(0.3))) == 6.0


@pytest.mark.parametrize(
    "pairs",
    [
        [(1.0, 0.0), (18.0, 2.25), (24.0, 0.046875)],
        [(1.0, 0.0), (10.0, 0.625), (11.0, 0.0055)],
        [(100.0, 0.2), (101.0, 1e-4), (90.0, 0.05)],
    ],
)
def test_max_with_a_sharp_lane_matches_quadrature(pairs: list[tuple[float, float]]) -> None:
    """A nearly certain host beside wide ones: the analytic max must resolve its narrow CDF
    (the engine's uniform grid once lost 13 % of the std here). Reference: adaptive quadrature
    of E[Y^k] = int t^k d(prod F_i)."""
    from scipy import integrate, stats

    normals = [(m, m * c) for m, c in pairs if c > 0]
    floor = max((m for m, c in pairs if c == 0), default=-np.inf)

    def cdf(t: float) -> float:
        return 0.0 if t < floor else float(np.prod([stats.norm.cdf(t, m, s) for m, s in normals]))

    lo = max(floor, max(m - 12 * s for m, s in normals))
    hi = max(m + 12 * s for m, s in normals)
    breaks = sorted({m + z * s for m, s in normals for z in (-3, 0, 3) if lo < m + z * s < hi})
    tail = integrate.quad(lambda t: 1 - cdf(t), lo, hi, points=breaks, limit=500, epsabs=1e-13)[0]
    sq = integrate.quad(
        lambda t: 2 * (t - lo) * (1 - cdf(t)), lo, hi, points=breaks, limit=500, epsabs=1e-13
    )[0]
    mean, var = lo + tail, sq - tail**2
    with use_engine("analytic"):
        y = smax([Point(m) if c == 0 else Normal(m, m * c) for m, c in pairs])
    assert y.mean() == pytest.approx(mean, rel=1e-6)
    assert y.std() == pytest.approx(np.sqrt(var), rel=0.01)
