"""Storing runs (a batch at a time, idempotently) and reading them back.

The API (``POST /api/v1/runs``) and ``ppe runs import`` both call :func:`store_runs`: the same
checks, the same keys, the same answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from ppe.empirical.runs import RunProblem, RunRecord, check_batch
from ppe.service.store.models import Run, ServedLog


@dataclass(frozen=True)
class StoredRuns:
    """What a batch did: new runs, re-posted ones, and every run's id in batch order."""

    stored: int
    duplicates: int
    ids: list[int]


@dataclass(frozen=True)
class RunFilter:
    """GET /api/v1/runs's filters; None matches everything."""

    app: str | None = None
    kernel: str | None = None
    system: str | None = None
    metric: str | None = None
    schedule_id: int | None = None
    status: str | None = None


def unknown_schedules(session: Session, records: Sequence[RunRecord]) -> list[RunProblem]:
    """Runs naming a schedule the served log does not hold (never served, or trimmed)."""
    wanted = {r.schedule_id for r in records if r.schedule_id is not None}
    if not wanted:
        return []
    known = set(
        session.execute(
            select(ServedLog.id).where(ServedLog.id.in_(wanted), ServedLog.kind == "schedule")
        ).scalars()
    )
    return [
        RunProblem(
            i,
            "schedule_id",
            f"no served schedule {r.schedule_id} (GET /api/v1/schedules lists them; the "
            "served log keeps them for a limited time)",
        )
        for i, r in enumerate(records)
        if r.schedule_id is not None and r.schedule_id not in known
    ]


def store_runs(session: Session, records: Sequence[RunRecord]) -> StoredRuns | list[RunProblem]:
    """Check a batch whole and, when nothing is wrong, write it in the caller's transaction.

    Returns the problems instead when there are any (nothing is written). Runs whose key the
    application already has (re-posts, or repeats inside the batch) are not written again:
    they get the stored run's id.
    """
    problems = check_batch(records) or unknown_schedules(session, records)
    if problems:
        return problems
    keys = [(r.app, r.idempotency_key) for r in records]
    first: dict[tuple[str, str], RunRecord] = {}
    for key, record in zip(keys, records, strict=True):
        first.setdefault(key, record)
    ids = _existing(session, list(first))
    new = [_row(record, key[1]) for key, record in first.items() if key not in ids]
    stored = 0
    if new:
        dialect = session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        table = cast(Table, Run.__table__)
        t = table.c
        stmt = (
            insert(table)
            .on_conflict_do_nothing(index_elements=["app", "key"])
            .returning(t.id, t.app, t.key)
        )
        # A concurrent writer may have taken a key since _existing: DO NOTHING skips it.
        created = session.execute(stmt, new).all()
        stored = len(created)
        ids.update({(app, key): rid for rid, app, key in created})
        missing = [k for k in first if k not in ids]
        ids.update(_existing(session, missing))
    return StoredRuns(stored=stored, duplicates=len(records) - stored, ids=[ids[k] for k in keys])


def _row(record: RunRecord, key: str) -> dict[str, Any]:
    return {
        "app": record.app,
        "kernel": record.kernel,
        "system": record.system,
        "metric": record.metric,
        "params": {k: float(v) for k, v in record.params.items()},
        "values": [float(v) for v in record.values],
        "schedule_id": record.schedule_id,
        "status": record.status,
        "report": None if record.report is None else dict(record.report),
        "key": key,
        "created_at": time.time(),
    }


def _existing(session: Session, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Ids of the runs stored under these (app, key) pairs, a query per application."""
    out: dict[tuple[str, str], int] = {}
    by_app: dict[str, list[str]] = {}
    for app, key in keys:
        by_app.setdefault(app, []).append(key)
    for app, app_keys in by_app.items():
        for start in range(0, len(app_keys), 500):  # bound the IN list
            chunk = app_keys[start : start + 500]
            rows = session.execute(
                select(Run.id, Run.key).where(Run.app == app, Run.key.in_(chunk))
            )
            out.update({(app, key): rid for rid, key in rows})
    return out


def query_runs(session: Session, where: RunFilter, limit: int = 100) -> list[Run]:
    """The newest ``limit`` runs matching ``where``, newest first."""
    stmt = select(Run)
    for column, value in (
        (Run.app, where.app),
        (Run.kernel, where.kernel),
        (Run.system, where.system),
        (Run.metric, where.metric),
        (Run.schedule_id, where.schedule_id),
        (Run.status, where.status),
    ):
        if value is not None:
            stmt = stmt.where(column == value)
    return list(session.execute(stmt.order_by(Run.id.desc()).limit(limit)).scalars())
