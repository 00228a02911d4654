"""A real PPE service for the client tests: the app on a SQLite store, served by uvicorn on a
free loopback port in a thread (so a test can wrap it, or start it late), and one token per
role.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
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


def service_app(db_url: str, trace_dirs: tuple[str, ...] = ()) -> FastAPI:
    return create_app(Settings(database_url=db_url, trace_dirs=trace_dirs))


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
