"""Service settings, read once at start-up from flags and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_DB_URL = "sqlite:///ppe.db"
ENV_DB_URL = "PPE_DATABASE_URL"


def database_url_from_env(explicit: str | None = None) -> str:
    """Flag beats environment beats the embedded SQLite default in the working directory."""
    return explicit or os.environ.get(ENV_DB_URL) or DEFAULT_DB_URL


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DB_URL
    # Relaxed auth for local trials: requests without a token act as admin.
    demo_auth: bool = False
    # Largest accepted measurement batch; bigger ones are rejected whole (documented in README).
    max_batch: int = 50_000
    # A measurement stamped further than this into the future is rejected as a clock error.
    max_future_skew_s: float = 86_400.0
    # Apply Alembic migrations in the app's lifespan (the CLI does it once before forking workers).
    migrate_on_start: bool = True
    # How many recent samples per series the forecasts use (the battery replays them on change).
    history_limit: int = 5_000
    # Where replay jobs may read server-side traces from.
    trace_dirs: tuple[str, ...] = field(default_factory=tuple)
    # Threads that run request handlers in each worker. Planning is CPU-bound Python: more
    # threads than cores only trade throughput for GIL contention.
    request_threads: int = 4
    # Replay jobs. A Dask scheduler the server's own jobs may use (None: "dask" is refused);
    # callers never name one, so the server connects only where its operator said.
    dask_scheduler: str | None = None
    # Most processes one replay job may use (a request's 0, "all cores", means this many).
    replay_max_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    # Uploaded traces of one request: compressed bytes in all and number of files.
    max_upload_bytes: int = 64 * 2**20
    max_upload_files: int = 256
    # Any trace a job reads: decompressed bytes and data rows per file, rows of all files.
    trace_max_bytes: int = 50 * 2**20
    trace_max_rows: int = 1_000_000
    trace_max_total_rows: int = 5_000_000

    @classmethod
    def from_env(cls) -> Settings:
        """Workers started by uvicorn's factory mode get their settings through the environment."""
        dirs = tuple(d for d in os.environ.get("PPE_TRACE_DIRS", "").split(os.pathsep) if d)
        return cls(
            database_url=database_url_from_env(),
            demo_auth=os.environ.get("PPE_DEMO_AUTH", "") == "1",
            max_batch=int(os.environ.get("PPE_MAX_BATCH", "50000")),
            migrate_on_start=os.environ.get("PPE_SKIP_MIGRATIONS", "") != "1",
            trace_dirs=dirs,
            request_threads=int(os.environ.get("PPE_REQUEST_THREADS", "4")),
            dask_scheduler=os.environ.get("PPE_DASK_SCHEDULER") or None,
            **{
                name: int(os.environ[env])
                for name, env in _INT_ENV.items()
                if os.environ.get(env, "").strip()
            },
        )


#: Integer settings read from the environment when set (else the defaults above).
_INT_ENV = {
    "replay_max_workers": "PPE_REPLAY_MAX_WORKERS",
    "max_upload_bytes": "PPE_MAX_UPLOAD_BYTES",
    "max_upload_files": "PPE_MAX_UPLOAD_FILES",
    "trace_max_bytes": "PPE_TRACE_MAX_BYTES",
    "trace_max_rows": "PPE_TRACE_MAX_ROWS",
    "trace_max_total_rows": "PPE_TRACE_MAX_TOTAL_ROWS",
}
