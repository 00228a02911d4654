"""Live accuracy by hand: coverage, relative error, ratio, scaling for early stops."""

from __future__ import annotations

import pytest

from ppe.evaluation.live import RunOutcome, Served, accuracy, judge

SERVED = Served(mean=10.0, low=8.0, high=12.0, confidence=0.95, iterations=100)


def run(i: int, actual: float, status: str = "completed", done: float = 100) -> RunOutcome:
    return RunOutcome(i, 1000.0 + i, status, actual, SERVED, done)


def test_coverage_error_and_ratio_by_hand() -> None:
    # 9 inside [8, 12] (one on each edge), 1 outside; a failed run is only counted.
    actuals = [8.0, 9.0, 10.0, 10.0, 11.0, 12.0, 9.5, 10.5, 11.5, 15.0]
    got = accuracy([run(i, a) for i, a in enumerate(actuals)] + [run(99, 3.0, "failed")])
    assert (got.runs, got.completed, got.failed, got.inside) == (11, 10, 1, 9)
    assert got.coverage == pytest.approx(0.9)
    # |10 - a| / a, averaged
    errors = [abs(10 - a) / a for a in actuals]
    assert got.mean_relative_error == pytest.approx(sum(errors) / 10)
    assert got.mean_ratio == pytest.approx(sum(actuals) / 10 / 10)
    assert got.median_ratio == pytest.approx(1.025)  # (10.0 + 10.5) / 2 / 10
    assert got.nominal == pytest.approx(0.95)
    lo, hi = got.coverage_interval or (0.0, 0.0)
    assert lo < 0.9 < hi and 0.5 < lo and hi < 1.0  # Wilson interval of 9 in 10


def test_an_early_stop_is_judged_against_the_scaled_prediction() -> None:
    # Half the iterations: the promise is [4, 6] around 5; 5.5 is inside, a ratio of 1.1.
    j = judge(run(1, 5.5, done=50))
    assert (j.scale, j.mean, j.low, j.high) == (0.5, 5.0, 4.0, 6.0)
    assert j.inside and j.ratio == pytest.approx(1.1)
    # Unscaled, 5.5 would have been far outside [8, 12].
    assert not judge(RunOutcome(1, 0.0, "completed", 5.5, SERVED, None)).inside


def test_only_failed_runs_give_no_figures() -> None:
    got = accuracy([run(1, 4.0, "failed"), run(2, 30.0, "failed")])
    assert (got.completed, got.failed, got.coverage, got.mean_ratio) == (0, 2, None, None)
    assert got.coverage_interval is None and got.judged == ()


def test_a_zero_actual_has_no_relative_error_but_is_judged() -> None:
    j = judge(run(1, 0.0))
    assert j.relative_error is None and not j.inside and j.ratio == 0.0
