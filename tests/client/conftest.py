"""A real PPE service for the client tests: the app on a SQLite store, served by uvicorn on a
free loopback port in a thread (so a test can wrap it, or start it late), and one token per
role.

FAKE RUN STORE: while ``POST/GET /api/v1/runs`` is not in the app (it is being built on
another branch), :func:`fake_runs_router` stands in for it, following docs/contracts; the
fixture adds it only when the real route is missing, so the same tests run against the real
run store once it is merged.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.models import ServedLog
from ppe.service.store.tokens import create_token

ROLES = ("sensor", "app", "operator", "admin")
Scope = MutableMapping[str, Any]
ASGI = Callable[[Scope, Any, Any], Awaitable[None]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ThreadServer:
    """uvicorn serving an ASGI app in a daemon thread; ``start()`` returns once it listens."""

    def __init__(self, app: ASGI, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout: float = 30.0) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(30)


def fake_runs_router(app: FastAPI) -> APIRouter:
    """FAKE of the run store's contract (see the module doc): validation of the values,
    idempotency by key (default: a hash of the content), schedule ids checked against the
    real served log, filters, newest first."""
    router = APIRouter(prefix="/api/v1")
    stored: list[dict[str, Any]] = []

    def problem(status: int, index: int | None, field: str, reason: str) -> JSONResponse:
        body = {"detail": [{"index": index, "field": field, "reason": reason}]}
        return JSONResponse(body, status_code=status)

    @router.post("/runs", status_code=201)
    async def post_runs(request: Request) -> Any:
        runs = (await request.json())["runs"]
        with app.state.services.sessions() as session:
            for i, run in enumerate(runs):
                values = run.get("values") or []
                if not values or any(not isinstance(v, int | float) or v < 0 for v in values):
                    return problem(422, i, "values", "values must be finite numbers >= 0")
                sid = run.get("schedule_id")
                if sid is not None and session.get(ServedLog, sid) is None:
                    return problem(422, i, "schedule_id", f"no schedule {sid}")
        ids, new = [], 0
        for run in runs:
            full = {
                "kernel": "total", "params": {}, "system": None, "metric": "time",
                "schedule_id": None, "status": "completed", "report": None, **run,
            }  # fmt: skip
            key = (
                full.get("key")
                or hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()
            )
            old = next((r for r in stored if r["key"] == key), None)
            if old is None:
                old = {**full, "key": key, "id": len(stored) + 1, "created_at": time.time()}
                stored.append(old)
                new += 1
            ids.append(old["id"])
        return {"stored": new, "duplicates": len(runs) - new, "ids": ids}

    @router.get("/runs")
    def list_runs(request: Request) -> Any:
        q = dict(request.query_params)
        limit = int(q.pop("limit", 100))
        out = [r for r in reversed(stored) if all(str(r.get(k)) == v for k, v in q.items())]
        return out[:limit]

    @router.get("/runs/{run_id}")
    def get_run(run_id: int) -> Any:
        for r in stored:
            if r["id"] == run_id:
                return r
        return problem(404, None, "path.run_id", f"no run {run_id}")

    return router


def has_route(app: FastAPI, path: str) -> bool:
    return any(getattr(r, "path", None) == path for r in app.routes)


def service_app(db_url: str, trace_dirs: tuple[str, ...] = ()) -> FastAPI:
    """The real app, with the FAKE run store only while the real one is missing."""
    app = create_app(Settings(database_url=db_url, trace_dirs=trace_dirs))
    if not has_route(app, "/api/v1/runs"):
        app.include_router(fake_runs_router(app))
    return app


def make_tokens(db_url: str) -> dict[str, str]:
    migrate(db_url)
    engine = make_engine(db_url)
    with session_scope(make_sessionmaker(engine)) as s:
        tokens = {r: create_token(s, r) for r in ROLES}
    engine.dispose()
    return tokens


@dataclass
class Service:
    url: str
    tokens: dict[str, str]
    app: FastAPI


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ppe.db'}"


@pytest.fixture
def servers() -> Iterator[list[ThreadServer]]:
    """Servers a test started; all stopped after it."""
    started: list[ThreadServer] = []
    yield started
    for s in started:
        s.stop()


@pytest.fixture
def service(db: str, servers: list[ThreadServer]) -> Service:
    tokens = make_tokens(db)
    app = service_app(db)
    server = ThreadServer(app).start()
    servers.append(server)
    return Service(server.url, tokens, app)


class Unavailable:
    """ASGI wrapper answering 503 (with ``Retry-After``) to the first ``count`` API requests,
    as a service behind a proxy does while it restarts; records when each request came."""

    def __init__(self, app: ASGI, count: int, retry_after: str | None = None) -> None:
        self.app, self.count, self.retry_after = app, count, retry_after
        self.status = 503
        self.arrivals: list[float] = []
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            self.arrivals.append(time.monotonic())
            if self.refused < self.count:
                self.refused += 1
                headers = [(b"content-type", b"application/json")]
                if self.retry_after is not None:
                    headers.append((b"retry-after", self.retry_after.encode()))
                await send(
                    {"type": "http.response.start", "status": self.status, "headers": headers}
                )
                await send({"type": "http.response.body", "body": b'{"detail": "restarting"}'})
                return
        await self.app(scope, receive, send)


@pytest.fixture
def flaky_service(db: str, servers: list[ThreadServer]) -> tuple[Service, Unavailable]:
    """The real service behind :class:`Unavailable` (two 503s, ``Retry-After: 1``)."""
    tokens = make_tokens(db)
    app = service_app(db)
    gate = Unavailable(app, count=2, retry_after="1")
    server = ThreadServer(gate).start()
    servers.append(server)
    return Service(server.url, tokens, app), gate


class DroppingServer:
    """A TCP server that reads a request and closes the connection without answering (a
    server dying mid-request); counts the connections it accepted."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.connections += 1
                conn.recv(65536)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def dropping_server() -> Iterator[DroppingServer]:
    s = DroppingServer()
    yield s
    s.close()
