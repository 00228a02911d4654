"""What the service's background jobs (replays, what-ifs) share: the fields every job lists
with, progress written to the store at most twice a second, and the moves between states.

A job is ``queued``, then ``running``, and ends ``done``, ``failed`` or ``cancelled``. Every
move is one conditional update (:func:`move`), so a cancel (``POST /{kind}/{id}/cancel``, in
any server worker) and the worker running the job agree through the store alone: the runner
stops at its next progress write, which finds the job no longer running
(:class:`Cancelled`), and a job cancelled while queued never starts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from ppe.service.store.db import session_scope

#: Seconds between two progress writes (and always the last one).
PROGRESS_EVERY_S = 0.5
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
#: States a job can still leave.
LIVE = (QUEUED, RUNNING)


class Cancelled(Exception):
    """The job was cancelled while it ran: its runner stops and stores nothing more."""


class JobRow(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def created_at(self) -> float: ...
    @property
    def finished_at(self) -> float | None: ...
    @property
    def error(self) -> str: ...


def job_summary(j: JobRow) -> dict[str, Any]:
    """A job as its listing shows it; each kind adds what it was asked (config, options)."""
    return {
        "id": j.id,
        "status": j.status,
        "done": j.done,
        "total": j.total,
        "created_at": j.created_at,
        "finished_at": j.finished_at,
        "error": j.error or None,
    }


def throttled(update: Callable[[int, int], None]) -> Callable[[int, int], None]:
    """``update(done, total)`` at most every PROGRESS_EVERY_S, and always at the end: a store
    write per step would cost more than many steps."""
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > PROGRESS_EVERY_S or done == total:
            last[0] = now
            update(done, total)

    return progress


def move(
    sessions: sessionmaker[Session], model: Any, job_id: int, frm: tuple[str, ...], **values: Any
) -> bool:
    """Set ``values`` on job ``job_id`` of table ``model`` if its status is one of ``frm``;
    False when it was not (cancelled meanwhile, say): one statement, no read before."""
    with session_scope(sessions) as s:
        result = s.execute(
            update(model).where(model.id == job_id, model.status.in_(frm)).values(**values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]


def progress_writer(
    sessions: sessionmaker[Session], model: Any, job_id: int
) -> Callable[[int, int], None]:
    """``progress(done, total)`` for a running job, throttled; raises :class:`Cancelled` when
    the write finds the job no longer running."""

    def write(done: int, total: int) -> None:
        if not move(sessions, model, job_id, (RUNNING,), done=done, total=total):
            raise Cancelled(f"job {job_id} was cancelled")

    return throttled(write)


def cancel(session: Session, model: Any, job_id: int) -> Any | None:
    """Cancel a queued or running job in this request's session; the job row after (None
    when there is no such job). A job that has ended keeps its status; cancelling a
    cancelled one is a no-op."""
    session.execute(
        update(model)
        .where(model.id == job_id, model.status.in_(LIVE))
        .values(status=CANCELLED, error="cancelled", finished_at=time.time())
    )
    session.commit()
    return session.get(model, job_id, populate_existing=True)


def run_job(
    sessions: sessionmaker[Session],
    model: Any,
    job_id: int,
    work: Callable[[Callable[[int, int], None]], dict[str, Any]],
    error_text: Callable[[Exception], str],
) -> None:
    """Run a queued job: ``work(progress)`` returns its report. A job cancelled while queued
    never starts; one cancelled while running stops at its next progress write; a failure is
    recorded with ``error_text(exc)`` (which leaves the server's paths out)."""
    if not move(sessions, model, job_id, (QUEUED,), status=RUNNING):
        return
    try:
        report = work(progress_writer(sessions, model, job_id))
    except Cancelled:
        return
    except Exception as exc:  # noqa: BLE001 - the job records any failure for its caller
        fields: dict[str, Any] = {"status": FAILED, "error": error_text(exc)}
    else:
        fields = {"status": DONE, "report": report}
    move(sessions, model, job_id, (RUNNING,), **fields, finished_at=time.time())
