"""Parameterization templates (Prophecy's second method) and their evaluation on systems.

A template is a grammar expression over an application's parameters and the systems' (see
ppe.empirical.templates and docs/empirical.md, "Templates"). It is checked when stored (422
naming every problem, nothing stored) and belongs to the token that stored it, like a user
model: only that token or an admin may replace or delete it. Evaluating reads each system's
figures from the store (resource properties, the forecasts' means of its measured series, the
named figures of its newest machine profile) and answers per system a value or the problem
that prevented one.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from forecaster import InsufficientData
from ppe.core import GrammarError
from ppe.empirical.systems import HostFigures, System, system_of
from ppe.empirical.templates import compile_template, evaluate_on_systems
from ppe.pmac import PROFILE_PARAMETERS, profile_parameters
from ppe.service.api.groups import group_members
from ppe.service.auth import APP_USE, READ, Principal, authorize, require
from ppe.service.deps import ForecastCacheDep, SessionDep, commit
from ppe.service.errors import (
    CONFLICT,
    NOT_FOUND,
    PLANNING,
    ROUTER_RESPONSES,
    ProblemRoute,
    domain_errors,
    problem,
)
from ppe.service.forecasts import ForecastCache
from ppe.service.schemas import ModelName
from ppe.service.schemas_templates import (
    SystemResult,
    TemplateEvaluate,
    TemplateIn,
    TemplateOut,
    TemplateValues,
)
from ppe.service.store.db import release
from ppe.service.store.models import LINK_METRICS, Resource, ResourceGroup, Series, Template
from ppe.service.store.pmac import latest_profiles

router = APIRouter(tags=["templates"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)
AppUser = Annotated[Principal, Depends(authorize(*APP_USE))]
TEMPLATE_WRITE = {**CONFLICT, 422: PLANNING[422]}
PROFILE_WORST = MappingProxyType({name: p.worst for name, p in PROFILE_PARAMETERS.items()})


def _out(t: Template) -> TemplateOut:
    try:
        described: dict[str, Any] = compile_template(t.text).describe()
    except GrammarError:
        described = {"names": None, "functions": None}
    return TemplateOut(
        name=t.name,
        app=t.app,
        text=t.text,
        description=t.description,
        created_at=t.created_at,
        owner_token_id=t.owner_token_id,
        **described,
    )


def _stored(session: Session, name: str) -> Template | None:
    return session.execute(select(Template).where(Template.name == name)).scalar_one_or_none()


def _stored_or_404(session: Session, name: str) -> Template:
    t = _stored(session, name)
    if t is None:
        raise problem(404, f"no template {name!r}", "path.name")
    return t


def _check_may_change(t: Template, who: Principal, verb: str) -> None:
    if who.role == "admin":
        return
    if t.owner_token_id is None or t.owner_token_id != who.token_id:
        whose = f"token {t.owner_token_id}'s" if t.owner_token_id is not None else "no token's"
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"template {t.name!r} is {whose}, not yours: only its owner or an admin token "
            f"may {verb} it (or store yours under another name)",
        )


@router.post(
    "/templates",
    status_code=status.HTTP_201_CREATED,
    response_model=TemplateOut,
    responses=TEMPLATE_WRITE,
)
def post_template(body: TemplateIn, session: SessionDep, who: AppUser) -> Any:
    """Check the template (every error, with line, column and token) and store it."""
    existing = _stored(session, body.name)
    if existing is not None:
        _check_may_change(existing, who, "replace")
    try:
        compile_template(body.text)
    except GrammarError as exc:
        return JSONResponse({"detail": [e.to_dict() for e in exc.errors]}, status_code=422)
    if existing is None:
        t = Template(
            name=body.name,
            app=body.app,
            text=body.text,
            description=body.description,
            owner_token_id=who.token_id,
        )
        session.add(t)
    else:
        t = existing
        t.app, t.text, t.description = body.app, body.text, body.description
    commit(session)  # before the 201: a lost race on the name answers 409, nothing stored
    return _out(t)


@router.get("/templates", response_model=list[TemplateOut])
def list_templates(
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    app: Annotated[ModelName | None, Query(description="only this application's")] = None,
) -> list[TemplateOut]:
    query = select(Template).order_by(Template.name)
    if app is not None:
        query = query.where(Template.app == app)
    return [_out(t) for t in session.execute(query).scalars()]


@router.get("/templates/{name}", response_model=TemplateOut, responses=NOT_FOUND)
def get_template(
    name: ModelName, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> TemplateOut:
    return _out(_stored_or_404(session, name))


@router.delete("/templates/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
def delete_template(name: ModelName, session: SessionDep, who: AppUser) -> Response:
    t = _stored_or_404(session, name)
    _check_may_change(t, who, "delete")
    session.delete(t)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/templates/{name}/evaluate",
    response_model=TemplateValues,
    responses={**NOT_FOUND, 422: PLANNING[422]},
)
def evaluate_template(
    name: ModelName,
    body: TemplateEvaluate,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    cache: ForecastCacheDep,
) -> TemplateValues:
    """The template on each system named (every registered resource when ``systems`` is
    null): per system its value, or a problem naming the parameter it lacks. When the
    systems were named and none gives a value, the request itself is a 422 (their problems):
    a caller who chose the system gets an error, not a 200 without a number; a survey of
    every system (``null``) or a list with some values answers per system."""
    t = _stored_or_404(session, name)
    app, text = t.app, t.text
    with domain_errors():
        template = compile_template(text)
        systems = read_systems(session, cache, body.systems)
        results = evaluate_on_systems(template, body.params, systems)
    failed = [r.problem for r in results if r.problem is not None]
    if body.systems is not None and results and len(failed) == len(results):
        raise HTTPException(422, [p.to_dict() for p in failed])
    return TemplateValues(
        template=name,
        app=app,
        params=dict(body.params),
        results=[SystemResult(**r.to_dict()) for r in results],
    )


def _members(wanted: Sequence[str] | None, session: Session) -> list[tuple[str, list[str]]]:
    """(system, its resources) per system asked for: a resource, a named group (its members)
    or ``"h0,h1"``; every registered resource and every named group for None."""
    if wanted is None:
        names = session.execute(select(Resource.name).order_by(Resource.name)).scalars()
        groups = session.execute(select(ResourceGroup).order_by(ResourceGroup.name)).scalars()
        return [(n, [n]) for n in names] + [(g.name, list(g.members)) for g in groups]
    out = []
    for i, system in enumerate(wanted):
        named = None if "," in system else group_members(session, system)
        members = named if named is not None else system.split(",")
        if len(set(members)) != len(members):
            raise problem(422, f"system {system!r} names a resource twice", f"systems[{i}]")
        out.append((system, members))
    return out


def read_systems(
    session: Session, cache: ForecastCache, wanted: Sequence[str] | None
) -> list[System]:
    """Each system's figures from the store: its resources' properties, the forecast means
    of their measured series (a group counts only the links between its members) and the
    named figures of their newest machine profiles (``ppe.pmac.profile_parameters``)."""
    groups = _members(wanted, session)
    needed = sorted({m for _, members in groups for m in members})
    query = select(Resource.name, Resource.properties, Series.id, Series.metric, Series.peer)
    query = query.join_from(Resource, Series, Series.resource_id == Resource.id, isouter=True)
    if wanted is not None:
        query = query.where(Resource.name.in_(needed))
    properties: dict[str, dict[str, Any]] = {}
    series: dict[str, list[tuple[int, str, str]]] = {}
    for rname, props, sid, metric, peer in session.execute(query):
        properties[rname] = props or {}
        if sid is not None:
            series.setdefault(rname, []).append((sid, metric, peer or ""))
    unknown = [m for m in needed if m not in properties]
    if unknown:
        raise problem(404, f"unknown resource(s): {', '.join(unknown)}", "systems")
    profiles = {
        host: profile_parameters(stored.profile)
        for host, stored in latest_profiles(session, needed).items()
    }
    release(session)  # the forecast cache reads the store on its own connection
    means: dict[int, float | None] = {}

    def mean(sid: int, metric: str) -> float | None:
        if sid not in means:
            try:
                means[sid] = cache.forecast(sid, metric).mean
            except InsufficientData:
                means[sid] = None
        return means[sid]

    systems = []
    for system, members in groups:
        figures = []
        for member in members:
            measured: dict[str, list[float]] = {}
            for sid, metric, peer in series.get(member, []):
                if metric in LINK_METRICS and len(members) > 1 and peer not in members:
                    continue  # a group's messages cross the links between its members
                value = mean(sid, metric)
                if value is not None:
                    measured.setdefault(metric, []).append(value)
            figures.append(
                HostFigures(member, properties[member], measured, profiles.get(member, {}))
            )
        systems.append(system_of(system, figures, PROFILE_WORST))
    return systems
