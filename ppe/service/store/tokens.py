"""Issuing and checking API tokens."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.service.store.models import ROLES, ApiToken


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, role: str, label: str = "") -> str:
    """Store a new token's digest and return the token itself (shown once, never stored)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    token = f"ppe_{role}_{secrets.token_urlsafe(24)}"
    session.add(ApiToken(token_hash=hash_token(token), role=role, label=label))
    return token


def role_of(session: Session, token: str) -> str | None:
    row = session.execute(
        select(ApiToken.role).where(
            ApiToken.token_hash == hash_token(token), ApiToken.revoked.is_(False)
        )
    ).first()
    return row[0] if row else None


def bootstrap_admin(session: Session) -> str | None:
    """On a store with no tokens at all, issue a first admin token so someone can log in."""
    if session.execute(select(ApiToken.id).limit(1)).first() is not None:
        return None
    return create_token(session, "admin", "bootstrap")


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
