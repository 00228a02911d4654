"""The per-worker plan memo: one computation per key, shared by concurrent requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ppe.service.plan_memo import PlanMemo


def _slow(calls: list[int], gate: threading.Event, value: Any = "answer") -> Any:
    calls.append(1)
    gate.wait(5)
    return value


def _returns(value: Any) -> Callable[[], Any]:
    """A compute function answering ``value`` (the memo never looks inside its answers)."""
    return lambda: value


def test_concurrent_misses_compute_once() -> None:
    memo, gate = PlanMemo(), threading.Event()
    calls: list[int] = []
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(memo.answer, "k", lambda: _slow(calls, gate)) for _ in range(8)]
        time.sleep(0.2)  # let every thread reach the memo before the plan finishes
        gate.set()
        results = [f.result() for f in futures]
    assert results == ["answer"] * 8
    assert len(calls) == 1
    assert memo.answer("k", lambda: pytest.fail("should be memoised")) == "answer"


def test_failure_reaches_every_waiter_and_is_not_memoised() -> None:
    memo, gate = PlanMemo(), threading.Event()

    def fail() -> Any:
        gate.wait(5)
        raise ValueError("no feasible schedule")

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(memo.answer, "k", fail) for _ in range(4)]
        time.sleep(0.2)
        gate.set()
        for f in futures:
            with pytest.raises(ValueError, match="no feasible"):
                f.result()
    assert memo.answer("k", _returns("later")) == "later"


def test_unkeyed_requests_always_compute() -> None:
    memo = PlanMemo()
    calls: list[int] = []

    def compute() -> Any:
        calls.append(1)
        return None

    for _ in range(3):
        memo.answer(None, compute)
    assert len(calls) == 3


def test_bounded() -> None:
    memo = PlanMemo(answers=2)
    for k in range(3):
        memo.answer(k, _returns(k))
    assert memo.answer(0, _returns("recomputed")) == "recomputed"  # the oldest was evicted


def test_an_answer_over_newer_data_replaces_the_older_one() -> None:
    """Superseded data never comes back: one answer per request, not one per data version."""
    memo = PlanMemo()
    for version in range(50):
        assert memo.answer("k", _returns(version), version=version) == version
    assert len(memo._answers) == 1
    assert memo.answer("k", _returns("again"), version=49) == 49  # the newest is memoised
    assert memo.answer("k", _returns("older"), version=3) == "older"  # an old one is not
