"""Authentication and authorisation holes from the attack report, each sent as reported.

1. Junk bearer tokens grew the server without bound (the token cache kept them all).
3. Tokens could not be listed, relabelled, revoked or made to expire.
4. Any app token could overwrite any stored model.
5. Grammar of the token message, HEAD on pages, /docs and /redoc from a CDN.
6. A label with NUL was accepted on PostgreSQL, and the token then refused forever.
(2, CSRF, is in tests/dashboard/test_dash_csrf.py.)
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil
import pytest
from sqlalchemy import inspect, select

from ppe.cli import main as ppe_main
from ppe.service import auth
from ppe.service.auth import csrf_token
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.models import ApiToken, UserModel
from ppe.service.store.tokens import (
    MAX_TOKEN_CHARS,
    TokenCache,
    TokenInfo,
    create_token,
    hash_token,
)

ORIGIN = "http://testserver"
MB = 2**20


def services(env):  # type: ignore[no-untyped-def]
    return env.client.app.state.services


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def new_token(env, role: str = "app", **body) -> dict:  # type: ignore[no-untyped-def]
    r = env.client.post("/api/v1/tokens", json={"role": role, **body}, headers=env.h("admin"))
    assert r.status_code == 201, r.text
    return r.json()


# ---- 1. junk tokens: bounded memory, no store lookups, a bounded thread-safe cache -------------


def test_oversized_tokens_never_reach_the_store_or_the_cache(env, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    looked_up: list[str] = []
    real = auth.lookup

    def spy(session: Any, token: str, *rest: Any) -> Any:
        looked_up.append(token)
        return real(session, token, *rest)

    monkeypatch.setattr(auth, "lookup", spy)
    junk = "ppe_app_" + "x" * MAX_TOKEN_CHARS
    assert env.client.get("/api/v1/resources", headers=bearer(junk)).status_code == 401
    env.client.cookies.set("ppe_token", junk)
    csrf = {"X-PPE-CSRF": csrf_token(junk), "Origin": ORIGIN}
    assert env.client.get("/api/v1/resources", headers=csrf).status_code == 401
    assert env.client.get("/", follow_redirects=False).status_code == 303
    env.client.cookies.clear()
    assert looked_up == []
    assert len(services(env).tokens) == 0
    # A real token is far below the cap, and still works.
    assert len(env.tokens["admin"]) < MAX_TOKEN_CHARS // 4
    assert env.client.get("/api/v1/resources", headers=env.h("app")).status_code == 200


def test_unknown_tokens_are_not_cached_and_the_cache_holds_no_token(env) -> None:  # type: ignore[no-untyped-def]
    for i in range(300):
        r = env.client.get("/api/v1/resources", headers=bearer(f"ppe_app_bogus{i:04d}"))
        assert r.status_code == 401
    cache = services(env).tokens
    assert len(cache) == 0
    assert env.client.get("/api/v1/resources", headers=env.h("app")).status_code == 200
    assert cache.keys() == [hash_token(env.tokens["app"])]


def test_token_cache_is_bounded_and_thread_safe() -> None:
    cache = TokenCache(ttl_s=60, maxsize=64)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        try:
            for i in range(3000):
                token = f"t{seed}-{i % 200}"
                cache.put(token, TokenInfo(i, "app"))
                cache.get(token)
                if i % 7 == 0:
                    cache.evict_hash(hash_token(token))
        except BaseException as exc:  # noqa: BLE001 - any error in a thread fails the test
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) <= 64


def test_cache_forgets_expired_tokens() -> None:
    cache = TokenCache(ttl_s=60)
    cache.put("a", TokenInfo(1, "app", expires_at=time.time() - 1))
    cache.put("b", TokenInfo(2, "app", expires_at=None))
    assert cache.get("a") is None and cache.get("b") == TokenInfo(2, "app")


def test_revocation_through_the_server_takes_effect_at_once(env) -> None:  # type: ignore[no-untyped-def]
    made = new_token(env, "app", label="to revoke")
    h = bearer(made["token"])
    assert env.client.get("/api/v1/resources", headers=h).status_code == 200  # now cached
    r = env.client.post(f"/api/v1/tokens/{made['id']}/revoke", headers=env.h("admin"))
    assert r.status_code == 200 and r.json()["revoked"] is True
    assert env.client.get("/api/v1/resources", headers=h).status_code == 401
    # A lookup that read the store just before the revocation cannot cache it again.
    services(env).tokens.put(made["token"], TokenInfo(made["id"], "app"))
    assert env.client.get("/api/v1/resources", headers=h).status_code == 401


def _rss(proc: psutil.Process) -> int:
    return int(proc.memory_info().rss)


def _burst(client: httpx.Client, size: int, first: int, count: int) -> Counter[str]:
    """`count` GETs, each with a different bogus bearer token of `size` characters."""
    pad = "x" * size
    codes: Counter[str] = Counter()
    for i in range(first, first + count):
        token = f"{i:08d}{pad}"[:size]
        try:
            r = client.get("/api/v1/resources", headers=bearer(token))
            codes[str(r.status_code)] += 1
        except httpx.TransportError:  # a server refusing a huge header may just hang up
            codes["closed"] += 1
    return codes


@pytest.mark.slow
def test_huge_bogus_tokens_do_not_grow_a_real_server(server_factory, db_url) -> None:  # type: ignore[no-untyped-def]
    """The report: 1 500 GETs, each with a different 1 MB bogus bearer token, grew the server by
    1.4 GB for good. Now it answers 401 without keeping anything (the server here accepts 1 MB
    headers; a smaller batch under any header limit proves the same for the cache)."""
    server = server_factory(db_url)
    proc = psutil.Process(server.proc.pid)
    with httpx.Client(base_url=server.base_url, timeout=60) as client:
        _burst(client, MB, 0, 50)  # warm-up: allocator arenas, first-request imports
        _burst(client, 60_000, 0, 50)
        start = _rss(proc)
        huge = _burst(client, MB, 1_000, 2_000)
        after_huge = _rss(proc)
        large = _burst(client, 60_000, 10_000, 2_000)
        end = _rss(proc)
        assert client.get("/api/v1/resources").status_code == 401  # still serving
    print(
        f"\nRSS start {start / MB:.1f} MB, after 2000 x 1 MB {after_huge / MB:.1f} MB, "
        f"after 2000 x 60 KB {end / MB:.1f} MB; {dict(huge)} {dict(large)}"
    )
    assert set(huge) <= {"401", "400", "431", "closed"}, huge
    assert large == Counter({"401": 2_000}), large
    assert max(after_huge, end) - start < 50 * MB


# ---- 3. token management -----------------------------------------------------------------------


def test_admin_lists_creates_relabels_and_revokes_tokens(env) -> None:  # type: ignore[no-untyped-def]
    made = new_token(env, "operator", label="night shift", expires_in_s=3600)
    assert made["token"].startswith("ppe_operator_")
    assert made["label"] == "night shift" and made["active"] is True
    assert made["expires_at"] == pytest.approx(time.time() + 3600, abs=60)
    listed = env.client.get("/api/v1/tokens", headers=env.h("admin")).json()
    assert [t["role"] for t in listed] == ["sensor", "app", "operator", "admin", "operator"]
    mine = next(t for t in listed if t["id"] == made["id"])
    assert set(mine) == {
        "id",
        "role",
        "label",
        "created_at",
        "expires_at",
        "revoked",
        "revoked_at",
        "last_used_at",
        "active",
    }
    text = str(listed)
    assert made["token"] not in text and hash_token(made["token"]) not in text
    assert all(env.tokens[r] not in text for r in env.tokens)
    # Last used: set by the first request the token makes.
    assert mine["last_used_at"] is None
    assert env.client.get("/api/v1/resources", headers=bearer(made["token"])).status_code == 200
    one = env.client.get(f"/api/v1/tokens/{made['id']}", headers=env.h("admin")).json()
    assert one["last_used_at"] is not None
    r = env.client.patch(
        f"/api/v1/tokens/{made['id']}", json={"label": "day shift"}, headers=env.h("admin")
    )
    assert r.status_code == 200 and r.json()["label"] == "day shift"
    r = env.client.post(f"/api/v1/tokens/{made['id']}/revoke", headers=env.h("admin"))
    assert r.json()["revoked"] is True and r.json()["active"] is False
    assert r.json()["revoked_at"] is not None
    again = env.client.post(f"/api/v1/tokens/{made['id']}/revoke", headers=env.h("admin"))
    assert again.status_code == 200 and again.json()["revoked_at"] == r.json()["revoked_at"]
    for method, path in (("GET", "/api/v1/tokens/999"), ("POST", "/api/v1/tokens/999/revoke")):
        assert env.client.request(method, path, headers=env.h("admin")).status_code == 404


@pytest.mark.parametrize("role", ["sensor", "app", "operator"])
def test_only_admins_manage_tokens(env, role: str) -> None:  # type: ignore[no-untyped-def]
    h = env.h(role)
    assert env.client.get("/api/v1/tokens", headers=h).status_code == 403
    assert env.client.patch("/api/v1/tokens/1", json={"label": "x"}, headers=h).status_code == 403
    assert env.client.post("/api/v1/tokens/1/revoke", headers=h).status_code == 403
    assert env.client.get("/api/v1/resources", headers=env.h("sensor")).status_code == 403


def test_expired_and_revoked_tokens_are_401(env) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        expired = create_token(s, "app", "expired", expires_at=time.time() - 1)
        revoked = create_token(s, "app", "revoked")
        s.execute(select(ApiToken).where(ApiToken.label == "revoked")).scalar_one().revoked = True
    engine.dispose()
    for token in (expired, revoked):
        r = env.client.get("/api/v1/resources", headers=bearer(token))
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_expiry_must_be_in_the_future_and_given_once(env) -> None:  # type: ignore[no-untyped-def]
    for body in (
        {"role": "app", "expires_at": time.time() - 10},
        {"role": "app", "expires_at": time.time() + 99, "expires_in_s": 5},
        {"role": "app", "expires_in_s": 0},
        {"role": "app", "expires_in_s": "forever"},
    ):
        r = env.client.post("/api/v1/tokens", json=body, headers=env.h("admin"))
        assert r.status_code == 422, body


def test_cli_lists_creates_labels_and_revokes(env, capsys) -> None:  # type: ignore[no-untyped-def]
    db = ["--db", env.url]
    assert (
        ppe_main(["token", "create", "--role", "app", "--label", "ci", "--expires-in", "2d", *db])
        == 0
    )
    out = capsys.readouterr()
    token = out.out.strip().splitlines()[-1]
    assert "created an app token (id 5, expires" in out.err
    assert env.client.get("/api/v1/resources", headers=bearer(token)).status_code == 200
    assert ppe_main(["token", "label", "5", "ci runner", *db]) == 0
    assert ppe_main(["token", "list", *db]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.split()[:1] == ["5"])
    assert "app" in row and "active" in row and row.endswith("ci runner")
    assert token not in table and hash_token(token) not in table
    assert ppe_main(["token", "revoke", "5", *db]) == 0
    assert ppe_main(["token", "list", "--json", *db]) == 0
    import json

    listed = json.loads(capsys.readouterr().out.split("\n", 1)[1])  # after "token 5 ... revoked"
    assert next(t for t in listed if t["id"] == 5)["revoked"] is True
    assert ppe_main(["token", "revoke", "77", *db]) == 1
    assert ppe_main(["token", "label", "5", "bad\x00label", *db]) == 2
    with pytest.raises(SystemExit):
        ppe_main(["token", "create", "--role", "app", "--expires-in", "soon", *db])


# ---- 4. model ownership ------------------------------------------------------------------------


def sor_text(env) -> str:  # type: ignore[no-untyped-def]
    models = env.client.get("/api/v1/models", headers=env.h("app")).json()
    return str(next(m["text"] for m in models if m["name"] == "sor"))


def test_an_app_token_cannot_overwrite_anothers_model(env) -> None:  # type: ignore[no-untyped-def]
    text = sor_text(env)
    other = new_token(env, "app", label="other app")
    r = env.client.post(
        "/api/v1/models", json={"name": "shared", "text": text}, headers=env.h("app")
    )
    assert r.status_code == 201 and r.json()["owner_token_id"] == 2
    # The report's request: another app token stores a model under the same name.
    evil = {"name": "shared", "text": text, "description": "mine now"}
    r = env.client.post("/api/v1/models", json=evil, headers=bearer(other["token"]))
    assert r.status_code == 403
    assert "admin" in r.json()["detail"] and "owner" in r.json()["detail"]
    r = env.client.post("/api/v1/models", json=evil, headers=env.h("operator"))
    assert r.status_code == 403
    r = env.client.delete("/api/v1/models/shared", headers=bearer(other["token"]))
    assert r.status_code == 403
    stored = [m for m in env.client.get("/api/v1/models", headers=env.h("app")).json()]
    assert next(m for m in stored if m["name"] == "shared")["description"] == ""
    # Its owner may replace and delete it; so may an admin.
    mine = {"name": "shared", "text": text, "description": "v2"}
    assert env.client.post("/api/v1/models", json=mine, headers=env.h("app")).status_code == 201
    admin = {**mine, "description": "v3"}
    r = env.client.post("/api/v1/models", json=admin, headers=env.h("admin"))
    assert r.status_code == 201 and r.json()["owner_token_id"] == 2  # still the app's
    assert env.client.delete("/api/v1/models/shared", headers=env.h("app")).status_code == 204
    assert env.client.delete("/api/v1/models/shared", headers=env.h("app")).status_code == 404
    assert env.client.delete("/api/v1/models/sor", headers=env.h("admin")).status_code == 409
    env.client.post("/api/v1/models", json=mine, headers=bearer(other["token"]))
    assert env.client.delete("/api/v1/models/shared", headers=env.h("admin")).status_code == 204


def test_legacy_models_without_owner_are_admin_only(env) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        s.add(UserModel(name="legacy", text=sor_text(env), description="old"))
    engine.dispose()
    body = {"name": "legacy", "text": sor_text(env)}
    r = env.client.post("/api/v1/models", json=body, headers=env.h("app"))
    assert r.status_code == 403 and "admin" in r.json()["detail"]
    assert env.client.post("/api/v1/models", json=body, headers=env.h("admin")).status_code == 201


def test_migration_0003_keeps_rows_and_round_trips(db_url) -> None:  # type: ignore[no-untyped-def]
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from ppe.service.store.db import alembic_config
    from ppe.service.store.models import Base

    cfg = alembic_config(db_url)
    command.upgrade(cfg, "0002")
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO api_tokens (token_hash, role, label, created_at, revoked) "
            "VALUES ('h', 'app', 'old', 1.0, false)"
        )
        conn.exec_driver_sql(
            "INSERT INTO user_models (name, text, description, created_at) "
            "VALUES ('m', 't', '', 1.0)"
        )
    migrate(db_url)
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("api_tokens")}
        assert {"expires_at", "revoked_at", "last_used_at"} <= columns
        row = conn.exec_driver_sql("SELECT label, expires_at FROM api_tokens").one()
        assert tuple(row) == ("old", None)
        owner = conn.exec_driver_sql("SELECT owner_token_id FROM user_models").scalar()
        assert owner is None
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    mine = [d for d in diffs if re.search(r"api_tokens|user_models", str(d))]
    assert mine == []
    command.downgrade(cfg, "0002")
    with engine.connect() as conn:
        assert "owner_token_id" not in {c["name"] for c in inspect(conn).get_columns("user_models")}
    migrate(db_url)
    engine.dispose()


# ---- 5. small things ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "article"), [("sensor", "a"), ("app", "an"), ("operator", "an"), ("admin", "an")]
)
def test_token_message_grammar(env, role: str, article: str) -> None:  # type: ignore[no-untyped-def]
    made = new_token(env, role)
    assert made["message"].startswith(f"created {article} {role} token")


@pytest.mark.parametrize(
    "path", ["/login", "/", "/playground", "/replays", "/hosts/h1", "/docs", "/redoc"]
)
def test_head_on_pages(env, path: str) -> None:  # type: ignore[no-untyped-def]
    get = env.client.get(path, follow_redirects=False)
    head = env.client.head(path, follow_redirects=False)
    assert head.status_code == get.status_code and head.status_code in (200, 303)
    assert head.content == b""


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_api_docs_load_nothing_from_outside(env, path: str) -> None:  # type: ignore[no-untyped-def]
    r = env.client.get(path)
    assert r.status_code == 200
    assert not re.search(r"(?:https?:)?//[A-Za-z0-9][\w.-]*\.[A-Za-z]{2,}", r.text), r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp
    assert "<script>" not in r.text  # no inline script: the CSP would block it
    refs = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    scripts = [u for u in refs if u.endswith(".js")]
    assert scripts, r.text
    for ref in refs:
        assert not urlsplit(ref).netloc, ref
        assert env.client.get(ref).status_code == 200, ref
    spec = re.search(r'(?:data-openapi|spec-url)="([^"]+)"', r.text)
    assert spec and env.client.get(spec.group(1)).json()["paths"]


def test_docs_bundle_speaks_openapi_3_1(env) -> None:  # type: ignore[no-untyped-def]
    """FastAPI writes OpenAPI 3.1, which swagger-ui 4 cannot show: the bundle must be 5.x."""
    assert env.client.get("/openapi.json").json()["openapi"].startswith("3.1")
    js = env.client.get("/docs/assets/swagger-ui-bundle.js").text
    assert re.search(r'"5\.\d+\.\d+"', js)


# ---- 6. labels ---------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["nul\x00inside", "esc\x1b[31m", "x" * 256])
def test_bad_labels_are_422(env, label: str) -> None:  # type: ignore[no-untyped-def]
    r = env.client.post(
        "/api/v1/tokens", json={"role": "app", "label": label}, headers=env.h("admin")
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "label"
    r = env.client.patch("/api/v1/tokens/1", json={"label": label}, headers=env.h("admin"))
    assert r.status_code == 422
    listed = env.client.get("/api/v1/tokens", headers=env.h("admin")).json()
    assert len(listed) == 4 and listed[0]["label"] == ""


def test_unicode_labels_work(env) -> None:  # type: ignore[no-untyped-def]
    made = new_token(env, "app", label="Zürich — 测试 " + "x" * 200)
    assert env.client.get("/api/v1/resources", headers=bearer(made["token"])).status_code == 200
