"""Model lookup for requests: built-in grammar models first, then those users registered, then
applications known only from their runs; and the fitted models ``empirical(...)`` calls read."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from ppe.core import CompiledModel, bind_empirical, builtin_models, compile_model
from ppe.empirical.strip import ROW_KERNEL, strip_model_text
from ppe.service.empirical import BoundFit, FitCache
from ppe.service.store.models import Run, StoredEmpiricalModel, UserModel


@dataclass(frozen=True)
class Resolved:
    """A model ready to evaluate, and what a caller should be told about where it came from."""

    model: CompiledModel
    notes: tuple[str, ...] = ()


def resolve(session: Session, name: str | None, inline: str | None, fits: FitCache) -> Resolved:
    """Raises ppe.core.GrammarError for bad text, LookupError for an unknown name and
    ppe.core.ModelError (an empirical one) when a fit the model reads cannot be made."""
    if inline is not None:
        return bind(session, compile_model(inline), fits)
    builtins = builtin_models()
    if name in builtins:
        return bind(session, compile_model(builtins[name]), fits)
    text = session.execute(select(UserModel.text).where(UserModel.name == name)).scalar()
    if text is not None:
        return bind(session, compile_model(text), fits)
    if name is not None and _has_row_model(session, name):
        row = fits.latest(session, name, ROW_KERNEL)
        model = compile_model(strip_model_text(name, row.fit.model.params))
        return _bound(model, {(name, ROW_KERNEL): row})
    known = sorted([*builtins, *session.execute(select(UserModel.name)).scalars()])
    raise LookupError(
        f"unknown model {name!r}; known: {', '.join(known)}; or an application with runs "
        f"of its {ROW_KERNEL!r} kernel (its time per row and iteration)"
    )


def bind(session: Session, model: CompiledModel, fits: FitCache) -> Resolved:
    """``model`` with the fits its ``empirical(...)`` calls read (none: the model itself)."""
    refs = model.empirical_refs()
    if not refs:
        return Resolved(model)
    found = {
        ref: fits.named(session, ref[0]) if len(ref) == 1 else fits.latest(session, *ref)
        for ref in refs
    }
    return _bound(model, found)


def _bound(model: CompiledModel, found: dict[tuple[str, ...], BoundFit]) -> Resolved:
    sources = {ref: b.fit for ref, b in found.items()}
    binding = "|".join(b.tag for b in found.values())
    return Resolved(bind_empirical(model, sources, binding), tuple(b.note for b in found.values()))


def _has_row_model(session: Session, app: str) -> bool:
    """Whether ``app`` has completed runs of its row kernel or a model saved for it."""
    runs = exists().where(Run.app == app, Run.kernel == ROW_KERNEL, Run.status == "completed")
    saved = exists().where(
        StoredEmpiricalModel.app == app, StoredEmpiricalModel.kernel == ROW_KERNEL
    )
    return bool(session.execute(select(runs | saved)).scalar())
