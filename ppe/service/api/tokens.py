"""Token management for admins: list, create, relabel, revoke (`ppe token ...` does the same
offline, on the store)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, status

from ppe.service.auth import ADMIN, require
from ppe.service.deps import SessionDep, services_of
from ppe.service.errors import NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import IdPath
from ppe.service.schemas_tokens import (
    TokenCreate,
    TokenCreated,
    TokenOut,
    TokenUpdate,
    created_message,
)
from ppe.service.store.models import ApiToken
from ppe.service.store.tokens import get_token, issue_token, list_tokens, revoke_token

router = APIRouter(tags=["tokens"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)
AdminDep = Annotated[str, Depends(require(*ADMIN))]


def _found(row: ApiToken | None, token_id: int) -> ApiToken:
    if row is None:
        raise problem(status.HTTP_404_NOT_FOUND, f"no token {token_id}", "path.token_id")
    return row


@router.get("/tokens", response_model=list[TokenOut])
def get_tokens(session: SessionDep, _role: AdminDep) -> list[TokenOut]:
    return [TokenOut.of(row) for row in list_tokens(session)]


@router.post("/tokens", response_model=TokenCreated, status_code=status.HTTP_201_CREATED)
def post_token(body: TokenCreate, session: SessionDep, _role: AdminDep) -> TokenCreated:
    row, token = issue_token(session, body.role, body.label, body.expiry())
    out = TokenOut.of(row)
    return TokenCreated(**out.model_dump(), token=token, message=created_message(body.role))


@router.get("/tokens/{token_id}", response_model=TokenOut, responses=NOT_FOUND)
def get_one(token_id: IdPath, session: SessionDep, _role: AdminDep) -> TokenOut:
    return TokenOut.of(_found(get_token(session, token_id), token_id))


@router.patch("/tokens/{token_id}", response_model=TokenOut, responses=NOT_FOUND)
def patch_token(
    token_id: IdPath, body: TokenUpdate, session: SessionDep, _role: AdminDep
) -> TokenOut:
    row = _found(get_token(session, token_id), token_id)
    row.label = body.label
    session.flush()  # a store that refuses the label fails this request, not a later one
    return TokenOut.of(row)


@router.post("/tokens/{token_id}/revoke", response_model=TokenOut, responses=NOT_FOUND)
def post_revoke(
    token_id: IdPath, request: Request, session: SessionDep, _role: AdminDep
) -> TokenOut:
    """Idempotent. This worker forgets the token at once; other workers within their cache's
    lifetime (TokenCache.ttl_s)."""
    row = _found(revoke_token(session, token_id), token_id)
    session.commit()  # revoked in the store before any cache can learn the token again
    services_of(request).tokens.evict_hash(row.token_hash)
    return TokenOut.of(row)
