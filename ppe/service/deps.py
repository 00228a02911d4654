"""FastAPI dependencies that hand the lifespan's objects to the routers."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from ppe.service.config import Settings
from ppe.service.metrics import Metrics


def get_session(request: Request) -> Iterator[Session]:
    """One transaction per request: committed when the handler returns, rolled back on error."""
    with request.app.state.sessions() as session, session.begin():
        yield session


def get_engine(request: Request) -> Engine:
    return request.app.state.engine  # type: ignore[no-any-return]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics  # type: ignore[no-any-return]
