"""The cancel route's answer, shared by replay and what-if jobs (``ppe.service.jobs``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from ppe.service.errors import problem
from ppe.service.jobs import CANCELLED, cancel


def cancelled(session: Session, model: Any, job_id: int, what: str) -> Any:
    """The job's row, now cancelled; a problem 404 for no such job, 409 for one that has
    ended. ``what`` names the kind in messages ("replay", "what-if")."""
    job = cancel(session, model, job_id)
    if job is None:
        raise problem(404, f"no {what} job {job_id}", "path.job_id")
    if job.status != CANCELLED:
        raise problem(409, f"{what} job {job_id} has ended ({job.status})", "path.job_id")
    return job
