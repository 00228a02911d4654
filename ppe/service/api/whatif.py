"""What-if over HTTP (docs/whatif.md, API): evaluate a spec on the store's hosts, at once when
small, else as a job with progress; and "the hosts I have now" as a spec to start from."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

import scheduler
from ppe.service.api.job_cancel import cancelled
from ppe.service.auth import OPERATE, READ, require
from ppe.service.deps import ForecastCacheDep, SessionDep, planning_thread, services_of
from ppe.service.errors import JOB_ENDED, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.jobs import job_summary
from ppe.service.schemas import TEXT_PATTERN, IdPath, StrategyName
from ppe.service.store.models import WhatIfJob
from ppe.service.whatif import (
    SMALL_NODES,
    StoreResolver,
    check,
    current_spec,
    is_small,
    job_spread,
    nodes,
    read_references,
)
from ppe.whatif import (
    Options,
    ResolveError,
    Resources,
    SpecError,
    WhatIf,
    WhatIfError,
    evaluate_resolved,
)
from ppe.whatif.html import figures_json

router = APIRouter(tags=["whatif"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)

#: Largest spec text accepted (a spec is a page of TOML; sweeps are ranges, not lists).
MAX_SPEC_CHARS = 256 * 2**10


#: A spec small enough to be answered at once (the schema's example).
EXAMPLE_SPEC = """title = "4 nodes at 1 Gflop/s, SOR"

[[nodeset]]
name = "node"
number = 4
floatspeed = "1 Gflop/s"
load = {kind = "normal", mean = 0.8, std = 0.05}

[[linkset]]
name = "lan"
across = "node"
bandwidth = "1 Gb/s"

[[dataset]]
name = "grid"
type = "grid2dim"
size = 1000
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = "node"

[execution]
model = "sor"
iterations = 100
"""


class WhatIfSpec(BaseModel):
    """A spec to check only (``POST /whatif/validate``)."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"spec": EXAMPLE_SPEC}]}
    )

    spec: str = Field(
        max_length=MAX_SPEC_CHARS, pattern=TEXT_PATTERN, description="a what-if spec (TOML text)"
    )


class WhatIfValidation(BaseModel):
    """A spec that checks: what POSTing it would evaluate."""

    valid: Literal[True] = True
    title: str = Field(description="the spec's title")
    axes: list[str] = Field(description="the swept fields, in sweep order")
    points: int = Field(description="points to evaluate (the sweep's size)")
    nodes: int = Field(description="the most nodes any point has")
    job: bool = Field(description="whether POST /whatif would queue it as a job")


class WhatIfRequest(WhatIfSpec):
    strategy: StrategyName = Field("mean", description="the scheduler's strategy at every point")
    confidence: float = Field(0.95, gt=0, lt=1, description="interval confidence")
    k: float = Field(2.0, gt=0, le=10, description="k of the conservative strategy")
    executor: Literal["process", "serial", "dask"] = Field(
        "process",
        description="where a job's points run, as for replays: a process pool of the server's "
        "replay workers, one after another in the job's thread, or the server's own Dask "
        "scheduler (`--dask-scheduler`; else 422). The report is the same on any of them.",
    )


POST_DESCRIPTION = f"""Evaluate a what-if spec (docs/whatif.md) on this service's data.

The spec is checked first, its references included (registered hosts, stored profiles by
host name, signatures and models posted here, traces under the server's trace directories):
a spec with mistakes is a 422 listing every problem with its `field`, `line`, `column` and
`reason`, and nothing is queued. A spec of one point with at most {SMALL_NODES} nodes is
answered at once (200, `status: "done"` and the report); anything larger becomes a job (202
with its URL; follow it with `GET /whatif/{{id}}`: `done` of `total` points, then the
report, or `error` when it failed). A job's points run on `executor` (default a process
pool; `dask` on the server's own scheduler only), the report the same on any."""


FiguresQuery = Annotated[
    bool,
    Query(
        description="also return `figures`: the plots `ppe whatif --html` draws, as plotly "
        "JSON (`[{data, layout}]`)"
    ),
]


def _with_figures(out: dict[str, Any], report: dict[str, Any] | None) -> dict[str, Any]:
    return {**out, "figures": figures_json(report) if report else []}


def _summary(j: WhatIfJob) -> dict[str, Any]:
    return {**job_summary(j), "options": j.options}


def _resolver(request: Request, confidence: float) -> StoreResolver:
    sv = services_of(request)
    return StoreResolver(sv.sessions, sv.forecasts, sv.index, sv.settings, confidence)


async def _checked(
    request: Request, text: str, resolver: StoreResolver
) -> tuple[WhatIf, Resources]:
    """The spec parsed and checked, its references read (422 listing every problem)."""

    def prepare() -> tuple[WhatIf, Resources]:
        whatif = check(text)
        return whatif, read_references(whatif, resolver)

    try:
        checked: tuple[WhatIf, Resources] = await planning_thread(request, prepare)
    except SpecError as exc:
        raise HTTPException(422, [p.to_dict() for p in exc.problems]) from exc
    return checked


