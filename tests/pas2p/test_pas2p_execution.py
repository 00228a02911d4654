"""Signature execution: the steps to run, and the weighted sum with its interval, by hand."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats

from ppe.pas2p import logical_trace, read_traces, signature
from ppe.pas2p.execution import SETUP, SignatureFileError, execution_plan, predict
from ppe.pas2p.report import to_dict
from tests.pas2p.conftest import DATA


def analysis(kept: list[int] | None = None) -> dict[str, Any]:
    """Set-up (phase 0, step -1), a steady phase x 100 and a check phase x 10."""
    phases = [
        {"id": 0, "weight": 1, "mean_s": 0.5, "sd_s": 0.0, "first": {"step": -1}},
        {"id": 1, "weight": 100, "mean_s": 0.01, "sd_s": 0.001, "first": {"step": 0}},
        {"id": 2, "weight": 10, "mean_s": 0.05, "sd_s": 0.005, "first": {"step": 9}},
    ]
    return {"phases": phases, "signature": [1, 2, 0] if kept is None else kept, "traced_s": 2.0}


def test_plan_runs_the_set_up_once_and_each_step_after_its_predecessor() -> None:
    plan = execution_plan(analysis(), repeats=3, warmup=1)
    assert [(p.id, p.step) for p in plan.phases] == [(0, SETUP), (1, 0), (2, 9)]
    # an untimed round, then rounds of every phase once, in step order; step 9 runs after
    # step 8 (untimed), step 0 has no predecessor but the set-up
    assert plan.schedule() == [(1, 0), (2, 9)] + [(1, 0), (2, 8), (2, 9)] * 3
    assert plan.timed() == [False, False] + [True, False, True] * 3
    times = [9.0, 9.0, 1.0, 9.0, 4.0, 2.0, 9.0, 5.0, 3.0, 9.0, 6.0]
    assert plan.measured(times) == {1: [1.0, 2.0, 3.0], 2: [4.0, 5.0, 6.0]}
    with pytest.raises(ValueError, match="10 step times"):
        plan.measured(times[:-1])


def test_a_phase_runs_at_most_half_as_often_as_it_occurs() -> None:
    few = analysis()
    few["phases"][2]["weight"] = 5
    plan = execution_plan(few, repeats=3, warmup=0)
    assert [plan.runs(p) for p in plan.phases] == [1, 3, 2]
    assert plan.schedule() == [(1, 0), (2, 9)] + [(1, 0), (2, 9)] * 2 + [(1, 0)]
    few["phases"][2]["weight"] = 3  # once at least
    assert [p for p, _ in execution_plan(few, repeats=3).schedule()].count(2) == 2  # no warm round


def test_a_phase_costs_at_most_half_its_share_with_its_warm_ups() -> None:
    """Phase 2 (5 x 0.05 s) behind two warm-up steps of the mean traced step, (100 x 0.01 +
    5 x 0.05) / 105 s: a timed run costs 0.05 + 2 x 0.0119 = 0.0738 s, and half its share,
    0.125 s, pays for one; phase 1 (100 x 0.01 s) could pay for 14, and gets its 3."""
    few = analysis()
    few["phases"][2]["weight"] = 5
    plan = execution_plan(few, repeats=3, warmup=2)
    step_s = (100 * 0.01 + 5 * 0.05) / 105
    assert math.floor(5 * 0.05 / (2 * (0.05 + 2 * step_s))) == 1
    assert [plan.runs(p) for p in plan.phases] == [1, 3, 1]
    # only phase 1 is timed more than once, so only it has an untimed round first
    assert plan.schedule() == [(1, 0)] + [(1, 0), (2, 7), (2, 8), (2, 9)] + [(1, 0)] * 2
    assert plan.timed() == [False, True, False, False, True, True, True]


def test_weighted_sum_and_interval_worked_by_hand() -> None:
    plan = execution_plan(analysis(), repeats=3, warmup=0)
    got = predict(plan, {0: [0.4], 1: [0.009, 0.010, 0.011], 2: [0.04, 0.05, 0.06]})
    # 1 x 0.4 + 100 x 0.010 + 10 x 0.05 = 1.9; nothing left out
    assert got.mean_s == pytest.approx(1.9)
    assert got.left_out_s == 0.0
    # phase 1: sd 0.001, variance 0.001^2 (100^2/3 + 100); phase 2: 0.01^2 (10^2/3 + 10);
    # the set-up, measured once, takes the traced spread (0): no variance
    v1 = 0.001**2 * (100**2 / 3 + 100)
    v2 = 0.01**2 * (10**2 / 3 + 10)
    df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 2)
    half = stats.t.ppf(0.975, df) * math.sqrt(v1 + v2)
    assert got.low_s == pytest.approx(1.9 - half)
    assert got.high_s == pytest.approx(1.9 + half)
    # the traced kept time 2.0 ran in 1.9 here
    assert got.speedup == pytest.approx(2.0 / 1.9)


def test_left_out_phases_scale_with_the_kept_ones() -> None:
    plan = execution_plan(analysis(kept=[1]), repeats=2, warmup=0)
    assert plan.left_out_s == pytest.approx(2.0 - 1.0)
    got = predict(plan, {1: [0.02, 0.02]})  # twice the traced 0.01 s
    assert got.mean_s == pytest.approx(100 * 0.02 + 1.0 * 2)
    assert got.low_s == got.high_s == got.mean_s  # no spread measured


def test_one_run_borrows_the_traced_relative_spread() -> None:
    plan = execution_plan(analysis(kept=[1]), repeats=1, warmup=0)
    got = predict(plan, {1: [0.02]})
    assert got.phases[0].sd_s == pytest.approx(0.002)  # 10 % of the mean, as traced
    assert got.high_s > got.mean_s > got.low_s


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.update(signature=[]), "keeps no phase"),
        (lambda a: a.update(signature=[7]), "phase 7 is kept"),
        (lambda a: a["phases"][1]["first"].pop("step"), r"phases\[1\].first.step"),
        (lambda a: a.pop("traced_s"), "traced_s"),
    ],
)
def test_bad_signatures_name_the_field(change: Any, message: str) -> None:
    bad = analysis()
    change(bad)
    with pytest.raises(SignatureFileError, match=message):
        execution_plan(bad)


def test_bad_measurements_are_refused() -> None:
    plan = execution_plan(analysis(kept=[1]), repeats=1, warmup=0)
    with pytest.raises(ValueError, match="no measured time"):
        predict(plan, {})
    with pytest.raises(ValueError, match="finite"):
        predict(plan, {1: [math.nan]})


def test_the_real_fixture_maps_phases_to_half_sweeps() -> None:
    """Each segment starts at a half-sweep of rank 0: the steady phase first appears at the
    second half-sweep (step 1), and the residual half-sweep ends every 10th iteration (the
    black half-sweep of iteration 10 is step 19)."""
    files = sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))
    sig = signature(logical_trace(read_traces(files)), keep=1.0, tolerance=math.inf)
    steps = {p.weight: p.first_step for p in sig.phases}
    assert steps[1] in (SETUP, 199)  # the set-up and the last half-sweep each appear once
    assert steps[180] == 1
    assert steps[9] == 19
    plan = execution_plan(to_dict(sig))
    assert plan.phases[0].step == SETUP
    # the last half-sweep occurs once: it is not run but scaled, and is all that is left out
    (last,) = [p for p in sig.phases if p.weight == 1 and p.first_step != SETUP]
    assert plan.scaled == (last.id,)
    assert plan.left_out_s == pytest.approx(last.total, rel=1e-9)


def test_a_phase_runs_its_typical_occurrence_not_its_cold_start() -> None:
    """Times 5, 1, 2 ms at steps 0, 4, 8: the median time is step 8's, so that step runs."""
    from ppe.pas2p.phases import Phase

    phase = Phase(0, (), 1, [0.0], [0.005, 0.001, 0.002], steps=[0, 4, 8])
    assert phase.typical_step == 8
    phase.times, phase.steps = [0.003, 0.001], [2, 6]  # two: the earlier of the two middles
    assert phase.typical_step == 6
    a = analysis()
    a["phases"][1]["step"] = 42  # the typical step wins over the first occurrence's
    assert [p.step for p in execution_plan(a).phases] == [SETUP, 9, 42]


