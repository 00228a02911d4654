"""ppe.executors: results in task order whatever order tasks finish in, progress counted by
task sizes, a task's failure raised to the caller, bad executors refused."""

from __future__ import annotations

import time

import pytest

from ppe.executors import Executor, check_executor, worker_count

#: The tasks below live in this test module, which pytest imports by path
#: (``--import-mode=importlib``): only a forked worker, a copy of this process, can find them.
FORK = "fork"


def _slow_square(x: int, pause: float) -> int:
    time.sleep(pause)  # earlier tasks finish later: order must come from positions
    return x * x


def _fails(x: int) -> int:
    if x == 2:
        raise ValueError(f"task {x} failed")
    return x


@pytest.mark.parametrize("kind", ["serial", "process"])
def test_results_come_back_in_task_order(kind: str) -> None:
    args = [(x, 0.2 if x == 0 else 0.0) for x in range(5)]
    progress: list[tuple[int, int]] = []
    with Executor(kind, 2, method=FORK) as ex:
        out = ex.map(_slow_square, args, lambda d, t: progress.append((d, t)), [3, 1, 1, 1, 1])
        assert ex.local == (kind == "serial")
        assert ex.slots == (1 if kind == "serial" else 2)
    assert out == [0, 1, 4, 9, 16]
    assert [t for _, t in progress] == [7] * 5
    assert progress[-1] == (7, 7)
    assert sorted(d for d, _ in progress) == [d for d, _ in progress]


def test_one_worker_runs_here_and_a_failure_reaches_the_caller() -> None:
    with Executor("process", 1) as ex:
        assert ex.local
    with (
        Executor("process", 2, method=FORK) as ex,
        pytest.raises(ValueError, match="task 2 failed"),
    ):
        ex.map(_fails, [(x,) for x in range(4)])


def test_bad_executors_are_refused() -> None:
    with pytest.raises(ValueError, match="executor must be"):
        check_executor("threads", None)
    with pytest.raises(ValueError, match="needs --scheduler-address"):
        Executor("dask", 2)
    assert worker_count(3) == 3 and worker_count(0) >= 1
