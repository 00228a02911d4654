"""User-defined performance-grammar models (Prophecy's template database)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, status
from fastapi.responses import JSONResponse
from sqlalchemy import select

from ppe.core import builtin_models, validate_model
from ppe.service.auth import APP_USE, READ, require
from ppe.service.deps import SessionDep
from ppe.service.schemas import ModelIn
from ppe.service.store.models import UserModel

router = APIRouter(tags=["models"])


@router.get("/models")
def list_models(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": name, "builtin": True, "text": text, "description": ""}
        for name, text in builtin_models().items()
    ]
    for m in session.execute(select(UserModel).order_by(UserModel.name)).scalars():
        out.append(
            {
                "name": m.name,
                "builtin": False,
                "text": m.text,
                "description": m.description,
                "created_at": m.created_at,
            }
        )
    return out


@router.post("/models", status_code=status.HTTP_201_CREATED)
def post_model(
    body: ModelIn,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*APP_USE))],
) -> Any:
    """Validate the model text (every error, with line, column and token) and store it."""
    if body.name in builtin_models():
        raise HTTPException(409, f"{body.name!r} is a built-in model; choose another name")
    errors = validate_model(body.text)
    if errors:
        return JSONResponse({"detail": [e.to_dict() for e in errors]}, status_code=422)
    existing = session.execute(
        select(UserModel).where(UserModel.name == body.name)
    ).scalar_one_or_none()
    if existing is None:
        session.add(UserModel(name=body.name, text=body.text, description=body.description))
    else:
        existing.text, existing.description = body.text, body.description
    return {"name": body.name, "builtin": False, "text": body.text, "description": body.description}
