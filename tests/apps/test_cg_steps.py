"""ppe-cg's step schedule: which step an index is, for any iterations, check and checkpoint."""

from __future__ import annotations

import itertools

import pytest

from ppe.apps.cg.steps import CHECK, CHECKPOINT, MATVEC, UPDATE, Schedule, Step


def test_the_planted_structure() -> None:
    s = Schedule(40, 10, 20)
    steps = s.all()
    assert s.count == len(steps) == 40 * 2 + 4 + 2
    kinds = [st.kind for st in steps]
    assert kinds.count(MATVEC) == kinds.count(UPDATE) == 40
    assert [st.iteration for st in steps if st.kind == CHECK] == [10, 20, 30, 40]
    assert [st.iteration for st in steps if st.kind == CHECKPOINT] == [20, 40]
    assert steps[:2] == [Step(MATVEC, 1), Step(UPDATE, 1)]
    assert steps[20:23] == [Step(CHECK, 10), Step(MATVEC, 11), Step(UPDATE, 11)]
    assert steps[-3:] == [Step(UPDATE, 40), Step(CHECK, 40), Step(CHECKPOINT, 40)]


def test_the_last_iteration_always_checks() -> None:
    s = Schedule(7, 3)
    assert [st.iteration for st in s.all() if st.kind == CHECK] == [3, 6, 7]
    assert s.at(s.count - 1) == Step(CHECK, 7)
    assert Schedule(1, 5).all() == [Step(MATVEC, 1), Step(UPDATE, 1), Step(CHECK, 1)]


@pytest.mark.parametrize(
    ("iterations", "k", "m"),
    list(itertools.product([1, 2, 5, 12, 30], [1, 3, 5, 40], [0, 1, 2, 7, 12])),
)
def test_at_agrees_with_the_whole_list(iterations: int, k: int, m: int) -> None:
    s = Schedule(iterations, k, m)
    steps = s.all()
    assert s.count == len(steps)
    assert [s.at(i) for i in range(s.count)] == steps
    for i in range(1, iterations + 1):
        assert steps[s.start(i)] == Step(MATVEC, i)


def test_out_of_range_steps_and_bad_schedules_are_refused() -> None:
    s = Schedule(3, 2, 0)
    with pytest.raises(IndexError, match="among the run's 8 steps"):
        s.at(8)
    with pytest.raises(IndexError):
        s.at(-1)
    for bad in ((0, 1, 0), (3, 0, 0), (3, 1, -1)):
        with pytest.raises(ValueError):
            Schedule(*bad)
