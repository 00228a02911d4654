"""What the service's background jobs (replays, what-ifs) share: the fields every job lists
with, and progress written to the store at most twice a second."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

#: Seconds between two progress writes (and always the last one).
PROGRESS_EVERY_S = 0.5


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
