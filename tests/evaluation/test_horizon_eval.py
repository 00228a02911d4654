"""`ppe forecast-eval --horizons`: causality, the service's code path, categories, report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from forecaster import CPU_ANALOG, forecast_series, snap_horizon
from ppe.evaluation import horizon_eval
from ppe.evaluation.forecast_eval import main
from ppe.traces import read_trace

DAY = 86400.0


@pytest.fixture(scope="module")
def bimodal(traces_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    t = read_trace(traces_dir / "41.csv.gz").alive()
    return t.timestamps, t.availability


@pytest.mark.parametrize("horizon", [300.0, 21600.0, 259200.0])
def test_forecast_case_does_not_look_ahead(
    bimodal: tuple[np.ndarray, np.ndarray], horizon: float
) -> None:
    ts, xs = bimodal
    now = float(ts[0]) + 9.3 * DAY
    base = horizon_eval.forecast_case(ts, xs, now, horizon)
    rng = np.random.default_rng(7)
    future = ts >= now
    other = xs.copy()
    other[future] = rng.uniform(0.01, 1.0, int(future.sum()))
    assert horizon_eval.forecast_case(ts, other, now, horizon) == base
    # the same change one sample earlier is seen (the test can fail)
    first = int(np.argmax(future))
    other[first - 1] = 1.01 - other[first - 1]
    moved = horizon_eval.forecast_case(ts, other, now, horizon)
    assert (
        moved["forecaster"] != base["forecaster"]
        or moved["unconditional"] != (base["unconditional"])
    )


def test_realised_uses_only_the_window(bimodal: tuple[np.ndarray, np.ndarray]) -> None:
    ts, xs = bimodal
    now = float(ts[100]) + 1.0
    inside = (ts >= now) & (ts < now + 3600)
    assert horizon_eval.realised(ts, xs, now, 3600) == pytest.approx(float(xs[inside].mean()))
    gap = ts.copy()
    gap[gap >= now] += 10 * DAY  # nothing in the window: drawn again, never scored
    assert horizon_eval.realised(gap, xs, now, 3600) is None


def test_forecaster_is_what_the_service_answers(bimodal: tuple[np.ndarray, np.ndarray]) -> None:
    ts, xs = bimodal
    now = float(ts[0]) + 11.7 * DAY
    for horizon in (3600.0, 86400.0):
        case = horizon_eval.forecast_case(ts, xs, now, horizon)
        fc = forecast_series(
            ts,
            xs,
            now=now,
            horizon_s=snap_horizon(horizon),
            bounds=(0.0, 1.0),
            analog=CPU_ANALOG,
        )
        assert case["forecaster"]["lower"] == pytest.approx(fc.interval[0], abs=1e-12)
        assert case["forecaster"]["upper"] == pytest.approx(fc.interval[1], abs=1e-12)
        assert case["forecaster"]["mean"] == pytest.approx(fc.mean, abs=1e-12)
        assert case["forecaster"]["support"] == fc.distribution.support


def test_categories() -> None:
    ts = np.arange(0.0, 7 * DAY, 300.0)
    rng = np.random.default_rng(1)
    now = float(ts[-1]) + 1
    idle = np.clip(0.98 + rng.normal(0, 0.005, ts.size), 0, 1)
    steady = np.clip(0.6 + rng.normal(0, 0.01, ts.size), 0, 1)
    variable = np.clip(0.6 + rng.normal(0, 0.15, ts.size), 0, 1)
    bimodal = np.where((ts // 36000) % 2 == 0, 0.02, 0.99)
    assert horizon_eval.category(ts, idle, now) == "idle"
    assert horizon_eval.category(ts, steady, now) == "steady"
    assert horizon_eval.category(ts, variable, now) == "variable"
    assert horizon_eval.category(ts, bimodal, now) == "bimodal"
    # only the past counts: the same series judged before its variable half is steady
    mixed = np.where(ts < 3 * DAY, steady, variable)
    assert horizon_eval.category(ts, mixed, 3 * DAY) == "steady"


def test_unconditional_is_every_past_window() -> None:
    ts = np.arange(0.0, 100 * 300.0, 300.0)
    xs = np.arange(100, dtype=float) / 100
    means = horizon_eval.unconditional(ts, xs, float(ts[50]), 3 * 300.0)
    np.testing.assert_allclose(means, [(xs[i] + xs[i + 1] + xs[i + 2]) / 3 for i in range(48)])


def test_scores() -> None:
    """Coverage and width of the interval answered; pinball of the central quantiles."""
    quantiles = {"q_lower": 0.3, "q_upper": 0.7}
    cases = [
        {"actual": 0.5, "m": {"mean": 0.4, "lower": 0.35, "upper": 0.7, **quantiles}},
        {"actual": 0.9, "m": {"mean": 0.6, "lower": 0.35, "upper": 0.7, **quantiles}},
    ]
    s = horizon_eval.scores(cases, "m")
    assert s["coverage"] == 0.5 and s["width"] == pytest.approx(0.35)
    assert s["mae"] == pytest.approx(0.2)
    # case 1: 0.025*0.2 + 0.025*0.2; case 2: 0.025*0.6 + 0.975*0.2
    expected = ((0.005 + 0.005) / 2 + (0.015 + 0.195) / 2) / 2
    assert s["pinball"] == pytest.approx(expected)


def test_checks_count_rows_inside_and_below_the_band() -> None:
    def row(
        cover: float,
        width: float,
        pinball: float,
        n: int = 100,
        ci: tuple[float, float] | None = None,
    ) -> dict:  # type: ignore[type-arg]
        base = {"coverage": 0.9, "width": 0.3, "pinball": 0.01, "range_coverage": 0.99}
        forecaster = {
            "coverage": cover,
            "width": width,
            "pinball": pinball,
            "coverage_ci": ci,
            "width_at_unconditional_coverage": min(width, 0.3),
        }
        peer = {"coverage": 0.9, "width": 0.3, "pinball": 0.015}
        return {
            "n": n,
            "forecaster": forecaster,
            "unconditional": base,
            "analog_legacy": base,
            "ar1": peer,
        }

    rows = [
        row(0.95, 0.2, 0.005, ci=(0.91, 0.99)),
        row(0.92, 0.4, 0.02, ci=(0.90, 0.94)),  # below, but its interval reaches the band
        row(0.91, 0.4, 0.02, ci=(0.89, 0.925)),  # wholly below
        row(0.98, 0.3, 0.01, ci=(0.975, 0.99)),  # wholly above
        row(0.5, 1, 1, 0),
    ]
    # wider at 95 % but as narrow as the baseline at its own coverage of 0.9
    rows[1]["forecaster"]["width_at_unconditional_coverage"] = 0.25
    rows[2]["forecaster"]["width_at_unconditional_coverage"] = 0.31  # wider at both
    rows[3]["forecaster"]["width_at_unconditional_coverage"] = None  # never covers as often
    rows[2]["unconditional"]["range_coverage"] = 0.92
    assert horizon_eval.checks(rows) == {
        "rows": 4,
        "coverage_in_93_97": 1,
        "coverage_below_93": 2,
        "coverage_ci_below_93": 1,
        "coverage_ci_above_97": 1,
        "width_le_unconditional": 2,
        "width_le_unconditional_at_equal_coverage": 2,
        "unconditional_range_below_93": 1,
        "pinball_le_baselines": 2,
        "pinball_le_ar1": 2,
        "crps_le_last_value": 0,
    }
    rows[0]["forecaster"]["crps"], rows[0]["last_value"] = 0.01, {"mae": 0.02}
    rows[1]["forecaster"]["crps"], rows[1]["last_value"] = 0.03, {"mae": 0.02}
    assert horizon_eval.checks(rows)["crps_le_last_value"] == 1


def _leveled(actual: float, widths: list[float]) -> dict:  # type: ignore[type-arg]
    """A case whose intervals at SHARPNESS_LEVELS are centred on 0.5 with these widths."""
    return {"actual": actual, "m": {"levels": [[0.5 - w / 2, 0.5 + w / 2] for w in widths]}}


def test_width_at_coverage_reads_the_width_that_reaches_a_coverage() -> None:
    """Ten cases, the outcome of case i at 0.5 + 0.01 i: an interval of width w covers the
    cases with 0.02 i <= w. The widths grow with the level; at each level case i's interval
    is (level / 0.95) times as wide as at 95 %."""
    scale = np.array(horizon_eval.SHARPNESS_LEVELS) / horizon_eval.CONFIDENCE
    cases = [_leveled(0.5 + 0.01 * i, list(0.2 * scale)) for i in range(10)]
    # level 0.9 (width 0.189) already covers every case, as 0.95 does; level 0.5's width
    # 0.105 covers 6
    assert horizon_eval.width_at_coverage(cases, "m", 1.0) == pytest.approx(0.2 * 0.9 / 0.95)
    assert horizon_eval.width_at_coverage(cases, "m", 0.6) == pytest.approx(0.2 * 0.5 / 0.95)
    w = [horizon_eval.width_at_coverage(cases, "m", t) for t in (0.3, 0.6, 0.9)]
    assert np.all(np.diff(np.array(w, dtype=float)) >= 0)  # more coverage costs width
    # a coverage the 95 % intervals do not reach cannot be met by narrowing them
    narrow = [_leveled(0.5 + 0.01 * i, list(0.1 * scale)) for i in range(10)]
    assert horizon_eval.width_at_coverage(narrow, "m", 0.9) is None
    # a level whose intervals cover less than the one below (moved off the outcomes) is
    # passed over: 0.95 lies between level 0.8 (0.9 covered) and 0.95 (all covered)
    dip = [_leveled(0.5 + 0.01 * i, list(0.2 * scale)) for i in range(10)]
    for c in dip:
        c["m"]["levels"][-2] = [0.0, 0.01]  # level 0.9 covers none
    between = (0.2 * 0.8 / 0.95 + 0.2) / 2
    assert horizon_eval.width_at_coverage(dip, "m", 0.95) == pytest.approx(between)
    # below the lowest level's coverage: that level's width, an upper bound
    assert horizon_eval.width_at_coverage(cases, "m", 0.0) == pytest.approx(0.2 * scale[0])


def test_range_coverage_is_the_whole_sample_range() -> None:
    cases = [{"actual": y, "u": {"min": 0.2, "max": 0.8}} for y in (0.1, 0.2, 0.5, 0.8, 0.9)]
    assert horizon_eval.range_coverage(cases, "u") == pytest.approx(0.6)


def _cases(hits_by_trace: dict[str, list[bool]]) -> list[dict]:  # type: ignore[type-arg]
    m = {"lower": 0.4, "upper": 0.6}
    return [
        {"trace": t, "actual": 0.5 if hit else 0.9, "m": m}
        for t, hits in hits_by_trace.items()
        for hit in hits
    ]


def test_coverage_interval_resamples_traces_not_cases() -> None:
    """Ten traces of 100 cases: five cover every case, five only 90 of 100. Over cases the
    binomial interval of 0.95 in 1000 is about +-0.014; the traces disagree, so resampling
    them gives a wider interval, and it holds the pooled coverage and stays within what
    the traces' own coverages allow."""
    good = {f"g{i}": [True] * 100 for i in range(5)}
    poor = {f"p{i}": [True] * 90 + [False] * 10 for i in range(5)}
    cases = _cases(good | poor)
    lo, hi = horizon_eval.coverage_interval(cases, "m", seed=3)  # type: ignore[misc]
    assert 0.90 <= lo < 0.95 < hi <= 1.0
    binomial = horizon_eval.wilson(950, 1000)
    assert binomial is not None and hi - lo > 1.5 * (binomial[1] - binomial[0])
    assert horizon_eval.coverage_interval(cases, "m", seed=3) == (lo, hi)  # seeded
    # the same hits spread evenly over the traces: the traces agree, a narrow interval
    even = _cases({f"t{i}": [True] * 95 + [False] * 5 for i in range(10)})
    e_lo, e_hi = horizon_eval.coverage_interval(even, "m")  # type: ignore[misc]
    assert e_lo == e_hi == pytest.approx(0.95)


