"""Dashboard pages without a browser: login flow, redirects, roles, offline-only references."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.dashboard import routes

PAGES = [
    "/",
    "/hosts/h1",
    "/playground",
    "/replays",
    "/replays/7",
    "/runs",
    "/models",
    "/whatif",
    "/signatures",
]
STATIC_FILES = sorted(p for p in routes.STATIC_DIR.iterdir() if p.is_file())
TEMPLATES = sorted((Path(routes.__file__).parent / "templates").glob("*.html"))
# An http(s) URL, or a scheme-relative one ("//host/..."), anywhere in a text.
URL_RE = re.compile(r"""(?:https?:)?//[A-Za-z0-9][\w.-]*\.[A-Za-z]{2,}""", re.I)
# XML namespace names are identifiers that nothing fetches; they are the only URLs allowed
# (in an xmlns attribute, or as the quoted SVG namespace handed to createElementNS).
NAMESPACE_RE = re.compile(
    r"""xmlns(?::\w+)?=["']http://www\.w3\.org/[^"']*["']|["']http://www\.w3\.org/2000/svg["']"""
)


class Markup(HTMLParser):
    """Collects what the no-external-URL and accessibility checks need from a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.controls: list[dict[str, str | None]] = []
        self.label_for: set[str] = set()
        self.label_depth = 0
        self.buttons: list[dict[str, str | None]] = []
        self._button: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for name in ("src", "href", "action", "formaction", "poster", "data"):
            if a.get(name):
                self.refs.append((tag, name, a[name] or ""))
        if tag == "label":
            self.label_depth += 1
            if a.get("for"):
                self.label_for.add(a["for"] or "")
        if tag in ("input", "select", "textarea") and a.get("type") != "hidden":
            self.controls.append({**a, "_tag": tag, "_in_label": "1" if self.label_depth else None})
        if tag == "button":
            self._button = {**a, "_text": ""}
            self.buttons.append(self._button)

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self.label_depth -= 1
        if tag == "button":
            self._button = None

    def handle_data(self, data: str) -> None:
        if self._button is not None:
            self._button["_text"] = (self._button["_text"] or "") + data.strip()


def parse(html: str) -> Markup:
    m = Markup()
    m.feed(html)
    return m


def external_urls(text: str) -> list[str]:
    return URL_RE.findall(NAMESPACE_RE.sub("", text))


def all_pages(dash) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Every page the dashboard renders, signed in, plus the login form and its error variant."""
    out = {p: dash.client.get(p).text for p in PAGES}
    assert dash.logout().status_code == 303
    out["/login"] = dash.client.get("/login").text
    out["/login (error)"] = dash.post_login({"token": "nope"}).text
    return out


# ---- login, logout, redirects ------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_pages_redirect_to_login_without_cookie(dash, path: str) -> None:  # type: ignore[no-untyped-def]
    r = dash.client.get(path, follow_redirects=False)
    assert r.status_code == 303
    target = urlsplit(r.headers["location"])
    assert target.path == "/login"
    assert parse_qs(target.query)["next"] == [path]


def test_invalid_cookie_redirects(dash) -> None:  # type: ignore[no-untyped-def]
    dash.client.cookies.set("ppe_token", "ppe_operator_forged")
    assert dash.client.get("/", follow_redirects=False).status_code == 303


def test_login_sets_strict_httponly_cookie_and_pages_then_open(dash) -> None:  # type: ignore[no-untyped-def]
    form = dash.client.get("/login?next=/playground")
    assert form.status_code == 200
    assert 'name="next" value="/playground"' in form.text
    r = dash.post_login({"token": dash.tokens["operator"], "next": "/playground"})
    assert r.status_code == 303 and r.headers["location"] == "/playground"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"ppe_token={dash.tokens['operator']};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Max-Age=" in cookie and "Secure" not in cookie  # plain http here; https adds Secure
    for path in PAGES:
        page = dash.client.get(path, follow_redirects=False)
        assert page.status_code == 200, path
        assert "default-src 'self'" in page.headers["content-security-policy"]
    # The pages' fetch() calls authenticate with the cookie plus the page's CSRF header; the
    # cookie alone is no credential for the API (tests/dashboard/test_dash_csrf.py).
    csrf = re.search(r'name="ppe-csrf" content="([^"]+)"', page.text)
    assert csrf
    headers = {"X-PPE-CSRF": csrf.group(1), "Sec-Fetch-Site": "same-origin"}
    assert dash.client.get("/api/v1/resources", headers=headers).status_code == 200
    assert dash.client.get("/api/v1/resources").status_code == 401


