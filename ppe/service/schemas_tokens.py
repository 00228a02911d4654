"""Pydantic schemas for token management (`/api/v1/tokens`). Kept apart from schemas.py so token
changes and request-validation changes do not touch the same file."""

from __future__ import annotations

import time
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from ppe.service.schemas import Role
from ppe.service.store.models import LABEL_MAX, ApiToken
from ppe.service.store.tokens import article, check_label

Label = Annotated[
    str,
    Field(max_length=LABEL_MAX, description="free text shown in listings; no control characters"),
    AfterValidator(check_label),
]
UnixTime = Annotated[float, Field(gt=0, allow_inf_nan=False, description="Unix seconds")]


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role
    label: Label = ""
    expires_at: UnixTime | None = Field(default=None, description="never expires when omitted")
    expires_in_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        default=None, description="lifetime from now, instead of expires_at"
    )

    @model_validator(mode="after")
    def _one_expiry(self) -> Self:
        if self.expires_at is not None and self.expires_in_s is not None:
            raise ValueError("give expires_at or expires_in_s, not both")
        if self.expires_at is not None and self.expires_at <= time.time():
            raise ValueError("expires_at is in the past")
        return self

    def expiry(self) -> float | None:
        if self.expires_in_s is not None:
            return time.time() + self.expires_in_s
        return self.expires_at


class TokenUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: Label


class TokenOut(BaseModel):
    """A token as listed: never the secret, nor its hash."""

    id: int
    role: Role
    label: str
    created_at: float
    expires_at: float | None
    revoked: bool
    revoked_at: float | None
    last_used_at: float | None = Field(description="to within a minute; None: never used")
    active: bool = Field(description="neither revoked nor expired: requests with it succeed")

    @classmethod
    def of(cls, row: ApiToken, now: float | None = None) -> TokenOut:
        now = time.time() if now is None else now
        expired = row.expires_at is not None and now >= row.expires_at
        return cls(
            id=row.id,
            role=row.role,  # type: ignore[arg-type]
            label=row.label,
            created_at=row.created_at,
            expires_at=row.expires_at,
            revoked=row.revoked,
            revoked_at=row.revoked_at,
            last_used_at=row.last_used_at,
            active=not row.revoked and not expired,
        )


class TokenCreated(TokenOut):
    token: str = Field(description="the secret: shown this once, only its hash is kept")
    message: str


def created_message(role: str) -> str:
    return f"created {article(role)} {role} token (store it now; only its hash is kept)"
