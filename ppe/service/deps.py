"""FastAPI dependencies that hand the lifespan's objects to the routers."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ppe.service.config import Settings
from ppe.service.metrics import Metrics


def get_session(request: Request) -> Iterator[Session]:
    """Committed when the handler returns, rolled back on error; a handler may `release` the
    connection midway (the session begins again by itself on its next statement)."""
    with request.app.state.sessions() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def release(session: Session) -> None:
    """End the read transaction so the connection returns to the pool before the forecast cache
    reads the store on its own: a request never holds two pooled connections at once, which
    would deadlock a pool that every worker thread has taken one from."""
    session.commit()


def get_engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def get_metrics(request: Request) -> Metrics:  # async: no worker-thread hop for a lookup
    return request.app.state.metrics  # type: ignore[no-any-return]
