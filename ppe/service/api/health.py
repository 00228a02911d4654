"""Liveness and Prometheus metrics."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel

from ppe import __version__
from ppe.service.deps import EngineDep, MetricsDep
from ppe.service.store.db import ping

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    store: Literal["up", "down"]
    dialect: str
    version: str


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "the store is unreachable"}},
)
def healthz(engine: EngineDep) -> JSONResponse:
    ok = ping(engine)
    body = Health(
        status="ok" if ok else "degraded",
        store="up" if ok else "down",
        dialect=engine.dialect.name,
        version=__version__,
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
def metrics(m: MetricsDep) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
