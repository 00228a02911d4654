"""Retention: trim the served log, finished replay jobs and old measurements to the policy.

A pass is a sequence of short transactions of at most ``policy.batch_rows`` rows each, so a
large purge never holds a long lock and ingestion goes on between them. Every step is
idempotent and safe beside other writers, including another pass:

- rows are deleted by key ranges read just before, and ``series.samples`` is adjusted by the
  rows each DELETE actually removed (``samples - n`` in the database, as ingestion adds
  ``samples + n``), so two passes or a pass and an ingest never double count;
- downsampling deletes a range ``RETURNING`` its rows and writes the means of exactly those
  rows, so a measurement that lands in the range concurrently is either folded or left raw,
  never lost; a bucket that holds a single row is left as it is, so a second pass over
  downsampled data changes nothing;
- ``series.latest_*`` is recomputed only where the removed rows reached the newest sample, and
  only if no concurrent ingest has moved it past them.

Downsampled rows live in the same table, marked by nothing but their timestamps (the start of
their bucket). A measurement's age is counted back from its series' newest sample, capped at
now (see ``RetentionPolicy``); served-log and replay-job ages are wall-clock ages.

The service runs passes from a background thread in each worker (:class:`RetentionTask`); the
worker that holds the store's :class:`StoreLock` (a PostgreSQL advisory lock, or a lock file
beside a SQLite store) runs them all. That saves work; correctness does not depend on it.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    LargeBinary,
    Table,
    and_,
    cast,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from ppe.service.config import DAY_S, RetentionPolicy
from ppe.service.store.models import Measurement, ReplayJob, Series, ServedLog

log = logging.getLogger("ppe.retention")

#: PostgreSQL advisory-lock key of the retention pass (any constant 64-bit number works).
ADVISORY_KEY = zlib.crc32(b"ppe.retention")
#: Statuses of replay jobs that have ended; queued and running jobs are never touched.
FINISHED = ("done", "failed")
#: How often a worker re-reads every series' downsampled range in full, to fold measurements
#: that arrived late (older than the raw window) since it last looked.
FULL_SCAN_S = DAY_S

_measurements: Table = Measurement.__table__  # type: ignore[assignment]
_series: Table = Series.__table__  # type: ignore[assignment]
_served: Table = ServedLog.__table__  # type: ignore[assignment]
_replays: Table = ReplayJob.__table__  # type: ignore[assignment]
M = _measurements.c
S = _series.c


@dataclass
class RetentionReport:
    """Rows one pass removed (or, in a dry run, would remove)."""

    served_log: int = 0
    replay_jobs: int = 0
    measurements_deleted: int = 0  # by age or by the per-series row limit
    measurements_folded: int = 0  # raw rows replaced by their buckets' means (net)
    buckets: int = 0  # means written by downsampling
    dry_run: bool = False

    @property
    def total(self) -> int:
        return (
            self.served_log
            + self.replay_jobs
            + self.measurements_deleted
            + self.measurements_folded
        )

    def as_dict(self) -> dict[str, int | bool]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class RetentionState:
    """What one process remembers between passes: up to where each series is downsampled,
    so a steady-state pass reads only the bucket that has just aged (forgotten daily)."""

    downsampled: dict[int, float] = field(default_factory=dict)
    since: float = field(default_factory=time.monotonic)

    def expire(self) -> None:
        if time.monotonic() - self.since > FULL_SCAN_S:
            self.downsampled.clear()
            self.since = time.monotonic()


class _Stopped(Exception):
    """Raised between transactions when the caller asked the pass to end."""


@dataclass
class _Pass:
    engine: Engine
    policy: RetentionPolicy
    now: float
    dry_run: bool
    state: RetentionState
    stop: Callable[[], bool]
    report: RetentionReport

    def between(self) -> None:
        """Between two transactions: let other writers in, and end early when asked."""
        if self.stop():
            raise _Stopped
        if self.policy.pause_s > 0 and not self.dry_run:
            time.sleep(self.policy.pause_s)


def run_pass(
    engine: Engine,
    policy: RetentionPolicy,
    *,
    now: float | None = None,
    dry_run: bool = False,
    state: RetentionState | None = None,
    stop: Callable[[], bool] | None = None,
) -> RetentionReport:
    """Bring the store to the policy; returns what was removed. ``stop`` ends it early."""
    p = _Pass(
        engine,
        policy,
        time.time() if now is None else now,
        dry_run,
        state if state is not None else RetentionState(),
        stop or (lambda: False),
        RetentionReport(dry_run=dry_run),
    )
    p.state.expire()
    try:
        p.report.served_log = _served_log(p)
        p.report.replay_jobs = _replay_jobs(p)
        _measurements_pass(p)
    except _Stopped:
        pass
    return p.report


# -- served log and replay jobs: ordered by id, oldest first ---------------------------------


def _delete_by_id(p: _Pass, table: Table, cond: ColumnElement[bool], batch: int) -> int:
    """Delete the rows matching ``cond`` in id order, ``batch`` per transaction."""
    if p.dry_run:
        with p.engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(cond)).scalar_one())
    removed = 0
    ids = select(table.c.id).where(cond).order_by(table.c.id).limit(batch)
    while True:
        with p.engine.begin() as conn:
            n = conn.execute(delete(table).where(table.c.id.in_(ids))).rowcount
        removed += n
        if n < batch:
            return removed
        p.between()


def _nth_newest_id(conn: Connection, table: Table, n: int, *conds: Any) -> int | None:
    """Id of the newest row that is beyond the newest ``n`` (None when there are at most n)."""
    row = conn.execute(
        select(table.c.id).where(*conds).order_by(table.c.id.desc()).limit(1).offset(n)
    ).first()
    return None if row is None else int(row[0])


def _served_row_limit(conn: Connection, policy: RetentionPolicy) -> int:
    """The row limit, tightened by the byte limit through the newest rows' mean stored size
    (PostgreSQL: bytes on disk, compressed; SQLite: bytes of the JSON text)."""
    limit = policy.served_log_max_rows or 0
    if policy.served_log_max_mb <= 0:
        return limit
    if conn.dialect.name == "postgresql":
        size = func.pg_column_size(_served.c.request) + func.pg_column_size(_served.c.response)
    else:
        size = func.length(cast(_served.c.request, LargeBinary)) + func.length(
            cast(_served.c.response, LargeBinary)
        )
    newest = select(size.label("b")).order_by(_served.c.id.desc()).limit(200).subquery()
    mean = conn.execute(select(func.avg(newest.c.b))).scalar()
    if not mean:
        return limit
    by_bytes = max(1, int(policy.served_log_max_mb * 1e6 / float(mean)))
    return min(limit, by_bytes) if limit else by_bytes


def _served_log(p: _Pass) -> int:
    conds = []
    if p.policy.served_log_days > 0:
        conds.append(_served.c.created_at < p.now - p.policy.served_log_days * DAY_S)
    with p.engine.connect() as conn:
        limit = _served_row_limit(conn, p.policy)
        boundary = _nth_newest_id(conn, _served, limit) if limit else None
    if boundary is not None:
        conds.append(_served.c.id <= boundary)
    if not conds:
        return 0
    return _delete_by_id(p, _served, or_(*conds), max(1, p.policy.batch_rows // 10))


def _replay_jobs(p: _Pass) -> int:
    finished = _replays.c.status.in_(FINISHED)
    conds = []
    if p.policy.replay_days > 0:
        ended = func.coalesce(_replays.c.finished_at, _replays.c.created_at)
        conds.append(ended < p.now - p.policy.replay_days * DAY_S)
    if p.policy.replay_max_jobs > 0:
        with p.engine.connect() as conn:
            boundary = _nth_newest_id(conn, _replays, p.policy.replay_max_jobs, finished)
        if boundary is not None:
            conds.append(_replays.c.id <= boundary)
    if not conds:
        return 0
    return _delete_by_id(
        p, _replays, and_(finished, or_(*conds)), max(1, p.policy.batch_rows // 10)
    )


# -- measurements: per series, along the (series_id, timestamp) key ---------------------------


@dataclass(frozen=True)
class _SeriesInfo:
    id: int
    latest: float
    oldest: float


def _series_infos(engine: Engine) -> list[_SeriesInfo]:
    """Each series with rows: its newest and oldest timestamps (one index seek each)."""
    oldest = (
        select(func.min(M.timestamp))
        .where(M.series_id == S.id)
        .correlate(_series)
        .scalar_subquery()
    )
    with engine.connect() as conn:
        rows = conn.execute(select(S.id, S.latest_timestamp, oldest).order_by(S.id)).all()
    return [
        _SeriesInfo(int(sid), float(latest), float(old))
        for sid, latest, old in rows
        if latest is not None and old is not None
    ]


def _measurements_pass(p: _Pass) -> None:
    policy = p.policy
    bucket = policy.downsample_s
    for info in _series_infos(p.engine):
        ref = min(info.latest, p.now)
        delete_before = -math.inf
        if policy.measurement_days > 0:
            delete_before = ref - policy.measurement_days * DAY_S
        fold_before = -math.inf
        if policy.raw_days > 0:
            raw_from = ref - policy.raw_days * DAY_S
            if bucket > 0:
                fold_before = math.floor(raw_from / bucket) * bucket  # whole buckets only
            else:
                delete_before = max(delete_before, raw_from)
        if info.oldest < delete_before:
            _delete_older(p, info.id, delete_before)
        if info.oldest < fold_before:
            # Whole buckets above the age limit: a mean is stamped at its bucket's start, and
            # must not be older than the rows it stands for are allowed to be.
            keep_from = (
                math.ceil(delete_before / bucket) * bucket
                if delete_before > -math.inf
                else -math.inf
            )
            _downsample(p, info, max(info.oldest, keep_from), fold_before)
        if policy.series_max_rows > 0:
            _cap_rows(p, info.id, policy.series_max_rows)


def _insert(conn: Connection, table: Table) -> Any:
    """Dialect-specific INSERT so that ON CONFLICT DO NOTHING is available."""
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)


def _after_removal(conn: Connection, sid: int, removed: int, newest_removed: float) -> None:
    """Keep the series summary true: ``samples`` less what went, and ``latest_*`` recomputed
    when the removed rows reached the newest sample (unless an ingest has moved it since)."""
    if removed:
        conn.execute(update(_series).where(S.id == sid).values(samples=S.samples - removed))
    newest = select(M.timestamp, M.value).where(M.series_id == sid).order_by(M.timestamp.desc())
    conn.execute(
        update(_series)
        .where(S.id == sid, S.latest_timestamp <= newest_removed)
        .values(
            latest_timestamp=newest.with_only_columns(M.timestamp).limit(1).scalar_subquery(),
            latest_value=newest.with_only_columns(M.value).limit(1).scalar_subquery(),
        )
    )


def _delete_older(p: _Pass, sid: int, before: float) -> None:
    """Delete the series' rows older than ``before``, oldest first, a batch per transaction."""
    in_range = and_(M.series_id == sid, M.timestamp < before)
    if p.dry_run:
        with p.engine.connect() as conn:
            n = conn.execute(select(func.count()).where(in_range)).scalar_one()
        p.report.measurements_deleted += int(n)
        return
    _delete_oldest(p, sid, in_range)


