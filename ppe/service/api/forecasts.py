"""Forecasts per series, and the history-with-forecast-band view the dashboard draws."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query
from sqlalchemy.orm import Session

from forecaster import InsufficientData, batch_forecasts
from ppe.service.auth import READ, require
from ppe.service.deps import ForecastCacheDep, SessionDep
from ppe.service.schemas import Metric
from ppe.service.store.db import release
from ppe.service.store.measurements import find_series

router = APIRouter(tags=["forecasts"])


def series_or_404(session: Session, resource: str, metric: str, peer: str | None) -> int:
    if metric in ("bandwidth", "latency") and not peer:
        raise HTTPException(422, f"{metric} is a link metric: give ?peer=")
    sid = find_series(session, resource, metric, peer or "")
    release(session)
    if sid is None:
        what = f"{resource}/{metric}" + (f" to {peer}" if peer else "")
        raise HTTPException(404, f"no measurements for {what}")
    return sid


def insufficient(exc: InsufficientData) -> HTTPException:
    return HTTPException(
        409,
        {"reason": "too little data to forecast", "samples": exc.n, "needed": exc.minimum},
    )


@router.get("/forecasts/{resource}/{metric}")
def get_forecast(
    resource: str,
    metric: Metric,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    cache: ForecastCacheDep,
    peer: str | None = None,
    horizon: Annotated[float | None, Query(gt=0, description="seconds to average over")] = None,
    confidence: Annotated[float, Query(gt=0, lt=1)] = 0.95,
    at: Annotated[
        float | None, Query(description="evaluate as of this unix time (past data only)")
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
    resource: str,
    metric: Metric,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    cache: ForecastCacheDep,
    peer: str | None = None,
    limit: Annotated[int, Query(ge=10, le=20_000)] = 1000,
    confidence: Annotated[float, Query(gt=0, lt=1)] = 0.95,
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
