"""PAS2P phase signatures and their probes in the store (docs/pas2p.md, "Storage").

A signature is versioned by name like a PMaC one: re-posting the newest version's content (a
client retrying after a lost answer) stores nothing. A probe belongs to one version, so the
times a host measured stay tied to the phases they were measured for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ppe.service.store.models import PhaseProbe, PhaseSignature, Resource


@dataclass(frozen=True)
class SignatureContent:
    """What a posted signature holds; two posts are the same version when these are equal."""

    app: str
    parameters: dict[str, Any]
    ranks: int
    analysis: dict[str, Any]


@dataclass(frozen=True)
class ProbeRow:
    """A stored probe with the names it refers to."""

    id: int
    name: str
    version: int
    host: str
    status: str
    error: str
    result: dict[str, Any] | None
    created_at: float


def newest(session: Session, name: str) -> PhaseSignature | None:
    return (
        session.execute(
            select(PhaseSignature)
            .where(PhaseSignature.name == name)
            .order_by(PhaseSignature.version.desc())
            .limit(1)
        )
        .scalars()
        .first()
    )


def content_of(row: PhaseSignature) -> SignatureContent:
    return SignatureContent(row.app, row.parameters, row.ranks, row.analysis)


def save(session: Session, name: str, content: SignatureContent) -> tuple[PhaseSignature, bool]:
    """Store ``content`` as ``name``'s next version; the newest version's content again is
    that version (False: nothing stored)."""
    last = newest(session, name)
    if last is not None and content_of(last) == content:
        return last, False
    row = PhaseSignature(
        name=name,
        version=(last.version if last is not None else 0) + 1,
        app=content.app,
        parameters=content.parameters,
        ranks=content.ranks,
        analysis=content.analysis,
    )
    session.add(row)
    session.flush()  # a concurrent post of the same name fails the unique key: commit's 409
    return row, True


def get(session: Session, name: str, version: int | None = None) -> PhaseSignature | None:
    """``name``'s newest version, or the given one; None when there is none."""
    if version is None:
        return newest(session, name)
    return (
        session.execute(
            select(PhaseSignature).where(
                PhaseSignature.name == name, PhaseSignature.version == version
            )
        )
        .scalars()
        .first()
    )


def all_newest(session: Session) -> Sequence[PhaseSignature]:
    """Each name's newest version, by name."""
    top = (
        select(PhaseSignature.name, func.max(PhaseSignature.version).label("v"))
        .group_by(PhaseSignature.name)
        .subquery()
    )
    return list(
        session.execute(
            select(PhaseSignature)
            .join(top, (top.c.name == PhaseSignature.name) & (top.c.v == PhaseSignature.version))
            .order_by(PhaseSignature.name)
        ).scalars()
    )


def add_probe(
    session: Session,
    signature: PhaseSignature,
    resource: int,
    status: str,
    error: str,
    result: dict[str, Any] | None,
) -> PhaseProbe:
    row = PhaseProbe(
        signature_id=signature.id,
        resource_id=resource,
        status=status,
        error=error,
        result=result,
    )
    session.add(row)
    session.flush()
    return row


def probes(
    session: Session,
    name: str,
    *,
    host: str | None = None,
    version: int | None = None,
    limit: int = 100,
) -> list[ProbeRow]:
    """``name``'s probes (of every version, or ``version``'s), newest first."""
    query = (
        select(PhaseProbe, PhaseSignature.version, Resource.name)
        .join(PhaseSignature, PhaseSignature.id == PhaseProbe.signature_id)
        .join(Resource, Resource.id == PhaseProbe.resource_id)
        .where(PhaseSignature.name == name)
    )
    if host is not None:
        query = query.where(Resource.name == host)
    if version is not None:
        query = query.where(PhaseSignature.version == version)
    rows = session.execute(query.order_by(PhaseProbe.id.desc()).limit(limit))
    return [
        ProbeRow(p.id, name, v, h, p.status, p.error, p.result, p.created_at) for p, v, h in rows
    ]
