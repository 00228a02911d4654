"""PAS2P phase signatures and the probes run with them (docs/pas2p.md, "Storage").

``ppe pas2p analyze --post NAME`` stores a traced run's analysis here, versioned by name.
A probe is one run of a stored signature on a registered host, posted by the host's sensor
or an operator, so resource selection can later read what each host measured. The routes
sit under ``/signatures/phases``: the app includes this router before PMaC's, whose
``/signatures/{name}`` would otherwise answer ``GET /signatures/phases`` (and PMaC refuses a
signature named ``phases``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response, status
from sqlalchemy.orm import Session

from ppe.service.auth import OPERATE, READ, SENSOR_WRITE, require
from ppe.service.deps import SessionDep, commit, write_race_is_conflict
from ppe.service.errors import CONFLICT, NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.schemas import ModelName, ResourceName
from ppe.service.schemas_phase_signatures import (
    PhaseSignatureIn,
    PhaseSignatureMeta,
    PhaseSignatureOut,
    ProbeIn,
    ProbeOut,
    analysis_problem,
)
from ppe.service.store import phase_signatures as store
from ppe.service.store.measurements import resource_id
from ppe.service.store.models import PhaseSignature

router = APIRouter(tags=["pas2p"], route_class=ProblemRoute, responses=ROUTER_RESPONSES)
PREFIX = "/signatures/phases"
NamePath = Annotated[ModelName, Path(examples=["sor-n1000"])]
VersionQuery = Annotated[int | None, Query(ge=1, le=2**31 - 1)]


def _meta(row: PhaseSignature) -> dict[str, Any]:
    return {
        "name": row.name,
        "version": row.version,
        "app": row.app,
        "parameters": row.parameters,
        "ranks": row.ranks,
        "kept": row.analysis["signature"],
        "predicted_s": row.analysis["predicted_s"],
        "traced_s": row.analysis["traced_s"],
        "created_at": row.created_at,
    }


@router.post(
    PREFIX,
    response_model=PhaseSignatureMeta,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": PhaseSignatureMeta, "description": "the same as the newest"},
        **CONFLICT,
    },
)
def post_phase_signature(
    body: PhaseSignatureIn,
    response: Response,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*OPERATE))],
) -> dict[str, Any]:
    """Store a PAS2P analysis (``ppe pas2p analyze --json``) as the name's next version;
    the newest version's content again stores nothing (200)."""
    found = analysis_problem(body)
    if found is not None:
        field, reason = found
        raise problem(422, reason, field)
    content = store.SignatureContent(
        app=body.app,
        parameters=dict(body.parameters),
        ranks=body.ranks,
        analysis=body.analysis.model_dump(mode="json", exclude_unset=True),
    )
    with write_race_is_conflict(session):  # a concurrent post took the version: 409
        row, created = store.save(session, body.name, content)
    out = _meta(row)
    commit(session)
    if not created:
        response.status_code = status.HTTP_200_OK
    return out


@router.get(PREFIX, response_model=list[PhaseSignatureMeta])
def list_phase_signatures(
    session: SessionDep, _role: Annotated[str, Depends(require(*READ))]
) -> list[dict[str, Any]]:
    """Each name's newest version, by name, without the analysis."""
    return [_meta(row) for row in store.all_newest(session)]


def _signature(
    session: Session, name: str, version: int | None, version_field: str = "query.version"
) -> PhaseSignature:
    row = store.get(session, name, version)
    if row is not None:
        return row
    if version is None or store.newest(session, name) is None:
        raise problem(404, f"no phase signature {name!r}", "path.name")
    raise problem(404, f"phase signature {name!r} has no version {version}", version_field)


@router.get(f"{PREFIX}/{{name}}", response_model=PhaseSignatureOut, responses=NOT_FOUND)
def get_phase_signature(
    name: NamePath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    version: VersionQuery = None,
) -> dict[str, Any]:
    """A signature's newest version (or ``version``) with its analysis."""
    row = _signature(session, name, version)
    return {**_meta(row), "analysis": row.analysis}


def _probe_out(p: store.ProbeRow) -> dict[str, Any]:
    return {
        "id": p.id,
        "name": p.name,
        "version": p.version,
        "host": p.host,
        "status": p.status,
        "error": p.error or None,
        "result": p.result,
        "created_at": p.created_at,
    }


@router.post(
    f"{PREFIX}/{{name}}/probes",
    response_model=ProbeOut,
    status_code=status.HTTP_201_CREATED,
    responses={**NOT_FOUND, **CONFLICT},
)
def post_probe(
    name: NamePath,
    body: ProbeIn,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*SENSOR_WRITE, "operator"))],
) -> dict[str, Any]:
    """Record one run of the signature (its newest version, or ``version``) on a registered
    host; every post is a new probe."""
    if body.status == "failed" and body.error is None:
        raise problem(422, "a failed probe says why", "error")
    if body.status == "ok" and body.error is not None:
        raise problem(422, "only a failed probe has an error", "error")
    sig = _signature(session, name, body.version, "version")
    rid = resource_id(session, body.host)
    if rid is None:
        raise problem(422, f"unknown host {body.host!r} (not a registered resource)", "host")
    with write_race_is_conflict(session):  # the host or signature went meanwhile
        row = store.add_probe(session, sig, rid, body.status, body.error or "", body.result)
    out = _probe_out(
        store.ProbeRow(
            row.id,
            sig.name,
            sig.version,
            body.host,
            row.status,
            row.error,
            row.result,
            row.created_at,
        )
    )
    commit(session)
    return out


@router.get(f"{PREFIX}/{{name}}/probes", response_model=list[ProbeOut], responses=NOT_FOUND)
def list_probes(
    name: NamePath,
    session: SessionDep,
    _role: Annotated[str, Depends(require(*READ))],
    host: Annotated[ResourceName | None, Query()] = None,
    version: VersionQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    """The signature's probes (every version's, or ``version``'s; ``host``'s only), newest
    first."""
    _signature(session, name, version)
    return [
        _probe_out(p) for p in store.probes(session, name, host=host, version=version, limit=limit)
    ]
