"""The spread model's calibration: conformal ranks, nested coverage on data with known
heteroscedastic noise and on the real kernels, storage, and what a fit hands the pipeline."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.model import fit_terms
from ppe.empirical.report import SeriesKey, fit_from_stored, fit_series
from ppe.empirical.runs import RunRecord
from ppe.empirical.spread import (
    Calibration,
    SpreadModel,
    conformal_quantile,
    fit_spread,
    loo_scores,
    misfit,
    spread_coverage,
    thin,
)
from tests.empirical.test_kernels_data import KERNELS


def hetero(seed: int, reps: int = 6) -> Measurements:
    """Mean ``2 + 0.01 n^2``, std ``0.5 n^(1/2)``: the noise grows far slower than the mean."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.array([16, 24, 32, 48, 64, 96, 128, 192, 256, 384], dtype=float), reps)
    return Measurements.from_arrays(
        ["n"], n, 2.0 + 0.01 * n**2 + 0.5 * np.sqrt(n) * rng.standard_normal(n.size)
    )


def test_conformal_ranks_by_hand() -> None:
    scores = np.arange(1, 20) / 10.0  # 0.1 .. 1.9, 19 scores
    # rank ceil(20 c): 16th, 18th, 19th smallest
    assert conformal_quantile(scores, 0.8) == pytest.approx(1.6)
    assert conformal_quantile(scores, 0.9) == pytest.approx(1.8)
    assert conformal_quantile(scores, 0.95) == pytest.approx(1.9)
    assert conformal_quantile(scores, 0.5) == pytest.approx(1.0)  # ceil(10) = 10th
    # 10 scores: ceil(11 * 0.95) = 11 > 10, no finite 95 % interval; 90 %: ceil(9.9) = 10th
    assert math.isinf(conformal_quantile(scores[:10], 0.95))
    assert conformal_quantile(scores[:10], 0.9) == pytest.approx(1.0)
    # thinned order statistics keep the ranks: 2001 scores equal to their rank, 1000 kept
    many = np.arange(1.0, 2002.0)
    kept = np.array(thin(many))
    assert kept.size == 1000 and kept[0] == 1.0 and kept[-1] == 2001.0
    assert conformal_quantile(kept, 0.9, n=2001) == pytest.approx(1802.0, abs=1.0)
    assert Calibration(tuple(kept), 2001).multiplier(0.5) == pytest.approx(1001.0, abs=1.0)


def test_the_calibration_is_the_rank_of_the_leave_one_point_out_scores() -> None:
    data = hetero(3)
    sp = fit_spread(data)
    cal = sp.calibration
    assert cal is not None and cal.n == data.n_obs == 60
    # point 4's scores by hand: both models refitted without it, terms kept
    keep = np.arange(data.n_points) != 4
    mean = fit_terms(data.select(keep), sp.mean.terms, noise=sp.mean.noise)
    rest = data.select(keep)
    stds = Measurements.from_arrays(["n"], rest.points, rest.stds)
    std = fit_terms(stds, sp.std.terms, noise=sp.std.noise)
    mu, sd = SpreadModel(mean, std, misfit=misfit(rest, mean)).moments({"n": 64.0})
    by_hand = np.abs(data.values[4] - mu) / sd
    scores = loo_scores(data, sp)
    assert np.all(np.isin(np.round(by_hand, 12), np.round(scores, 12)))
    ranked = np.sort(scores)
    assert cal.scores == pytest.approx(tuple(ranked))
    assert cal.multiplier(0.95) == ranked[math.ceil(61 * 0.95) - 1]  # the 58th of 60
    assert sp.quantile({"n": 64.0}, 0.975) - sp.quantile({"n": 64.0}, 0.5) == pytest.approx(
        cal.multiplier(0.95) * sp.moments({"n": 64.0})[1]
    )


def test_nested_coverage_on_known_heteroscedastic_noise_is_near_nominal() -> None:
    covs = []
    for seed in range(5):
        cal = fit_spread(hetero(100 + seed)).calibration
        assert cal is not None
        covs.append([cal.coverage[c] for c in (0.8, 0.9, 0.95)])
    mean = np.mean(covs, axis=0)
    assert mean == pytest.approx([0.8, 0.9, 0.95], abs=0.06)


