"""Measurement ingestion: a batch is accepted whole or rejected whole."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from ppe.service.auth import SENSOR_WRITE, require
from ppe.service.deps import (
    ForecastCacheDep,
    IndexCacheDep,
    MetricsDep,
    SessionDep,
    SettingsDep,
    commit,
)
from ppe.service.errors import CONFLICT, ROUTER_RESPONSES, ProblemRoute
from ppe.service.schemas import BatchAccepted, MeasurementBatch, ProblemReport
from ppe.service.store.measurements import NEW_SERIES, Row, insert_batch
from ppe.service.validation import check_batch

router = APIRouter(tags=["measurements"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


@router.post(
    "/measurements",
    response_model=BatchAccepted,
    responses={
        422: {"model": ProblemReport, "description": "batch rejected whole"},
        **CONFLICT,
    },
)
def post_measurements(
    batch: MeasurementBatch,
    session: SessionDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    _role: Annotated[str, Depends(require(*SENSOR_WRITE))],
    forecasts: ForecastCacheDep,
    index: IndexCacheDep,
) -> BatchAccepted | JSONResponse:
    problems = check_batch(
        batch.measurements,
        max_batch=settings.max_batch,
        max_future_skew_s=settings.max_future_skew_s,
    )
    if problems:
        metrics.rejected_batches.labels("invalid").inc()
        return JSONResponse(ProblemReport(detail=problems).model_dump(), status_code=422)
    rows = [
        Row(m.resource, m.metric, m.peer or "", float(m.timestamp), float(m.value))
        for m in batch.measurements
    ]
    inserted = insert_batch(session, rows)
    commit(session)  # acknowledge only what is durable
    forecasts.invalidate()
    if session.info.pop(NEW_SERIES, False):
        index.clear()  # a new link: this worker's next plan sees it
    metrics.measurements.inc(len(rows))
    metrics.measurements_new.inc(inserted)
    return BatchAccepted(accepted=len(rows), inserted=inserted, duplicates=len(rows) - inserted)
