"""FastAPI dependencies that hand the lifespan's objects to the routers, typed.

The app's lifespan builds one :class:`Services` per worker and keeps it on ``app.state``; the
dependencies below read its fields. Those look-ups are ``async def`` on purpose: FastAPI runs a
plain ``def`` dependency in the worker threadpool, and that hop costs far more than an attribute
read on the schedule route, which serves hundreds of requests a second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import Depends, HTTPException, Request
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ppe.service.config import Settings
from ppe.service.forecasts import ForecastCache
from ppe.service.metrics import Metrics
from ppe.service.plan_memo import PlanMemo
from ppe.service.planning import IndexCache
from ppe.service.replay_jobs import ReplayRunner
from ppe.service.schemas import Problem
from ppe.service.store.tokens import TokenCache
from ppe.service.whatif import WhatIfRunner


@dataclass(frozen=True)
class Services:
    """What one worker shares between its requests; built in the app's lifespan."""

    settings: Settings
    metrics: Metrics
    engine: Engine
    sessions: sessionmaker[Session]
    tokens: TokenCache
    forecasts: ForecastCache
    index: IndexCache
    plan_memo: PlanMemo
    replays: ReplayRunner
    whatifs: WhatIfRunner
    #: threads that may plan at once (Settings.planning_threads); see :func:`planning_thread`
    planning: CapacityLimiter


def services_of(request: Request) -> Services:
    """The worker's services, for code that has the request but is no dependency (auth helpers,
    exception handlers)."""
    services: Services = request.app.state.services
    return services


#: What a client is told when its write lost a race (see :func:`write_race_is_conflict`).
LOST_RACE = (
    "conflict: another request stored the same key (e.g. a name) at the same time; "
    "nothing was stored, retry"
)


@contextmanager
def write_race_is_conflict(session: Session, reason: str = LOST_RACE) -> Iterator[None]:
    """Answer 409 when the writes inside lost a race on a unique key (a name another request
    took meanwhile) or, on SQLite, to another writer: rolled back, nothing of this request is
    stored, and the client is told so."""
    try:
        yield
    except (IntegrityError, OperationalError) as exc:
        if isinstance(exc, OperationalError) and not _lost_write_race(exc):
            raise
        session.rollback()
        raise HTTPException(409, [Problem(reason=reason).model_dump()]) from exc


def commit(session: Session) -> None:
    """Commit, or 409 when the write lost a race (:func:`write_race_is_conflict`)."""
    with write_race_is_conflict(session):
        session.commit()


def _lost_write_race(exc: OperationalError) -> bool:
    """SQLite refuses a transaction that read before another writer committed ("database is
    locked" at once, whatever the busy timeout): a lost race like a unique-key conflict."""
    return "database is locked" in str(exc.orig)


def get_session(request: Request) -> Iterator[Session]:
    """A session committed when the handler returns, *before* the answer is sent (the
    dependency is function-scoped, see SessionDep), so a write is acknowledged only once it is
    durable and a failed commit answers 409 or 500, never a success; rolled back on error. A
    handler may `release` the connection midway (the session begins again by itself on its next
    statement), or `commit` itself when it has work to do after the commit."""
    with services_of(request).sessions() as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        commit(session)


T = TypeVar("T")


async def planning_thread(request: Request, work: Callable[[], T]) -> T:
    """Run CPU-bound planning in a thread of its own pool, not the request pool.

    A plan holds its thread for tens of milliseconds of Python; run in the shared pool, a crowd
    of applications took every thread and sensors' batches queued behind them for seconds.
    Planning routes are ``async def`` and hand their work here; everything else (ingestion,
    reads, the session's commit) keeps the request pool.
    """
    return await anyio.to_thread.run_sync(work, limiter=services_of(request).planning)


async def get_engine(request: Request) -> Engine:
    return services_of(request).engine


async def get_settings(request: Request) -> Settings:
    return services_of(request).settings


async def get_metrics(request: Request) -> Metrics:
    return services_of(request).metrics


async def get_forecast_cache(request: Request) -> ForecastCache:
    return services_of(request).forecasts


async def get_index_cache(request: Request) -> IndexCache:
    return services_of(request).index


async def get_plan_memo(request: Request) -> PlanMemo:
    return services_of(request).plan_memo


async def get_replay_runner(request: Request) -> ReplayRunner:
    return services_of(request).replays


# scope="function": the teardown (commit) runs when the handler returns, before the response
# is sent; FastAPI's default ("request") runs it after the client already has its answer.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
ForecastCacheDep = Annotated[ForecastCache, Depends(get_forecast_cache)]
IndexCacheDep = Annotated[IndexCache, Depends(get_index_cache)]
PlanMemoDep = Annotated[PlanMemo, Depends(get_plan_memo)]
ReplayRunnerDep = Annotated[ReplayRunner, Depends(get_replay_runner)]
