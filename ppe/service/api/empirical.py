"""Empirical models fitted to stored runs, saved by name, and kernel coupling.

``POST /models/empirical`` fits one series of stored runs (what ``ppe model fit --app`` does,
the same JSON) and may save the fit; ``GET /models/empirical[/{name}]`` lists and reads saved
fits (``?n=1200&p=8``: a prediction there); ``DELETE`` is an operator's.  ``POST /coupling``
computes Prophecy's kernel couplings from runs of kernels alone and in pairs.  Whatever the runs
or the points cannot give is a 422 naming the field and why; nothing is stored then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status
from sqlalchemy.orm import Session

from ppe.empirical.errors import EmpiricalError
from ppe.empirical.report import SERIES_FIELDS, Fit
from ppe.service.auth import APP_USE, OPERATE, READ, require
from ppe.service.deps import SessionDep, commit, planning_thread
from ppe.service.empirical import (
    FitSpec,
    coupling_stored,
    fit_of,
    fit_stored,
    list_stored,
    predict_coupling,
    save_coupling,
    save_fit,
    stored_couplings,
    stored_model,
)
from ppe.service.errors import CONFLICT, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import MAX_PARAM, PARAM_PATTERN, ModelName, ProblemReport
from ppe.service.schemas_empirical import (
    CouplingAnswer,
    CouplingIn,
    EmpiricalFitIn,
    EmpiricalFitted,
    StoredCouplingOut,
    StoredEmpiricalOut,
    StoredEmpiricalSummary,
)
from ppe.service.schemas_runs import SystemName
from ppe.service.store.models import StoredEmpiricalModel

router = APIRouter(tags=["empirical models"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)

UNFIT: dict[int | str, dict[str, Any]] = {
    422: {
        "model": ProblemReport,
        "description": "invalid request, or runs that cannot give the model (too few points, "
        "one value of a parameter, a value <= 0 under a log or inverse, no runs...): "
        "nothing stored",
    }
}
EmpiricalName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z][A-Za-z0-9_\-]*$",
        description="a stored empirical model's name",
        examples=["matmul-time"],
    ),
]


@contextmanager
def empirical_errors(where: Callable[[str | None], str | None]) -> Iterator[None]:
    """An EmpiricalError as a 422 problem whose field is ``where(error's name)``."""
    try:
        yield
    except EmpiricalError as exc:
        raise problem(422, f"{exc.message} ({exc.kind})", where(exc.name)) from exc


def _fit_field(body: EmpiricalFitIn) -> Callable[[str | None], str | None]:
    """A series field (no runs, several kernels...) or ``x``; a parameter of the runs is no
    field of the request (the reason names it)."""
    return lambda name: "x" if name is not None and name == body.x else _series_field(name)


def _series_field(name: str | None) -> str | None:
    return name if name in SERIES_FIELDS else None


def _point_field(at: str) -> Callable[[str | None], str | None]:
    return lambda name: at if name is None else f"{at}.{name}"


def _coupling_field(name: str | None) -> str:
    return name if name in ("system", "tolerance") else "kernels"


# ---------------------------------------------------------------------------- fitting


@router.post(
    "/models/empirical",
    response_model=EmpiricalFitted,
    responses={**UNFIT, **CONFLICT},
)
async def post_empirical(
    request: Request,
    body: EmpiricalFitIn,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
) -> dict[str, Any]:
    """Fit one series of stored runs; with ``save_as``, store the model under that name."""
    return await planning_thread(request, partial(_fit, body, session))


def _fit(body: EmpiricalFitIn, session: Session) -> dict[str, Any]:
    """The fit and its predictions, checked whole before anything is stored (a planning thread)."""
    if body.save_as is not None and stored_model(session, body.save_as) is not None:
        raise problem(
            409,
            f"an empirical model {body.save_as!r} is stored already: choose another name, or "
            "have an operator delete it first",
            "save_as",
        )
    spec = FitSpec(body.app, body.kernel, body.metric, body.system, body.type, body.x)
    with empirical_errors(_fit_field(body)):
        fit = fit_stored(session, spec)
    points = [dict(p) for p in body.predict]
    _check_points(fit, points, "predict")
    report = fit.report(points)
    if body.suggest is not None:
        if not points:
            raise problem(
                422, "suggest plans for the sizes you care about: give `predict` points", "suggest"
            )
        with empirical_errors(_point_field("suggest")):
            report["suggested"] = fit.suggest(body.suggest, points, body.by_cost)
        report["suggested_per"] = "time" if body.by_cost else "run"
    if body.save_as is not None:
        save_fit(session, body.save_as, fit)
        commit(session)  # a lost race on the name answers 409, nothing stored
    return {**report, "saved_as": body.save_as}


def _check_points(fit: Fit, points: list[dict[str, float]], where: str) -> None:
    for i, point in enumerate(points):
        at = f"{where}[{i}]" if where == "predict" else where
        with empirical_errors(_point_field(at)):
            fit.predict(point)


# ---------------------------------------------------------------------------- stored


def _summary(row: StoredEmpiricalModel) -> dict[str, Any]:
    cv = row.model.get("cv_error")
    return {
        "name": row.name,
        "app": row.app,
        "kernel": row.kernel,
        "metric": row.metric,
        "system": row.system,
        "type": row.type,
        "requested_type": row.requested_type,
        "model": str(row.model.get("formula", "")),
        "cv_error": None if cv is None else float(cv),
        "n_points": row.n_points,
        "fitted_at": row.fitted_at,
    }


@router.get("/models/empirical", response_model=list[StoredEmpiricalSummary])
def list_empirical(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    """Stored empirical models, by name."""
    return [_summary(row) for row in list_stored(session)]


@router.get(
    "/models/empirical/{name}",
    response_model=StoredEmpiricalOut,
    responses={**NOT_FOUND, **UNFIT},
)
def get_empirical(
    name: EmpiricalName,
    request: Request,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
) -> dict[str, Any]:
    """A stored model; query parameters (``?n=1200&p=8``) are a point to predict at."""
    row = stored_model(session, name)
    if row is None:
        raise problem(404, f"no stored empirical model {name!r}", "path.name")
    point = query_point(request)
    fit = fit_of(row)
    points = [point] if point else []
    _check_points(fit, points, "query")
    return {
        **fit.report(points),
        "name": row.name,
        "fitted_at": row.fitted_at,
        "definition": row.model,
    }


def query_point(request: Request) -> dict[str, float]:
    """The query's parameters as a point: identifiers, each once, finite numbers."""
    point: dict[str, float] = {}
    items = request.query_params.multi_items()
    if len(items) > 64:
        raise problem(422, f"{len(items)} query parameters: a point has at most 64", "query")
    for key, text in items:
        field = f"query.{key}"
        if not re.fullmatch(PARAM_PATTERN, key):
            raise problem(422, "a parameter name is an identifier of at most 64 chars", field)
        if key in point:
            raise problem(422, f"parameter {key!r} is given twice", field)
        try:
            value = float(text)
        except ValueError:
            raise problem(422, f"{text[:40]!r} is not a number", field) from None
        if not math.isfinite(value) or abs(value) > MAX_PARAM:
            raise problem(
                422, f"{key}={text[:40]}: finite and at most {MAX_PARAM:g} in size", field
            )
        point[key] = value
    return point


@router.delete(
    "/models/empirical/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=NOT_FOUND,
)
def delete_empirical(
    name: EmpiricalName,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*OPERATE))],
) -> Response:
    row = stored_model(session, name)
    if row is None:
        raise problem(404, f"no stored empirical model {name!r}", "path.name")
    session.delete(row)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------------------- coupling


