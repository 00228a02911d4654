"""Service fixtures: an app on a fresh store, a client, and one token per role."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.tokens import create_token


@dataclass
class Env:
    client: TestClient
    url: str
    tokens: dict[str, str]

    def h(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


def make_tokens(url: str) -> dict[str, str]:
    migrate(url)
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        tokens = {r: create_token(s, r) for r in ("sensor", "app", "operator", "admin")}
    engine.dispose()
    return tokens


@pytest.fixture
def env(db_url: str) -> Iterator[Env]:
    tokens = make_tokens(db_url)
    app = create_app(Settings(database_url=db_url, max_batch=20_000))
    with TestClient(app) as client:
        yield Env(client, db_url, tokens)


@pytest.fixture
def env_tokens_factory() -> Callable[[str], dict[str, str]]:
    """Migrate a store and return one fresh token per role."""
    return make_tokens