def _delete_oldest(p: _Pass, sid: int, cond: ColumnElement[bool]) -> None:
    batch = p.policy.batch_rows
    while True:
        with p.engine.connect() as conn:  # the batch-th oldest row: delete up to it
            row = conn.execute(
                select(M.timestamp).where(cond).order_by(M.timestamp).limit(1).offset(batch - 1)
            ).first()
        upto = cond if row is None else and_(cond, M.timestamp <= row[0])
        with p.engine.begin() as conn:
            gone = conn.execute(delete(_measurements).where(upto).returning(M.timestamp)).all()
            if gone:
                _after_removal(conn, sid, len(gone), max(t for (t,) in gone))
        p.report.measurements_deleted += len(gone)
        if row is None:
            return
        p.between()


def _cap_rows(p: _Pass, sid: int, keep: int) -> None:
    """Delete all but the series' newest ``keep`` rows."""
    with p.engine.connect() as conn:
        row = conn.execute(
            select(M.timestamp)
            .where(M.series_id == sid)
            .order_by(M.timestamp.desc())
            .limit(1)
            .offset(keep)
        ).first()
    if row is None:
        return
    cond = and_(M.series_id == sid, M.timestamp <= row[0])
    if p.dry_run:
        with p.engine.connect() as conn:
            p.report.measurements_deleted += int(
                conn.execute(select(func.count()).where(cond)).scalar_one()
            )
        return
    _delete_oldest(p, sid, cond)


