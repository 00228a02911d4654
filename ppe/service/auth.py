"""Authentication and role checks, as FastAPI dependencies.

Applications authenticate with a bearer token. The dashboard's pages call the same API with the
HttpOnly session cookie set at login, which a browser attaches to any request to this host,
including a form another site (or another port of this host: SameSite does not separate ports)
submits. So the API accepts that cookie only together with the page's CSRF token in the
`X-PPE-CSRF` header and same-origin evidence from the browser: a cross-origin form cannot set a
header, and a cross-origin script that tries gets stopped by CORS preflight, which this server
never grants. The CSRF token is an HMAC of the session token, so it needs no server-side state
and holds across workers and restarts, and a page that leaks it does not leak the token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

import anyio
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import SQLAlchemyError

from ppe.service.deps import services_of
from ppe.service.store.db import session_scope
from ppe.service.store.tokens import MAX_TOKEN_CHARS, TokenInfo, lookup, touch

# Who may do what (docs/architecture.md, "HTTP contract"): admin may do everything.
SENSOR_WRITE = ("sensor", "admin")
READ = ("app", "operator", "admin")
APP_USE = ("app", "operator", "admin")
OPERATE = ("operator", "admin")
ADMIN = ("admin",)

COOKIE = "ppe_token"  # the dashboard's session: the token itself, HttpOnly, SameSite=Strict
CSRF_HEADER = "X-PPE-CSRF"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

log = logging.getLogger(__name__)
bearer = HTTPBearer(auto_error=False, description="A token from `ppe token create`")


@dataclass(frozen=True)
class Principal:
    """Who is asking: the token's role and id (None for --demo-auth's token-less admin)."""

    role: str
    token_id: int | None


def plausible(token: str | None) -> bool:
    """Could the store hold this token? Junk is refused before it costs memory or a query."""
    return bool(token) and len(token or "") <= MAX_TOKEN_CHARS


def csrf_token(secret: str) -> str:
    """The CSRF token a page embeds: derived from a secret the browser holds in an HttpOnly
    cookie (the session token, or before login a random nonce)."""
    return hmac.new(secret.encode(), b"ppe-csrf-v1", hashlib.sha256).hexdigest()


def csrf_matches(secret: str | None, presented: str | None) -> bool:
    if not secret or not presented or not plausible(secret):
        return False
    return hmac.compare_digest(csrf_token(secret), presented)


def own_origins(request: Request) -> set[str]:
    """This server's origin as the browser sees it: from the Host header, and from a reverse
    proxy's X-Forwarded-Host/-Proto (a cross-origin form cannot set those headers)."""
    scheme, host = request.url.scheme, request.headers.get("host", "")
    origins = {f"{scheme}://{host}"}
    fwd_host = request.headers.get("x-forwarded-host", "").split(",")[0].strip()
    fwd_proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip()
    if fwd_host or fwd_proto:
        origins.add(f"{fwd_proto or scheme}://{fwd_host or host}")
    return origins


def same_origin(request: Request, *, require_evidence: bool) -> bool:
    """Does the browser say this request comes from one of our own pages?

    Sec-Fetch-Site first (browsers set it, pages cannot), then Origin, then Referer. With no
    evidence at all (not a browser, or a very old one) the answer is `not require_evidence`.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        allowed = {"same-origin", "none"} if request.method in SAFE_METHODS else {"same-origin"}
        if site not in allowed:
            return False
    origin = request.headers.get("origin")
    if origin is not None:
        return origin in own_origins(request)  # "null" (sandboxed, file:) never matches
    referer = request.headers.get("referer")
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}" in own_origins(request)
    return site == "same-origin" or not require_evidence


def session_cookie(request: Request) -> str | None:
    return request.cookies.get(COOKIE)


def _presented_token(request: Request, creds: HTTPAuthorizationCredentials | None) -> str | None:
    """The token an API request presents: its bearer token, else the dashboard's cookie when the
    request carries the matching CSRF header and comes from our own origin. A cookie without
    both is no credential at all here: "" (presented, unusable), never the anonymous path."""
    if creds is not None:
        return creds.credentials
    cookie = session_cookie(request)
    if cookie is None:
        return None
    if csrf_matches(cookie, request.headers.get(CSRF_HEADER)) and same_origin(
        request, require_evidence=True
    ):
        return cookie
    return ""


def cached_identity(request: Request, token: str) -> TokenInfo | None:
    return services_of(request).tokens.get(token)


def resolve_identity(request: Request, token: str | None) -> TokenInfo | None:
    """The token's identity from the cache or the store (blocking: call from a thread). Only
    plausible tokens are looked up and only valid ones cached."""
    if token is None or not plausible(token):
        return None
    services = services_of(request)
    info = services.tokens.get(token)
    if info is None:
        with session_scope(services.sessions) as session:
            info = lookup(session, token)
        if info is not None:
            services.tokens.put(token, info)
            _note_use(request, info)
    return info


def _note_use(request: Request, info: TokenInfo) -> None:
    """Best effort, apart from the check: a store too busy to take this write must not turn
    a valid token away."""
    now = time.time()
    if not info.used_long_ago(now):
        return
    try:
        with session_scope(services_of(request).sessions) as session:
            touch(session, info.id, now)
    except SQLAlchemyError as exc:
        log.warning("could not record use of token %s: %s", info.id, exc)


def resolve_role(request: Request, token: str | None) -> str | None:
    """The dashboard's check: the role of a session token (the pages are only ever GETs)."""
    if token is None:
        return "admin" if services_of(request).settings.demo_auth else None
    info = resolve_identity(request, token)
    return info.role if info else None


async def authenticate(request: Request, token: str | None) -> Principal | None:
    """async: a cached token is checked on the event loop, no hop to a worker thread; only a
    cache miss reads the store, in a thread."""
    if token is None:
        # --demo-auth: no token acts as admin, but never for a request another site's page
        # makes (it would need no cookie at all to drive this server).
        demo = services_of(request).settings.demo_auth
        if demo and same_origin(request, require_evidence=False):
            return Principal("admin", None)
        return None
    if not plausible(token):
        return None
    info = cached_identity(request, token)
    if info is None:
        info = await anyio.to_thread.run_sync(resolve_identity, request, token)
    return Principal(info.role, info.id) if info else None


def authorize(*roles: str) -> Callable[..., Awaitable[Principal]]:
    """Dependency factory: 401 without a valid token, 403 when the role may not do this."""

    async def dependency(
        request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> Principal:
        who = await authenticate(request, _presented_token(request, creds))
        if who is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing, invalid, expired or revoked token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if who.role not in roles:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"role {who.role!r} may not do this; needs one of {', '.join(roles)}",
            )
        return who

    return dependency


def require(*roles: str) -> Callable[..., Awaitable[str]]:
    """Like `authorize`, for routes that only need the role."""
    check = authorize(*roles)

    # A default, not Annotated: annotations are strings here (PEP 563) and FastAPI resolves
    # them in the module's globals, where `check` does not exist.
    async def dependency(who: Principal = Depends(check)) -> str:  # noqa: B008
        return who.role

    return dependency
