"""The 95 % interval of a value censored to its range (``Distribution.interval`` with bounds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from forecaster import forecast_series
from forecaster.distribution import Distribution
from ppe.traces import Trace

CPU = (0.0, 1.0)


def normal(mean: float, std: float) -> Distribution:
    return Distribution("normal", [(1.0, mean, std)], mean, std, False, 100)


def mixture(components: list[tuple[float, float, float]]) -> Distribution:
    w, mu, sd = (np.array(c) for c in zip(*components, strict=True))
    mean = float(w @ mu)
    std = math.sqrt(float(w @ (sd**2 + mu**2)) - mean**2)
    return Distribution("mixture", components, mean, std, True, 100)


def censored_mass(dist: Distribution, lo: float, hi: float, bounds: tuple[float, float]) -> float:
    """Probability of [lo, hi] for the value censored to ``bounds``."""
    upper = 1.0 if hi >= bounds[1] else float(dist.cdf(hi))
    lower = 0.0 if lo <= bounds[0] else float(dist.cdf(lo))
    return upper - lower


def test_far_from_the_bounds_it_is_the_central_interval() -> None:
    d = normal(0.5, 0.1)
    assert d.interval(0.95, CPU) == pytest.approx(norm(0.5, 0.1).interval(0.95), abs=1e-12)
    assert d.interval(0.95, (0.0, math.inf)) == pytest.approx(d.interval(0.95), abs=1e-12)


def test_an_atom_at_the_bound_takes_the_upper_tail() -> None:
    """16 % of N(0.98, 0.02) lies above 1: censored, that mass sits on 1, so the shortest
    95 % interval ends at 1 and starts at the 5 % quantile (the central one, [q2.5, 1],
    would hold 97.5 %)."""
    d = normal(0.98, 0.02)
    lo, hi = d.interval(0.95, CPU)
    assert hi == 1.0
    assert lo == pytest.approx(norm.ppf(0.05, 0.98, 0.02), abs=1e-9)
    c_lo, c_hi = np.clip(d.interval(0.95), *CPU)
    assert censored_mass(d, float(c_lo), float(c_hi), CPU) == pytest.approx(0.975, abs=1e-9)
    assert censored_mass(d, lo, hi, CPU) == pytest.approx(0.95, abs=1e-9)


def test_a_light_low_mode_is_cut_at_its_median() -> None:
    """90 % idle at 0.995 (partly above 1: an atom) and 10 % busy around 0.3: the shortest
    interval holding 95 % leaves out half of the busy mode, so it starts at 0.3."""
    d = mixture([(0.9, 0.995, 0.003), (0.1, 0.3, 0.05)])
    lo, hi = d.interval(0.95, CPU)
    assert (lo, hi) == pytest.approx((0.3, 1.0), abs=1e-9)


def test_everything_beyond_a_bound_is_the_bound() -> None:
    assert normal(1.5, 0.02).interval(0.95, CPU) == (1.0, 1.0)
    assert normal(-0.5, 0.02).interval(0.95, CPU) == (0.0, 0.0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="confidence"):
        normal(0.5, 0.1).interval(1.5, CPU)
    with pytest.raises(ValueError, match="bounds"):
        normal(0.5, 0.1).interval(0.95, (1.0, 0.0))


@pytest.mark.parametrize("name", ["4", "41", "45", "233"])
def test_real_forecasts_hold_the_confidence_and_are_no_wider(
    traces: dict[str, Trace], name: str
) -> None:
    """On real hosts at every horizon the served interval holds 95 % of the censored forecast
    and is never wider than the central interval clipped to [0, 1]."""
    t = traces[name]
    now = float(t.timestamps[0]) + 10 * 86400.0
    for h in (303.0, 3600.0, 86400.0, 259200.0):
        f = forecast_series(t.timestamps, t.availability, now=now, horizon_s=h, bounds=CPU)
        d = f.distribution
        lo, hi = f.interval
        central = np.clip(d.interval(0.95), *CPU)
        assert censored_mass(d, lo, hi, CPU) == pytest.approx(0.95, abs=1e-6)
        assert hi - lo <= central[1] - central[0] + 1e-9


def test_a_narrow_mode_in_a_wide_range_is_resolved() -> None:
    """A link's narrow main mode beside a light, wide one a decade away: the range spans
    both, the narrow mode is a fraction of one even step of it, and the interval must still
    sit on the narrow mode (an end at the range's start, 10 deviations out, holds no mass)."""
    d = mixture([(0.97, 100.0, 0.5), (0.03, 1000.0, 50.0)])
    lo, hi = d.interval(0.8, (0.0, math.inf))
    assert (lo, hi) == pytest.approx(d.interval(0.8), abs=1e-9)
    assert censored_mass(d, lo, hi, (0.0, math.inf)) == pytest.approx(0.8, abs=1e-9)


def test_random_mixtures_hold_the_confidence_and_are_never_wider_than_central() -> None:
    """With mass beyond both bounds an interval may have to take a whole atom (an atom of 70 %
    at 1 is the shortest 50 % interval by itself): then it holds more than asked."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        k = int(rng.integers(1, 6))
        w = rng.dirichlet(np.ones(k))
        comps = [
            (float(a), float(b), float(c))
            for a, b, c in zip(w, rng.uniform(0, 1.1, k), rng.uniform(0.001, 0.2, k), strict=True)
        ]
        d = mixture(comps)
        for confidence in (0.5, 0.9, 0.95):
            lo, hi = d.interval(confidence, CPU)
            c_lo, c_hi = np.clip(d.interval(confidence), *CPU)
            assert 0.0 <= lo <= hi <= 1.0
            assert hi - lo <= c_hi - c_lo + 1e-9
            mass = censored_mass(d, lo, hi, CPU)
            assert mass >= confidence - 1e-6
            if 0.0 < lo and hi < 1.0:  # no atom on an end: exactly the confidence
                assert mass == pytest.approx(confidence, abs=1e-6)


def test_an_interval_is_solved_once_per_confidence_and_bounds() -> None:
    """A warm forecast reads the distribution from the fit cache and asks again: the answer is
    the one solved the first time, and each confidence and range gets its own."""
    d = mixture([(0.7, 0.95, 0.03), (0.3, 0.2, 0.1)])
    fresh = mixture([(0.7, 0.95, 0.03), (0.3, 0.2, 0.1)])
    first = d.interval(0.95, CPU)
    assert d.interval(0.95, CPU) is first
    assert first == fresh.interval(0.95, CPU)
    assert d.interval(0.9, CPU) == fresh.interval(0.9, CPU) != first
    assert d.interval(0.95) == fresh.interval(0.95) != first


def test_confidences_share_one_censored_table_per_bounds() -> None:
    """Asking for several confidences (forecast-eval's sharpness levels) tabulates the censored
    CDF once per range, and each answer is the one a fresh distribution gives."""
    comps = [(0.6, 0.97, 0.02), (0.25, 0.5, 0.08), (0.15, 0.05, 0.04)]
    d = mixture(comps)
    levels = (0.1, 0.5, 0.8, 0.95)
    answers = [d.interval(c, CPU) for c in levels]
    assert list(d._censored_tables) == [CPU]
    assert answers == [mixture(comps).interval(c, CPU) for c in levels]
    widths = [hi - lo for lo, hi in answers]
    assert widths == sorted(widths) and widths[0] < widths[-1]
    d.interval(0.9, (0.0, 0.99))
    assert list(d._censored_tables) == [CPU, (0.0, 0.99)]