@router.post(
    "/whatif/validate",
    description="Check a what-if spec as `POST /whatif` does, references included, without "
    "evaluating or queuing anything: 200 with what it would evaluate, or 422 listing every "
    "problem with its `field`, `line`, `column` and `reason` (the dashboard's Validate).",
)
async def validate_whatif(
    body: WhatIfSpec,
    request: Request,
    _role: Annotated[str, Depends(require(*OPERATE))],
) -> WhatIfValidation:
    whatif, _ = await _checked(request, body.spec, _resolver(request, 0.95))
    return WhatIfValidation(
        title=whatif.points[0].spec.title,
        axes=[a.label for a in whatif.axes],
        points=len(whatif.points),
        nodes=nodes(whatif),
        job=not is_small(whatif),
    )


@router.post(
    "/whatif",
    status_code=status.HTTP_202_ACCEPTED,
    description=POST_DESCRIPTION,
    responses={200: {"description": "a small spec, answered at once"}},
)
async def post_whatif(
    body: WhatIfRequest,
    request: Request,
    response: Response,
    _role: Annotated[str, Depends(require(*OPERATE))],
    figures: FiguresQuery = False,
) -> dict[str, Any]:
    if body.strategy not in scheduler.STRATEGIES:
        raise problem(
            422,
            f"unknown strategy {body.strategy!r}; choose from {', '.join(scheduler.STRATEGIES)}",
            "strategy",
        )
    options = Options(strategy=body.strategy, confidence=body.confidence, k=body.k)
    resolver = _resolver(request, body.confidence)

    whatif, resources = await _checked(request, body.spec, resolver)
    sv = services_of(request)
    try:
        spread = job_spread(sv.settings, body.executor, resources)
    except ValueError as exc:
        raise problem(422, str(exc), "executor") from exc
    if is_small(whatif):

        def run() -> dict[str, Any]:
            report = evaluate_resolved(whatif, resources, options).to_dict()
            out = {"id": None, "status": "done", "done": 1, "total": 1, "report": report}
            return _with_figures(out, report) if figures else out

        try:
            answer = await planning_thread(request, run)
        except WhatIfError as exc:
            raise problem(422, str(exc), "spec") from exc
        response.status_code = status.HTTP_200_OK
        return answer
    hide = [Path(d).resolve() for d in sv.settings.trace_dirs]
    job_id = await planning_thread(
        request,
        lambda: sv.whatifs.submit(
            body.spec, whatif, resources, options, hide, spread, body.executor
        ),
    )
    total = len(whatif.points)
    return {
        "id": job_id,
        "status": "queued",
        "done": 0,
        "total": total,
        "url": f"/api/v1/whatif/{job_id}",
    }


@router.get("/whatif", description="What-if jobs, newest first.")
def list_whatifs(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> list[dict[str, Any]]:
    jobs = session.execute(select(WhatIfJob).order_by(WhatIfJob.id.desc()).limit(limit)).scalars()
    return [_summary(j) for j in jobs]


@router.get(
    "/whatif/current",
    response_class=Response,
    responses={200: {"content": {"application/toml": {}}, "description": "a spec (TOML)"}},
    description="'The hosts I have now' as a what-if spec (TOML) to edit and POST: one "
    "nodeset per registered host with cpu measurements and a speed (`host = name`, `load = "
    '{kind = "forecasts"}`), linksets between consecutive hosts from their measured links '
    "(else the defaults), the model on an n x n grid.",
)
async def current_whatif(
    request: Request,
    session: SessionDep,
    cache: ForecastCacheDep,
    _role: Annotated[str, Depends(require(*READ))],
    n: Annotated[int, Query(ge=2, le=1_000_000)] = 1000,
    iterations: Annotated[int, Query(ge=1, le=1_000_000)] = 100,
    model: Literal["sor", "jacobi2d"] = "sor",
) -> Response:
    resolver = _resolver(request, 0.95)
    try:
        text = await planning_thread(
            request,
            lambda: current_spec(session, cache, resolver, n=n, iterations=iterations, model=model),
        )
    except ResolveError as exc:
        raise problem(409, str(exc)) from exc
    return Response(text, media_type="application/toml")


@router.get("/whatif/{job_id}", responses=NOT_FOUND)
def get_whatif(
    job_id: IdPath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    figures: FiguresQuery = False,
) -> dict[str, Any]:
    job = session.get(WhatIfJob, job_id)
    if job is None:
        raise problem(404, f"no what-if job {job_id}", "path.job_id")
    out = {**_summary(job), "spec": job.spec, "report": job.report}
    return _with_figures(out, job.report) if figures else out


@router.post(
    "/whatif/{job_id}/cancel",
    responses=JOB_ENDED,
    description="Cancel a queued or running what-if job: 200 with the job, now `cancelled` (a "
    "running one stops at its next point and stores no report); 409 when it has already "
    "ended. Cancelling a cancelled job is a no-op.",
)
def cancel_whatif(
    job_id: IdPath, session: SessionDep, _role: Annotated[str, Depends(require(*OPERATE))]
) -> dict[str, Any]:
    return _summary(cancelled(session, WhatIfJob, job_id, "what-if"))
