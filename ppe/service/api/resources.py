"""Hosts, their properties and the latest value of each of their series."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException
from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from ppe.service.auth import OPERATE, READ, require
from ppe.service.deps import get_session
from ppe.service.schemas import ResourceOut, ResourcePut, SeriesOut
from ppe.service.store.measurements import ensure_resources
from ppe.service.store.models import Measurement, Resource, Series

router = APIRouter(tags=["resources"])


def _series_summaries(session: Session) -> dict[int, list[SeriesOut]]:
    """Count and latest value per series in one grouped query (no per-series round trips)."""
    stats = (
        select(
            Measurement.series_id.label("sid"),
            func.count().label("n"),
            func.max(Measurement.timestamp).label("ts"),
        )
        .group_by(Measurement.series_id)
        .subquery()
    )
    rows = session.execute(
        select(stats.c.sid, stats.c.n, stats.c.ts, Measurement.value).join(
            Measurement,
            and_(Measurement.series_id == stats.c.sid, Measurement.timestamp == stats.c.ts),
        )
    ).all()
    latest = {sid: (n, ts, v) for sid, n, ts, v in rows}
    out: dict[int, list[SeriesOut]] = {}
    for s in session.execute(select(Series).order_by(Series.metric, Series.peer)).scalars():
        n, ts, v = latest.get(s.id, (0, None, None))
        out.setdefault(s.resource_id, []).append(
            SeriesOut(
                metric=s.metric, peer=s.peer or None, samples=n, latest_timestamp=ts, latest_value=v
            )
        )
    return out


def _resource_out(r: Resource, series: dict[int, list[SeriesOut]]) -> ResourceOut:
    return ResourceOut(name=r.name, properties=r.properties or {}, series=series.get(r.id, []))


@router.get("/resources", response_model=list[ResourceOut])
def list_resources(
    session: Session = Depends(get_session), _role: str = Depends(require(*READ))
) -> list[ResourceOut]:
    series = _series_summaries(session)
    resources = session.execute(select(Resource).order_by(Resource.name)).scalars()
    return [_resource_out(r, series) for r in resources]


@router.get("/resources/{name}", response_model=ResourceOut)
def get_resource(
    name: str, session: Session = Depends(get_session), _role: str = Depends(require(*READ))
) -> ResourceOut:
    r = session.execute(select(Resource).where(Resource.name == name)).scalar_one_or_none()
    if r is None:
        raise HTTPException(404, f"unknown resource {name!r}")
    return _resource_out(r, _series_summaries(session))


@router.put("/resources/{name}", response_model=ResourceOut)
def put_resource(
    name: str,
    body: ResourcePut,
    session: Session = Depends(get_session),
    _role: str = Depends(require(*OPERATE)),
) -> ResourceOut:
    """Register a host or merge new properties into an existing one."""
    ensure_resources(session, [name])
    r = session.execute(select(Resource).where(Resource.name == name)).scalar_one()
    r.properties = {**(r.properties or {}), **body.properties.model_dump(exclude_none=True)}
    session.flush()
    return _resource_out(r, _series_summaries(session))
