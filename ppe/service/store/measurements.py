"""Writing measurement batches and reading series back."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Engine, Table, and_, bindparam, case, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from ppe.service.store.models import Measurement, Resource, Series

SeriesKey = tuple[str, str, str]  # (resource, metric, peer or "")
NEW_SERIES = "ppe.new_series"  # Session.info flag: this transaction registered new series


@dataclass(frozen=True)
class Row:
    resource: str
    metric: str
    peer: str
    timestamp: float
    value: float


def _insert(session: Session, table):  # type: ignore[no-untyped-def]
    """Dialect-specific INSERT so that ON CONFLICT DO NOTHING is available."""
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def ensure_resources(session: Session, names: Iterable[str]) -> dict[str, int]:
    names = sorted(set(names))
    if not names:
        return {}
    session.execute(
        _insert(session, Resource.__table__).on_conflict_do_nothing(index_elements=["name"]),
        [{"name": n} for n in names],  # properties and created_at: the columns' defaults
    )
    rows = session.execute(select(Resource.name, Resource.id).where(Resource.name.in_(names)))
    return {name: rid for name, rid in rows}


def ensure_series(session: Session, keys: Iterable[SeriesKey]) -> dict[SeriesKey, int]:
    """Register unknown resources and series (peers become resources too) and return ids."""
    keys = sorted(set(keys))
    names = {k[0] for k in keys} | {k[2] for k in keys if k[2]}
    ids = ensure_resources(session, names)
    created = session.execute(
        _insert(session, Series.__table__)
        .on_conflict_do_nothing(index_elements=["resource_id", "metric", "peer"])
        .returning(Series.__table__.c.id),
        [{"resource_id": ids[r], "metric": m, "peer": p} for r, m, p in keys],
    ).all()
    if created:  # callers that cache which series a host has look here (see NEW_SERIES)
        session.info[NEW_SERIES] = True
    by_id = {rid: name for name, rid in ids.items()}
    rows = session.execute(
        select(Series.id, Series.resource_id, Series.metric, Series.peer).where(
            Series.resource_id.in_(list(by_id))
        )
    )
    wanted = set(keys)
    out: dict[SeriesKey, int] = {}
    for sid, rid, metric, peer in rows:
        key = (by_id[rid], metric, peer)
        if key in wanted:
            out[key] = sid
    return out


def insert_batch(session: Session, rows: Sequence[Row]) -> int:
    """Write a batch in the caller's transaction; duplicates of stored rows are skipped.

    Returns how many rows were new.
    """
    series_ids = ensure_series(session, {(r.resource, r.metric, r.peer) for r in rows})
    values = [
        {
            "series_id": series_ids[(r.resource, r.metric, r.peer)],
            "timestamp": r.timestamp,
            "value": r.value,
        }
        for r in rows
    ]
    m = Measurement.__table__.c
    stmt = (
        _insert(session, Measurement.__table__)
        .on_conflict_do_nothing(index_elements=["series_id", "timestamp"])
        .returning(m.series_id, m.timestamp, m.value)
    )
    # RETURNING names exactly the new rows on both dialects (psycopg's rowcount is -1).
    new = session.execute(stmt, values).all()
    _update_summaries(session, new)
    return len(new)


def _update_summaries(session: Session, new: Sequence[Any]) -> None:
    """Add the new rows to their series' count and newest value, in the same transaction
    (``samples + n`` and the comparisons run in the database, so concurrent writers add up)."""
    per: dict[int, tuple[int, float, float]] = {}
    for sid, ts, value in new:
        n, newest, latest = per.get(sid, (0, -math.inf, math.nan))
        if ts > newest:
            newest, latest = ts, value
        per[sid] = (n + 1, newest, latest)
    if not per:
        return
    table = cast(Table, Series.__table__)
    s = table.c
    newer = or_(s.latest_timestamp.is_(None), bindparam("b_ts") >= s.latest_timestamp)
    session.execute(
        update(table)
        .where(s.id == bindparam("b_sid"))
        .values(
            samples=s.samples + bindparam("b_n"),
            latest_timestamp=case((newer, bindparam("b_ts")), else_=s.latest_timestamp),
            latest_value=case((newer, bindparam("b_v")), else_=s.latest_value),
        ),
        [{"b_sid": sid, "b_n": n, "b_ts": ts, "b_v": v} for sid, (n, ts, v) in per.items()],
    )


def resource_id(session: Session, host: str) -> int | None:
    """The id of the resource named ``host``, None when it was never registered."""
    return session.execute(select(Resource.id).where(Resource.name == host)).scalar_one_or_none()


def find_series(session: Session, resource: str, metric: str, peer: str = "") -> int | None:
    row = session.execute(
        select(Series.id)
        .join(Resource)
        .where(and_(Resource.name == resource, Series.metric == metric, Series.peer == peer))
    ).first()
    return row[0] if row else None


def read_series(
    engine: Engine,
    series_id: int,
    *,
    after: float | None = None,
    before: float | None = None,
    limit: int = 20_000,
) -> tuple[list[float], list[float]]:
    """The newest `limit` samples in (after, before), oldest first."""
    conds = [Measurement.series_id == series_id]
    if after is not None:
        conds.append(Measurement.timestamp > after)
    if before is not None:
        conds.append(Measurement.timestamp < before)
    stmt = (
        select(Measurement.timestamp, Measurement.value)
        .where(*conds)
        .order_by(Measurement.timestamp.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    rows = list(reversed(rows))
    return [r[0] for r in rows], [r[1] for r in rows]


def latest_timestamps(engine: Engine, series_ids: list[int]) -> dict[int, float]:
    """Newest timestamp per series (an index seek each, on the (series, timestamp) key)."""
    stmt = (
        select(Measurement.series_id, func.max(Measurement.timestamp))
        .where(Measurement.series_id.in_(series_ids))
        .group_by(Measurement.series_id)
    )
    with engine.connect() as conn:
        return {int(sid): float(ts) for sid, ts in conn.execute(stmt)}


def host_series_latest(engine: Engine, metric: str) -> dict[int, float]:
    """Every host series of ``metric`` (peer '') that holds samples, with its newest timestamp
    (kept by ingestion): the fleet a forecast may borrow from (forecaster.fleet)."""
    stmt = (
        select(Series.id, Series.latest_timestamp)
        .where(Series.metric == metric, Series.peer == "", Series.samples > 0)
        .order_by(Series.id)
    )
    with engine.connect() as conn:
        return {int(sid): float(ts or 0.0) for sid, ts in conn.execute(stmt)}


def read_many(
    engine: Engine, series_ids: Sequence[int], *, since: float, before: float | None = None
) -> dict[int, tuple[list[float], list[float]]]:
    """The samples of many series in [since, before), oldest first, in one query."""
    if not series_ids:
        return {}
    conds = [Measurement.series_id.in_(list(series_ids)), Measurement.timestamp >= since]
    if before is not None:
        conds.append(Measurement.timestamp < before)
    stmt = (
        select(Measurement.series_id, Measurement.timestamp, Measurement.value)
        .where(*conds)
        .order_by(Measurement.series_id, Measurement.timestamp)
    )
    out: dict[int, tuple[list[float], list[float]]] = {}
    with engine.connect() as conn:
        for sid, ts, v in conn.execute(stmt):
            ts_list, v_list = out.setdefault(int(sid), ([], []))
            ts_list.append(float(ts))
            v_list.append(float(v))
    return out


def window_versions(
    engine: Engine, series_ids: Sequence[int], *, since: float, before: float
) -> tuple[tuple[int, int, float], ...]:
    """(series, samples, newest timestamp) of each series within [since, before): what a
    reading of that window depends on, counted without reading it."""
    if not series_ids:
        return ()
    stmt = (
        select(Measurement.series_id, func.count(), func.max(Measurement.timestamp))
        .where(
            Measurement.series_id.in_(list(series_ids)),
            Measurement.timestamp >= since,
            Measurement.timestamp < before,
        )
        .group_by(Measurement.series_id)
        .order_by(Measurement.series_id)
    )
    with engine.connect() as conn:
        return tuple((int(sid), int(n), float(ts)) for sid, n, ts in conn.execute(stmt))
