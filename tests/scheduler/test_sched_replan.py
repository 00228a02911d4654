"""Re-planning decisions and the cost of moving strips (scheduler.replan)."""

from __future__ import annotations

import math

import pytest

from scheduler import ReplanPolicy, migration_seconds

ROW = 80_000.0  # bytes per row (n = 10 000 doubles)
BW = 1.0e7


def test_migration_is_the_busiest_boundary_by_hand() -> None:
    # boundaries 10|20 -> 5|20: 5 rows cross the first link, none the second
    assert migration_seconds([10, 10, 10], [5, 15, 10], ROW, BW, 0.001) == pytest.approx(
        0.001 + 5 * ROW / BW
    )
    # 10|20 -> 5|15: 5 rows on each link, at the same time
    assert migration_seconds([10, 10, 10], [5, 10, 15], ROW, BW, 0.0) == pytest.approx(5 * ROW / BW)
    # everything from one end of the chain to the other crosses both links
    assert migration_seconds([30, 0, 0], [0, 0, 30], ROW, BW, 0.0) == pytest.approx(30 * ROW / BW)
    assert migration_seconds([7, 3], [7, 3], ROW, BW, 0.5) == 0.0  # no move, no latency


@pytest.mark.parametrize(
    ("old", "new"), [([10, 10], [10, 9]), ([10, 10], [5, 5, 10]), ([[1, 2]], [[2, 1]])]
)
def test_migration_rejects_moves_that_are_not_moves(old, new) -> None:
    with pytest.raises(ValueError):
        migration_seconds(old, new, ROW, BW, 0.0)


def test_migration_rejects_a_bad_link() -> None:
    with pytest.raises(ValueError, match="bandwidth"):
        migration_seconds([1, 2], [2, 1], ROW, 0.0, 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"every_s": 0},
        {"every_s": math.nan},
        {"every_s": -5},
        {"lag": 0.9},
        {"lag": math.inf},
        {"min_gain": 1.0},
        {"min_gain": -0.1},
    ],
)
def test_policy_rejects_settings_that_make_no_sense(kwargs) -> None:
    with pytest.raises(ValueError):
        ReplanPolicy(**kwargs)


def test_behind_compares_the_pace_since_the_last_plan() -> None:
    policy = ReplanPolicy(every_s=300, lag=1.2)
    assert policy.behind(elapsed_s=130.0, iterations_done=100, seconds_per_iteration=1.0)
    assert not policy.behind(elapsed_s=110.0, iterations_done=100, seconds_per_iteration=1.0)
    # stuck inside its first iteration: counts as one done, so a long stall is behind
    assert policy.behind(elapsed_s=300.0, iterations_done=0, seconds_per_iteration=2.0)
    assert not policy.behind(elapsed_s=2.0, iterations_done=0, seconds_per_iteration=2.0)


def test_moving_must_pay_for_the_migration_and_the_margin() -> None:
    policy = ReplanPolicy(min_gain=0.05)
    assert policy.worth_moving(keep_s=100.0, move_s=90.0, migration_s=0.0)
    assert not policy.worth_moving(keep_s=100.0, move_s=90.0, migration_s=6.0)
    assert not policy.worth_moving(keep_s=100.0, move_s=96.0, migration_s=0.0)