def test_coverage_interval_edge_cases() -> None:
    assert horizon_eval.coverage_interval(_cases({"a": [True, False]}), "m") is None
    assert horizon_eval.coverage_interval(_cases({"a": [True], "b": [True] * 3}), "m") == (
        1.0,
        1.0,
    )


def test_sample_summary_is_the_shortest_span() -> None:
    """19 idle windows and one busy: the shortest span with 19 of the 20 points is the idle
    level alone, while the central 2.5 % quantile lies between the two (0.475 by numpy's
    linear rule)."""
    s = horizon_eval.sample_summary(np.array([0.0] + [1.0] * 19))
    assert (s["lower"], s["upper"]) == (1.0, 1.0)
    assert (s["q_lower"], s["q_upper"]) == pytest.approx((0.475, 1.0))
    assert s["mean"] == pytest.approx(0.95)
    assert (s["min"], s["max"]) == (0.0, 1.0)
    spread = horizon_eval.sample_summary(np.linspace(0.0, 1.0, 41))
    assert spread["upper"] - spread["lower"] == pytest.approx(0.95)  # 39 of 41 points


def test_cli_json(traces_dir: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "h.json"
    argv = [
        str(traces_dir / "41.csv.gz"),
        str(traces_dir / "198.csv.gz"),
        "--horizons",
        "3600,86400",
        "--cases",
        "6",
        "--json",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == report
    assert report["settings"]["per_trace"] == 3
    assert len(report["cases"]) == 12
    assert [(r["horizon_s"], r["category"]) for r in report["rows"][:2]] == [
        (3600.0, "all"),
        (3600.0, "steady"),
    ]
    top = report["rows"][0]
    assert top["n"] == 6 and set(top) >= {"forecaster", "analog_legacy", "unconditional", "ar1"}
    assert set(top["forecaster"]) == {
        "n",
        "coverage",
        "width",
        "pinball",
        "mae",
        "coverage_ci",
        "width_at_unconditional_coverage",
        "crps",
    }
    lo, hi = top["forecaster"]["coverage_ci"]
    assert lo <= top["forecaster"]["coverage"] <= hi
    assert set(top["unconditional"]) == {
        "n",
        "coverage",
        "width",
        "pinball",
        "mae",
        "range_coverage",
        "crps",
    }
    assert top["unconditional"]["range_coverage"] >= top["unconditional"]["coverage"]
    assert set(top["last_value"]) == {"n", "mae"}
    for case in report["cases"]:
        assert case["at"] + case["horizon_s"] <= 1.4e9 and case["category"] in (
            horizon_eval.CATEGORIES
        )
        assert 0.0 <= case["forecaster"]["lower"] <= case["forecaster"]["upper"] <= 1.0
        levels = case["forecaster"]["levels"]
        assert len(levels) == len(horizon_eval.SHARPNESS_LEVELS)
        assert levels[-1] == [case["forecaster"]["lower"], case["forecaster"]["upper"]]
        widths = [hi - lo for lo, hi in levels]
        assert widths == sorted(widths)  # a higher level never needs a narrower interval
    # same seed, same cases
    assert main([*argv[:-3], "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["cases"] == report["cases"]
    assert main([str(traces_dir / "41.csv.gz"), "--horizons", "0,60"]) == 2
    assert "positive" in capsys.readouterr().err


def test_cli_text(traces_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(traces_dir / "41.csv.gz"), "--horizons", "3600", "--cases", "3"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "1 h" in text and "bimodal" in text and "coverage in 93-97 %" in text
    assert "wholly outside by their 95 % interval over traces" in text
    assert "ar1" in text and "statsmodels AR(1)" in text
    assert "switching" not in text
    assert main([*argv, "--switching"]) == 0
    text = capsys.readouterr().out
    assert "switching" in text and "combined" in text


def test_an_outcome_on_the_bound_draws_its_pit_across_the_atom() -> None:
    """N(0.98, 0.02) puts 16 % beyond 1: an outcome of exactly 1 has a PIT anywhere in
    [0.84, 1], drawn by u; inside the range the PIT is the CDF."""
    from scipy.stats import norm

    from forecaster.distribution import Distribution

    d = Distribution("normal", [(1.0, 0.98, 0.02)], 0.98, 0.02, False, 100)
    below = norm.cdf(1.0, 0.98, 0.02)
    assert horizon_eval.censored_pit(d, 1.0, 0.0) == pytest.approx(below)
    assert horizon_eval.censored_pit(d, 1.0, 0.5) == pytest.approx((below + 1) / 2)
    assert horizon_eval.censored_pit(d, 0.97, 0.9) == pytest.approx(norm.cdf(0.97, 0.98, 0.02))
    assert horizon_eval.censored_pit(d, 0.0, 0.5) == pytest.approx(norm.cdf(0.0, 0.98, 0.02) / 2)
    # a calibrated censored forecast gives a flat histogram
    rng = np.random.default_rng(3)
    y = np.minimum(rng.normal(0.98, 0.02, 20000), 1.0)
    pits = [horizon_eval.censored_pit(d, float(v), float(rng.uniform())) for v in y]
    counts, _ = np.histogram(pits, bins=10, range=(0, 1))
    assert counts.min() > 0.9 * 2000 and counts.max() < 1.1 * 2000


def test_censored_crps_matches_the_normal_closed_form_and_censors() -> None:
    """Far from the bounds the CRPS of N(mu, sd) is sd * (z (2 Phi(z) - 1) + 2 phi(z) -
    1 / sqrt(pi)) (Gneiting and Raftery 2007); at a bound the censored forecast puts the mass
    beyond it on the bound, which an outcome there is not charged for."""
    from scipy.stats import norm

    from forecaster.distribution import Distribution

    mu, sd = 0.5, 0.04
    d = Distribution("normal", [(1.0, mu, sd)], mu, sd, False, 100)
    for y in (0.43, 0.5, 0.58):
        z = (y - mu) / sd
        exact = sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
        assert horizon_eval.censored_crps(d, y) == pytest.approx(exact, abs=2e-6)
    point = Distribution("point", [(1.0, 0.9, 0.0)], 0.9, 0.0, False, 1)
    assert horizon_eval.censored_crps(point, 0.7) == pytest.approx(0.2)
    # centred on the bound: the half above it, which censoring piles on 1, costs nothing
    at_one = Distribution("normal", [(1.0, 1.0, 0.05)], 1.0, 0.05, False, 100)
    uncensored = 0.05 * (2 * norm.pdf(0.0) - 1 / np.sqrt(np.pi))
    assert horizon_eval.censored_crps(at_one, 1.0) == pytest.approx(uncensored / 2, rel=1e-4)


def test_sample_crps_is_the_energy_form() -> None:
    rng = np.random.default_rng(4)
    sample = rng.uniform(0.2, 1.0, 57)
    for y in (0.1, 0.55, 1.0):
        brute = np.mean(np.abs(sample - y)) - np.mean(np.abs(sample[:, None] - sample)) / 2
        assert horizon_eval.sample_crps(sample, y) == pytest.approx(brute, abs=1e-12)
    assert horizon_eval.sample_crps(np.array([0.3]), 0.5) == pytest.approx(0.2)


def test_scored_case_scores_the_forecasts_it_made_without_the_outcome(
    bimodal: tuple[np.ndarray, np.ndarray],
) -> None:
    """The outcome only scores: the forecasts are forecast_case's whatever it is, the last
    value is the sample just before ``at``, and a forecast nearer the outcome scores lower."""
    ts, xs = bimodal
    now = float(ts[0]) + 10.4 * DAY
    base = horizon_eval.forecast_case(ts, xs, now, 3600.0)
    near, far = (horizon_eval.scored_case(ts, xs, now, 3600.0, y) for y in (0.5, 0.02))
    for case in (near, far):
        for name in ("forecaster", "analog_legacy", "unconditional", "ar1"):
            assert {k: v for k, v in case[name].items() if k != "crps"} == base[name]
            assert case[name]["crps"] >= 0.0
        assert case["last_value"] == float(xs[ts < now][-1]) == base["last_value"]
    assert near["actual"] == 0.5 and near["at"] == now and near["horizon_s"] == 3600.0
    assert near["unconditional"]["crps"] != far["unconditional"]["crps"]
    assert near["forecaster"]["crps"] != far["forecaster"]["crps"]


def test_last_value_scores_are_its_absolute_errors() -> None:
    cases = [{"actual": 0.5, "last_value": 0.7}, {"actual": 1.0, "last_value": 0.9}]
    assert horizon_eval.last_value_scores(cases) == {"n": 2, "mae": pytest.approx(0.15)}
