"""Dashboard pages at `/`: login, overview, host, schedule playground, replays, runs, models,
what-if, signatures.

The pages are Jinja2 templates that carry no data of their own: their plain JavaScript fetches the
same `/api/v1` JSON that applications get, authenticated by the HttpOnly `ppe_token` cookie set at
login plus the page's CSRF token in a header (see ppe.service.auth), so the dashboard can never
show something the API would not. Everything a page loads comes from this origin (plotly's
JavaScript from the installed Python package, never a CDN), and a strict Content-Security-Policy
makes the browser refuse anything else.

Every form that changes something (sign in, sign out) must come from this origin (Origin or
Referer) and carry a CSRF token: signed in, an HMAC of the session token; on the login form, of a
random nonce kept in an HttpOnly cookie of its own.
"""

from __future__ import annotations

import gzip
import hashlib
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from plotly import __version__ as plotly_version

from ppe import __version__
from ppe.service.auth import (
    COOKIE,
    OPERATE,
    csrf_matches,
    csrf_token,
    resolve_role,
    same_origin,
    session_cookie,
)
from ppe.service.dashboard.host_data import DATA_PATH as HORIZON_CALIBRATION_PATH
from ppe.service.dashboard.models_data import DATA_PATH as MODELS_DATA_PATH
from ppe.service.dashboard.signatures_data import DATA_PATH as SIGNATURES_DATA_PATH
from ppe.service.dashboard.whatif_data import DATA_PATH as WHATIF_EXAMPLES_PATH
from ppe.service.store.tokens import article
from scheduler import STRATEGIES

LOGIN_NONCE_COOKIE = "ppe_csrf"  # before login there is no session to derive a CSRF token from
COOKIE_MAX_AGE_S = 12 * 3600  # an operator's working day; log in again after that
STATIC_PATH = "/dashboard/static"
PLOTLY_PATH = "/dashboard/vendor/plotly.min.js"
HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
templates = Jinja2Templates(directory=str(HERE / "templates"))

# 'unsafe-inline' styles only: plotly writes style attributes and <style> rules as it draws.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

router = APIRouter(include_in_schema=False)
PAGE_METHODS = ["GET", "HEAD"]  # HEAD too: monitors and link checkers probe pages with it


def static_files() -> StaticFiles:
    """The dashboard's own CSS and JavaScript, mounted by the app at STATIC_PATH."""
    return StaticFiles(directory=str(STATIC_DIR))


def _root(request: Request) -> str:
    """Prefix for links, so the dashboard also works behind a proxy with a root path."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def _safe_next(target: str | None) -> str:
    """Only same-origin paths: `next=//evil.example` must not become an open redirect."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    if target.startswith(("/login", "/logout")):
        return "/"
    return target


def _dashboard_role(request: Request) -> str | None:
    role = resolve_role(request, session_cookie(request))
    return role if role in OPERATE else None


def _cookie_args(request: Request) -> dict[str, Any]:
    return {
        "path": _root(request) or "/",
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
    }


def _to_login(request: Request) -> RedirectResponse:
    root, here = _root(request), request.url.path
    if root and here.startswith(root):
        here = here[len(root) :] or "/"
    if request.url.query:
        here += "?" + request.url.query
    return RedirectResponse(f"{_root(request)}/login?next={quote(here, safe='')}", 303)


def _render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    base = {
        "root": _root(request),
        "version": __version__,
        "static": _root(request) + STATIC_PATH,
        "plotly_src": f"{_root(request)}{PLOTLY_PATH}?v={plotly_version}",
        "role": context.pop("role", None),
        "csrf": context.pop("csrf", None),
    }
    return templates.TemplateResponse(
        request, name, {**base, **context}, status_code=status_code, headers=PAGE_HEADERS
    )


def _page(request: Request, name: str, **context: Any) -> Response:
    """Render a dashboard page for an operator or admin; everyone else goes to the login form."""
    role = _dashboard_role(request)
    if role is None:
        return _to_login(request)
    cookie = session_cookie(request)  # None under --demo-auth: the API needs no token then
    return _render(request, name, role=role, csrf=csrf_token(cookie) if cookie else "", **context)


@router.api_route("/", methods=PAGE_METHODS, response_class=HTMLResponse)
def overview(request: Request) -> Response:
    return _page(request, "overview.html", page="overview", title="Overview")


@router.api_route("/hosts/{name}", methods=PAGE_METHODS, response_class=HTMLResponse)
def host(request: Request, name: str) -> Response:
    return _page(
        request,
        "host.html",
        page="host",
        title=name,
        host=name,
        calibration_path=HORIZON_CALIBRATION_PATH.replace("{name}", quote(name, safe="")),
    )


@router.api_route("/playground", methods=PAGE_METHODS, response_class=HTMLResponse)
def playground(request: Request) -> Response:
    return _page(request, "playground.html", page="playground", title="Schedule playground")


@router.api_route("/replays", methods=PAGE_METHODS, response_class=HTMLResponse)
def replays(request: Request) -> Response:
    return _page(request, "replays.html", page="replays", title="Replays")


@router.api_route("/replays/{job_id}", methods=PAGE_METHODS, response_class=HTMLResponse)
def replay(request: Request, job_id: str) -> Response:
    return _page(request, "replay.html", page="replays", title=f"Replay {job_id}", job_id=job_id)


