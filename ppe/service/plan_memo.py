"""Per-worker memory of recent schedules: answers memoised on their data, and horizon hints.

A schedule is a pure function of the request (model, hosts, strategy and its knobs) and of the
series its forecasts come from; `StoreForecasts.data_version` names that data (sample count and
newest timestamp of every series involved). Launchers ask for the same schedule over the same
pool many times between two sensor reports: those answers cost a look-up, and any new
measurement on any of the hosts' series makes a new key. Answers as of a past `at` are not
memoised (the store, not the cache, backs them).

Horizon hints: the settled run length of the last identical request, where the horizon loop of
the next one starts (usually one round instead of three).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from ppe.pipeline import PlanResult


@dataclass(frozen=True)
class Answer:
    """A plan with the JSON of its allocation and makespan (the parts that do not age)."""

    result: PlanResult
    allocation: list[dict[str, Any]]
    makespan: dict[str, Any]


class PlanMemo:
    """Bounded, thread-safe (request handlers run in a thread pool); one per worker."""

    def __init__(self, answers: int = 256, hints: int = 10_000) -> None:
        self._answers: LRUCache[Hashable, Answer] = LRUCache(answers)
        self._hints: LRUCache[Hashable, float | None] = LRUCache(hints)
        self._lock = threading.Lock()

    def answer(self, key: Hashable | None) -> Answer | None:
        if key is None:
            return None
        with self._lock:
            return self._answers.get(key)

    def remember(self, key: Hashable | None, answer: Answer) -> None:
        if key is not None:
            with self._lock:
                self._answers[key] = answer

    def hint(self, key: Hashable) -> float | None:
        with self._lock:
            return self._hints.get(key)

    def remember_hint(self, key: Hashable, horizon_s: float | None) -> None:
        with self._lock:
            self._hints[key] = horizon_s
