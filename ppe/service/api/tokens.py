"""Token management for admins (the CLI's `ppe token create` does the same offline)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, status

from ppe.service.auth import ADMIN, require
from ppe.service.deps import SessionDep
from ppe.service.schemas import TokenCreate, TokenCreated
from ppe.service.store.tokens import create_token

router = APIRouter(tags=["tokens"])


@router.post("/tokens", response_model=TokenCreated, status_code=status.HTTP_201_CREATED)
def post_token(
    body: TokenCreate,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*ADMIN))],
) -> TokenCreated:
    return TokenCreated(token=create_token(session, body.role, body.label), role=body.role)
