"""The run store: measured runs and run reports, posted in batches and listed back.

A batch is accepted whole or refused whole (422 naming each bad run's index and field), and
re-posting it stores nothing new (``(app, key)`` is unique; the key defaults to a hash of the
run). A run may name the schedule it followed, which must be one the service served.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Query, status
from fastapi.responses import JSONResponse

from ppe.empirical.runs import RunProblem
from ppe.service.auth import APP_USE, READ, require
from ppe.service.deps import SessionDep, commit, write_race_is_conflict
from ppe.service.errors import (
    CONFLICT,
    NOT_FOUND,
    ROUTER_RESPONSES,
    ProblemRoute,
    problem,
)
from ppe.service.schemas import IdPath, ModelName, Problem, ProblemReport
from ppe.service.schemas_runs import (
    KernelName,
    MetricName,
    RunBatch,
    RunOut,
    RunsStored,
    RunStatus,
    ScheduleId,
    SystemName,
)
from ppe.service.store.models import Run
from ppe.service.store.runs import RunFilter, StoredRuns, query_runs, store_runs

STORE_CHANGED = (
    "conflict: the store changed meanwhile (another batch, or a linked schedule left the "
    "served log); nothing was stored, retry"
)


def as_problems(found: Sequence[RunProblem]) -> list[Problem]:
    return [Problem(index=p.index, field=p.field, reason=p.reason) for p in found]


router = APIRouter(tags=["runs"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


def _refused(found: Sequence[RunProblem]) -> JSONResponse:
    return JSONResponse(ProblemReport(detail=as_problems(found)).model_dump(), status_code=422)


@router.post(
    "/runs",
    status_code=status.HTTP_201_CREATED,
    response_model=RunsStored,
    responses={
        422: {"model": ProblemReport, "description": "batch refused whole: nothing stored"},
        **CONFLICT,
    },
)
def post_runs(
    batch: RunBatch,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
) -> RunsStored | JSONResponse:
    """Store measured runs (a run report is a run with a ``report``), all or none."""
    # A linked schedule trimmed by retention since the check, or (SQLite) another writer
    # committed since this transaction read: like a lost race on a key, a 409.
    with write_race_is_conflict(session, STORE_CHANGED):
        result = store_runs(session, [run.record() for run in batch.runs])
    if not isinstance(result, StoredRuns):
        return _refused(result)
    commit(session)  # acknowledge only what is durable
    return RunsStored(stored=result.stored, duplicates=result.duplicates, ids=result.ids)


def run_out(r: Run) -> RunOut:
    return RunOut(
        id=r.id,
        app=r.app,
        kernel=r.kernel,
        params=r.params,
        system=r.system,
        metric=r.metric,
        values=r.values,
        schedule_id=r.schedule_id,
        status=r.status,  # type: ignore[arg-type]  # the store holds only RunStatus values
        report=r.report,
        key=r.key,
        created_at=r.created_at,
    )


@router.get("/runs", response_model=list[RunOut])
def list_runs(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    app: Annotated[ModelName | None, Query()] = None,
    kernel: Annotated[KernelName | None, Query()] = None,
    system: Annotated[SystemName | None, Query()] = None,
    metric: Annotated[MetricName | None, Query()] = None,
    schedule_id: Annotated[ScheduleId | None, Query()] = None,
    status: Annotated[RunStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[RunOut]:
    """Runs matching every filter given, newest first."""
    where = RunFilter(app, kernel, system, metric, schedule_id, status)
    return [run_out(r) for r in query_runs(session, where, limit)]


@router.get("/runs/{run_id}", response_model=RunOut, responses=NOT_FOUND)
def get_run(
    run_id: IdPath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
) -> RunOut:
    r = session.get(Run, run_id)
    if r is None:
        raise problem(404, f"no run {run_id}", "path.run_id")
    return run_out(r)