def bucket_of(ts: float, width: float) -> int:
    """The bucket a timestamp falls in: [k * width, (k + 1) * width), exactly as SQL's range
    comparisons see it (floating-point division may round up across the boundary)."""
    k = math.floor(ts / width)
    return k - 1 if ts < k * width else k


def _downsample(p: _Pass, info: _SeriesInfo, lo: float, hi: float) -> None:
    """Fold the series' raw rows in [lo, hi) into one mean per bucket of ``downsample_s``,
    a chunk of about ``batch_rows`` rows per transaction."""
    width = p.policy.downsample_s
    batch = p.policy.batch_rows
    lo = max(lo, p.state.downsampled.get(info.id, -math.inf))
    while lo < hi:
        with p.engine.connect() as conn:
            ts = conn.scalars(
                select(M.timestamp)
                .where(M.series_id == info.id, M.timestamp >= lo, M.timestamp < hi)
                .order_by(M.timestamp)
                .limit(batch)
            ).all()
        if not ts:
            break
        keys = [bucket_of(t, width) for t in ts]
        end = hi
        if len(ts) == batch:  # the last bucket may go on past this chunk: leave it for the next
            last = keys[-1]
            end = last * width if keys[0] != last else (last + 1) * width
            if keys[0] != last:
                keys = [k for k in keys if k != last]
        multi = [k for k, n in _runs(keys) if n > 1]
        if multi:
            _fold(p, info.id, multi[0] * width, min(end, hi), width)
        lo = end
        p.between()
    if not p.dry_run:
        p.state.downsampled[info.id] = max(hi, p.state.downsampled.get(info.id, -math.inf))


