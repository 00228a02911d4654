"""``"probe": "signature"`` in a schedule request: each candidate host's speed from a signature
probe (``ppe.service.probes``) instead of the model's dedicated speed (docs/pas2p.md "Probes").

The probe computes the strip the host would hold under an even split, capped at
``PROBE_MAX_ELEMENTS`` (fewer rows first). The stored phase signature is the request's
``probe_signature``, or the newest one whose ``app`` is the request's application. A host
keeps a probe of that version younger than ``probe_max_age_s``; the others are probed now,
one after another (hosts of one machine would disturb each other), and every outcome is
stored. The store is not held while probes run.

A probe measures the host as loaded at that moment. Its benchmark times the mean CPU share the
host's sensor reported in the two minutes before the probe is the dedicated speed planning
wants (the forecasts then apply the share to come); without sensor readings the probe's own
figure is used as the dedicated one, and the answer says so. A host whose probe failed is
left unprobed and keeps its other speed; the schedule never fails for a probe.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session

from ppe.service.config import Settings
from ppe.service.deps import commit
from ppe.service.planning import PlanningError
from ppe.service.probes import (
    ProbeOutcome,
    ProbeSpec,
    finite_number,
    planned_benchmark,
    run_probe,
)
from ppe.service.schemas import ScheduleRequest
from ppe.service.speeds import Speed
from ppe.service.store import phase_signatures as store
from ppe.service.store.measurements import resource_id
from ppe.service.store.models import PhaseSignature
from ppe.service.store.run_evidence import cpu_samples

#: Sensor readings before a probe that give the CPU share it ran with.
SHARE_WINDOW_S = 120.0
#: The largest strip a probe computes (64 MB of float64): a request for a huge grid must not
#: make the service start a huge computation on every host.
PROBE_MAX_ELEMENTS = 8_000_000


def probe_strip(n: int, hosts: int) -> tuple[int, int]:
    """(columns, rows) of the strip a probe computes: the even share of an ``n``-row grid,
    with fewer rows (then fewer columns) when that is over ``PROBE_MAX_ELEMENTS``."""
    cols = min(n, PROBE_MAX_ELEMENTS)
    rows = min(math.ceil(n / hosts), max(1, PROBE_MAX_ELEMENTS // cols))
    return cols, rows


@dataclass
class Probed:
    """The probed hosts' speeds (source ``probe``) and a line per host for the answer."""

    speeds: dict[str, Speed] = field(default_factory=dict)
    report: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def probe_hosts(body: ScheduleRequest, session: Session, settings: Settings) -> Probed:
    sig = _signature(body, session)
    label = f"phase signature {sig.name!r} version {sig.version}"
    names = [h if isinstance(h, str) else h.name for h in body.hosts]
    given = {h.name for h in body.hosts if not isinstance(h, str) and h.benchmark is not None}
    candidates = [n for n in names if n not in given]
    ids = {n: resource_id(session, n) for n in candidates}
    missing = [n for n, rid in ids.items() if rid is None]
    if missing:
        raise PlanningError(422, f"unknown host {missing[0]!r}: register it first", "hosts")
    cols, rows = probe_strip(body.n, len(names))
    out = Probed()
    fresh = _fresh(session, sig, candidates, body.probe_max_age_s)
    todo = [n for n in candidates if n not in fresh]
    spec = ProbeSpec(sig.app, dict(sig.analysis), dict(sig.parameters), "", cols, rows)
    session.rollback()  # no transaction stays open while the probes run
    ran: dict[str, tuple[ProbeOutcome, float]] = {}
    for name in todo:
        started = time.time()
        outcome = run_probe(
            replace(spec, host=name), settings.probe_launcher, settings.probe_timeout_s
        )
        ran[name] = (outcome, started)
    sig = store.get(session, sig.name, sig.version) or sig
    for name, (outcome, started) in ran.items():
        record = outcome.record()
        share = _share(session, name, started)
        if share is not None:
            record["cpu_share"] = share
        record["started_at"] = started
        record["strip"] = {"rows": rows, "columns": cols}
        rid = ids[name]
        assert rid is not None
        row = store.add_probe(
            session, sig, rid, "ok" if outcome.ok else "failed", outcome.error or "", record
        )
        fresh[name] = (row.id, row.created_at, row.status, row.error, record)
    commit(session)
    for name in candidates:
        _account(out, name, label, fresh[name], reused=name not in ran)
    return out


def _signature(body: ScheduleRequest, session: Session) -> PhaseSignature:
    if body.probe_signature is not None:
        sig = store.get(session, body.probe_signature)
        if sig is None:
            raise PlanningError(
                422, f"no phase signature {body.probe_signature!r}", "probe_signature"
            )
        return sig
    mine = [s for s in store.all_newest(session) if s.app == body.app]
    if not mine:
        raise PlanningError(
            422,
            f"no phase signature of app {body.app!r} to probe with: post one "
            "(ppe pas2p analyze --post NAME --app APP) or name it in probe_signature",
            "probe",
        )
    return max(mine, key=lambda s: s.created_at)


Kept = tuple[int, float, str, str, dict[str, Any] | None]  # id, created_at, status, error, result


def _fresh(
    session: Session, sig: PhaseSignature, hosts: list[str], max_age_s: float
) -> dict[str, Kept]:
    """Each host's newest probe of this version, when younger than ``max_age_s``."""
    now = time.time()
    out: dict[str, Kept] = {}
    for name in hosts:
        rows = store.probes(session, sig.name, host=name, version=sig.version, limit=1)
        if rows and now - rows[0].created_at <= max_age_s:
            r = rows[0]
            out[name] = (r.id, r.created_at, r.status, r.error, r.result)
    return out


def _share(session: Session, host: str, started: float) -> float | None:
    samples = cpu_samples(session, host, started - SHARE_WINDOW_S, started)
    if not samples:
        return None
    return math.fsum(v for _, v in samples) / len(samples)


def _account(out: Probed, name: str, label: str, kept: Kept, reused: bool) -> None:
    probe_id, created, status, error, result = kept
    entry: dict[str, Any] = {"host": name, "probe_id": probe_id, "status": status}
    entry["reused"] = reused
    result = result or {}
    measured = finite_number(result.get("benchmark"))
    if status != "ok" or measured is None or measured <= 0:
        entry["error"] = error or "no benchmark in the probe's result"
        out.report.append(entry)
        out.notes.append(
            f"host {name!r} is unprobed: its probe with {label} failed ({entry['error']}); "
            "planned with its other speed"
        )
        return
    share = finite_number(result.get("cpu_share"))
    dedicated = planned_benchmark(measured, share)
    entry.update(measured_benchmark=measured, benchmark=dedicated, cpu_share=share)
    out.report.append(entry)
    why = (
        f"x its CPU share {share:.3g} at the time"
        if share
        else "as dedicated (no CPU readings from its sensor before the probe)"
    )
    note = (
        f"host {name!r}: planned with {dedicated:.4g} s per element from a signature probe "
        f"({label}, probe {probe_id}{', reused' if reused else ''}: measured {measured:.4g} "
        f"{why})"
    )
    out.speeds[name] = Speed(dedicated, "probe", note)
