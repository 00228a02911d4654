"""Recalibrated intervals by hand: the conformal rank, the widening, its floor (the model's own
interval), the warning, the minimum number of runs, and causality in the offline replay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppe.evaluation.live import RunOutcome, Served
from ppe.evaluation.recalibration import (
    SCALED,
    Pair,
    conformal_rank,
    grouped,
    recalibration,
    replay_coverage,
    scores,
    warning,
    widen,
)

#: log(actual / predicted) of nine past runs; sorted |.|: .05 .1 .15 .2 .25 .3 .35 .4 .5
LOGS = [0.1, -0.2, 0.3, -0.05, 0.15, -0.4, 0.25, 0.35, -0.5]
SERVED = Served(mean=10.0, low=9.5, high=10.5, confidence=0.8, iterations=100)


def runs(logs: list[float], status: str = "completed") -> list[RunOutcome]:
    return [
        RunOutcome(i, 1000.0 + i, status, 10.0 * math.exp(x), SERVED, 100)
        for i, x in enumerate(logs)
    ]


def test_conformal_rank_by_hand() -> None:
    assert conformal_rank(9, 0.8) == 8  # ceil(10 * 0.8)
    assert conformal_rank(19, 0.95) == 19  # ceil(20 * 0.95) = 19 exactly, not 20
    assert conformal_rank(20, 0.95) == 20  # ceil(19.95)
    assert conformal_rank(39, 0.95) == 38  # ceil(38.0)
    assert conformal_rank(8, 0.95) == 9  # more than n: no finite bound has the guarantee
    with pytest.raises(ValueError):
        conformal_rank(0, 0.95)


def test_the_widening_by_hand() -> None:
    r = recalibration(runs(LOGS), confidence=0.8, min_runs=8)
    assert r is not None
    # n = 9, k = 8: the 8th smallest |log ratio| is 0.4.
    assert (r.runs, r.rank, r.guaranteed) == (9, 8, True)
    assert r.q == pytest.approx(0.4)
    assert r.median_ratio == pytest.approx(math.exp(0.1))  # signed logs: median 0.1
    # A new answer of mean 20 with the model's [19, 21]: served 20 * [e^-0.4, e^0.4].
    w = widen(20.0, 19.0, 21.0, r)
    assert (w.low, w.high) == pytest.approx((20 * math.exp(-0.4), 20 * math.exp(0.4)))
    assert (w.model_low, w.model_high) == (19.0, 21.0)
    assert w.factor == pytest.approx((20 * math.exp(0.4) - 20 * math.exp(-0.4)) / 2.0)
    assert w.widened


def test_never_narrower_than_the_model() -> None:
    r = recalibration(runs(LOGS), confidence=0.8, min_runs=8)
    assert r is not None
    wide = widen(20.0, 5.0, 50.0, r)  # the model's interval already holds 20 * e^+-0.4
    assert (wide.low, wide.high, wide.factor, wide.widened) == (5.0, 50.0, 1.0, False)
    one_side = widen(20.0, 15.0, 50.0, r)  # only the lower end moves
    assert one_side.low == pytest.approx(20 * math.exp(-0.4)) and one_side.high == 50.0
    assert one_side.low < 15.0 and one_side.widened


def test_fewer_than_min_runs_give_nothing_and_failed_runs_do_not_count() -> None:
    assert recalibration(runs(LOGS[:7]), 0.8, min_runs=8) is None
    with_failed = runs(LOGS[:7]) + runs([2.0, 3.0], status="failed")
    assert recalibration(with_failed, 0.8, min_runs=8) is None
    assert len(scores(with_failed)) == 7


def test_an_early_stop_is_scored_against_the_scaled_mean() -> None:
    half = RunOutcome(1, 0.0, "completed", 5.0 * math.exp(0.2), SERVED, 50)
    assert scores([half]) == pytest.approx([0.2])


def test_the_warning_says_from_how_many_runs_and_by_how_much() -> None:
    r = recalibration(runs(LOGS), confidence=0.8, min_runs=8)
    assert r is not None
    text = warning(r, widen(20.0, 19.0, 21.0, r))
    assert text.startswith(
        "makespan interval widened from 9 reported runs of this application and strategy: "
        "[19, 21] -> [13.41, 29.84] s (x8.22 wider; 8 of the 9 took within a factor "
    )
    assert "e^0.4 = 1.49" in text and "median actual/predicted 1.11" in text
    assert "fewer than" not in text  # 9 runs back an 80 % bound
    # At 95 % nine runs cannot back a conformal bound: the widest seen, and the answer says so.
    r95 = recalibration(runs(LOGS), confidence=0.95, min_runs=8)
    assert r95 is not None and not r95.guaranteed and r95.q == pytest.approx(0.5)
    assert "9 runs are fewer than the 19 a 95% conformal bound needs" in warning(
        r95, widen(20.0, 19.0, 21.0, r95)
    )


def pair(t: float, log_error: float, group: str = "") -> Pair:
    return Pair(t, 10.0, 9.9, 10.1, 10.0 * math.exp(log_error), 0.95, group)


def test_the_replay_uses_only_runs_that_ended_before_each_answer() -> None:
    # Eight exact runs, then one 0.3 off (outside [9.9, 10.1]), then one far off. If the run
    # at t = 1000 leaked into the bound of the run at t = 900, the latter would be inside.
    pairs = [pair(100.0 * i, 0.0) for i in range(8)] + [pair(900.0, 0.3), pair(1000.0, 2.0)]
    got = replay_coverage(pairs, min_runs=8)
    assert (got.runs, got.recalibrated) == (10, 2)
    assert got.inside_model == 8 and got.inside_served == 8  # t = 900 and 1000 both outside
    # A run still going when the next answer is served does not count either: the 8th run
    # ends at 700 + 10 * e^2 = 773.9, so the answer at 770 sees seven runs only.
    late = [pair(100.0 * i, 0.0) for i in range(7)] + [pair(700.0, 2.0), pair(770.0, 1.0)]
    assert replay_coverage(late, min_runs=8).recalibrated == 0


def test_the_replay_recovers_nominal_coverage_on_synthetic_noise() -> None:
    """actual = mean x lognormal(0.2) while the served interval is +-5 %: the model covers
    ~20 %, the recalibrated intervals ~95 % (the truth is known)."""
    rng = np.random.default_rng(7)
    pairs = [
        Pair(100.0 * i, 10.0, 9.5, 10.5, 10.0 * math.exp(0.2 * z), 0.95, "")
        for i, z in enumerate(rng.standard_normal(1000))
    ]
    got = replay_coverage(pairs, min_runs=8, last=50)
    assert got.recalibrated == 1000 - 8
    model = got.inside_model_recal / got.recalibrated
    served = got.inside_served_recal / got.recalibrated
    assert model < 0.3
    assert 0.92 < served < 0.98
    assert got.median_factor is not None and got.median_factor > 5


def test_the_strategy_first_then_the_application() -> None:
    mine, others = runs(LOGS[:3]), runs(LOGS[3:])
    r = grouped(mine, mine + others, 0.8, min_runs=8)
    assert r is not None and r.scope == "app" and r.runs == 9
    own = grouped(runs([0.1] * 8), mine + others, 0.8, min_runs=8)
    assert own is not None and own.scope == "strategy" and own.q == pytest.approx(0.1)
    assert grouped(mine, mine, 0.8, min_runs=8) is None


def test_the_scaled_score_stretches_the_models_own_interval() -> None:
    # SERVED is [9.5, 10.5] around 10: a run at 10 * 1.05^2 is two upper half-widths out (in
    # log), one at 10 * 0.95^0.5 half a lower half-width.
    two_up = RunOutcome(1, 0.0, "completed", 10.0 * 1.05**2, SERVED, 100)
    half_down = RunOutcome(2, 0.0, "completed", 10.0 * 0.95**0.5, SERVED, 100)
    assert scores([two_up, half_down], SCALED) == pytest.approx([2.0, 0.5])
    r = recalibration([two_up] * 8, 0.8, min_runs=8, kind=SCALED)
    assert r is not None and r.q == pytest.approx(2.0)
    w = widen(20.0, 18.0, 21.0, r)  # each side stretched twice in log around the mean
    assert (w.low, w.high) == pytest.approx((20 * 0.9**2, 20 * 1.05**2))
    assert "2 times their interval's log half-width" in warning(r, w)
