"""Cross-site request forgery against the dashboard's forms and the cookie it holds.

The attack report's page ran on another port of the same host (same site, so SameSite=Strict did
not stop the cookie) and auto-submitted forms with the operator's cookie. Each test sends such a
request and checks it is refused and changed nothing; the same request from our own page works.
"""

from __future__ import annotations

import json
import re

import pytest

from ppe.service.auth import csrf_token

ORIGIN = "http://testserver"  # TestClient's origin, as our own pages send it
EVIL = "http://testserver:8666"  # the attacker's page: same host, another port


def signed_in_csrf(dash) -> str:  # type: ignore[no-untyped-def]
    found = re.search(r'name="ppe-csrf" content="([^"]+)"', dash.client.get("/").text)
    assert found
    return found.group(1)


def bearer(dash, role: str = "admin") -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"Authorization": f"Bearer {dash.tokens[role]}"}


def test_cross_origin_replay_form_with_the_cookie_starts_nothing(dash_db) -> None:  # type: ignore[no-untyped-def]
    """The report's request: multipart POST /api/v1/replays from another port, cookie attached."""
    dash_db.login("operator")
    files = {"files": ("evil.csv", b"timestamp,cpu\n0,1\n", "text/csv")}
    r = dash_db.client.post(
        "/api/v1/replays",
        data={"config": json.dumps({"n": 400, "iterations": 5})},
        files=files,
        headers={"Origin": EVIL, "Sec-Fetch-Site": "same-site", "Referer": EVIL + "/x"},
    )
    assert r.status_code == 401, r.text
    assert dash_db.client.get("/api/v1/replays", headers=bearer(dash_db)).json() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/v1/resources"), ("PUT", "/api/v1/resources/h1"), ("GET", "/api/v1/replays")],
)
def test_api_with_the_cookie_only_is_401(dash_db, method: str, path: str) -> None:  # type: ignore[no-untyped-def]
    dash_db.login("admin")
    body = {"properties": {"benchmark": 1e-8}} if method == "PUT" else None
    r = dash_db.client.request(method, path, json=body, headers={"Origin": ORIGIN})
    assert r.status_code == 401
    assert dash_db.client.get("/api/v1/resources", headers=bearer(dash_db)).json() == []


def test_api_takes_the_cookie_with_the_pages_csrf_header_from_our_origin(dash_db) -> None:  # type: ignore[no-untyped-def]
    dash_db.login("operator")
    csrf = signed_in_csrf(dash_db)
    body = {"properties": {"benchmark": 2e-8}}
    ours = {"X-PPE-CSRF": csrf, "Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}
    r = dash_db.client.put("/api/v1/resources/h1", json=body, headers=ours)
    assert r.status_code == 200, r.text
    # A GET from our page: no Origin, but Sec-Fetch-Site / Referer say where it comes from.
    got = dash_db.client.get(
        "/api/v1/resources/h1", headers={"X-PPE-CSRF": csrf, "Referer": ORIGIN + "/hosts/h1"}
    )
    assert got.status_code == 200
    # The same header from another origin, a wrong token, or no browser evidence at all: 401.
    for headers in (
        {"X-PPE-CSRF": csrf, "Origin": EVIL},
        {"X-PPE-CSRF": csrf, "Origin": "null"},
        {"X-PPE-CSRF": csrf, "Sec-Fetch-Site": "same-site", "Origin": ORIGIN},
        {"X-PPE-CSRF": csrf_token("something else"), "Origin": ORIGIN},
        {"X-PPE-CSRF": csrf},
    ):
        r = dash_db.client.put(
            "/api/v1/resources/h1", json={"properties": {"benchmark": 9.0}}, headers=headers
        )
        assert r.status_code == 401, headers
    stored = dash_db.client.get("/api/v1/resources/h1", headers=bearer(dash_db)).json()
    assert stored["properties"]["benchmark"] == 2e-8


def test_cross_origin_login_is_refused(dash_db) -> None:  # type: ignore[no-untyped-def]
    csrf = dash_db.form_csrf()
    data = {"token": dash_db.tokens["operator"], "csrf": csrf}
    for headers in ({"Origin": EVIL}, {"Referer": EVIL + "/"}, {}):
        r = dash_db.client.post("/login", data=data, headers=headers, follow_redirects=False)
        assert r.status_code == 403, headers
        assert "ppe_token" not in r.headers.get("set-cookie", "")
    # Our origin without the form's token.
    r = dash_db.client.post(
        "/login",
        data={"token": dash_db.tokens["operator"], "csrf": "0" * 64},
        headers={"Origin": ORIGIN},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert "ppe_token" not in dash_db.client.cookies
    # The genuine form works.
    assert dash_db.post_login({"token": dash_db.tokens["operator"]}).status_code == 303


def test_cross_origin_logout_is_refused(dash_db) -> None:  # type: ignore[no-untyped-def]
    dash_db.login("operator")
    csrf = dash_db.form_csrf("/")
    r = dash_db.client.post(
        "/logout", data={"csrf": csrf}, headers={"Origin": EVIL}, follow_redirects=False
    )
    assert r.status_code == 403
    r = dash_db.client.post(
        "/logout", data={"csrf": "nope"}, headers={"Origin": ORIGIN}, follow_redirects=False
    )
    assert r.status_code == 403
    assert dash_db.client.get("/", follow_redirects=False).status_code == 200  # still signed in
    assert dash_db.logout().status_code == 303
    assert dash_db.client.get("/", follow_redirects=False).status_code == 303


def test_pages_carry_the_csrf_token_and_scripts_send_it(dash_db) -> None:  # type: ignore[no-untyped-def]
    dash_db.login("operator")
    assert signed_in_csrf(dash_db) == csrf_token(dash_db.tokens["operator"])
    js = dash_db.client.get("/dashboard/static/ppe.js").text
    assert 'init.headers["X-PPE-CSRF"] = CSRF' in js


def test_login_behind_a_proxy_keeps_working(dash_db) -> None:  # type: ignore[no-untyped-def]
    """A TLS-terminating proxy: the browser's Origin is the proxy's, passed on as X-Forwarded-*."""
    csrf = dash_db.form_csrf()
    r = dash_db.client.post(
        "/login",
        data={"token": dash_db.tokens["operator"], "csrf": csrf},
        headers={
            "Origin": "https://ppe.example.org",
            "X-Forwarded-Host": "ppe.example.org",
            "X-Forwarded-Proto": "https",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303


def test_demo_auth_does_not_serve_other_sites(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """--demo-auth makes token-less requests admin; a page on another origin gets nothing."""
    from fastapi.testclient import TestClient

    from ppe.service.app import create_app
    from ppe.service.config import Settings

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    with TestClient(create_app(Settings(database_url=url, demo_auth=True))) as client:
        body = {"properties": {"benchmark": 1e-8}}
        assert client.put("/api/v1/resources/h1", json=body).status_code == 200  # curl
        r = client.put("/api/v1/resources/h2", json=body, headers={"Origin": EVIL})
        assert r.status_code == 401
        assert [x["name"] for x in client.get("/api/v1/resources").json()] == ["h1"]
