"""Retention: the store is trimmed to its policy in bounded batches, summaries stay true,
downsampling keeps each bucket's mean, and nothing inside the windows is ever removed."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, LargeBinary, cast, func, insert, select, update

from ppe.cli import main as cli_main
from ppe.service.app import create_app
from ppe.service.config import DAY_S, RetentionPolicy, Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.measurements import Row, find_series, insert_batch
from ppe.service.store.models import Measurement, ReplayJob, Series, ServedLog
from ppe.service.store.retention import (
    RetentionState,
    RetentionTask,
    bucket_of,
    exclusive,
    run_pass,
)

T0 = 1_700_000_000.0  # 2023: far in the past, as historical data loaded into the service is
NOW = T0 + 400 * DAY_S
#: Everything off; each test switches on what it checks. No pause between transactions.
OFF = RetentionPolicy(
    interval_s=0,
    served_log_days=0,
    served_log_max_rows=0,
    replay_days=0,
    replay_max_jobs=0,
    raw_days=0,
    downsample_s=0,
    measurement_days=0,
    pause_s=0,
)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    migrate(db_url)
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


def add_served(engine: Engine, created: list[float], payload: str = "x") -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(ServedLog),
            [
                {"kind": "schedule", "created_at": c, "request": {"p": payload}, "response": {}}
                for c in created
            ],
        )


def served_ids(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.scalars(select(ServedLog.id).order_by(ServedLog.id)))


def post(engine: Engine, rows: list[Row]) -> None:
    with session_scope(make_sessionmaker(engine)) as s:
        insert_batch(s, rows)


def series_rows(engine: Engine, resource: str, metric: str = "cpu") -> list[tuple[float, float]]:
    with session_scope(make_sessionmaker(engine)) as s:
        sid = find_series(s, resource, metric)
        return [
            (float(t), float(v))
            for t, v in s.execute(
                select(Measurement.timestamp, Measurement.value)
                .where(Measurement.series_id == sid)
                .order_by(Measurement.timestamp)
            )
        ]


def assert_summaries_true(engine: Engine) -> None:
    """samples, latest_timestamp and latest_value are what a recount gives."""
    with engine.connect() as conn:
        for sid, samples, latest_ts, latest_v in conn.execute(
            select(Series.id, Series.samples, Series.latest_timestamp, Series.latest_value)
        ):
            rows = conn.execute(
                select(Measurement.timestamp, Measurement.value)
                .where(Measurement.series_id == sid)
                .order_by(Measurement.timestamp.desc())
            ).all()
            assert samples == len(rows), sid
            if rows:
                assert (latest_ts, latest_v) == (rows[0][0], rows[0][1]), sid
            else:
                assert latest_ts is None, sid


def expected_rows(
    rows: list[Row], keep_from: float, fold_before: float, width: float
) -> list[tuple[float, float]]:
    """What downsampling should leave: rows before ``keep_from`` gone, the edge bucket it cuts
    raw, whole buckets before ``fold_before`` one mean each (a lone row as it is), then raw."""
    first = math.ceil(keep_from / width) * width if keep_from > -math.inf else -math.inf
    buckets: dict[int, list[Row]] = {}
    out = []
    for r in rows:
        if r.timestamp < keep_from:
            continue
        if first <= r.timestamp < fold_before:
            buckets.setdefault(bucket_of(r.timestamp, width), []).append(r)
        else:
            out.append((r.timestamp, r.value))
    for k, members in buckets.items():
        if len(members) == 1:
            out.append((members[0].timestamp, members[0].value))
        else:
            out.append((k * width, math.fsum(r.value for r in members) / len(members)))
    return sorted(out)


def trace(resource: str, start: float, step: float, n: int) -> list[Row]:
    """A deterministic wavy cpu series, so bucket means are not all equal."""
    return [
        Row(resource, "cpu", "", start + i * step, 0.5 + 0.4 * math.sin(i * 0.37)) for i in range(n)
    ]


# -- served log ----------------------------------------------------------------------------


def test_served_log_is_brought_to_its_row_limit_and_stays_there(engine: Engine) -> None:
    add_served(engine, [NOW - 10] * 250)
    policy = replace(OFF, served_log_max_rows=100, batch_rows=30)  # 3 rows per transaction
    report = run_pass(engine, policy, now=NOW)
    assert report.served_log == 150
    ids = served_ids(engine)
    assert len(ids) == 100 and ids == list(range(151, 251))  # the newest ones
    for _ in range(3):  # continued inserts and passes
        add_served(engine, [NOW] * 40)
        run_pass(engine, policy, now=NOW)
        ids = served_ids(engine)
        assert len(ids) == 100 and ids[-1] - ids[0] == 99


def test_served_log_age_limit_deletes_exactly_what_is_older(engine: Engine) -> None:
    cutoff = NOW - 2 * DAY_S
    created = [cutoff - 3600, cutoff - 1, cutoff, cutoff + 1, NOW - 60]
    add_served(engine, created)
    report = run_pass(engine, replace(OFF, served_log_days=2), now=NOW)
    assert report.served_log == 2
    with engine.connect() as conn:
        kept = sorted(conn.scalars(select(ServedLog.created_at)))
    assert kept == [cutoff, cutoff + 1, NOW - 60]


def test_served_log_byte_limit(engine: Engine) -> None:
    import secrets

    add_served(engine, [NOW] * 60)
    with engine.begin() as conn:  # incompressible, equal-sized payloads
        for i in served_ids(engine):
            conn.execute(
                update(ServedLog)
                .where(ServedLog.id == i)
                .values(request={"p": secrets.token_hex(2000)})
            )
    size = (
        func.pg_column_size(ServedLog.request) + func.pg_column_size(ServedLog.response)
        if engine.dialect.name == "postgresql"
        else func.length(cast(ServedLog.request, LargeBinary))
        + func.length(cast(ServedLog.response, LargeBinary))
    )
    with engine.connect() as conn:
        row_bytes = conn.execute(select(func.max(size))).scalar_one()
    budget_mb = 20.5 * row_bytes / 1e6
    run_pass(engine, replace(OFF, served_log_max_mb=budget_mb), now=NOW)
    assert len(served_ids(engine)) == 20


# -- replay jobs ---------------------------------------------------------------------------


def test_replay_jobs_finished_and_old_go_running_and_recent_stay(engine: Engine) -> None:
    old, recent = NOW - 40 * DAY_S, NOW - DAY_S
    jobs = [
        ("done", old, old),
        ("failed", old, None),  # interrupted by a restart: no finished_at
        ("running", old, None),
        ("queued", old, None),
        ("done", recent, recent),
        ("failed", recent, recent),
        ("done", recent, recent),
    ]
    with engine.begin() as conn:
        conn.execute(
            insert(ReplayJob),
            [
                {"status": st, "created_at": c, "finished_at": f, "report": {"x": 1}}
                for st, c, f in jobs
            ],
        )
    assert run_pass(engine, replace(OFF, replay_days=30), now=NOW).replay_jobs == 2
    assert run_pass(engine, replace(OFF, replay_max_jobs=2), now=NOW).replay_jobs == 1
    with engine.connect() as conn:
        left = conn.execute(select(ReplayJob.id, ReplayJob.status).order_by(ReplayJob.id)).all()
    assert [tuple(r) for r in left] == [(3, "running"), (4, "queued"), (6, "failed"), (7, "done")]


# -- measurements --------------------------------------------------------------------------


def test_measurement_age_limit_deletes_exactly_what_is_older(engine: Engine) -> None:
    """Age counts back from each series' newest sample: a silent host keeps its last days."""
    live = trace("live", NOW - 10 * DAY_S, 3600, 241)  # up to NOW
    silent = trace("silent", T0, 3600, 241)  # ended 390 days ago
    post(engine, live + silent)
    policy = replace(OFF, raw_days=3, batch_rows=7)  # downsampling off: older raw rows go
    report = run_pass(engine, policy, now=NOW)
    for rows, name in ((live, "live"), (silent, "silent")):
        cutoff = rows[-1].timestamp - 3 * DAY_S
        kept = [(r.timestamp, r.value) for r in rows if r.timestamp >= cutoff]
        assert series_rows(engine, name) == kept
    assert report.measurements_deleted == 2 * (241 - 73)
    assert_summaries_true(engine)


