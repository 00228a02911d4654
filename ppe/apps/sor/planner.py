"""Rank 0's side of the conversation with PPE: the first schedule, the pace, re-plans.

The schedule's strips are mapped onto the ranks by host name (rank ``r`` runs on
``hosts[r]``, chain order = rank order); anything else is a :class:`ScheduleMismatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ppe.apps.sor.partition import block_split, check_split
from ppe.client import PPEClient, PPEError, Schedule

BLOCK = "block"


class ScheduleMismatch(ValueError):
    """The served strips do not map one to one onto the ranks' hosts."""


@dataclass(frozen=True)
class Plan:
    """Rows per rank and what the service predicted for them: ``predicted_s`` (the makespan
    mean) for the ``iterations`` that follow iteration ``start`` (None: no prediction)."""

    split: list[int]
    schedule_id: int | None
    predicted_s: float | None
    iterations: int
    start: int = 0
    makespan: dict[str, Any] | None = None


@dataclass(frozen=True)
class Replan:
    """One re-plan request and its outcome; ``plan`` is what the run follows next."""

    plan: Plan
    move: bool
    record: dict[str, Any] = field(default_factory=dict)


def split_of(schedule: Schedule, hosts: Sequence[str], n: int) -> list[int]:
    """Rows per rank from a served schedule (rank ``r`` holds ``hosts[r]``'s strip)."""
    served = [s.host for s in schedule.strips]
    if sorted(served) != sorted(hosts) or len(set(served)) != len(served):
        raise ScheduleMismatch(
            f"schedule {schedule.id} has strips for {served} but the ranks run on {list(hosts)}"
            ": one strip per rank is needed"
        )
    rows = {s.host: s.rows for s in schedule.strips}
    split = [rows[h] for h in hosts]
    try:
        check_split(split, n)
    except ValueError as exc:
        raise ScheduleMismatch(f"schedule {schedule.id}: {exc}") from None
    return split


def behind(plan: Plan, done: int, elapsed_s: float, slack: float) -> bool:
    """Slower than predicted: ``elapsed`` since the plan exceeds its predicted share for the
    iterations done since, by more than ``slack`` (a fraction)."""
    if plan.predicted_s is None or plan.iterations <= 0 or done <= plan.start:
        return False
    expected = plan.predicted_s * (done - plan.start) / plan.iterations
    return elapsed_s > expected * (1.0 + slack)


def _mean(makespan: dict[str, Any] | None) -> float | None:
    value = None if makespan is None else makespan.get("mean")
    return None if value is None else float(value)


@dataclass
class Planner:
    """Asks ``client`` (None: offline, block strips) for schedules over ``hosts``."""

    client: PPEClient | None
    hosts: list[str]
    n: int
    iterations: int
    strategy: str = "mean"
    k: float = 2.0
    benchmark: float | None = None
    replan_every_s: float | None = None

    @property
    def asks(self) -> bool:
        return self.client is not None and self.strategy != BLOCK

    def _hosts(self) -> list[dict[str, Any]]:
        """Every host gets at least one row (a rank without rows would break the chain)."""
        out: list[dict[str, Any]] = []
        for h in self.hosts:
            item: dict[str, Any] = {"name": h, "min_rows": 1}
            if self.benchmark is not None:
                item["benchmark"] = self.benchmark
            out.append(item)
        return out

    def initial(self) -> Plan:
        if not self.asks:
            return Plan(block_split(self.n, len(self.hosts)), None, None, self.iterations)
        assert self.client is not None
        schedule = self.client.schedule(
            hosts=self._hosts(),
            n=self.n,
            iterations=self.iterations,
            app="sor",
            strategy=self.strategy,
            k=self.k,
            replan_every_s=self.replan_every_s,
        )
        return Plan(
            split_of(schedule, self.hosts, self.n),
            schedule.id,
            _mean(schedule.makespan),
            self.iterations,
            makespan=schedule.makespan,
        )

    def replan(self, current: Plan, split: list[int], done: int) -> Replan:
        """Ask with the current rows and the iterations left. A refusal (any client error, a
        schedule that does not fit the ranks) keeps the current plan: the run carries on and
        asks again at its next check if still behind."""
        assert self.client is not None
        left = self.iterations - done
        record: dict[str, Any] = {"iteration": done, "rows_before": list(split)}
        try:
            schedule = self.client.schedule(
                hosts=self._hosts(),
                n=self.n,
                iterations=left,
                app="sor",
                strategy=self.strategy,
                k=self.k,
                current=list(zip(self.hosts, split, strict=True)),
                replan_every_s=self.replan_every_s,
            )
            verdict = schedule.replan or {}
            move = bool(verdict.get("move"))
            new_split = split_of(schedule, self.hosts, self.n) if move else list(split)
        except (PPEError, ScheduleMismatch) as exc:
            record.update(refused=str(exc), move=False)
            return Replan(current, False, record)
        keep = verdict.get("keep")
        record.update(
            schedule_id=schedule.id,
            move=move,
            migration_s=verdict.get("migration_s"),
            keep_mean=_mean(keep),
            new_mean=_mean(schedule.makespan),
            rows_after=new_split,
        )
        makespan = schedule.makespan if move else keep
        plan = Plan(new_split, schedule.id, _mean(makespan), left, start=done, makespan=makespan)
        return Replan(plan, move, record)
