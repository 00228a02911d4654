"""Forecasts per series, and the history-with-forecast-band view the dashboard draws."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query
from sqlalchemy.orm import Session

from forecaster import InsufficientData, batch_forecasts
from ppe.service.auth import READ, require
from ppe.service.deps import ForecastCacheDep, SessionDep
from ppe.service.errors import CONFLICT, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import Confidence, Duration, Metric, NamePath, ResourceName, Timestamp
from ppe.service.store.db import release
from ppe.service.store.measurements import find_series
from ppe.service.store.models import LINK_METRICS

router = APIRouter(
    tags=["forecasts"],
    route_class=ProblemRoute,
    responses={**ROUTER_RESPONSES, **NOT_FOUND, **CONFLICT},
)
PeerQuery = Annotated[ResourceName | None, Query(description="the link's other end")]
ConfidenceQuery = Annotated[Confidence, Query(description="of the interval, in (0, 1)")]


def series_or_404(session: Session, resource: str, metric: str, peer: str | None) -> int:
    if metric in LINK_METRICS and not peer:
        raise problem(422, f"{metric} is a link metric: give ?peer=", "query.peer")
    sid = find_series(session, resource, metric, peer or "")
    release(session)
    if sid is None:
        what = f"{resource}/{metric}" + (f" to {peer}" if peer else "")
        raise problem(404, f"no measurements for {what}", "path.resource")
    return sid


def insufficient(exc: InsufficientData) -> HTTPException:
    return problem(
        409, f"too little data to forecast: {exc.n} samples, {exc.minimum} needed", "path.resource"
    )


@router.get("/forecasts/{resource}/{metric}")
def get_forecast(
    resource: NamePath,
    metric: Metric,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    cache: ForecastCacheDep,
    peer: PeerQuery = None,
    horizon: Annotated[
        Duration | None, Query(description="seconds to average over, at most a year")
    ] = None,
    confidence: ConfidenceQuery = 0.95,
    at: Annotated[
        Timestamp | None, Query(description="evaluate as of this unix time (past data only)")
    ] = None,
) -> dict[str, Any]:
    sid = series_or_404(session, resource, metric, peer)
    try:
        fc = cache.forecast(sid, metric, horizon_s=horizon, confidence=confidence, at=at)
    except InsufficientData as exc:
        raise insufficient(exc) from exc
    body = fc.to_dict()
    body.update(
        {
            "resource": resource,
            "metric": metric,
            "peer": peer,
            "samples": fc.n,
            "forecast": fc.value,
        }
    )
    return body


@router.get("/resources/{resource}/history/{metric}")
def get_history(
    resource: NamePath,
    metric: Metric,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    cache: ForecastCacheDep,
    peer: PeerQuery = None,
    limit: Annotated[int, Query(ge=10, le=20_000)] = 1000,
    confidence: ConfidenceQuery = 0.95,
) -> dict[str, Any]:
    """Recent samples with the one-step forecast each was given (from earlier data only)."""
    sid = series_or_404(session, resource, metric, peer)
    ts, vals = cache.history(sid)
    ts, vals = ts[-limit:], vals[-limit:]
    if vals.size < 2:
        raise insufficient(InsufficientData(int(vals.size), 2))
    result = batch_forecasts(vals, confidence=confidence)
    errors = result.member_errors(vals)
    members = {
        name: {
            "mae": float(np.mean(np.abs(errors[:, k]))),
            "rmse": float(np.sqrt(np.mean(errors[:, k] ** 2))),
        }
        for k, name in enumerate(result.names)
    }
    rows = slice(0, result.n)
    return {
        "resource": resource,
        "metric": metric,
        "peer": peer,
        "timestamps": ts.tolist(),
        "values": vals.tolist(),
        "forecasts": _json_floats(result.forecast[rows]),
        "lower": _json_floats(result.lower[rows]),
        "upper": _json_floats(result.upper[rows]),
        "predictors": [result.names[w] if w >= 0 else None for w in result.winner[rows]],
        "members": members,
        "confidence": confidence,
    }


def _json_floats(a: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in a]
