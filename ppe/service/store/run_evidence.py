"""What reported runs tell about the service's promises and its hosts, read from the store.

Live accuracy reads runs next to the schedule each followed (the served log's makespan and the
iterations asked for); calibration reads a host's recent completed runs and its CPU samples
over each run's window. The figures themselves are computed by ``ppe.evaluation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from ppe.service.store.models import Measurement, Resource, Run, Series, ServedLog

#: The application whose reports calibrate ``benchmark`` (its model defines the unit).
CALIBRATING_APP = "sor"


@dataclass(frozen=True)
class LinkedRun:
    """A run and what the schedule it followed promised (the served JSON, as stored)."""

    id: int
    app: str
    strategy: str
    status: str
    created_at: float
    values: list[float]
    params: dict[str, Any]
    makespan: dict[str, Any] | None
    asked_iterations: Any


def linked_runs(
    session: Session,
    app: str | None,
    strategy: str | None,
    last: int,
    before: float | None = None,
    per_group: bool = True,
) -> list[LinkedRun]:
    """The newest ``last`` runs of every (application, strategy) linked to a served schedule,
    newest first; both filters optional. ``before``: only runs stored (reported) strictly
    before that time, so that what is served at a time rests on nothing reported later.
    One query: a window function ranks each group's runs (SQLite >= 3.25 and PostgreSQL
    alike). ``per_group`` False: the newest ``last`` of all that match, in one plain
    ``ORDER BY id DESC LIMIT`` that walks the ``(app, id)`` index and stops there; what
    answers read on every request (the window ranks every run of the application)."""
    strat = ServedLog.response["strategy"].as_string()
    columns = (
        Run.id,
        Run.app,
        strat.label("strategy"),
        Run.status,
        Run.created_at,
        Run.values,
        Run.params,
        ServedLog.response["makespan"].label("makespan"),
        ServedLog.request["iterations"].label("asked"),
    )
    if per_group:
        rank = func.row_number().over(partition_by=(Run.app, strat), order_by=Run.id.desc())
        inner = select(*columns, rank.label("rank"))
    else:
        inner = select(*columns)
    inner = inner.join(ServedLog, ServedLog.id == Run.schedule_id)
    if app is not None:
        inner = inner.where(Run.app == app)
    if strategy is not None:
        inner = inner.where(strat == strategy)
    if before is not None:
        inner = inner.where(Run.created_at < before)
    if per_group:
        ranked = inner.subquery()
        rows = session.execute(
            select(ranked)
            .where(ranked.c.rank <= last)
            .order_by(ranked.c.app, ranked.c.strategy, ranked.c.id.desc())
        ).all()
    else:
        rows = session.execute(inner.order_by(Run.id.desc()).limit(last)).all()
    return [
        LinkedRun(
            id=r.id,
            app=r.app,
            strategy=r.strategy or "",
            status=r.status,
            created_at=r.created_at,
            values=list(r.values),
            params=dict(r.params or {}),
            makespan=r.makespan if isinstance(r.makespan, dict) else None,
            asked_iterations=r.asked,
        )
        for r in rows
    ]


@dataclass(frozen=True)
class ReportedRun:
    """A completed run's parameters and report, as posted."""

    id: int
    params: dict[str, Any]
    report: dict[str, Any]
    #: the hosts in chain order, comma-joined (None when the run named none)
    system: str | None = None


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def runs_on_host(session: Session, host: str, last: int) -> list[ReportedRun]:
    """The newest ``last`` completed, reported runs of :data:`CALIBRATING_APP` whose system
    lists ``host`` (``h0,h1``: a comma-joined list of names), newest first."""
    name = _like_escaped(host)
    on_host = or_(
        Run.system == host,
        Run.system.like(f"{name},%", escape="\\"),
        Run.system.like(f"%,{name}", escape="\\"),
        Run.system.like(f"%,{name},%", escape="\\"),
    )
    rows = session.execute(
        select(Run.id, Run.params, Run.report, Run.system)
        .where(
            Run.app == CALIBRATING_APP,
            Run.status == "completed",
            Run.report.is_not(None),
            on_host,
        )
        .order_by(Run.id.desc())
        .limit(last)
    ).all()
    return [
        ReportedRun(r.id, dict(r.params or {}), r.report, r.system)
        for r in rows
        if isinstance(r.report, dict)
    ]


def cpu_samples(
    session: Session, host: str, start: float, end: float
) -> Sequence[tuple[float, float]]:
    """The host's cpu measurements stamped in ``[start, end]``, oldest first."""
    rows = session.execute(
        select(Measurement.timestamp, Measurement.value)
        .join(Series, Series.id == Measurement.series_id)
        .join(Resource, Resource.id == Series.resource_id)
        .where(
            Resource.name == host,
            Series.metric == "cpu",
            Measurement.timestamp >= start,
            Measurement.timestamp <= end,
        )
        .order_by(Measurement.timestamp)
    ).all()
    return [(float(t), float(v)) for t, v in rows]


#: Newest samples of a link series whose mean the calibration shows beside its estimate.
LINK_SAMPLES = 100


def link_mean(
    session: Session, a: str, b: str, metric: str, last: int = LINK_SAMPLES
) -> float | None:
    """The mean of the newest ``last`` samples of the link's ``metric`` (``bandwidth`` or
    ``latency``) as the sensors store it: the series of ``a`` with peer ``b``, else the one
    of ``b`` with peer ``a`` (a link measured one way serves both, as in planning); None
    when neither exists or holds samples."""
    for host, peer in ((a, b), (b, a)):
        newest = (
            select(Measurement.value)
            .join(Series, Series.id == Measurement.series_id)
            .join(Resource, Resource.id == Series.resource_id)
            .where(Resource.name == host, Series.metric == metric, Series.peer == peer)
            .order_by(Measurement.timestamp.desc())
            .limit(last)
            .subquery()
        )
        value = session.execute(select(func.avg(newest.c.value))).scalar_one_or_none()
        if value is not None:
            return float(value)
    return None