@router.api_route("/models", methods=PAGE_METHODS, response_class=HTMLResponse)
def models_page(request: Request) -> Response:
    """Empirical models of stored runs (data from ppe.service.dashboard.models_data)."""
    return _page(
        request, "models_page.html", page="models", title="Models", data_path=MODELS_DATA_PATH
    )


@router.api_route("/whatif", methods=PAGE_METHODS, response_class=HTMLResponse)
def whatif(request: Request) -> Response:
    """Edit, check and run what-if specs (``?job=ID`` opens a job); the page calls
    ``/api/v1/whatif`` and takes its examples from ppe.service.dashboard.whatif_data."""
    return _page(
        request,
        "whatif.html",
        page="whatif",
        title="What-if",
        examples_path=WHATIF_EXAMPLES_PATH,
        strategies=list(STRATEGIES),
    )


@router.api_route("/runs", methods=PAGE_METHODS, response_class=HTMLResponse)
def runs(request: Request) -> Response:
    """Reported runs against their served intervals, and the live accuracy per strategy."""
    return _page(request, "runs.html", page="runs", title="Runs")


@router.api_route("/signatures", methods=PAGE_METHODS, response_class=HTMLResponse)
def signatures(request: Request) -> Response:
    """Stored PAS2P phase signatures, their phases and the probes run with them (``?name=``
    opens one; data from ppe.service.dashboard.signatures_data)."""
    return _page(
        request,
        "signatures.html",
        page="signatures",
        title="Signatures",
        data_path=SIGNATURES_DATA_PATH,
    )


def _login_page(
    request: Request, next_path: str, status_code: int = 200, error: str | None = None
) -> Response:
    """The login form, with a CSRF token derived from this browser's login nonce (set here when
    the browser has none yet)."""
    nonce = request.cookies.get(LOGIN_NONCE_COOKIE) or ""
    fresh = len(nonce) != 43  # secrets.token_urlsafe(32); anything else was not set by us
    if fresh:
        nonce = secrets.token_urlsafe(32)
    response = _render(
        request,
        "login.html",
        status_code,
        page="login",
        title="Sign in",
        next=next_path,
        error=error,
        csrf=csrf_token(nonce),
    )
    if fresh:
        response.set_cookie(LOGIN_NONCE_COOKIE, nonce, **_cookie_args(request))
    return response


def _forged(request: Request, secret: str | None, form_token: str) -> bool:
    """A state-changing form that did not come from one of our pages."""
    return not same_origin(request, require_evidence=True) or not csrf_matches(secret, form_token)


@router.api_route("/login", methods=PAGE_METHODS, response_class=HTMLResponse)
def login_form(request: Request, next: str = "/") -> Response:
    if _dashboard_role(request) is not None:
        return RedirectResponse(_root(request) + _safe_next(next), 303)
    return _login_page(request, _safe_next(next))


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request, token: str = Form(""), next: str = Form("/"), csrf: str = Form("")
) -> Response:
    token = token.strip()
    target = _safe_next(next)
    if _forged(request, request.cookies.get(LOGIN_NONCE_COOKIE), csrf):
        error = "This sign-in form did not come from this dashboard, or has expired: sign in again."
        return _login_page(request, target, 403, error)
    role = resolve_role(request, token) if token else None
    if role is None:
        error = (
            "Enter a token." if not token else "This token is unknown, expired or has been revoked."
        )
        return _login_page(request, target, 401, error)
    if role not in OPERATE:
        error = (
            f"{article(role).capitalize()} {role} token cannot open the dashboard: "
            "use an operator or admin token (ppe token create --role operator)."
        )
        return _login_page(request, target, 403, error)
    response = RedirectResponse(_root(request) + target, 303)
    response.set_cookie(COOKIE, token, max_age=COOKIE_MAX_AGE_S, **_cookie_args(request))
    return response


@router.post("/logout")
def logout(request: Request, csrf: str = Form("")) -> Response:
    cookie = session_cookie(request)
    if cookie is not None and _forged(request, cookie, csrf):
        return PlainTextResponse(
            "Sign-out refused: the request did not come from this dashboard's page.", 403
        )
    response = RedirectResponse(f"{_root(request)}/login", 303)
    response.delete_cookie(COOKIE, **_cookie_args(request))
    return response


@lru_cache(maxsize=1)
def _plotly() -> tuple[bytes, bytes, str]:
    """plotly.js from the installed Python package: raw, gzipped, and its ETag."""
    from plotly.offline import get_plotlyjs

    raw = get_plotlyjs().encode()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return raw, gzip.compress(raw, 6, mtime=0), f'"{digest}"'


@router.api_route(PLOTLY_PATH, methods=PAGE_METHODS)
def plotly_js(request: Request) -> Response:
    """Served with a year-long immutable cache: page links carry the plotly package version."""
    raw, packed, etag = _plotly()
    headers = {
        "Cache-Control": "public, max-age=31536000, immutable",
        "ETag": etag,
        "Vary": "Accept-Encoding",
        "X-Content-Type-Options": "nosniff",
    }
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    media = "application/javascript; charset=utf-8"
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(packed, media_type=media, headers={**headers, "Content-Encoding": "gzip"})
    return Response(raw, media_type=media, headers=headers)
