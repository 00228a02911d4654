"""JSON the dashboard's Models page draws: the stored runs' applications and kernels, and a
model fitted over them (ppe.empirical.views does the modelling; this reads the store).

Authenticated like the API the other pages call: the session cookie with the page's CSRF
header (or a bearer token), operator or admin. Not part of the public API (no schema).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.empirical.data import Measurements
from ppe.empirical.errors import EmpiricalError
from ppe.empirical.runs import DEFAULT_METRIC
from ppe.empirical.views import (
    SEARCH,
    VIEW_TYPES,
    Run,
    common_params,
    coupling_table,
    curve,
    describe,
    distinct_values,
    fit,
    hold_fixed,
    measurements,
    surface,
)
from ppe.service.auth import OPERATE, require
from ppe.service.deps import SessionDep
from ppe.service.errors import ROUTER_RESPONSES, ProblemRoute, domain_errors, problem
from ppe.service.schemas import ModelName
from ppe.service.schemas_runs import KernelName, MetricName
from ppe.service.store.models import Run as RunRow

DATA_PATH = "/dashboard/data/models"
#: Newest completed runs read per request: a page draws from a bounded sample.
MAX_RUNS = 20_000
NO_SURFACE = "none"

router = APIRouter(include_in_schema=False, route_class=ProblemRoute, responses=ROUTER_RESPONSES)
Operator = Annotated[str, Depends(require(*OPERATE))]
ParamQuery = Annotated[str, Query(min_length=1, max_length=64, pattern=r"^[A-Za-z_]\w{0,63}$")]


def _runs(session: Session, app: str, metric: str) -> list[Run]:
    rows = session.execute(
        select(RunRow.kernel, RunRow.params, RunRow.values)
        .where(RunRow.app == app, RunRow.metric == metric, RunRow.status == "completed")
        .order_by(RunRow.id.desc())
        .limit(MAX_RUNS)
    )
    return [Run(kernel, params or {}, values or []) for kernel, params, values in rows]


@router.get(DATA_PATH)
def catalogue(session: SessionDep, _role: Operator) -> dict[str, Any]:
    """Applications, their kernels and metrics, and each kernel's parameters with their
    distinct values (what the page's pickers offer)."""
    rows = session.execute(
        select(RunRow.app, RunRow.kernel, RunRow.metric, RunRow.params)
        .where(RunRow.status == "completed")
        .order_by(RunRow.id.desc())
        .limit(MAX_RUNS)
    )
    kernels: dict[tuple[str, str], dict[str, Any]] = {}
    for app, kernel, metric, params in rows:
        k = kernels.setdefault((app, kernel), {"runs": 0, "metrics": set(), "params": {}})
        k["runs"] += 1
        k["metrics"].add(metric)
        for name, value in (params or {}).items():
            k["params"].setdefault(name, set()).add(float(value))
    apps: dict[str, list[dict[str, Any]]] = {}
    for (app, kernel), k in sorted(kernels.items()):
        apps.setdefault(app, []).append(
            {
                "kernel": kernel,
                "runs": k["runs"],
                "metrics": sorted(k["metrics"]),
                "params": {p: sorted(v) for p, v in sorted(k["params"].items())},
            }
        )
    return {
        "apps": [{"app": a, "kernels": ks} for a, ks in apps.items()],
        "types": list(VIEW_TYPES),
    }


@router.get(DATA_PATH + "/fit")
def fitted(
    session: SessionDep,
    _role: Operator,
    app: Annotated[ModelName, Query()],
    kernel: Annotated[KernelName, Query()],
    x: ParamQuery,
    type: Annotated[str, Query(max_length=32)] = SEARCH,  # noqa: A002 - the page's word
    y: Annotated[str | None, Query(max_length=64)] = None,
    metric: Annotated[MetricName, Query()] = DEFAULT_METRIC,
    at: Annotated[float | None, Query(gt=0, le=1e15, allow_inf_nan=False)] = None,
) -> dict[str, Any]:
    """The model of ``kernel`` along ``x`` (the other parameters held fixed), its curve, band
    and extrapolated point; the two-parameter surface over ``x`` and ``y`` (``y`` absent:
    the first other parameter that ranges; ``none``: no surface); the app's coupling table."""
    if type not in VIEW_TYPES:
        raise problem(422, f"unknown type {type!r}; expected one of {list(VIEW_TYPES)}", "type")
    all_runs = _runs(session, app, metric)
    runs = [r for r in all_runs if r.kernel == kernel]
    if not runs:
        raise problem(404, f"no completed {metric} runs of {app!r} kernel {kernel!r}", "kernel")
    params = common_params(runs)
    if x not in params:
        raise problem(422, f"{x!r} is not a parameter of every run; they give {list(params)}", "x")
    with domain_errors():
        data = measurements(runs, params)
        line, fixed = hold_fixed(data, [x])
        model = fit(line, type)
        view = curve(model, line, at)
    out: dict[str, Any] = {
        "app": app,
        "kernel": kernel,
        "metric": metric,
        "params": list(params),
        "values": distinct_values(data),
        "fixed": fixed,
        "model": describe(model),
        **view,
        "surface": None,
        "surface_note": None,
        "coupling": coupling_table(all_runs, params),
    }
    out["surface"], out["surface_note"] = _surface(data, x, y, params)
    return out


def _surface(
    data: Measurements, x: str, y: str | None, params: tuple[str, ...]
) -> tuple[dict[str, Any] | None, str | None]:
    """The search's two-parameter model over ``x`` and ``y``, or why there is none."""
    if y == NO_SURFACE:
        return None, None
    values = distinct_values(data)
    if y is None:
        ranging = [p for p in params if p != x and len(values[p]) >= 2]
        if not ranging:
            return None, "only one parameter ranges: no surface"
        y = ranging[0]
    if y == x or y not in params:
        raise problem(422, f"surface parameter {y!r} must be another of {list(params)}", "y")
    try:
        plane, _ = hold_fixed(data, [x, y])
        return surface(fit(plane, SEARCH), plane), None
    except EmpiricalError as exc:
        return None, f"no surface over {x} and {y}: {exc.message}"
