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
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from ppe.pipeline import HostForecasts


@dataclass(frozen=True)
class Answer:
    """What a schedule's response needs, kept compact: the JSON of its allocation and makespan
    (the parts that do not age) and the forecasts it rests on, never the plan's predicted
    distributions themselves (Monte Carlo draws and density grids are the bulk of a plan, and
    a memo of them grew each worker by hundreds of MB under steady traffic)."""

    allocation: list[dict[str, Any]]
    makespan: dict[str, Any]
    horizon_s: float | None
    rounds: int
    engine: str | None
    #: the forecasts of the last round, aged at answer time (``planning.inputs_report``)
    inputs: Mapping[str, HostForecasts]
    #: for a running application (``current`` rows): move or keep, migration, keep's makespan
    replan: dict[str, Any] | None = None
    #: what the answer rests on that the caller should know (hosts floored or left out)
    warnings: tuple[str, ...] = ()


class PlanMemo:
    """Bounded, thread-safe (request handlers run in a thread pool); one per worker.

    One answer per request, for the newest data it was asked over: an answer over superseded
    data can never be asked for again (a new measurement changes the data version for good),
    so it is dropped as soon as the same request is planned over newer data. With live sensors
    that keeps one answer per application's request instead of `answers` stale ones.
    """

    def __init__(self, answers: int = 256, hints: int = 10_000) -> None:
        self._answers: LRUCache[Hashable, tuple[Hashable, Answer]] = LRUCache(answers)
        self._hints: LRUCache[Hashable, float | None] = LRUCache(hints)
        self._pending: dict[Hashable, Future[Answer]] = {}
        self._lock = threading.Lock()

    def answer(
        self, key: Hashable | None, compute: Callable[[], Answer], version: Hashable = None
    ) -> Answer:
        """The memoised answer for ``key`` over data ``version``, else ``compute()``'s,
        computed once: requests that miss while it is being computed wait for it (new data
        arriving would otherwise send every waiting client into the same plan at once).
        ``None``: not memoisable."""
        if key is None:
            return compute()
        with self._lock:
            hit = self._answers.get(key)
            if hit is not None and hit[0] == version:
                return hit[1]
            pending = self._pending.get((key, version))
            owner = pending is None
            if pending is None:
                pending = self._pending[(key, version)] = Future()
        if not owner:
            return pending.result()  # the owner's error, if it failed, is raised here too
        try:
            answer = compute()
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        else:
            pending.set_result(answer)
            with self._lock:
                self._answers[key] = (version, answer)
            return answer
        finally:
            with self._lock:
                self._pending.pop((key, version), None)

    def hint(self, key: Hashable) -> float | None:
        with self._lock:
            return self._hints.get(key)

    def remember_hint(self, key: Hashable, horizon_s: float | None) -> None:
        with self._lock:
            self._hints[key] = horizon_s
