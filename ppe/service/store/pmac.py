"""Machine profiles and application signatures in the store (PMaC, docs/pmac.md).

Profiles are kept per host and versioned: a sensor's daily re-measurement is the next
version, and re-posting the newest one (a sensor retrying after a lost answer) stores
nothing new. Signatures are TOML text, versioned per name; the shipped ones (``sor``,
``jacobi2d``) are package files and cannot be replaced, as the built-in models cannot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from ppe.pmac import MachineProfile, Signature, profile_from_dict, profile_to_dict
from ppe.pmac.signature import BUILTIN, builtin_signature_text
from ppe.service.store.measurements import ensure_resources, resource_id
from ppe.service.store.models import HostProfile, Resource, StoredSignature


@dataclass(frozen=True)
class StoredProfile:
    """A host's stored profile and its version number."""

    version: int
    profile: MachineProfile


def _next_version(
    session: Session, column: InstrumentedAttribute[int], where: ColumnElement[bool]
) -> int:
    newest = session.execute(select(func.max(column)).where(where)).scalar_one_or_none()
    return int(newest or 0) + 1


def save_profile(session: Session, host: str, profile: MachineProfile) -> tuple[HostProfile, bool]:
    """Store ``profile`` as ``host``'s next version (the host is registered if unknown);
    the same profile as the newest version is that version, not a new one."""
    rid = ensure_resources(session, [host])[host]
    body = profile_to_dict(profile)
    newest = _profiles(session, rid).limit(1)
    last = session.execute(newest).scalars().first()
    if last is not None and last.profile == body:
        return last, False
    row = HostProfile(
        resource_id=rid,
        version=_next_version(session, HostProfile.version, HostProfile.resource_id == rid),
        measured_at=profile.measured_at,
        method=profile.method,
        quick=profile.quick,
        profile=body,
    )
    session.add(row)
    session.flush()
    return row, True


def _profiles(session: Session, resource_id: int) -> Select[Any]:
    return (
        select(HostProfile)
        .where(HostProfile.resource_id == resource_id)
        .order_by(HostProfile.version.desc())
    )


def profile_versions(session: Session, host: str) -> list[HostProfile] | None:
    """``host``'s profiles, newest first; None for an unknown host."""
    rid = resource_id(session, host)
    if rid is None:
        return None
    return list(session.execute(_profiles(session, rid)).scalars())


def stored_profile(session: Session, host: str, version: int | None = None) -> HostProfile | None:
    """``host``'s newest profile, or the given version; None when there is none."""
    rid = resource_id(session, host)
    if rid is None:
        return None
    query = _profiles(session, rid)
    if version is not None:
        query = query.where(HostProfile.version == version)
    return session.execute(query.limit(1)).scalars().first()


def latest_profiles(session: Session, hosts: Iterable[str]) -> dict[str, StoredProfile]:
    """The newest profile of each of ``hosts`` that has one (read back through the format's
    validation, so a row can never feed the convolution anything the API would refuse)."""
    names = sorted(set(hosts))
    if not names:
        return {}
    newest = (
        select(HostProfile.resource_id, func.max(HostProfile.version).label("v"))
        .group_by(HostProfile.resource_id)
        .subquery()
    )
    rows = session.execute(
        select(Resource.name, HostProfile.version, HostProfile.profile)
        .join(HostProfile, HostProfile.resource_id == Resource.id)
        .join(
            newest,
            (newest.c.resource_id == HostProfile.resource_id) & (newest.c.v == HostProfile.version),
        )
        .where(Resource.name.in_(names))
    )
    return {name: StoredProfile(v, profile_from_dict(body)) for name, v, body in rows}


def save_signature(session: Session, sig: Signature, text: str) -> tuple[StoredSignature, bool]:
    """Store ``sig``'s TOML ``text`` (``parse_signature(text)``) as its name's next version;
    the same text as the newest version is that version."""
    if sig.name in BUILTIN:
        raise ValueError(
            f"{sig.name!r} is a built-in signature and cannot be replaced; post it under "
            "another name"
        )
    last = _newest_signature(session, sig.name)
    if last is not None and last.text == text:
        return last, False
    row = StoredSignature(
        name=sig.name,
        version=_next_version(session, StoredSignature.version, StoredSignature.name == sig.name),
        text=text,
    )
    session.add(row)
    session.flush()
    return row, True


def _newest_signature(session: Session, name: str) -> StoredSignature | None:
    return (
        session.execute(
            select(StoredSignature)
            .where(StoredSignature.name == name)
            .order_by(StoredSignature.version.desc())
            .limit(1)
        )
        .scalars()
        .first()
    )


@dataclass(frozen=True)
class SignatureText:
    """A signature's text and where it came from (``version`` 0 for a built-in one)."""

    name: str
    text: str
    version: int
    builtin: bool
    created_at: float | None


def signature_text(session: Session, name: str, version: int | None = None) -> SignatureText | None:
    """The built-in signature ``name``, or the stored one (its newest or given version)."""
    if name in BUILTIN:
        if version not in (None, 0):
            return None
        return SignatureText(name, builtin_signature_text(name), 0, True, None)
    query = select(StoredSignature).where(StoredSignature.name == name)
    if version is not None:
        query = query.where(StoredSignature.version == version)
    row = session.execute(query.order_by(StoredSignature.version.desc()).limit(1)).scalars().first()
    if row is None:
        return None
    return SignatureText(row.name, row.text, row.version, False, row.created_at)


def all_signatures(session: Session) -> Sequence[SignatureText]:
    """Every built-in signature, then each stored name's newest version, by name."""
    newest = (
        select(StoredSignature.name, func.max(StoredSignature.version).label("v"))
        .group_by(StoredSignature.name)
        .subquery()
    )
    rows = session.execute(
        select(StoredSignature)
        .join(
            newest,
            (newest.c.name == StoredSignature.name) & (newest.c.v == StoredSignature.version),
        )
        .order_by(StoredSignature.name)
    ).scalars()
    shipped = [SignatureText(n, builtin_signature_text(n), 0, True, None) for n in BUILTIN]
    return [
        *shipped,
        *(SignatureText(r.name, r.text, r.version, False, r.created_at) for r in rows),
    ]
