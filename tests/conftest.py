"""Fixtures shared by the whole suite: store URLs (SQLite always, PostgreSQL when configured)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy

from ppe.service.store.db import make_engine, normalize_url
from ppe.traces import trace_files, trace_name

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces" / "bitbrains-rnd-2013-7"
SAMPLE_TRACES = ROOT / "examples" / "traces" / "bitbrains-sample"
TRACES_ENV = "PPE_TEST_TRACES_DIR"
POSTGRES_ENV = "PPE_TEST_POSTGRES_URL"


def real_traces_dir() -> Path:
    """The real traces tests read: ``$PPE_TEST_TRACES_DIR``, else the full shared set when it
    is there, else the sample kept in the repository (examples/traces/bitbrains-sample/README.md)."""
    if os.environ.get(TRACES_ENV):
        return Path(os.environ[TRACES_ENV]).resolve()
    return SHARED_TRACES if SHARED_TRACES.is_dir() else SAMPLE_TRACES


TRACES_DIR = real_traces_dir()
#: Trace names in TRACES_DIR ("41" for 41.csv.gz), for tests that pick traces by name.
TRACE_NAMES = (
    frozenset(trace_name(p) for p in trace_files(TRACES_DIR))
    if TRACES_DIR.is_dir()
    else frozenset()
)
#: The full set of 59 VMs: tests that pool every trace pin figures measured on it.
FULL_TRACE_SET = len(TRACE_NAMES) == 59


def postgres_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


def reset_postgres(url: str) -> None:
    """Each PostgreSQL test starts from an empty schema, as a fresh SQLite file would."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(sqlalchemy.text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store: a SQLite file, and the real PostgreSQL server when configured."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ppe.db'}"
        return
    url = postgres_url()
    if not url:
        pytest.skip(f"PostgreSQL not configured (set {POSTGRES_ENV})")
    url = normalize_url(url)
    reset_postgres(url)
    yield url


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """Directory of real traces (see :func:`real_traces_dir`); never skipped."""
    if not TRACES_DIR.is_dir():
        pytest.fail(f"real traces not found at {TRACES_DIR} (check ${TRACES_ENV})")
    return TRACES_DIR


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A real `ppe serve` process on loopback, for tests that need a true server."""

    def __init__(self, db_url: str, *extra: str, port: int | None = None) -> None:
        import subprocess
        import sys

        self.db_url = db_url
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        cmd = [
            sys.executable,
            "-m",
            "ppe",
            "serve",
            "--db",
            db_url,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *extra,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        import time

        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode() if self.proc.stdout else ""
                raise RuntimeError(f"server exited early:\n{out}")
            try:
                if httpx.get(self.base_url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError("server did not become ready")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flushing — what a crash looks like."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def server_factory() -> Iterator[type[ServerProcess]]:
    """Start servers with `server_factory(db_url, *args)`; all are stopped after the test."""
    started: list[ServerProcess] = []

    class Tracked(ServerProcess):
        def __init__(self, db_url: str, *extra: str, port: int | None = None) -> None:
            super().__init__(db_url, *extra, port=port)
            started.append(self)

    yield Tracked
    for s in started:
        s.stop()
