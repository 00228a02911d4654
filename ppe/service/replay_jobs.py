"""Replay jobs run in the background of the service, their progress and reports in the store.

A job resolves its trace paths against the server's allowed trace directories (or an upload
folder of its own), runs the replay in a worker thread (which itself uses processes), and
records progress as it goes. Jobs left "running" by a dead server are marked failed at the
next start, so no job claims to run forever, and their upload folders are removed then.

Everything a request sets is bounded before it is accepted: the replay settings by
``ppe.replay.config.LIMITS`` (with this server's worker count), each uploaded file by a read
with the real trace reader within :class:`ppe.traces.TraceLimits`. Callers see their own
names for files, never a server path.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from ppe.replay.config import LIMITS, Limits, ReplayConfig
from ppe.replay.experiment import run_experiment
from ppe.service.config import Settings
from ppe.service.jobs import LIVE, run_job
from ppe.service.store.db import session_scope
from ppe.service.store.models import ReplayJob
from ppe.traces import (
    TRACE_SUFFIXES,
    TraceFormatError,
    TraceLimits,
    TraceTooLarge,
    check_trace,
    read_traces,
    trace_name,
)

GZIP_MAGIC = b"\x1f\x8b"
#: Longest accepted upload file name (after sanitising).
MAX_NAME = 128


class JobError(ValueError):
    """A replay request the server refuses (422); ``field`` says which part of it."""

    def __init__(self, message: str, field: str = "config") -> None:
        super().__init__(message)
        self.field = field


class TooLarge(JobError):
    """A request over a size limit (413)."""


def trace_limits(settings: Settings) -> TraceLimits:
    return TraceLimits(
        max_bytes=settings.trace_max_bytes,
        max_rows=settings.trace_max_rows,
        max_total_rows=settings.trace_max_total_rows,
    )


def replay_limits(settings: Settings) -> Limits:
    """The replay settings' bounds for this server: ``LIMITS``, workers up to its setting."""
    workers = replace(LIMITS.bounds["workers"], hi=settings.replay_max_workers)
    return replace(LIMITS, bounds={**LIMITS.bounds, "workers": workers})


def resolve_traces(names: list[str], allowed: tuple[str, ...]) -> list[str]:
    """Each name must lie inside an allowed directory: no reading arbitrary server files."""
    if not names:
        raise JobError("give at least one trace (a file or directory under a trace dir)")
    roots = [Path(d).resolve() for d in allowed]
    if not roots:
        raise JobError("this server has no trace directories (start it with --trace-dir)")
    out = []
    for name in names:
        if not isinstance(name, str) or "\x00" in name:
            raise JobError(f"trace names must be strings, got {name!r:.80}")
        found = None
        for root in roots:
            candidate = (root / name).resolve()
            if candidate.is_relative_to(root) and candidate.exists():
                found = candidate
                break
        if found is None:
            raise JobError(f"trace {name!r:.200} not found under the server's trace directories")
        out.append(str(found))
    return out


def upload_name(raw: str) -> str:
    """A safe file name for an upload: its base name (after the last ``/`` or ``\\``), other
    characters than letters, digits, ``.``, ``_``, ``-`` replaced by ``_``; refused (422)
    when no trace file name is left (``.``, ``..``, empty, NUL, not a trace suffix)."""
    if "\x00" in raw:
        raise JobError(f"upload file name {raw!r:.80} contains NUL", "files")
    base = re.split(r"[/\\]", raw)[-1]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", base)
    if not safe.endswith(TRACE_SUFFIXES) or len(safe) > MAX_NAME:
        raise JobError(
            f"upload {raw!r:.80}: a trace file is named NAME{', NAME'.join(TRACE_SUFFIXES)} "
            f"(at most {MAX_NAME} characters)",
            "files",
        )
    if not trace_name(safe) or safe.startswith("."):
        raise JobError(f"upload {raw!r:.80}: no host name before the suffix", "files")
    return safe


