"""Schedules: strips per host under a strategy, with predicted times as stochastic values."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.service import planning
from ppe.service.auth import APP_USE, READ, require
from ppe.service.config import Settings
from ppe.service.deps import (
    ForecastCacheDep,
    IndexCacheDep,
    MetricsDep,
    PlanMemoDep,
    SessionDep,
    SettingsDep,
    commit,
    planning_thread,
)
from ppe.service.errors import (
    NOT_FOUND,
    PLANNING,
    ROUTER_RESPONSES,
    ProblemRoute,
    domain_errors,
    problem,
)
from ppe.service.forecasts import ForecastCache
from ppe.service.metrics import Metrics
from ppe.service.plan_memo import PlanMemo
from ppe.service.planning import IndexCache
from ppe.service.probing import Probed, probe_hosts
from ppe.service.recalibration import RecalibrationPolicy, serve
from ppe.service.responses import json_response
from ppe.service.schemas import IdPath, ScheduleRequest
from ppe.service.store.models import ServedLog

router = APIRouter(tags=["schedules"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


@router.post("/schedules", responses=PLANNING)
async def post_schedule(
    request: Request,
    body: ScheduleRequest,
    session: SessionDep,
    metrics: MetricsDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
    forecasts: ForecastCacheDep,
    index: IndexCacheDep,
    memo: PlanMemoDep,
    settings: SettingsDep,
) -> Response:
    return await planning_thread(
        request,
        partial(_serve_schedule, body, session, metrics, forecasts, index, memo, settings),
    )


def _serve_schedule(
    body: ScheduleRequest,
    session: Session,
    metrics: Metrics,
    forecasts: ForecastCache,
    index: IndexCache,
    memo: PlanMemo,
    settings: Settings,
) -> Response:
    """Plan, widen the interval by the application's reported runs, log what is served, and
    answer (in a planning thread). The memo keeps the model's answer: new runs count at once."""
    with domain_errors():
        probed = probe_hosts(body, session, settings) if body.probe == "signature" else Probed()
        answer = planning.schedule(body, session, forecasts, index, memo, probed.speeds)
    policy = RecalibrationPolicy.from_settings(settings)
    makespan, notes = serve(
        session, body.app, body.strategy, answer.makespan, body.confidence, body.at, policy
    )
    response: dict[str, Any] = {
        "app": body.app,
        "strategy": body.strategy,
        "allocation": answer.allocation,
        "makespan": makespan,
        "horizon_s": answer.horizon_s,
        "rounds": answer.rounds,
        "engine": answer.engine,
        "inputs": planning.inputs_report(answer.inputs, body.confidence, body.at),
        "warnings": [*answer.warnings, *probed.notes, *notes],
    }
    if body.probe is not None:
        response["probes"] = probed.report
    if answer.replan is not None:
        response["replan"] = answer.replan
    log = ServedLog(kind="schedule", request=body.model_dump(mode="json"), response=response)
    session.add(log)
    session.flush()  # assigns the id; the stored response is the same minus it
    commit(session)  # served only once logged
    response = {"id": log.id, **response}
    metrics.schedules.labels(body.strategy).inc()
    return json_response(response)  # already JSON-ready: skip FastAPI's generic encoder


@router.get("/schedules")
def list_schedules(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[dict[str, Any]]:
    rows = session.execute(
        select(ServedLog)
        .where(ServedLog.kind == "schedule")
        .order_by(ServedLog.id.desc())
        .limit(limit)
    ).scalars()
    return [
        {
            "id": r.id,
            "created_at": r.created_at,
            "request": r.request,
            "response": {"id": r.id, **r.response},
        }
        for r in rows
    ]


@router.get("/schedules/{schedule_id}", responses=NOT_FOUND)
def get_schedule(
    schedule_id: IdPath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
) -> dict[str, Any]:
    r = session.get(ServedLog, schedule_id)
    if r is None or r.kind != "schedule":
        raise problem(404, f"no schedule {schedule_id}", "path.schedule_id")
    return {
        "id": r.id,
        "created_at": r.created_at,
        "request": r.request,
        "response": {"id": r.id, **r.response},
    }