def _runs(keys: list[int]) -> Iterator[tuple[int, int]]:
    """(key, length) of each run of equal keys in a sorted list."""
    i = 0
    while i < len(keys):
        j = i
        while j < len(keys) and keys[j] == keys[i]:
            j += 1
        yield keys[i], j - i
        i = j


def _fold(p: _Pass, sid: int, lo: float, hi: float, width: float) -> None:
    """Replace the rows in [lo, hi) by their buckets' means; single-row buckets stay as they
    are. The means are of exactly the rows the DELETE removed."""
    in_range = and_(M.series_id == sid, M.timestamp >= lo, M.timestamp < hi)
    if p.dry_run:
        with p.engine.connect() as conn:
            rows = conn.execute(select(M.timestamp, M.value).where(in_range)).all()
        means = _bucket_means(rows, width)
        p.report.measurements_folded += len(rows) - len(means)
        p.report.buckets += sum(1 for _, _, n in means if n > 1)
        return
    with p.engine.begin() as conn:
        rows = conn.execute(
            delete(_measurements).where(in_range).returning(M.timestamp, M.value)
        ).all()
        if not rows:
            return
        means = _bucket_means(rows, width)
        written = conn.execute(
            _insert(conn, _measurements)
            .on_conflict_do_nothing(index_elements=["series_id", "timestamp"])
            .returning(M.timestamp),
            [{"series_id": sid, "timestamp": t, "value": v} for t, v, _ in means],
        ).all()
        _after_removal(conn, sid, len(rows) - len(written), max(t for t, _ in rows))
    p.report.measurements_folded += len(rows) - len(written)
    p.report.buckets += sum(1 for _, _, n in means if n > 1)


