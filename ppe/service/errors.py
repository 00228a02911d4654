"""Error answers: one documented body per kind, and where each is produced.

* :class:`~ppe.service.schemas.ProblemReport` (``{"detail": [{index, offset, field, reason}]}``)
  for everything wrong with a request or that the data cannot back: 422 (validation and
  domain checks), 404 (an unknown resource, series, schedule, host), 409 (too little data,
  a write that lost a race on a unique key).
* :class:`~ppe.service.schemas.ModelProblemReport` for errors in a model's text, parameters or
  evaluation (422, ``ppe.core.ModelError.to_dict``).
* :class:`~ppe.service.schemas.Message` (``{"detail": "..."}``) for 401 and 403 (``auth``).

Routers take :data:`ROUTER_RESPONSES` and :class:`ProblemRoute`, so request validation answers
in the same shape whichever router a route is on.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

import scheduler
from forecaster import InsufficientData
from ppe.core import ModelError
from ppe.pipeline import AllocationError
from ppe.service.deps import services_of
from ppe.service.planning import PlanningError
from ppe.service.schemas import (
    PATTERN_RULES,
    UNION_TAGS,
    Message,
    ModelProblemReport,
    Problem,
    ProblemReport,
)

# OpenAPI `responses=` entries, per status.
UNAUTHORIZED: dict[int | str, dict[str, Any]] = {
    401: {"model": Message, "description": "missing or invalid token"},
    403: {"model": Message, "description": "the token's role may not do this"},
}
INVALID: dict[int | str, dict[str, Any]] = {
    422: {"model": ProblemReport, "description": "invalid request: which item, field and why"}
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ProblemReport, "description": "not found"}
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ProblemReport,
        "description": "the data cannot back this (yet), or a "
        "concurrent write took the same key: nothing was stored",
    }
}
#: A job's cancel: no such job, or one that has already ended.
JOB_ENDED: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    409: {"model": ProblemReport, "description": "the job has already ended"},
}
PLANNING: dict[int | str, dict[str, Any]] = {
    404: {"model": ProblemReport, "description": "an unknown host"},
    409: CONFLICT[409],
    422: {
        "model": ProblemReport | ModelProblemReport,
        "description": "invalid request, or an error in the model's text, parameters or "
        "evaluation (ModelProblemReport)",
    },
}
#: Every authenticated API router's defaults.
ROUTER_RESPONSES: dict[int | str, dict[str, Any]] = {**UNAUTHORIZED, **INVALID}


def problem(status: int, reason: str, field: str | None = None) -> HTTPException:
    """An HTTPException whose body is a ProblemReport of one problem."""
    return HTTPException(status, [Problem(field=field, reason=reason).model_dump()])


#: Bodies that are batches (``{"measurements": [...]}``, ``{"runs": [...]}``): a problem names
#: the item by its index and the field relative to that item.
BATCH_FIELDS = frozenset({"measurements", "runs"})


def _where(loc: Sequence[str | int]) -> tuple[int | None, str | None]:
    """(batch index, field) of a pydantic location: a batch item's fields are named relative
    to the item its index gives; other positions are written into the field ('hosts[2].name')."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    index = None
    if len(parts) >= 2 and parts[0] in BATCH_FIELDS and isinstance(parts[1], int):
        index, parts = parts[1], parts[2:]
    field = ""
    for p in parts:
        if p in UNION_TAGS or p == "[key]":  # a branch of a union, a dict's key: no field
            continue
        field += f"[{p}]" if isinstance(p, int) else (f".{p}" if field else str(p))
    return index, field or None


def validation_problems(exc: RequestValidationError) -> list[Problem]:
    """Pydantic's errors as Problems; malformed JSON gives its character offset, not an index."""
    return problems_of(exc.errors())


def problems_of(errors: Sequence[Mapping[str, Any]]) -> list[Problem]:
    """Pydantic's error list (a request's, or a model validated elsewhere) as Problems."""
    problems = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if err.get("type") == "json_invalid":
            offset = next((p for p in reversed(loc) if isinstance(p, int)), None)
            why = (err.get("ctx") or {}).get("error")
            reason = "malformed JSON" + (f": {why}" if why else "")
            problems.append(Problem(offset=offset, reason=reason))
            continue
        index, field = _where(loc)
        reason = err.get("msg", "invalid")
        ctx = err.get("ctx") or {}
        if err.get("type") == "value_error":  # our validators' own words, without pydantic's
            reason = str(ctx.get("error", reason))
        elif err.get("type") == "string_pattern_mismatch" and ctx.get("pattern") in PATTERN_RULES:
            reason = PATTERN_RULES[ctx["pattern"]]
        problems.append(Problem(index=index, field=field, reason=reason))
    return problems


def validation_response(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with a ProblemReport; a measurement batch refused by its schema is counted."""
    if request.url.path.endswith("/measurements"):
        services_of(request).metrics.rejected_batches.labels("schema").inc()
    report = ProblemReport(detail=validation_problems(exc))
    return JSONResponse(report.model_dump(), status_code=422)


class ProblemRoute(APIRoute):
    """A route whose request validation errors answer a ProblemReport (see the module doc).

    A body FastAPI cannot even decode (not UTF-8) is its 400 "error parsing the body"; it is
    answered like malformed JSON: 422, one problem.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return validation_response(request, exc)
            except StarletteHTTPException as exc:
                if exc.status_code != 400:
                    raise
                why = Problem(reason=f"malformed body (send UTF-8 JSON): {exc.detail}")
                return JSONResponse(ProblemReport(detail=[why]).model_dump(), status_code=422)

        return route_handler


@contextmanager
def domain_errors() -> Iterator[None]:
    """Map what planning raises to the documented answers (PLANNING)."""
    try:
        yield
    except HTTPException:
        raise
    except PlanningError as exc:
        raise problem(exc.status, str(exc), exc.field) from exc
    except InsufficientData as exc:
        raise problem(409, f"too little data to forecast: {exc}", "hosts") from exc
    except ModelError as exc:
        errors = getattr(exc, "errors", None) or [exc]
        raise HTTPException(422, [e.to_dict() for e in errors]) from exc
    except AllocationError as exc:
        raise problem(422, str(exc), "allocation") from exc
    except scheduler.Infeasible as exc:
        raise problem(422, str(exc), "hosts") from exc
    except ValueError as exc:
        raise problem(422, str(exc)) from exc