def test_settling_runs_untimed_rounds_until_their_traced_time_reaches_it() -> None:
    """A round of the phases timed more than once takes 0.01 + 0.05 s traced; settling for
    0.2 s runs four untimed rounds before the timed ones (0.24 s), and never more untimed
    steps than the run had (110 steps: at most 55 rounds of two)."""
    plan = execution_plan(analysis(), repeats=3, warmup=1, settle_s=0.2)
    assert plan.schedule() == [(1, 0), (2, 9)] * 4 + [(1, 0), (2, 8), (2, 9)] * 3
    assert plan.timed() == [False] * 8 + [True, False, True] * 3
    assert execution_plan(analysis(), repeats=3, settle_s=0.0).schedule()[:3] == [
        (1, 0),
        (2, 9),
        (1, 0),
    ]
    capped = execution_plan(analysis(), repeats=3, warmup=0, settle_s=1e6)
    assert capped.timed().count(False) == 2 * 55
    with pytest.raises(SignatureFileError, match="settle"):
        execution_plan(analysis(), settle_s=-1.0)


def test_warm_ups_shrink_to_their_share_of_the_run() -> None:
    """Mean step 1.5 s / 110 occurrences = 0.0136 s; phase 2 (10 x 0.05 s at step 9) is
    timed twice (behind four warm-ups a run costs 0.105 s, and half its share, 0.25 s, pays
    for two), phase 1 (step 0) has nothing before it: w warm-ups cost 2 w x 0.0136 s =
    0.027 w s. Within 5 % of the 2 s run (0.1 s) that allows three of the four asked for;
    within 20 %, all four; within 1 %, one (never none: a step is always timed after its
    predecessor)."""
    assert execution_plan(analysis(), repeats=3, warmup=4).steps_before() == 4
    plan = execution_plan(analysis(), repeats=3, warmup=4, warmup_share=0.05)
    assert [plan.runs(p) for p in plan.phases] == [1, 3, 2]
    assert plan.steps_before() == 3
    assert plan.schedule()[2:6] == [(1, 0), (2, 6), (2, 7), (2, 8)]
    assert execution_plan(analysis(), warmup=4, warmup_share=0.2).steps_before() == 4
    assert execution_plan(analysis(), warmup=4, warmup_share=0.01).steps_before() == 1
    assert execution_plan(analysis(), warmup=0, warmup_share=0.01).steps_before() == 0
    with pytest.raises(SignatureFileError, match="share"):
        execution_plan(analysis(), warmup_share=1.5)


