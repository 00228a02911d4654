"""Schedules: strips per host under a strategy, with predicted times as stochastic values."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from sqlalchemy import select

import scheduler
from ppe.pipeline import HostMeta, PlanOptions, plan, replan, total_rows
from ppe.service import models_registry, planning
from ppe.service.auth import APP_USE, READ, require
from ppe.service.deps import (
    ForecastCacheDep,
    IndexCacheDep,
    MetricsDep,
    PlanMemoDep,
    SessionDep,
)
from ppe.service.errors import domain_errors
from ppe.service.plan_memo import Answer, PlanMemo
from ppe.service.responses import json_response
from ppe.service.schemas import ScheduleRequest
from ppe.service.store.models import ServedLog

router = APIRouter(tags=["schedules"])


@router.post("/schedules")
def post_schedule(
    body: ScheduleRequest,
    session: SessionDep,
    metrics: MetricsDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
    forecasts: ForecastCacheDep,
    index: IndexCacheDep,
    memo: PlanMemoDep,
) -> Response:
    if body.strategy not in scheduler.STRATEGIES:
        raise HTTPException(
            422,
            [
                {
                    "field": "strategy",
                    "reason": (
                        f"unknown strategy {body.strategy!r}; "
                        f"choose from {', '.join(scheduler.STRATEGIES)}"
                    ),
                }
            ],
        )
    if body.current is not None and body.select:
        raise HTTPException(
            422,
            [
                {
                    "field": "select",
                    "reason": (
                        "a running application keeps its hosts and chain: "
                        "select cannot go with current"
                    ),
                }
            ],
        )
    with domain_errors():
        specs = planning.host_specs(body.hosts)
        model = models_registry.resolve(session, body.app)
        metas, forecasts_for = planning.prepare(
            session,
            forecasts,
            index,
            specs,
            body.n,
            confidence=body.confidence,
            at=body.at,
            default_bandwidth=body.bandwidth,
            default_latency=body.latency,
        )
        version = forecasts_for.data_version()
        key = (
            None
            if version is None
            else (model.digest, body.model_dump_json(exclude={"hosts"}), tuple(metas), version)
        )
        answer = memo.answer(key, lambda: _plan(model, body, metas, forecasts_for, memo))
    result = answer.result
    response: dict[str, Any] = {
        "app": body.app,
        "strategy": body.strategy,
        "allocation": answer.allocation,
        "makespan": answer.makespan,
        "horizon_s": result.horizon_s,
        "rounds": result.rounds,
        "engine": getattr(result.prediction, "engine", None),
        "inputs": planning.inputs_report(result.inputs, body.confidence, body.at),
    }
    if answer.replan is not None:
        response["replan"] = answer.replan
    log = ServedLog(kind="schedule", request=body.model_dump(mode="json"), response=response)
    session.add(log)
    session.flush()  # assigns the id; the stored response is the same minus it
    response = {"id": log.id, **response}
    metrics.schedules.labels(body.strategy).inc()
    return json_response(response)  # already JSON-ready: skip FastAPI's generic encoder


def _plan(
    model: Any, body: ScheduleRequest, metas: list[HostMeta], forecasts_for: Any, memo: PlanMemo
) -> Answer:
    """Plan the request, starting the horizon loop where the last identical request settled."""
    names = [m.name for m in metas]
    params = {**body.params, "n": body.n, "I": body.iterations}
    hint_key = (
        model.digest,
        body.n,
        body.iterations,
        tuple(names),
        body.strategy,
        body.k,
        body.quantile,
        body.at,
        body.select,
    )
    options = PlanOptions(
        confidence=body.confidence,
        k=body.k,
        quantile=body.quantile,
        initial_horizon=memo.hint(hint_key),
    )
    if body.replan_every_s is not None:
        options = replace(options, replan_every_s=body.replan_every_s)
    if body.select:
        metas = planning.select_chain(model, params, metas, forecasts_for, body.strategy, options)
    c = body.confidence
    verdict = None
    if body.current is None:
        result = plan(
            model,
            params,
            metas,
            forecasts_for,
            body.strategy,
            options,
            dependence_for=forecasts_for.dependence,
        )
    else:
        policy = scheduler.ReplanPolicy(body.replan_every_s or scheduler.ReplanPolicy.every_s)
        again = replan(
            model,
            params,
            metas,
            forecasts_for,
            body.strategy,
            planning.current_rows(body.current, metas, total_rows(params)),
            policy,
            options,
            forecasts_for.dependence,
            row_bytes=body.n * params.get("Size", planning.DEFAULT_ELEMENT_SIZE),
            bandwidth=body.bandwidth,
            latency=body.latency,
        )
        result = again.plan
        verdict = {
            "move": again.move,
            "migration_s": again.migration_s,
            "keep": again.keep.makespan.to_dict(c),
        }
    if body.replan_every_s is None:  # a re-plan's one-round horizon is no hint for others
        memo.remember_hint(hint_key, result.horizon_s)
    return Answer(
        result=result,
        allocation=[
            {"host": h, "rows": result.rows[h], "time": result.per_host[h].to_dict(c)}
            for h in result.hosts
        ],
        makespan=result.makespan.to_dict(c),
        replan=verdict,
    )


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


@router.get("/schedules/{schedule_id}")
def get_schedule(
    schedule_id: int,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
) -> dict[str, Any]:
    r = session.get(ServedLog, schedule_id)
    if r is None or r.kind != "schedule":
        raise HTTPException(404, f"no schedule {schedule_id}")
    return {
        "id": r.id,
        "created_at": r.created_at,
        "request": r.request,
        "response": {"id": r.id, **r.response},
    }