def _bucket_means(rows: Any, width: float) -> list[tuple[float, float, int]]:
    """(timestamp, value, rows) per bucket: a lone row as it is, else the bucket's start and
    the mean of its values."""
    groups: dict[int, list[tuple[float, float]]] = {}
    for t, v in rows:
        groups.setdefault(bucket_of(float(t), width), []).append((float(t), float(v)))
    out = []
    for k, members in sorted(groups.items()):
        if len(members) == 1:
            out.append((*members[0], 1))
        else:
            out.append((k * width, math.fsum(v for _, v in members) / len(members), len(members)))
    return out


# -- one retention runner per store ------------------------------------------------------------


class StoreLock:
    """The store's retention lock, taken without waiting and held until released or until the
    process dies: the worker that holds it runs every pass, the others skip their rounds.

    PostgreSQL: a session advisory lock on a connection kept out of the pool (the server drops
    it with the connection). SQLite: ``flock`` on ``<db>.retention.lock`` (the kernel drops it
    with the process). In-memory SQLite has a single process: always granted.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn: Connection | None = None
        self._file: Any = None

    def acquire(self) -> bool:
        if self.engine.dialect.name == "postgresql":
            return self._acquire_pg()
        path = self.engine.url.database
        if self.engine.dialect.name != "sqlite" or not path or path == ":memory:":
            return True
        if self._file is not None:
            return True
        import fcntl

        fh = open(f"{path}.retention.lock", "a+b")  # held across calls, closed by release()
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        self._file = fh
        return True

    def _acquire_pg(self) -> bool:
        if self._conn is not None:  # held: still, if its connection is alive
            try:
                self._conn.execute(select(1))
                self._conn.commit()
                return True
            except Exception:  # noqa: BLE001 - a dead connection has lost the lock
                self._drop()
        conn = self.engine.connect()
        try:
            got = bool(conn.execute(select(func.pg_try_advisory_lock(ADVISORY_KEY))).scalar())
            conn.commit()
        except BaseException:
            conn.close()
            raise
        if got:
            self._conn = conn
        else:
            conn.close()
        return got

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.invalidate()  # never pool a connection that may hold the lock
            self._conn.close()
            self._conn = None

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute(select(func.pg_advisory_unlock_all()))
                self._conn.commit()
                self._conn.close()
                self._conn = None
            except Exception:  # noqa: BLE001
                self._drop()
        if self._file is not None:
            self._file.close()  # closing the descriptor releases the flock
            self._file = None


@contextmanager
def exclusive(engine: Engine) -> Iterator[bool]:
    """Whether this caller got the store's retention lock, held for the ``with`` block."""
    lock = StoreLock(engine)
    try:
        yield lock.acquire()
    finally:
        lock.release()


class RetentionTask:
    """The service's periodic pass: a daemon thread in every worker, the first pass one
    interval after start-up. The worker whose thread first takes the :class:`StoreLock` keeps
    it and runs every pass; the others try again each round, so one of them takes over within
    an interval if that worker dies."""

    def __init__(self, engine: Engine, policy: RetentionPolicy) -> None:
        self.engine = engine
        self.policy = policy
        self.state = RetentionState()
        self.lock = StoreLock(engine)
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="retention", daemon=True)

    def start(self) -> RetentionTask:
        if self.policy.interval_s > 0:
            for warning in self.policy.warnings():
                log.warning("retention: %s", warning)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.lock.release()

    def _loop(self) -> None:
        delay = self.policy.interval_s * random.uniform(1.0, 1.2)
        while not self._stop.wait(delay):
            delay = self.policy.interval_s
            try:
                self.run_once()
            except Exception:  # noqa: BLE001 - a failed pass is retried next round
                log.exception("retention pass failed")

    def run_once(self) -> RetentionReport | None:
        """One pass if this worker holds the store's lock (None when another one does)."""
        if not self.lock.acquire():
            return None
        report = run_pass(self.engine, self.policy, state=self.state, stop=self._stop.is_set)
        self.passes += 1
        if report.total:
            log.info("retention: %s", report.as_dict())
        return report
