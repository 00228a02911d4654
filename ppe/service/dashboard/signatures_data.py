"""JSON the dashboard's Signatures page draws: the stored PAS2P phase signatures (each name's
newest version) and, for one, its phases and the probes run with it (docs/pas2p.md,
"Storage" and "Probes"; this only reads ppe.service.store.phase_signatures).

The probe figures are flattened here (measured speed, CPU share, the dedicated speed planning
would use) so the page and the schedule's probe report agree on them.

Authenticated like the API the other pages call: the session cookie with the page's CSRF
header (or a bearer token), operator or admin. Not part of the public API (no schema).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ppe.service.auth import OPERATE, require
from ppe.service.deps import SessionDep
from ppe.service.errors import NOT_FOUND, ROUTER_RESPONSES, ProblemRoute, problem
from ppe.service.probes import finite_number, planned_benchmark
from ppe.service.schemas import ModelName
from ppe.service.store import phase_signatures as store
from ppe.service.store.models import PhaseProbe, PhaseSignature

DATA_PATH = "/dashboard/data/signatures"
#: Newest probes a signature's page lists and charts.
MAX_PROBES = 500

router = APIRouter(
    include_in_schema=False,
    route_class=ProblemRoute,
    responses={**ROUTER_RESPONSES, **NOT_FOUND},
)
Operator = Annotated[str, Depends(require(*OPERATE))]


def _probe_counts(session: Session) -> dict[str, int]:
    """Probes per signature name, over all its versions."""
    rows = session.execute(
        select(PhaseSignature.name, func.count(PhaseProbe.id))
        .join(PhaseProbe, PhaseProbe.signature_id == PhaseSignature.id)
        .group_by(PhaseSignature.name)
    )
    return {name: int(n) for name, n in rows}


def _summary(row: PhaseSignature, probes: int) -> dict[str, Any]:
    analysis = row.analysis
    return {
        "name": row.name,
        "version": row.version,
        "app": row.app,
        "parameters": row.parameters,
        "ranks": row.ranks,
        "kept": list(analysis["signature"]),
        "phases": len(analysis["phases"]),
        "kept_share": analysis.get("kept_share"),
        "traced_s": analysis["traced_s"],
        "predicted_s": analysis["predicted_s"],
        "created_at": row.created_at,
        "probes": probes,
    }


def _phase(p: dict[str, Any]) -> dict[str, Any]:
    step = p.get("step", (p.get("first") or {}).get("step"))
    return {
        "id": p["id"],
        "pattern": p["pattern"],
        "weight": p["weight"],
        "mean_ms": p["mean_s"] * 1e3,
        "sd_ms": p["sd_s"] * 1e3,
        "share": p["share"],
        "step": step,
        "kept": p["kept"],
    }


def probe_view(p: store.ProbeRow) -> dict[str, Any]:
    """One probe's row: its measured seconds per element update (``benchmark`` in the result),
    the host's CPU share then, and the dedicated speed a schedule plans with (measured × share,
    ppe.service.probes.planned_benchmark)."""
    result = p.result or {}
    measured = finite_number(result.get("benchmark"))
    share = finite_number(result.get("cpu_share"))
    dedicated = None if measured is None else planned_benchmark(measured, share)
    strip = result.get("strip")
    if not isinstance(strip, dict) or not all(
        isinstance(strip.get(k), int) and not isinstance(strip.get(k), bool)
        for k in ("rows", "columns")
    ):
        strip = None
    reused = result.get("reused")
    return {
        "id": p.id,
        "version": p.version,
        "host": p.host,
        "status": p.status,
        "error": p.error or None,
        "created_at": p.created_at,
        "measured_benchmark": measured,
        "cpu_share": share,
        "benchmark": dedicated,
        "seconds": finite_number(result.get("seconds")),
        "reused": reused if isinstance(reused, bool) else None,
        "strip": None if strip is None else {"rows": strip["rows"], "columns": strip["columns"]},
    }


@router.get(DATA_PATH)
def signatures(session: SessionDep, _role: Operator) -> list[dict[str, Any]]:
    """Each name's newest version, newest first, with how many probes its name has."""
    counts = _probe_counts(session)
    rows = sorted(store.all_newest(session), key=lambda r: (-r.created_at, r.name))
    return [_summary(r, counts.get(r.name, 0)) for r in rows]


@router.get(DATA_PATH + "/{name}")
def signature(
    name: Annotated[ModelName, Path()], session: SessionDep, _role: Operator
) -> dict[str, Any]:
    """A signature's newest version with its phases, and its probes (every version's),
    newest first."""
    row = store.get(session, name)
    if row is None:
        raise problem(404, f"no phase signature {name!r}", "path.name")
    probes = [probe_view(p) for p in store.probes(session, name, limit=MAX_PROBES)]
    return {
        **_summary(row, _probe_counts(session).get(name, 0)),
        "anchor_rank": row.analysis.get("anchor_rank"),
        "keep": row.analysis.get("keep"),
        "phase_rows": [_phase(p) for p in row.analysis["phases"]],
        "probe_rows": probes,
    }