def test_the_std_model_follows_the_noise_not_the_mean() -> None:
    """The std grows like n^(1/2) while the mean grows like n^2: at 4x the largest size the
    spread model's std is near 2x its value at the largest, not 16x."""
    sp = fit_spread(hetero(7, reps=10))
    s384 = sp.std.predict({"n": 384.0}).mean
    s1536 = sp.std.predict({"n": 1536.0}).mean
    assert s384 == pytest.approx(0.5 * math.sqrt(384), rel=0.4)
    assert 1.2 < s1536 / s384 < 4.0


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_real_kernels_stated_coverage(name: str) -> None:
    """The original normal intervals (``sqrt(std^2 + se_mean^2)``, no misfit) cover at most
    80 % of left-out runs at 95 % on every shipped kernel; the calibrated ones, tested on
    points neither fit nor calibration saw, cover at least 90 % (each kernel: 10 or 16 sizes
    of 5 runs)."""
    params, x, y = KERNELS[name]
    data = Measurements.from_arrays(params, x, y)
    sp = fit_spread(data)
    cal = sp.calibration
    assert cal is not None and sp.misfit > 0
    original = spread_coverage(data, replace(sp, misfit=0.0, calibration=None))
    assert original[0.95] <= 0.81
    assert cal.coverage[0.95] >= 0.9
    assert cal.coverage[0.8] >= 0.68
    assert cal.coverage[0.8] <= cal.coverage[0.9] <= cal.coverage[0.95]


def test_spread_round_trips_and_the_uncalibrated_coverage_is_reproduced() -> None:
    data = hetero(5)
    sp = fit_spread(data)
    back = SpreadModel.from_dict(sp.to_dict())
    assert back.calibration == sp.calibration
    for q in (0.1, 0.5, 0.9, 0.975):
        assert back.quantile({"n": 1000.0}, q) == pytest.approx(sp.quantile({"n": 1000.0}, q))
    assert back.to_stochastic({"n": 1000.0}).sigma == pytest.approx(
        sp.to_stochastic({"n": 1000.0}).sigma
    )
    raw = fit_spread(data, calibrate=False)
    assert raw.calibration is None and sp.calibration is not None
    assert spread_coverage(data, raw) == pytest.approx(sp.calibration.normal)
    # an infinite width (too few runs for an interval) is stored as null and read back
    odd = Calibration((0.5, 1.0), 2, {0.95: 1.0}, {0.95: math.inf}, {0.95: 0.5})
    assert odd.to_dict()["width"]["0.95"] is None
    assert Calibration.from_dict(odd.to_dict()) == odd


def records(data: Measurements, means_only: bool = False) -> list[RunRecord]:
    return [
        RunRecord(
            app="a",
            kernel="row",
            params={"n": float(data.points[k, 0])},
            values=(float(data.means[k]),) if means_only else tuple(map(float, data.values[k])),
        )
        for k in range(data.n_points)
    ]


def test_a_fit_with_repetitions_hands_the_pipeline_the_calibrated_spread() -> None:
    data = hetero(9)
    key = SeriesKey("a", "row", "time", None)
    fit = fit_series(key, records(data))
    assert fit.spread is not None and fit.spread.mean == fit.model
    small, large = {"n": 32.0}, {"n": 512.0}  # measured 16..384
    for point in (small, large):
        mu, sd = fit.spread.moments(point)
        value = fit.to_stochastic(point)
        assert value.mean() == pytest.approx(mu)
        assert value.sigma == pytest.approx(sd * fit.spread.scale())  # type: ignore[attr-defined]
    # the spread at each size is the std model's (with the mean's uncertainty), not the mean
    # model's relative noise, which grows with the mean (n^2) where the runs' std grows as n^0.5
    ratio = fit.to_stochastic(large).sigma / fit.to_stochastic(small).sigma  # type: ignore[attr-defined]
    sd_ratio = fit.spread.moments(large)[1] / fit.spread.moments(small)[1]
    assert ratio == pytest.approx(sd_ratio)
    mean_ratio = fit.model.predict(large).std / fit.model.predict(small).std
    assert ratio < 0.5 * mean_ratio
    report = fit.report([large])
    assert report["spread"]["used"] and report["spread"]["coverage"]["0.95"] >= 0.85
    assert report["predictions"][0]["spread"]["std"] == pytest.approx(
        fit.to_stochastic(large).sigma  # type: ignore[attr-defined]
    )
    # stored (save_as) and read back: the same distribution
    back = fit_from_stored(key, fit.requested, fit.stored(), fit.fixed)
    assert back.spread is not None
    assert back.to_stochastic(large).sigma == pytest.approx(fit.to_stochastic(large).sigma)  # type: ignore[attr-defined]
    assert back.report([large])["spread"] == report["spread"]


def test_without_repetitions_the_mean_model_stays() -> None:
    data = hetero(9)
    key = SeriesKey("a", "row", "time", None)
    fit = fit_series(key, records(data, means_only=True))
    assert fit.spread is None and fit.spread_note is not None
    assert "repetitions" in fit.spread_note
    point = {"n": 2048.0}
    expected = fit.model.to_stochastic(point)
    assert fit.to_stochastic(point).sigma == pytest.approx(expected.sigma)  # type: ignore[attr-defined]
    report = fit.report([point])
    assert report["spread"] == {"used": False, "model": None, "reason": fit.spread_note}
    assert "spread" not in report["predictions"][0]
    assert fit_from_stored(key, "search", fit.stored(), {}).spread is None
    # Prophecy's types keep the mean model's spread too
    assert fit_series(key, records(data), kind="quadratic").spread is None
