"""Machine profiles and application signatures (PMaC, docs/pmac.md).

A host's profile is posted by its sensor (``ppe sensor`` measures one at start and daily)
or by an operator from ``ppe profile --out``; each new measurement is a new version.
Signatures are posted as TOML; the built-in ``sor`` and ``jacobi2d`` are listed with them.
Planning convolves the newest profile with the model's signature for hosts that have no
other speed (``ppe.service.planning``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Response, status
from sqlalchemy.orm import Session

from ppe.pmac import ProfileError, SignatureError, parse_signature, profile_from_dict
from ppe.service.auth import OPERATE, READ, SENSOR_WRITE, require
from ppe.service.deps import IndexCacheDep, SessionDep, commit
from ppe.service.errors import NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import LINE_PATTERN, MODEL_NAME_PATTERN, ModelName, NamePath
from ppe.service.schemas_pmac import (
    PROFILE_MAX_POINTS,
    ProfileMeta,
    ProfileOut,
    SignatureIn,
    SignatureMeta,
    SignatureOut,
)
from ppe.service.store import pmac as store
from ppe.service.store.models import HostProfile

router = APIRouter(tags=["pmac"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)
Version = Annotated[int | None, Query(ge=0, le=2**31 - 1)]
SignaturePath = Annotated[ModelName, Path(examples=["sor"])]
#: Not a signature's name: the path of the PAS2P signatures' routes (api/phase_signatures.py).
RESERVED_NAME = "phases"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _points(body: dict[str, Any]) -> int:
    curves = [*body.get("memory", []), *body.get("messages", [])]
    return sum(len(c.get("points", [])) for c in curves if isinstance(c, dict))


def _check_text(body: dict[str, Any]) -> None:
    """What the format leaves to the store: text both stores take, and a bounded size."""
    line = re.compile(LINE_PATTERN)
    for text in _strings(body):
        if len(text) > 4096 or not line.match(text):
            raise problem(422, "profile text must be single lines of at most 4096 chars", "body")
    if _points(body) > PROFILE_MAX_POINTS:
        raise problem(422, f"a profile holds at most {PROFILE_MAX_POINTS} curve points", "body")


def _meta(host: str, row: HostProfile) -> dict[str, Any]:
    return {
        "host": host,
        "version": row.version,
        "measured_at": row.measured_at,
        "method": row.method,
        "quick": row.quick,
        "received_at": row.received_at,
    }


@router.post(
    "/resources/{name}/profiles",
    response_model=ProfileMeta,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": ProfileMeta, "description": "the same profile as the newest"}},
)
def post_profile(
    name: NamePath,
    body: Annotated[dict[str, Any], Body()],
    response: Response,
    session: SessionDep,
    index: IndexCacheDep,
    _role: Annotated[str, Depends(require(*SENSOR_WRITE, "operator"))],
) -> dict[str, Any]:
    """Store a measured profile (``ppe profile --out`` JSON) as the host's next version.
    The profile's ``host`` must be the path's; re-posting the newest version stores nothing
    (200) so a sensor may retry."""
    _check_text(body)
    try:
        profile = profile_from_dict(body)
    except ProfileError as exc:
        raise problem(422, str(exc), "body") from exc
    if profile.host != name:
        raise problem(
            422, f"the profile is of host {profile.host!r}, posted for {name!r}", "body.host"
        )
    row, created = store.save_profile(session, name, profile)
    out = _meta(name, row)
    commit(session)
    index.clear()  # planning reads the newest profile with the hosts' index
    if not created:
        response.status_code = status.HTTP_200_OK
    return out


def _versions(session: Session, name: str) -> list[HostProfile]:
    rows = store.profile_versions(session, name)
    if rows is None:
        raise problem(404, f"unknown host {name!r}", "path.name")
    return rows


@router.get("/resources/{name}/profiles", response_model=list[ProfileMeta], responses=NOT_FOUND)
def list_profiles(
    name: NamePath, session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    """The host's profile versions, newest first (figures left out)."""
    return [_meta(name, r) for r in _versions(session, name)]


@router.get("/resources/{name}/profile", response_model=ProfileOut, responses=NOT_FOUND)
def get_profile(
    name: NamePath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    version: Version = None,
) -> dict[str, Any]:
    """The host's newest profile, or ``version``."""
    if store.resource_id(session, name) is None:
        raise problem(404, f"unknown host {name!r}", "path.name")
    row = store.stored_profile(session, name, version)
    if row is None:
        which = "no profile" if version is None else f"no profile version {version}"
        raise problem(404, f"host {name!r} has {which}", "path.name")
    return {**_meta(name, row), "profile": row.profile}


def _signature_out(text: store.SignatureText) -> dict[str, Any]:
    sig = parse_signature(text.text)
    return {
        "name": text.name,
        "version": text.version,
        "builtin": text.builtin,
        "unit": sig.unit,
        "kernel": sig.kernel,
        "parameters": dict(sig.parameters),
        "created_at": text.created_at,
        "toml": text.text,
    }


@router.post(
    "/signatures",
    response_model=SignatureOut,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"model": SignatureOut, "description": "the same text as the newest"}},
)
def post_signature(
    body: SignatureIn,
    response: Response,
    session: SessionDep,
    index: IndexCacheDep,
    _role: Annotated[str, Depends(require(*OPERATE))],
) -> dict[str, Any]:
    """Store a signature (TOML) as its name's next version. A model of the same name is
    predicted from it on hosts known only by their profile."""
    try:
        sig = parse_signature(body.toml)
        if not re.match(MODEL_NAME_PATTERN, sig.name):
            raise SignatureError(
                f"signature name {sig.name!r}: a letter, then letters, digits, _ or -; "
                "at most 128 (it names the model it describes)"
            )
        if sig.name == RESERVED_NAME:
            raise SignatureError(
                f"signature name {sig.name!r} is reserved: /api/v1/signatures/{RESERVED_NAME} "
                "holds PAS2P phase signatures (docs/pas2p.md)"
            )
        row, created = store.save_signature(session, sig, body.toml)
    except SignatureError as exc:
        raise problem(422, str(exc), "toml") from exc
    except ValueError as exc:
        raise problem(409, str(exc), "toml") from exc
    out = _signature_out(
        store.SignatureText(row.name, row.text, row.version, False, row.created_at)
    )
    commit(session)
    index.clear()
    if not created:
        response.status_code = status.HTTP_200_OK
    return out


@router.get("/signatures", response_model=list[SignatureMeta])
def list_signatures(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    """Built-in signatures, then each posted name's newest version."""
    out = []
    for text in store.all_signatures(session):
        entry = _signature_out(text)
        del entry["toml"]
        out.append(entry)
    return out


@router.get("/signatures/{name}", response_model=SignatureOut, responses=NOT_FOUND)
def get_signature(
    name: SignaturePath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    version: Version = None,
) -> dict[str, Any]:
    """A signature's newest version (or ``version``; 0 is a built-in's) with its text."""
    text = store.signature_text(session, name, version)
    if text is None:
        which = "" if version is None else f" version {version}"
        raise problem(404, f"no signature {name!r}{which}", "path.name")
    return _signature_out(text)