@router.post("/coupling", response_model=CouplingAnswer, responses=UNFIT)
def post_coupling(
    body: CouplingIn,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
) -> dict[str, Any]:
    """Couplings ``C_AB = P_AB / (P_A + P_B)`` of a loop of kernels and each kernel's
    coefficient, per input and averaged, with whether they are stable across inputs; the
    loop's time at other inputs (``predict``) and, with ``save``, kept for the system."""
    with empirical_errors(_coupling_field):
        report = coupling_stored(
            session,
            body.app,
            body.kernels,
            body.metric,
            body.system,
            body.params,
            body.tolerance,
        )
    answer = {"app": body.app, "metric": body.metric, "system": body.system, **report.to_dict()}
    points = [{**(body.params or {}), **p} for p in body.predict]
    with empirical_errors(_point_field("predict")):
        predictions = predict_coupling(session, report, body.app, body.metric, body.system, points)
    warnings = []
    iso = answer["isocoupling"]
    if any(not p.measured for p in predictions) and iso["stable"] is not True:
        warnings.append(f"couplings reused at inputs not measured: {iso['message']}")
    saved = None
    if body.save:
        saved = save_coupling(session, body.app, body.metric, body.system, answer).id
        commit(session)
    return {
        **answer,
        "predictions": [p.to_dict() for p in predictions],
        "warnings": warnings,
        "saved": saved,
    }


@router.get("/coupling", response_model=list[StoredCouplingOut])
def list_couplings(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
    app: Annotated[ModelName | None, Query()] = None,
    system: Annotated[SystemName | None, Query()] = None,
) -> list[dict[str, Any]]:
    """Couplings kept with ``save``, per application, metric, system and loop (the filters
    are the stored names' types: text PostgreSQL refuses, such as NUL, is a 422 here)."""
    return [
        {
            "id": c.id,
            "app": c.app,
            "metric": c.metric,
            "system": c.system,
            "kernels": c.kernels,
            "coefficients": c.coefficients,
            "stable": c.stable,
            "computed_at": c.computed_at,
            "report": c.report,
        }
        for c in stored_couplings(session, app, system)
    ]