def test_downsampling_keeps_bucket_means_and_summaries(engine: Engine) -> None:
    step = 70.0  # not a divisor of the hour: buckets of 51 or 52 rows
    rows = trace("h", T0 + 1234.5, step, 4 * 1234)  # about 4 days
    lone = Row("h", "cpu", "", T0 - 5 * 3600 + 17.0, 0.25)  # a bucket with a single row
    post(engine, [lone, *rows])
    policy = replace(OFF, raw_days=1, downsample_s=3600, batch_rows=100)
    report = run_pass(engine, policy, now=NOW)

    fold_before = math.floor((rows[-1].timestamp - DAY_S) / 3600) * 3600
    expected = expected_rows([lone, *rows], -math.inf, fold_before, 3600)
    got = series_rows(engine, "h")
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-12)
    folded = len(rows) + 1 - len(expected)
    means = len([t for t, _ in expected if t < fold_before]) - 1  # all but the lone row
    assert means == 72 and report.buckets == means and report.measurements_folded == folded
    assert_summaries_true(engine)
    # a second pass, with or without memory of the first, changes nothing
    assert run_pass(engine, policy, now=NOW).total == 0
    assert run_pass(engine, policy, now=NOW, state=RetentionState()).total == 0
    assert series_rows(engine, "h") == got


