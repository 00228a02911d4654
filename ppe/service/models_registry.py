"""Model lookup for requests: built-in grammar models first, then those users registered."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ppe.core import CompiledModel, builtin_models, compile_model
from ppe.service.store.models import UserModel


def resolve(session: Session, name: str | None, inline: str | None = None) -> CompiledModel:
    """Raises ppe.core.GrammarError for bad text and LookupError for an unknown name."""
    if inline is not None:
        return compile_model(inline)
    builtins = builtin_models()
    if name in builtins:
        return compile_model(builtins[name])
    text = session.execute(select(UserModel.text).where(UserModel.name == name)).scalar()
    if text is None:
        known = sorted([*builtins, *session.execute(select(UserModel.name)).scalars()])
        raise LookupError(f"unknown model {name!r}; known: {', '.join(known)}")
    return compile_model(text)
