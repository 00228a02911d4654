"""Interval predictions of a given allocation under a structural model."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy.orm import Session

from ppe.service import planning
from ppe.service.auth import APP_USE, require
from ppe.service.config import Settings
from ppe.service.deps import (
    ForecastCacheDep,
    IndexCacheDep,
    MetricsDep,
    SessionDep,
    SettingsDep,
    commit,
    planning_thread,
)
from ppe.service.errors import PLANNING, ROUTER_RESPONSES, ProblemRoute, domain_errors
from ppe.service.forecasts import ForecastCache
from ppe.service.metrics import Metrics
from ppe.service.planning import IndexCache
from ppe.service.recalibration import RecalibrationPolicy, serve
from ppe.service.responses import json_response
from ppe.service.schemas import PredictionRequest
from ppe.service.store.models import ServedLog

router = APIRouter(tags=["predictions"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


@router.post("/predictions", responses=PLANNING)
async def post_prediction(
    request: Request,
    body: PredictionRequest,
    session: SessionDep,
    metrics: MetricsDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
    forecasts: ForecastCacheDep,
    index: IndexCacheDep,
    settings: SettingsDep,
) -> Response:
    return await planning_thread(
        request, partial(_serve_prediction, body, session, metrics, forecasts, index, settings)
    )


def _serve_prediction(
    body: PredictionRequest,
    session: Session,
    metrics: Metrics,
    forecasts: ForecastCache,
    index: IndexCache,
    settings: Settings,
) -> Response:
    """Predict, widen the interval by the model's reported runs (a named model is the
    application; grammar text names none), log what is served, and answer (in a planning
    thread)."""
    with domain_errors():
        answer = planning.predict(body, session, forecasts, index)
    result = answer.result
    c = body.confidence
    pred = result.prediction
    policy = RecalibrationPolicy.from_settings(settings)
    app = body.model if body.grammar is None else None
    makespan, notes = serve(session, app, None, result.makespan.to_dict(c), c, body.at, policy)
    response: dict[str, Any] = {
        "makespan": makespan,
        "hosts": [
            {
                "host": h,
                "rows": result.rows[h],
                "time": result.per_host[h].to_dict(c),
                "speed": answer.speeds[h].to_dict(),
            }
            for h in result.hosts
        ],
        "inputs": planning.inputs_report(result.inputs, c, body.at),
        "engine": getattr(pred, "engine", None),
        "samples": getattr(pred, "samples", None),
        "seed": getattr(pred, "seed", None),
        "horizon_s": result.horizon_s,
        "rounds": result.rounds,
        "warnings": [*answer.notes, *result.warnings, *notes],
    }
    log = ServedLog(kind="prediction", request=body.model_dump(mode="json"), response=response)
    session.add(log)
    session.flush()
    commit(session)  # served only once logged
    metrics.predictions.inc()
    return json_response({"id": log.id, **response})