def check_uploads(folder: Path, names: list[str], limits: TraceLimits) -> None:
    """Vet every uploaded file before a job is accepted, so a bad file is a 422 (413 when too
    big) naming it, not a failed job later: gzip content exactly when the name ends in .gz,
    parsed in full by the real reader within ``limits`` (memory: one line; time: bounded)."""
    if not names:
        raise JobError("multipart replay requests need at least one file in 'files'", "files")
    hosts: dict[str, str] = {}
    total = 0
    for name in names:
        path = folder / name
        with path.open("rb") as fh:
            gzipped = fh.read(2) == GZIP_MAGIC
        if gzipped != name.endswith(".gz"):
            why = (
                "is gzip data but its name does not end in .gz"
                if gzipped
                else ("is named .gz but is not gzip data")
            )
            raise JobError(f"upload {name!r}: {why}", "files")
        host = trace_name(name)
        if host in hosts:
            raise JobError(f"uploads {hosts[host]!r} and {name!r} are both host {host!r}", "files")
        hosts[host] = name
        try:
            total += check_trace(path, limits)
        except TraceTooLarge as exc:
            raise TooLarge(f"upload {name!r}: line {exc.line}: {exc.reason}", "files") from None
        except TraceFormatError as exc:
            raise JobError(f"upload {name!r}: line {exc.line}: {exc.reason}", "files") from None
        if total > limits.max_total_rows:
            raise TooLarge(
                f"uploads hold more than {limits.max_total_rows} rows together (the limit), "
                f"reached at {name!r}",
                "files",
            )


def job_config(config: dict[str, Any], settings: Settings) -> ReplayConfig:
    """A request's settings as this server runs them: within :func:`replay_limits`; Dask only
    on the server's own scheduler (a caller never names an address the server would connect
    to and unpickle from), the start method the server's choice; 0 workers means the most
    this server allows."""
    if config.get("scheduler_address") is not None:
        raise JobError("scheduler_address is set by the server (--dask-scheduler), not a request")
    if config.get("start_method") is not None:
        raise JobError("start_method is chosen by the server, not a request")
    if config.get("executor") == "dask":
        if not settings.dask_scheduler:
            raise JobError("executor 'dask' needs a server started with --dask-scheduler")
        config = {**config, "scheduler_address": settings.dask_scheduler}
    cfg = ReplayConfig.from_flat(config, replay_limits(settings))
    if cfg.workers == 0:
        cfg = replace(cfg, workers=settings.replay_max_workers)
    return cfg


def _shown(cfg: ReplayConfig, traces: list[str]) -> dict[str, Any]:
    """The flat config a caller reads back: traces as the caller named them, no addresses."""
    return {**cfg.to_flat(), "traces": list(traces), "scheduler_address": None}


_ABS_DIRS = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s/\\:'\"]+[/\\])+")


def public_error(exc: BaseException, hide: list[Path]) -> str:
    """A failed job's error for its callers: ``Type: message`` without server paths (the
    directories in ``hide``, then any other absolute directory part)."""
    text = f"{type(exc).__name__}: {exc}"
    for folder in sorted({str(p) for p in hide}, key=len, reverse=True):
        text = text.replace(folder + os.sep, "")
    return _ABS_DIRS.sub("", text)[:2000]


# ---- upload folders -------------------------------------------------------------------


def upload_root(engine: Engine) -> Path:
    """Where one store's servers keep uploaded traces: a folder per store (named by a hash of
    its URL; SQLite files by absolute path) so that a restart finds what a killed server left."""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        key = "sqlite:" + os.path.abspath(url.database)
    else:
        key = url.render_as_string(hide_password=False)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ppe-uploads-{digest}"


