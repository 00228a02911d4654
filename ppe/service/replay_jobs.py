"""Replay jobs run in the background of the service, their progress and reports in the store.

A job resolves its trace paths against the server's allowed trace directories (or an upload
folder of its own), runs `ppe.replay.experiment.run_replay` in a worker thread (which itself uses
processes), and records progress as it goes. Jobs left "running" by a dead server are marked
failed at the next start, so no job claims to run forever.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from ppe.replay.config import ReplayConfig
from ppe.replay.experiment import run_replay
from ppe.service.store.db import session_scope
from ppe.service.store.models import ReplayJob


class JobError(ValueError):
    pass


def resolve_traces(names: list[str], allowed: tuple[str, ...]) -> list[str]:
    """Each name must lie inside an allowed directory: no reading arbitrary server files."""
    if not names:
        raise JobError("give at least one trace (a file or directory under a trace dir)")
    roots = [Path(d).resolve() for d in allowed]
    if not roots:
        raise JobError("this server has no trace directories (start it with --trace-dir)")
    out = []
    for name in names:
        found = None
        for root in roots:
            candidate = (root / name).resolve()
            if candidate.is_relative_to(root) and candidate.exists():
                found = candidate
                break
        if found is None:
            raise JobError(f"trace {name!r} not found under the server's trace directories")
        out.append(str(found))
    return out


def fail_interrupted(sessions: sessionmaker[Session]) -> None:
    """Once per server start, before workers fork: jobs of a dead server will never finish."""
    with session_scope(sessions) as s:
        s.execute(
            update(ReplayJob)
            .where(ReplayJob.status.in_(["queued", "running"]))
            .values(status="failed", error="interrupted: the server stopped")
        )


class ReplayRunner:
    """One background thread: replays already use every core through their own processes."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay")
        self._upload_root: Path | None = None

    def upload_dir(self) -> Path:
        """A fresh folder for one job's uploaded traces (made on first use, removed with the job
        or, at the latest, at shutdown)."""
        if self._upload_root is None:
            self._upload_root = Path(tempfile.mkdtemp(prefix="ppe-uploads-"))
        return Path(tempfile.mkdtemp(dir=self._upload_root))

    def submit(self, config: dict[str, Any], uploads: Path | None = None) -> int:
        """Queue a job; ``uploads`` (its traces' folder) is deleted once the job has ended."""
        try:
            cfg = ReplayConfig.from_flat(config)  # validate now: a bad job is a 422, not a failure
            with session_scope(self.sessions) as s:
                job = ReplayJob(status="queued", config=cfg.to_flat(), total=cfg.starts)
                s.add(job)
                s.flush()
                job_id = job.id
        except BaseException:
            discard(uploads)
            raise
        self.pool.submit(self._run, job_id, cfg, uploads)
        return job_id

    def _set(self, job_id: int, **values: Any) -> None:
        with session_scope(self.sessions) as s:
            s.execute(update(ReplayJob).where(ReplayJob.id == job_id).values(**values))

    def _run(self, job_id: int, cfg: ReplayConfig, uploads: Path | None) -> None:
        try:
            self._replay(job_id, cfg)
        finally:
            discard(uploads)

    def _replay(self, job_id: int, cfg: ReplayConfig) -> None:
        self._set(job_id, status="running")
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] > 0.5 or done == total:
                last[0] = now
                self._set(job_id, done=done, total=total)

        try:
            report = run_replay(cfg, progress)
        except Exception as exc:  # noqa: BLE001 - the job records any failure for its caller
            self._set(
                job_id,
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
                finished_at=time.time(),
            )
            return
        self._set(job_id, status="done", report=report, finished_at=time.time())

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        discard(self._upload_root)


def discard(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
