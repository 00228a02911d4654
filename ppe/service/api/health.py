"""Liveness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine

from ppe import __version__
from ppe.service.deps import get_engine, get_metrics
from ppe.service.metrics import Metrics
from ppe.service.store.db import ping

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(engine: Engine = Depends(get_engine)) -> JSONResponse:
    ok = ping(engine)
    body = {
        "status": "ok" if ok else "degraded",
        "store": "up" if ok else "down",
        "dialect": engine.dialect.name,
        "version": __version__,
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/metrics")
def metrics(m: Metrics = Depends(get_metrics)) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
