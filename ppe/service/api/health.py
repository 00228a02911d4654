"""Liveness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ppe import __version__
from ppe.service.deps import EngineDep, MetricsDep
from ppe.service.store.db import ping

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(engine: EngineDep) -> JSONResponse:
    ok = ping(engine)
    body = {
        "status": "ok" if ok else "degraded",
        "store": "up" if ok else "down",
        "dialect": engine.dialect.name,
        "version": __version__,
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics")
def metrics(m: MetricsDep) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