def test_downsampling_with_batches_smaller_than_a_bucket(engine: Engine) -> None:
    start = math.floor(T0 / 3600) * 3600
    rows = trace("h", start, 10.0, 3 * 8640)  # 3 days at 10 s: 360 rows per hour
    post(engine, rows)
    policy = replace(OFF, raw_days=1, downsample_s=3600, batch_rows=100)
    run_pass(engine, policy, now=NOW)
    got = series_rows(engine, "h")
    fold_before = math.floor((rows[-1].timestamp - DAY_S) / 3600) * 3600
    old = [r for r in rows if r.timestamp < fold_before]
    assert len(got) == len(old) // 360 + (len(rows) - len(old))
    assert math.fsum(v for t, v in got if t < fold_before) * 360 == pytest.approx(
        math.fsum(r.value for r in old)
    )
    assert_summaries_true(engine)


def test_downsampled_rows_are_deleted_past_the_measurement_limit(engine: Engine) -> None:
    rows = trace("h", T0, 600.0, 6 * 144)  # 6 days, 10 minutes apart
    post(engine, rows)
    policy = replace(OFF, raw_days=2, downsample_s=3600, measurement_days=4)
    run_pass(engine, policy, now=NOW)
    newest = rows[-1].timestamp
    fold_before = math.floor((newest - 2 * DAY_S) / 3600) * 3600
    got = series_rows(engine, "h")
    assert got[0][0] >= newest - 4 * DAY_S
    expected = expected_rows(rows, newest - 4 * DAY_S, fold_before, 3600)
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-12)
    assert_summaries_true(engine)
    assert run_pass(engine, policy, now=NOW).total == 0


def test_row_limit_per_series_and_continued_inserts(engine: Engine) -> None:
    post(engine, trace("a", T0, 60, 200) + trace("b", T0, 60, 30))
    policy = replace(OFF, series_max_rows=50, batch_rows=16)
    run_pass(engine, policy, now=NOW)
    assert len(series_rows(engine, "a")) == 50 and len(series_rows(engine, "b")) == 30
    for k in range(3):
        post(engine, trace("a", T0 + 60 * (200 + 20 * k), 60, 20))
        run_pass(engine, policy, now=NOW)
        got = series_rows(engine, "a")
        assert len(got) == 50 and got[-1][0] == T0 + 60 * (200 + 20 * k + 19)
    assert_summaries_true(engine)


def test_acknowledged_measurements_inside_the_window_survive_concurrent_passes(
    engine: Engine,
) -> None:
    """Ingestion and passes interleave; every row acknowledged inside the raw window at the
    end is still there, unchanged, and the summaries add up."""
    step = 300.0
    post(engine, trace("h", T0, step, 3 * 288) + trace("g", T0, step, 3 * 288))
    policy = replace(
        OFF, raw_days=1, downsample_s=3600, measurement_days=2, batch_rows=50, pause_s=0
    )
    acked: dict[float, float] = {}
    stop = threading.Event()
    errors: list[BaseException] = []

    def ingest() -> None:
        try:
            t = T0 + 3 * 288 * step
            for i in range(150):
                batch = [Row("h", "cpu", "", t + j * step, (i + j) % 10 / 10) for j in range(4)]
                batch += [Row("g", "cpu", "", t + j * step, 0.5) for j in range(4)]
                post(engine, batch)  # committed: acknowledged
                acked.update({r.timestamp: r.value for r in batch if r.resource == "h"})
                t += 4 * step
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            stop.set()

    def retain() -> None:
        state = RetentionState()
        try:
            while not stop.is_set():
                run_pass(engine, policy, state=state)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=ingest), threading.Thread(target=retain)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(300)
    assert not errors, errors
    run_pass(engine, policy)
    got = dict(series_rows(engine, "h"))
    newest = max(acked)
    inside = {t: v for t, v in acked.items() if t >= newest - DAY_S}
    assert inside and all(got.get(t) == v for t, v in inside.items())
    assert min(got) >= newest - 2 * DAY_S
    assert_summaries_true(engine)


