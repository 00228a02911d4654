"""Bearer-token authentication and role checks, as FastAPI dependencies."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

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


def resolve_role(request: Request, token: str | None) -> str | None:
    state = request.app.state
    if token is None:
        return "admin" if state.settings.demo_auth else None
    found, role = state.token_cache.get(token)
    if not found:
        with session_scope(state.sessions) as session:
            role = role_of(session, token)
        state.token_cache.put(token, role)
    return role


def require(*roles: str) -> Callable[..., str]:
    """Dependency factory: 401 without a valid token, 403 when the role may not do this."""

    def dependency(
        request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> str:
        role = resolve_role(request, token_from_request(request, creds))
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
