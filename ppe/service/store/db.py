"""Engine and session factory, and Alembic migrations applied at start-up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def normalize_url(url: str) -> str:
    """Accept the usual spellings and pick the psycopg 3 driver for PostgreSQL."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def _json_dumps(value: object) -> str:
    """orjson: the served-log rows hold 30-50 kB documents, written on every schedule."""
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if is_sqlite(url):
        engine = create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=20,  # cheap file handles; one per concurrent request thread
            max_overflow=20,
            json_serializer=_json_dumps,
            json_deserializer=orjson.loads,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url,
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
        json_serializer=_json_dumps,
        json_deserializer=orjson.loads,
    )


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    """WAL lets readers run beside the writer; FULL sync makes an acknowledged batch durable."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return cfg


def migrate(url: str) -> None:
    """Bring the schema to the newest revision; safe to call on every start."""
    command.upgrade(alembic_config(url), "head")


def ping(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - health check reports any failure as "down"
        return False


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    with factory() as session, session.begin():
        yield session


def release(session: Session) -> None:
    """End the read transaction so the connection returns to the pool before the forecast cache
    reads the store on its own: a request never holds two pooled connections at once, which
    would deadlock a pool that every worker thread has taken one from."""
    session.commit()
