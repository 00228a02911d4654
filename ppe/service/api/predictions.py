"""Interval predictions of a given allocation under a structural model."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from ppe.pipeline import PlanOptions, predict_allocation
from ppe.service import models_registry, planning
from ppe.service.auth import APP_USE, require
from ppe.service.deps import ForecastCacheDep, IndexCacheDep, MetricsDep, SessionDep
from ppe.service.errors import domain_errors
from ppe.service.responses import json_response
from ppe.service.schemas import HostIn, PredictionRequest
from ppe.service.store.models import ServedLog

router = APIRouter(tags=["predictions"])


@router.post("/predictions")
def post_prediction(
    body: PredictionRequest,
    session: SessionDep,
    metrics: MetricsDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
    forecasts: ForecastCacheDep,
    index: IndexCacheDep,
) -> Response:
    rows = {a.host: a.rows for a in body.allocation}
    with domain_errors():
        specs = planning.host_specs(
            [HostIn(name=a.host, benchmark=a.benchmark) for a in body.allocation]
        )
        model = models_registry.resolve(session, body.model, body.grammar)
        metas, forecasts_for = planning.prepare(
            session,
            forecasts,
            index,
            specs,
            int(body.params.get("n", sum(rows.values()))),
            confidence=body.confidence,
            at=body.at,
            default_bandwidth=body.bandwidth,
            default_latency=body.latency,
        )
        options = PlanOptions(
            confidence=body.confidence,
            engine=body.engine,
            predict_samples=body.samples,
            seed=body.seed,
        )
        result = predict_allocation(model, body.params, metas, forecasts_for, rows, options)
    c = body.confidence
    pred = result.prediction
    response: dict[str, Any] = {
        "makespan": result.makespan.to_dict(c),
        "hosts": [
            {"host": h, "rows": result.rows[h], "time": result.per_host[h].to_dict(c)}
            for h in result.hosts
        ],
        "inputs": planning.inputs_report(result.inputs, c, body.at),
        "engine": getattr(pred, "engine", None),
        "samples": getattr(pred, "samples", None),
        "seed": getattr(pred, "seed", None),
        "horizon_s": result.horizon_s,
        "rounds": result.rounds,
    }
    log = ServedLog(kind="prediction", request=body.model_dump(mode="json"), response=response)
    session.add(log)
    session.flush()
    metrics.predictions.inc()
    return json_response({"id": log.id, **response})
