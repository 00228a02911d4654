"""Bearer-token authentication and role checks, as FastAPI dependencies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

import anyio
from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ppe.service.deps import services_of
from ppe.service.store.db import session_scope
from ppe.service.store.tokens import role_of

# Who may do what (docs/architecture.md, "HTTP contract"): admin may do everything.
SENSOR_WRITE = ("sensor", "admin")
READ = ("app", "operator", "admin")
APP_USE = ("app", "operator", "admin")
OPERATE = ("operator", "admin")
ADMIN = ("admin",)

bearer = HTTPBearer(auto_error=False, description="A token from `ppe token create`")


def token_from_request(request: Request, creds: HTTPAuthorizationCredentials | None) -> str | None:
    if creds is not None:
        return creds.credentials
    return request.cookies.get("ppe_token")


def cached_role(request: Request, token: str | None) -> tuple[bool, str | None]:
    """The role without touching the store, when it is known: ``(found, role)``."""
    services = services_of(request)
    if token is None:
        return True, "admin" if services.settings.demo_auth else None
    return services.tokens.get(token)


def resolve_role(request: Request, token: str | None) -> str | None:
    found, role = cached_role(request, token)
    if not found:
        assert token is not None
        services = services_of(request)
        with session_scope(services.sessions) as session:
            role = role_of(session, token)
        services.tokens.put(token, role)
    return role


def require(*roles: str) -> Callable[..., Awaitable[str]]:
    """Dependency factory: 401 without a valid token, 403 when the role may not do this."""

    async def dependency(
        request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
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
