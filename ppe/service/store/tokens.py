"""Issuing, checking, listing and revoking API tokens, and the per-worker cache of checks."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from cachetools import TTLCache
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ppe.service.store.models import LABEL_MAX, ROLES, ApiToken

# Real tokens are `ppe_<role>_<32 urlsafe chars>`, 45 characters at most. Anything much longer is
# junk, refused before it is hashed, cached or looked up (auth.MAX_TOKEN_CHARS uses this).
MAX_TOKEN_CHARS = 256
# last_used_at is written at most this often per token: a write on every request would cost more
# than the request, and "used in the last minute" is all an operator needs to know.
LAST_USED_RESOLUTION_S = 60.0


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def article(word: str) -> str:
    """The indefinite article for a word: "an admin", "an app", "a sensor"."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def check_label(label: str) -> str:
    """Labels are shown in tables and terminals: no control characters (PostgreSQL refuses NUL
    in text, which once left a token stored nowhere but still handed out), and no longer than
    the column."""
    if len(label) > LABEL_MAX:
        raise ValueError(f"label is {len(label)} characters long; at most {LABEL_MAX} allowed")
    bad = sorted({repr(c) for c in label if unicodedata.category(c) == "Cc"})
    if bad:
        raise ValueError(f"label may not contain control characters ({', '.join(bad)})")
    return label


def issue_token(
    session: Session, role: str, label: str = "", expires_at: float | None = None
) -> tuple[ApiToken, str]:
    """Store a new token's digest; return its row and the token itself (shown once, never
    stored). The row's id is set (flushed)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    check_label(label)
    token = f"ppe_{role}_{secrets.token_urlsafe(24)}"
    row = ApiToken(token_hash=hash_token(token), role=role, label=label, expires_at=expires_at)
    session.add(row)
    session.flush()
    return row, token


def create_token(
    session: Session, role: str, label: str = "", expires_at: float | None = None
) -> str:
    return issue_token(session, role, label, expires_at)[1]


@dataclass(frozen=True)
class TokenInfo:
    """What a request may know about the token it presented (never the token itself)."""

    id: int
    role: str
    expires_at: float | None = None
    # Read with the token: lets the caller skip the last-used write when it is recent.
    last_used_at: float | None = field(default=None, compare=False)

    def expired(self, now: float | None = None) -> bool:
        return (
            self.expires_at is not None and (time.time() if now is None else now) >= self.expires_at
        )

    def used_long_ago(self, now: float) -> bool:
        return self.last_used_at is None or now - self.last_used_at >= LAST_USED_RESOLUTION_S


def lookup(session: Session, token: str, now: float | None = None) -> TokenInfo | None:
    """The token's identity when it is known, not revoked and not expired; else None."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    now = time.time() if now is None else now
    row = session.execute(
        select(ApiToken.id, ApiToken.role, ApiToken.expires_at, ApiToken.last_used_at).where(
            ApiToken.token_hash == hash_token(token), ApiToken.revoked.is_(False)
        )
    ).first()
    if row is None:
        return None
    info = TokenInfo(row.id, row.role, row.expires_at, row.last_used_at)
    return None if info.expired(now) else info


def touch(session: Session, token_id: int, now: float | None = None) -> None:
    """Record that the token was just used (callers do it at most once a minute per token)."""
    now = time.time() if now is None else now
    session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))


def list_tokens(session: Session) -> Sequence[ApiToken]:
    return session.execute(select(ApiToken).order_by(ApiToken.id)).scalars().all()


def get_token(session: Session, token_id: int) -> ApiToken | None:
    return session.get(ApiToken, token_id)


def revoke_token(session: Session, token_id: int) -> ApiToken | None:
    """Revoke (idempotent: the first revocation time is kept); None for an unknown id."""
    row = session.get(ApiToken, token_id)
    if row is not None and not row.revoked:
        row.revoked, row.revoked_at = True, time.time()
    return row


def relabel_token(session: Session, token_id: int, label: str) -> ApiToken | None:
    row = session.get(ApiToken, token_id)
    if row is not None:
        row.label = check_label(label)
    return row


def bootstrap_admin(session: Session) -> str | None:
    """On a store with no tokens at all, issue a first admin token so someone can log in."""
    if session.execute(select(ApiToken.id).limit(1)).first() is not None:
        return None
    return create_token(session, "admin", "bootstrap")


class TokenCache:
    """Short-lived cache of valid tokens' identities, so a hot path does not hit the store every
    request.

    Keyed by the token's SHA-256 digest (the store's `token_hash`): the cache never holds a
    token, its entries are all the same small size, and revocation can evict by the stored hash.
    Unknown tokens are never cached, so junk cannot fill it; its size is bounded and it is
    locked, since requests check tokens from the event loop and from worker threads at once.
    Revocation through this worker evicts at once; another worker, or the CLI, is seen within
    `ttl_s`.
    """

    def __init__(self, ttl_s: float = 10.0, maxsize: int = 4096) -> None:
        self.ttl_s = ttl_s
        self._entries: TTLCache[str, TokenInfo] = TTLCache(maxsize=maxsize, ttl=ttl_s)
        # Hashes revoked here lately: a lookup that read the store just before the revocation
        # committed must not put the token back afterwards.
        self._revoked: TTLCache[str, bool] = TTLCache(maxsize=maxsize, ttl=ttl_s)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            self._entries.expire()
            return len(self._entries)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._entries.keys())

    def get(self, token: str) -> TokenInfo | None:
        """The cached identity, or None when the store must be asked."""
        key = hash_token(token)
        with self._lock:
            info = self._entries.get(key)
            if info is not None and info.expired():
                del self._entries[key]
                return None
        return info

    def put(self, token: str, info: TokenInfo) -> None:
        key = hash_token(token)
        with self._lock:
            if key not in self._revoked:
                self._entries[key] = info

    def evict_hash(self, token_hash: str) -> None:
        """Forget a token that was just revoked (by its stored hash)."""
        with self._lock:
            self._entries.pop(token_hash, None)
            self._revoked[token_hash] = True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
