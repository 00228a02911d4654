"""Fixtures shared by the whole suite: store URLs (SQLite always, PostgreSQL when configured)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy

from ppe.service.store.db import make_engine, normalize_url

ROOT = Path(__file__).resolve().parents[1]
TRACES_DIR = ROOT.parent / "shared" / "traces" / "bitbrains-rnd-2013-7"
POSTGRES_ENV = "PPE_TEST_POSTGRES_URL"


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
    if not TRACES_DIR.is_dir():
        pytest.skip(f"real traces not found at {TRACES_DIR}")
    return TRACES_DIR