def test_logout_clears_cookie(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login()
    assert dash.client.get("/", follow_redirects=False).status_code == 200
    r = dash.logout()
    assert r.status_code == 303 and r.headers["location"] == "/login"
    assert re.search(r'ppe_token="?"?;.*Max-Age=0', r.headers["set-cookie"])
    assert "ppe_token" not in dash.client.cookies
    assert dash.client.get("/", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("role", ["sensor", "app"])
def test_wrong_role_rejected(dash, role: str) -> None:  # type: ignore[no-untyped-def]
    r = dash.post_login({"token": dash.tokens[role]})
    assert r.status_code == 403
    assert "ppe_token" not in r.headers.get("set-cookie", "")
    assert "operator or admin token" in r.text
    # A cookie carrying such a token, set by hand, does not open the pages either.
    dash.client.cookies.set("ppe_token", dash.tokens[role])
    assert dash.client.get("/", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("token", ["", "   ", "ppe_admin_not-a-real-token"])
def test_unknown_token_rejected(dash, token: str) -> None:  # type: ignore[no-untyped-def]
    r = dash.post_login({"token": token})
    assert r.status_code == 401
    assert "ppe_token" not in r.headers.get("set-cookie", "")
    assert 'role="alert"' in r.text


def test_admin_may_log_in(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login("admin")
    assert dash.client.get("/replays", follow_redirects=False).status_code == 200


def test_signed_in_login_page_goes_on(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login()
    r = dash.client.get("/login?next=/replays", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/replays"


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
        "/login",
        "",
    ],
)
def test_next_never_leaves_the_dashboard(dash, target: str) -> None:  # type: ignore[no-untyped-def]
    r = dash.post_login({"token": dash.tokens["operator"], "next": target})
    assert r.headers["location"] == "/"


def test_demo_auth_opens_the_dashboard_like_the_api(tmp_path: Path) -> None:
    """--demo-auth makes token-less requests admin in the API; the pages follow the same rule."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    with TestClient(create_app(Settings(database_url=url, demo_auth=True))) as client:
        assert client.get("/", follow_redirects=False).status_code == 200


def test_host_name_is_escaped(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login()
    r = dash.client.get("/hosts/%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert r.status_code == 200
    assert "<img src=x" not in r.text
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.text


# ---- nothing external -------------------------------------------------------------------------


def test_no_page_or_static_file_references_an_external_url(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login()
    pages = all_pages(dash)
    assert len(pages) == len(PAGES) + 2
    problems = []
    for path, html in pages.items():
        problems += [f"{path}: {u}" for u in external_urls(html)]
        for tag, attr, value in parse(html).refs:
            if urlsplit(value).scheme or value.startswith("//"):
                problems.append(f"{path}: <{tag} {attr}={value!r}> is not a path on this origin")
    # The dashboard's own CSS/JS/SVG, as served, and the templates' source (every branch of them).
    for f in STATIC_FILES:
        served = dash.client.get(f"{routes.STATIC_PATH}/{f.name}")
        assert served.status_code == 200, f.name
        problems += [f"{f.name}: {u}" for u in external_urls(served.text)]
    for t in TEMPLATES:
        problems += [f"{t.name}: {u}" for u in external_urls(t.read_text())]
    assert not problems, "\n".join(problems)
    assert {f.name for f in STATIC_FILES} >= {
        "ppe.js",
        "dashboard.css",
        "overview.js",
        "host.js",
        "playground.js",
        "replays.js",
        "replay.js",
        "whatif.js",
    }


def test_every_local_reference_resolves(dash) -> None:  # type: ignore[no-untyped-def]
    """Scripts, styles and links on each page are served by this app (no 404 left to a CDN)."""
    dash.login()
    refs = {
        value
        for html in all_pages(dash).values()
        for tag, attr, value in parse(html).refs
        if tag in ("script", "link", "img")
    }
    assert any(routes.PLOTLY_PATH in r for r in refs)
    dash.login()
    for ref in sorted(refs):
        assert dash.client.get(ref).status_code == 200, ref


def test_url_checker_catches_what_it_should() -> None:
    assert external_urls('<script src="https://cdn.plot.ly/plotly.min.js">')
    assert external_urls("@import url(//fonts.example.com/x.css);")
    assert not external_urls('<svg xmlns="http://www.w3.org/2000/svg"></svg>')
    assert not external_urls('document.createElementNS("http://www.w3.org/2000/svg", "svg")')
    assert external_urls('fetch("http://www.w3.org/2000/svg/evil.js")')
    assert not external_urls('<script src="/dashboard/vendor/plotly.min.js?v=1">')


def test_plotly_comes_from_the_installed_package(dash) -> None:  # type: ignore[no-untyped-def]
    from plotly.offline import get_plotlyjs

    r = dash.client.get(routes.PLOTLY_PATH, headers={"Accept-Encoding": "gzip"})
    assert r.status_code == 200
    assert r.headers["content-encoding"] == "gzip"
    assert r.text == get_plotlyjs()
    assert (
        "immutable" in r.headers["cache-control"]
        and "max-age=31536000" in r.headers["cache-control"]
    )
    again = dash.client.get(routes.PLOTLY_PATH, headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and not again.content
    plain = dash.client.get(routes.PLOTLY_PATH, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.text.startswith("/**\n* plotly.js")


# ---- accessibility of the server-rendered controls ---------------------------------------------


def test_every_control_has_a_label(dash) -> None:  # type: ignore[no-untyped-def]
    dash.login()
    for path, html in all_pages(dash).items():
        m = parse(html)
        assert m.controls or path.startswith("/replays"), path
        for c in m.controls:
            labelled = (
                c.get("_in_label")
                or c.get("aria-label")
                or c.get("aria-labelledby")
                or (c.get("id") in m.label_for)
            )
            assert labelled, f"{path}: unlabelled {c}"
        for b in m.buttons:
            assert b["_text"] or b.get("aria-label"), f"{path}: button without a name {b}"
        assert '<html lang="en">' in html and 'name="viewport"' in html


def test_links_follow_a_proxy_root_path(tmp_path: Path) -> None:
    """Behind a reverse proxy (uvicorn --root-path /ppe) every link and redirect keeps the prefix."""
    url = f"sqlite:///{tmp_path / 'root.db'}"
    with TestClient(create_app(Settings(database_url=url)), root_path="/ppe") as client:
        r = client.get("/ppe/playground", follow_redirects=False)
        assert r.headers["location"] == "/ppe/login?next=%2Fplayground"
        refs = [v for _, _, v in parse(client.get("/ppe/login").text).refs]
        assert refs and all(v.startswith(("/ppe/", "#")) for v in refs), refs
