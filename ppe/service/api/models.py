"""User-defined performance-grammar models (Prophecy's template database).

A model belongs to the token that stored it: applications pick models by name, so one app token
replacing another's model would silently change what the other is predicted with. Only the owner
or an admin may replace or delete it; models without an owner (stored before ownership, or by an
admin without a token) only an admin.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Response, status
from fastapi.responses import JSONResponse
from sqlalchemy import select

from ppe.core import builtin_models, validate_model
from ppe.service.auth import APP_USE, READ, Principal, authorize, require
from ppe.service.deps import SessionDep, commit
from ppe.service.errors import (
    CONFLICT,
    NOT_FOUND,
    PLANNING,
    ROUTER_RESPONSES,
    ProblemRoute,
    problem,
)
from ppe.service.schemas import ModelIn
from ppe.service.store.models import UserModel

router = APIRouter(tags=["models"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)
AppUser = Annotated[Principal, Depends(authorize(*APP_USE))]
MODEL_WRITE = {**CONFLICT, 422: PLANNING[422]}


def _out(m: UserModel) -> dict[str, Any]:
    return {
        "name": m.name,
        "builtin": False,
        "text": m.text,
        "description": m.description,
        "created_at": m.created_at,
        "owner_token_id": m.owner_token_id,
    }


def _check_may_change(model: UserModel, who: Principal, verb: str) -> None:
    if who.role == "admin":
        return
    if model.owner_token_id is None or model.owner_token_id != who.token_id:
        whose = (
            f"token {model.owner_token_id}'s" if model.owner_token_id is not None else "no token's"
        )
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            f"model {model.name!r} is {whose}, not yours: only its owner or an admin token "
            f"may {verb} it (or store yours under another name)",
        )


def _stored(session: SessionDep, name: str) -> UserModel | None:
    return session.execute(select(UserModel).where(UserModel.name == name)).scalar_one_or_none()


@router.get("/models")
def list_models(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": name, "builtin": True, "text": text, "description": ""}
        for name, text in builtin_models().items()
    ]
    for m in session.execute(select(UserModel).order_by(UserModel.name)).scalars():
        out.append(_out(m))
    return out


@router.post("/models", status_code=status.HTTP_201_CREATED, responses=MODEL_WRITE)
def post_model(body: ModelIn, session: SessionDep, who: AppUser) -> Any:
    """Validate the model text (every error, with line, column and token) and store it."""
    if body.name in builtin_models():
        raise problem(409, f"{body.name!r} is a built-in model; choose another name", "name")
    existing = _stored(session, body.name)
    if existing is not None:
        _check_may_change(existing, who, "replace")
    errors = validate_model(body.text)
    if errors:
        return JSONResponse({"detail": [e.to_dict() for e in errors]}, status_code=422)
    if existing is None:
        model = UserModel(
            name=body.name,
            text=body.text,
            description=body.description,
            owner_token_id=who.token_id,
        )
        session.add(model)
    else:
        model = existing
        model.text, model.description = body.text, body.description
    commit(session)  # before the 201: a lost race on the name answers 409, nothing stored
    return _out(model)


@router.delete(
    "/models/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, **CONFLICT},
)
def delete_model(name: str, session: SessionDep, who: AppUser) -> Response:
    if name in builtin_models():
        raise problem(409, f"{name!r} is a built-in model; it cannot be deleted", "path.name")
    model = _stored(session, name)
    if model is None:
        raise problem(404, f"no stored model {name!r}", "path.name")
    _check_may_change(model, who, "delete")
    session.delete(model)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
