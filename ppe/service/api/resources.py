"""Hosts, their properties and the latest value of each of their series."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.service.auth import OPERATE, READ, require
from ppe.service.deps import IndexCacheDep, SessionDep, commit
from ppe.service.errors import CONFLICT, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import NamePath, ResourceOut, ResourcePut, SeriesOut
from ppe.service.store.measurements import ensure_resources
from ppe.service.store.models import Resource, Series

router = APIRouter(tags=["resources"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)


def _series_summaries(
    session: Session, resource_id: int | None = None
) -> dict[int, list[SeriesOut]]:
    """Count and latest value per series, as ingestion keeps them (no scan of measurements)."""
    query = select(Series).order_by(Series.metric, Series.peer)
    if resource_id is not None:
        query = query.where(Series.resource_id == resource_id)
    out: dict[int, list[SeriesOut]] = {}
    for s in session.execute(query).scalars():
        out.setdefault(s.resource_id, []).append(
            SeriesOut(
                metric=s.metric,
                peer=s.peer or None,
                samples=s.samples,
                latest_timestamp=s.latest_timestamp,
                latest_value=s.latest_value,
            )
        )
    return out


def _resource_out(r: Resource, series: dict[int, list[SeriesOut]]) -> ResourceOut:
    return ResourceOut(name=r.name, properties=r.properties or {}, series=series.get(r.id, []))


@router.get("/resources", response_model=list[ResourceOut])
def list_resources(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[ResourceOut]:
    series = _series_summaries(session)
    resources = session.execute(select(Resource).order_by(Resource.name)).scalars()
    return [_resource_out(r, series) for r in resources]


@router.get("/resources/{name}", response_model=ResourceOut, responses=NOT_FOUND)
def get_resource(
    name: NamePath, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> ResourceOut:
    r = session.execute(select(Resource).where(Resource.name == name)).scalar_one_or_none()
    if r is None:
        raise problem(404, f"unknown resource {name!r}", "path.name")
    return _resource_out(r, _series_summaries(session, r.id))


@router.put("/resources/{name}", response_model=ResourceOut, responses=CONFLICT)
def put_resource(
    name: NamePath,
    body: ResourcePut,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*OPERATE))],
    index: IndexCacheDep,
) -> ResourceOut:
    """Register a host or merge new properties into an existing one (the name follows the same
    rules as a measurement's `resource`)."""
    ensure_resources(session, [name])
    r = session.execute(select(Resource).where(Resource.name == name)).scalar_one()
    r.properties = {**(r.properties or {}), **body.properties.model_dump(exclude_none=True)}
    commit(session)
    index.clear()  # plans on this worker see the new properties at once
    return _resource_out(r, _series_summaries(session, r.id))