def test_a_phase_seen_once_is_scaled_not_run() -> None:
    """Phase 3 occurs once (0.3 s at step 20): running it would cost its whole share. It is
    predicted like a left-out phase: 0.3 s times how the run phases ran against their trace
    (here 1.2 x: 0.6 + 1.2 + 0.6 s measured where the trace had 0.5 + 1.0 + 0.5)."""
    a = analysis()
    a["phases"].append({"id": 3, "weight": 1, "mean_s": 0.3, "sd_s": 0.0, "step": 20})
    a["signature"].append(3)
    a["traced_s"] = 2.3
    plan = execution_plan(a, repeats=3, warmup=0)
    assert [p.id for p in plan.phases] == [0, 1, 2] and plan.scaled == (3,)
    assert plan.left_out_s == pytest.approx(0.3)
    assert all(pid != 3 for pid, _ in plan.schedule())
    got = predict(plan, {0: [0.6], 1: [0.012] * 3, 2: [0.06] * 3})
    assert got.mean_s == pytest.approx(0.6 + 1.2 + 0.6 + 0.3 * 1.2)
    # a signature of phases seen once only runs them: there is nothing else to measure
    single = analysis(kept=[0])
    single["phases"].append({"id": 3, "weight": 1, "mean_s": 0.3, "sd_s": 0.0, "step": 20})
    single["signature"] = [0, 3]
    assert [p.id for p in execution_plan(single).phases] == [0, 3]
