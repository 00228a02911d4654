"""Dashboard fixtures: an app on a fresh store with one token per role, and a signed-in client."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.tokens import create_token

ROLES = ("sensor", "app", "operator", "admin")


ORIGIN = "http://testserver"  # TestClient's own origin: what a browser sends from our pages
CSRF_RE = re.compile(r'name="csrf" value="([^"]*)"')


def form_csrf(client: TestClient, page: str = "/login") -> str:
    """The CSRF token a page's form carries (the login form's, or signed in, the sign-out
    form's), as a browser would read it."""
    found = CSRF_RE.search(client.get(page, follow_redirects=False).text)
    assert found, f"no csrf field on {page}"
    return found.group(1)


def post_form(
    client: TestClient, path: str, data: dict[str, str], page: str = "/login"
) -> httpx.Response:
    """POST a dashboard form the way a browser does from our own page: Origin and CSRF token."""
    return client.post(
        path,
        data={**data, "csrf": form_csrf(client, page)},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )


@dataclass
class Dash:
    client: TestClient
    tokens: dict[str, str]

    def login(self, role: str = "operator", next_path: str = "/") -> None:
        r = self.post_login({"token": self.tokens[role], "next": next_path})
        assert r.status_code == 303, r.text

    def post_login(self, data: dict[str, str]) -> httpx.Response:
        return post_form(self.client, "/login", data)

    def logout(self) -> httpx.Response:
        return post_form(self.client, "/logout", {}, page="/")

    def form_csrf(self, page: str = "/login") -> str:
        return form_csrf(self.client, page)

    origin = ORIGIN


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


@pytest.fixture
def dash_db(db_url: str) -> Iterator[Dash]:
    """Like `dash`, on SQLite and on PostgreSQL: for tests of what a form changes in the store."""
    tokens = tokens_for(db_url)
    with TestClient(create_app(Settings(database_url=db_url))) as client:
        yield Dash(client, tokens)
