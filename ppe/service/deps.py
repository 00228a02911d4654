"""FastAPI dependencies that hand the lifespan's objects to the routers, typed.

The app's lifespan builds one :class:`Services` per worker and keeps it on ``app.state``; the
dependencies below read its fields. Those look-ups are ``async def`` on purpose: FastAPI runs a
plain ``def`` dependency in the worker threadpool, and that hop costs far more than an attribute
read on the schedule route, which serves hundreds of requests a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from ppe.service.config import Settings
from ppe.service.forecasts import ForecastCache
from ppe.service.metrics import Metrics
from ppe.service.plan_memo import PlanMemo
from ppe.service.planning import IndexCache
from ppe.service.replay_jobs import ReplayRunner
from ppe.service.store.tokens import TokenCache


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


def services_of(request: Request) -> Services:
    """The worker's services, for code that has the request but is no dependency (auth helpers,
    exception handlers)."""
    services: Services = request.app.state.services
    return services


def get_session(request: Request) -> Iterator[Session]:
    """Committed when the handler returns, rolled back on error; a handler may `release` the
    connection midway (the session begins again by itself on its next statement)."""
    with services_of(request).sessions() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


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


SessionDep = Annotated[Session, Depends(get_session)]
EngineDep = Annotated[Engine, Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
ForecastCacheDep = Annotated[ForecastCache, Depends(get_forecast_cache)]
IndexCacheDep = Annotated[IndexCache, Depends(get_index_cache)]
PlanMemoDep = Annotated[PlanMemo, Depends(get_plan_memo)]
ReplayRunnerDep = Annotated[ReplayRunner, Depends(get_replay_runner)]
