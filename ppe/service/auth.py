"""Bearer-token authentication and role checks, as FastAPI dependencies."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ppe.service.store.db import session_scope
from ppe.service.store.tokens import role_of

# Who may do what (DESIGN.md "Tokens"): admin may do everything.
SENSOR_WRITE = ("sensor", "admin")
READ = ("app", "operator", "admin")
APP_USE = ("app", "operator", "admin")
OPERATE = ("operator", "admin")
ADMIN = ("admin",)

bearer = HTTPBearer(auto_error=False, description="A token from `ppe token create`")


@dataclass
class TokenCache:
    """Short-lived cache of token → role so a hot path does not hit the store every request."""

    ttl_s: float = 10.0
    entries: dict[str, tuple[str | None, float]] = field(default_factory=dict)

    def get(self, token: str) -> tuple[bool, str | None]:
        hit = self.entries.get(token)
        if hit and time.monotonic() - hit[1] < self.ttl_s:
            return True, hit[0]
        return False, None

    def put(self, token: str, role: str | None) -> None:
        if len(self.entries) > 10_000:
            self.entries.clear()
        self.entries[token] = (role, time.monotonic())


def token_from_request(request: Request, creds: HTTPAuthorizationCredentials | None) -> str | None:
    if creds is not None:
        return creds.credentials
    return request.cookies.get("ppe_token")


def cached_role(request: Request, token: str | None) -> tuple[bool, str | None]:
    """The role without touching the store, when it is known: ``(found, role)``."""
    state = request.app.state
    if token is None:
        return True, "admin" if state.settings.demo_auth else None
    found, role = state.token_cache.get(token)
    return found, role


def resolve_role(request: Request, token: str | None) -> str | None:
    found, role = cached_role(request, token)
    if not found:
        assert token is not None
        state = request.app.state
        with session_scope(state.sessions) as session:
            role = role_of(session, token)
        state.token_cache.put(token, role)
    return role


def require(*roles: str) -> Callable[..., Awaitable[str]]:
    """Dependency factory: 401 without a valid token, 403 when the role may not do this."""

    async def dependency(
        request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> str:
        # async: a cached token is checked on the event loop, no hop to a worker thread; only
        # a cache miss reads the store, in a thread.
        token = token_from_request(request, creds)
        found, role = cached_role(request, token)
        if not found:
            role = await anyio.to_thread.run_sync(resolve_role, request, token)
        if role is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing or invalid token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if role not in roles:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"role {role!r} may not do this; needs one of {', '.join(roles)}",
            )
        return role

    return dependency
