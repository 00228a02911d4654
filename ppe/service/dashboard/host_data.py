"""JSON the host page's "Calibration of past horizon forecasts" card draws: how the horizon
forecasts the service would have given for this host's cpu series at past times compared with
what followed (ppe.evaluation.horizon_eval.calibrate_series does the scoring; this reads the
worker's copy of the series and memoises the answer until the series gains a sample).

Authenticated like the API the other pages call: the session cookie with the page's CSRF
header (or a bearer token), operator or admin. Not part of the public API (no schema).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Query

from forecaster.fleet import FleetSource
from ppe.evaluation.horizon_eval import (
    DEFAULT_HORIZONS,
    SERIES_CASES,
    calibrate_series,
    parse_horizons,
)
from ppe.service.api.forecasts import series_or_404
from ppe.service.auth import OPERATE, require
from ppe.service.deps import ForecastCacheDep, SessionDep
from ppe.service.errors import NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.forecasts import FLEET_SPAN_S
from ppe.service.schemas import NamePath

DATA_PATH = "/dashboard/data/hosts/{name}/horizon-calibration"
#: Longest horizon the card scores: a month (every case also needs two days before it).
MAX_HORIZON_S = 30 * 86400.0
MAX_HORIZONS = 8

router = APIRouter(
    include_in_schema=False,
    route_class=ProblemRoute,
    responses={**ROUTER_RESPONSES, **NOT_FOUND},
)
Operator = Annotated[str, Depends(require(*OPERATE))]


def horizons_of(text: str | None) -> tuple[float, ...]:
    """``"300,3600"`` -> (300.0, 3600.0); a 422 naming the query field when they are not
    positive seconds up to ``MAX_HORIZON_S``, or too many."""
    if text is None:
        return DEFAULT_HORIZONS
    try:
        out = parse_horizons(text)
    except ValueError:
        raise problem(
            422,
            f"horizons must be positive seconds separated by commas, got {text!r}",
            "query.horizons",
        ) from None
    if len(out) > MAX_HORIZONS:
        raise problem(422, f"at most {MAX_HORIZONS} horizons, got {len(out)}", "query.horizons")
    if max(out) > MAX_HORIZON_S:
        raise problem(
            422,
            f"horizons are at most {MAX_HORIZON_S:.0f} s (30 days), got {max(out):g}",
            "query.horizons",
        )
    return tuple(sorted(set(out)))


@router.get(DATA_PATH)
def horizon_calibration(
    name: NamePath,
    session: SessionDep,
    _role: Operator,
    cache: ForecastCacheDep,
    horizons: Annotated[
        str | None, Query(max_length=200, description="seconds, comma-separated")
    ] = None,
    cases: Annotated[int, Query(ge=1, le=SERIES_CASES)] = SERIES_CASES,
) -> dict[str, Any]:
    """Coverage of the 95 % interval per horizon (with its Wilson interval), mean width, MAE,
    pinball loss, fallback share and PIT histogram of at most ``cases`` past forecasts per
    horizon of ``name``'s cpu series, each from samples strictly before its time."""
    hs = horizons_of(horizons)
    sid = series_or_404(session, name, "cpu", None)
    key = ("horizon-calibration", hs, cases)
    compute = partial(
        _calibrate,
        name=name,
        horizons=hs,
        cases=cases,
        history=cache.history_limit,
        fleet=partial(cache.fleet, sid, "cpu"),
    )
    body = cache.derived(sid, key, compute)
    return {"resource": name, "metric": "cpu", **body}


def _calibrate(
    ts: np.ndarray,
    xs: np.ndarray,
    *,
    name: str,
    horizons: tuple[float, ...],
    cases: int,
    history: int,
    fleet: Callable[..., FleetSource | None],
) -> dict[str, Any]:
    """The evaluation, each forecast from as many samples before its time as ``?at=`` reads,
    and borrowing from the other hosts as it does."""
    # as of just after this host's newest sample (every case is before it) and over its whole
    # history: read again when the series gains a sample, as the card is computed again then
    span = float(ts[-1] - ts[0]) if ts.size else 0.0
    at = float(np.nextafter(ts[-1], math.inf)) if ts.size else None
    others = fleet(at=at, span_s=span + FLEET_SPAN_S)
    out = calibrate_series(ts, xs, name, horizons, cases, history=history, fleet=others)
    out["last_timestamp"] = float(ts[-1]) if ts.size else None
    return out
