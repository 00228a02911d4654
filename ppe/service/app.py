"""The FastAPI application: routers, lifespan-owned state, error shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ppe import __version__
from ppe.service.accuracy import LiveCollector
from ppe.service.api import (
    accuracy,
    empirical,
    forecasts,
    groups,
    health,
    measurements,
    models,
    phase_signatures,
    pmac,
    predictions,
    replays,
    resources,
    runs,
    schedules,
    templates,
    tokens,
    whatif,
)
from ppe.service.config import Settings
from ppe.service.dashboard import docs, host_data, models_data, signatures_data, whatif_data
from ppe.service.dashboard import routes as dashboard
from ppe.service.deps import Services, services_of
from ppe.service.forecasts import ForecastCache
from ppe.service.malloc import ARENAS, Trimmer, limit_arenas
from ppe.service.metrics import Metrics, MetricsMiddleware
from ppe.service.plan_memo import PlanMemo
from ppe.service.planning import IndexCache
from ppe.service.replay_jobs import ReplayRunner, fail_interrupted
from ppe.service.store.db import make_engine, make_sessionmaker, migrate
from ppe.service.store.retention import RetentionTask
from ppe.service.store.tokens import TokenCache
from ppe.service.whatif import WhatIfRunner
from ppe.service.whatif import fail_interrupted as fail_interrupted_whatifs

API_PREFIX = "/api/v1"


def _problems_from_validation(exc: RequestValidationError) -> list[dict[str, Any]]:
    """Turn pydantic's error list into the documented shape: which item, which field, why."""
    problems = []
    for err in exc.errors():
        loc = [p for p in err.get("loc", ()) if p != "body"]
        index = next((p for p in loc if isinstance(p, int)), None)
        field = ".".join(str(p) for p in loc if not isinstance(p, int)) or None
        problems.append({"index": index, "field": field, "reason": err.get("msg", "invalid")})
    return problems


async def _validation_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    if request.url.path.endswith("/measurements"):
        services_of(request).metrics.rejected_batches.labels("schema").inc()
    return JSONResponse({"detail": _problems_from_validation(exc)}, status_code=422)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    metrics = Metrics()  # before the lifespan: the middleware counts from the first request

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        limit_arenas(ARENAS)  # before the first request thread: see ppe.service.malloc
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.request_threads
        if settings.migrate_on_start:
            migrate(settings.database_url)
        engine = make_engine(settings.database_url)
        sessions = make_sessionmaker(engine)
        forecasts = ForecastCache(
            engine,
            history_limit=settings.history_limit,
            window_s=settings.retention.raw_window_s(),  # never mix in downsampled rows
            max_series=settings.forecast_series,
        )
        if settings.migrate_on_start:  # single process: nobody else is running jobs
            fail_interrupted(sessions)
            fail_interrupted_whatifs(sessions)
        services = Services(
            settings=settings,
            metrics=metrics,
            engine=engine,
            sessions=sessions,
            tokens=TokenCache(),
            forecasts=forecasts,
            index=IndexCache(calibration_min_runs=settings.calibration_min_runs),
            plan_memo=PlanMemo(),
            replays=ReplayRunner(sessions),
            whatifs=WhatIfRunner(sessions),
            planning=CapacityLimiter(max(1, settings.planning_threads)),
        )
        app.state.services = services
        metrics.watch(LiveCollector(sessions))
        # Every worker runs one; a store lock lets only one of them work each round.
        retention = RetentionTask(engine, settings.retention).start()
        app.state.retention = retention
        trimmer = Trimmer().start()
        yield
        trimmer.stop()
        retention.stop()
        services.replays.shutdown()
        services.whatifs.shutdown()
        engine.dispose()

    app = FastAPI(
        title="PPE",
        version=__version__,
        description="Stochastic grid scheduling: forecasts, interval predictions, schedules.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's own pages load from a CDN: ours are served from here
        redoc_url=None,
    )
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_exception_handler(RequestValidationError, _validation_handler)

    api = APIRouter(prefix=API_PREFIX)
    for module in (
        measurements,
        resources,
        forecasts,
        models,
        predictions,
        schedules,
        replays,
        tokens,
        runs,
        empirical,
        templates,
        groups,
        phase_signatures,  # before pmac: /signatures/{name} would take /signatures/phases
        pmac,
        accuracy,
        whatif,
    ):
        api.include_router(module.router)
    app.include_router(health.router)
    app.include_router(api)
    app.include_router(dashboard.router)
    app.include_router(models_data.router)
    app.include_router(whatif_data.router)
    app.include_router(host_data.router)
    app.include_router(signatures_data.router)
    app.include_router(docs.router)
    app.mount(dashboard.STATIC_PATH, dashboard.static_files(), name="dashboard-static")
    app.mount(docs.ASSETS_PATH, docs.asset_files(), name="docs-assets")
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers, which get their settings through the environment."""
    return create_app(Settings.from_env())
