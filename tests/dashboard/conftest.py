"""Dashboard fixtures: an app on a fresh store with one token per role, and a signed-in client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.tokens import create_token

ROLES = ("sensor", "app", "operator", "admin")


@dataclass
class Dash:
    client: TestClient
    tokens: dict[str, str]

    def login(self, role: str = "operator", next_path: str = "/") -> None:
        r = self.client.post(
            "/login", data={"token": self.tokens[role], "next": next_path}, follow_redirects=False
        )
        assert r.status_code == 303, r.text


def tokens_for(url: str) -> dict[str, str]:
    migrate(url)
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        tokens = {role: create_token(s, role, f"dashboard test {role}") for role in ROLES}
    engine.dispose()
    return tokens


@pytest.fixture
def dash(tmp_path: Path) -> Iterator[Dash]:
    """Pages and auth do not depend on the store's dialect, so SQLite alone is enough here."""
    url = f"sqlite:///{tmp_path / 'dash.db'}"
    tokens = tokens_for(url)
    with TestClient(create_app(Settings(database_url=url))) as client:
        yield Dash(client, tokens)