def test_forecasts_read_raw_rows_only_after_downsampling(db_url: str) -> None:
    """A 30-minute sensor: past the raw window its hours become single means, more of them
    than raw rows in the forecast history; the forecast still sees a 30-minute spacing."""
    from ppe.service.store.tokens import create_token

    migrate(db_url)
    engine = make_engine(db_url)
    with session_scope(make_sessionmaker(engine)) as s:
        token = create_token(s, "app")
    post(engine, trace("h", T0, 1800.0, 120 * 48))  # 120 days
    policy = replace(RetentionPolicy(), interval_s=0, pause_s=0)
    run_pass(engine, policy)
    stored = series_rows(engine, "h")
    engine.dispose()
    window = stored[-1][0] - 30 * DAY_S
    raw = 30 * 48 + 1
    hourly = [t for t, _ in stored if t < window]
    assert len(stored) - len(hourly) == raw
    assert len(hourly) > raw and all(t % 3600 == 0 for t in hourly[:-1])  # [-1]: edge, raw
    app = create_app(Settings(database_url=db_url, retention=policy))
    with TestClient(app) as client:
        r = client.get("/api/v1/forecasts/h/cpu", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["horizon_s"] == 1800.0 and body["samples"] == raw


# -- running it ----------------------------------------------------------------------------


def test_dry_run_counts_and_changes_nothing(engine: Engine, db_url: str, capsys) -> None:  # type: ignore[no-untyped-def]
    add_served(engine, [time.time()] * 12)
    post(engine, trace("h", T0, 600.0, 6 * 144))
    args = ["retention", "run", "--db", db_url, "--set", "served_log_max_rows=5"]
    args += ["--set", "raw_days=2", "--set", "measurement_days=4", "--set", "pause_s=0"]
    assert cli_main([*args, "--dry-run"]) == 0
    assert '"served_log": 7' in capsys.readouterr().out
    assert len(served_ids(engine)) == 12 and len(series_rows(engine, "h")) == 6 * 144
    assert cli_main(args) == 0
    assert '"served_log": 7' in capsys.readouterr().out
    assert len(served_ids(engine)) == 5
    assert cli_main(["retention", "run", "--db", db_url, "--set", "nope=1"]) == 2
    assert cli_main(["serve", "--db", db_url, "--retain", "raw_days=-3"]) == 2


def test_one_worker_per_store_runs_retention(engine: Engine) -> None:
    """Two workers' tasks on one store: the first to take the lock runs every pass, the other
    skips until the first lets go."""
    policy = replace(OFF, served_log_max_rows=1)
    a, b = RetentionTask(engine, policy), RetentionTask(engine, policy)
    try:
        assert a.run_once() is not None
        assert b.run_once() is None and a.run_once() is not None
        with exclusive(engine) as mine:
            assert not mine
        a.stop()
        assert b.run_once() is not None
    finally:
        a.stop()
        b.stop()
    with exclusive(engine) as mine:
        assert mine


def test_the_service_runs_passes_in_the_background(db_url: str) -> None:
    migrate(db_url)
    engine = make_engine(db_url)
    add_served(engine, [NOW] * 20)
    policy = replace(OFF, interval_s=0.05, served_log_max_rows=3)
    app = create_app(Settings(database_url=db_url, retention=policy))
    with TestClient(app):
        task: RetentionTask = app.state.retention
        for _ in range(2000):
            if task.passes:
                break
            threading.Event().wait(0.01)
        assert task.passes >= 1
    assert not task._thread.is_alive()  # stopped with the app
    assert len(served_ids(engine)) == 3
    engine.dispose()


def test_policy_from_environment() -> None:
    env = {"PPE_RETAIN_SERVED_ROWS": "500", "PPE_DOWNSAMPLE_S": "0", "PPE_RETAIN_RAW_DAYS": "3"}
    policy = RetentionPolicy.from_env(env)
    assert (policy.served_log_max_rows, policy.downsample_s, policy.raw_days) == (500, 0.0, 3.0)
    assert policy.raw_window_s() is None and not policy.warnings()
    assert RetentionPolicy(raw_days=7).warnings()  # downsampled rows inside the look-back
    with pytest.raises(ValueError):
        RetentionPolicy.from_env({"PPE_RETAIN_SERVED_DAYS": "-1"})