def _own_dir(path: Path) -> bool:
    """A real directory (no symlink) of this user: safe to write into and to clean."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def clean_stale_uploads(sessions: sessionmaker[Session], started: float) -> int:
    """Remove upload folders left by a server that died: those older than ``started`` whose
    job (``job-<id>``) is not queued or running, and unclaimed ones (``upload-*``, a request
    that never became a job). Returns how many were removed."""
    root = upload_root(_engine(sessions))
    if not _own_dir(root):
        return 0
    with session_scope(sessions) as s:
        live = {
            f"job-{i}" for i in s.scalars(select(ReplayJob.id).where(ReplayJob.status.in_(LIVE)))
        }
    removed = 0
    for folder in root.iterdir():
        try:
            old = folder.lstat().st_mtime < started
        except OSError:
            continue
        if old and folder.name not in live:
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
            else:
                folder.unlink(missing_ok=True)
            removed += 1
    return removed


def _engine(sessions: sessionmaker[Session]) -> Engine:
    bind = sessions.kw["bind"]
    assert isinstance(bind, Engine)
    return bind


def fail_interrupted(sessions: sessionmaker[Session]) -> None:
    """Once per server start, before workers fork: jobs of a dead server will never finish,
    and the uploads it left (SIGKILL runs no cleanup) are removed."""
    started = time.time()
    with session_scope(sessions) as s:
        s.execute(
            update(ReplayJob)
            .where(ReplayJob.status.in_(LIVE))
            .values(status="failed", error="interrupted: the server stopped")
        )
    clean_stale_uploads(sessions, started)


class ReplayRunner:
    """One background thread: replays already use every core through their own processes."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replay")
        self.upload_root = upload_root(_engine(sessions))
        self._folders: set[Path] = set()  # upload folders of this runner not yet removed

    def upload_dir(self) -> Path:
        """A fresh folder for one request's uploaded traces, removed with its job, when the
        request is refused, at shutdown, or (after a crash) at the next start."""
        root = self.upload_root
        root.mkdir(mode=0o700, exist_ok=True)
        if not _own_dir(root):  # someone else's (or a link): keep out of it
            root = Path(tempfile.mkdtemp(prefix="ppe-uploads-"))
        folder = Path(tempfile.mkdtemp(prefix="upload-", dir=root))
        self._folders.add(folder)
        return folder

    def submit(
        self,
        config: dict[str, Any],
        settings: Settings,
        uploads: Path | None = None,
        names: list[str] | None = None,
    ) -> int:
        """Check and queue a job: on server-side traces (``config["traces"]``), or on files
        ``names`` uploaded to ``uploads`` (deleted once the job has ended, or now if refused)."""
        try:
            if uploads is not None:
                if "traces" in config:
                    raise JobError("traces come from the uploaded files; leave 'traces' out")
                shown = list(names or [])
                check_uploads(uploads, shown, trace_limits(settings))
                paths = [str(uploads)]
                hide = [uploads]
            else:
                given = config.get("traces") or []
                shown = [given] if isinstance(given, str) else list(given)
                paths = resolve_traces(shown, settings.trace_dirs)
                hide = [Path(d).resolve() for d in settings.trace_dirs]
            cfg = job_config({**config, "traces": paths}, settings)
            with session_scope(self.sessions) as s:
                job = ReplayJob(status="queued", config=_shown(cfg, shown), total=cfg.starts)
                s.add(job)
                s.flush()
                job_id = job.id
                if uploads is not None:  # named for its job, so a restart knows whose it is
                    moved = uploads.rename(uploads.parent / f"job-{job_id}")
                    self._folders.discard(uploads)
                    self._folders.add(moved)
                    uploads, hide = moved, [moved]
                    cfg = replace(cfg, traces=(str(moved),))
        except BaseException:
            self.discard(uploads)
            raise
        self.pool.submit(self._run, job_id, cfg, uploads, shown, hide, trace_limits(settings))
        return job_id

    def _run(
        self,
        job_id: int,
        cfg: ReplayConfig,
        uploads: Path | None,
        shown: list[str],
        hide: list[Path],
        limits: TraceLimits,
    ) -> None:
        try:
            self._replay(job_id, cfg, shown, hide, limits)
        finally:
            self.discard(uploads)

    def _replay(
        self,
        job_id: int,
        cfg: ReplayConfig,
        shown: list[str],
        hide: list[Path],
        limits: TraceLimits,
    ) -> None:
        def work(progress: Callable[[int, int], None]) -> dict[str, Any]:
            report = run_experiment(read_traces(cfg.traces, limits), cfg, progress)
            report["config"].update(traces=shown, scheduler_address=None)
            return report

        hidden = [*hide, Path(tempfile.gettempdir())]
        run_job(self.sessions, ReplayJob, job_id, work, lambda exc: public_error(exc, hidden))

    def discard(self, folder: Path | None) -> None:
        """Remove an upload folder of this runner."""
        if folder is not None:
            self._folders.discard(folder)
            discard(folder)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        for folder in list(self._folders):
            self.discard(folder)


def discard(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
