"""Service settings, read once at start-up from flags and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

DEFAULT_DB_URL = "sqlite:///ppe.db"
ENV_DB_URL = "PPE_DATABASE_URL"


def database_url_from_env(explicit: str | None = None) -> str:
    """Flag beats environment beats the embedded SQLite default in the working directory."""
    return explicit or os.environ.get(ENV_DB_URL) or DEFAULT_DB_URL


DAY_S = 86_400.0
#: The longest look-back of the live forecasts (analog and co-movement: 14 days, plus the one
#: day co-movement adds): raw measurements younger than this are what forecasting reads.
FORECAST_LOOKBACK_S = 15 * DAY_S


#: Environment variable of each retention setting (documented in README "Retention").
RETENTION_ENV = {
    "interval_s": "PPE_RETENTION_INTERVAL_S",
    "served_log_days": "PPE_RETAIN_SERVED_DAYS",
    "served_log_max_rows": "PPE_RETAIN_SERVED_ROWS",
    "served_log_max_mb": "PPE_RETAIN_SERVED_MB",
    "replay_days": "PPE_RETAIN_REPLAY_DAYS",
    "replay_max_jobs": "PPE_RETAIN_REPLAY_JOBS",
    "raw_days": "PPE_RETAIN_RAW_DAYS",
    "downsample_s": "PPE_DOWNSAMPLE_S",
    "measurement_days": "PPE_RETAIN_MEASUREMENT_DAYS",
    "series_max_rows": "PPE_RETAIN_SERIES_ROWS",
    "batch_rows": "PPE_RETENTION_BATCH",
    "pause_s": "PPE_RETENTION_PAUSE_S",
}


@dataclass(frozen=True)
class RetentionPolicy:
    """What the store keeps (README "Retention"). A limit of 0 is switched off.

    Served-log and replay-job ages are wall-clock ages (the server stamps those rows). A
    measurement's age is counted back from its series' newest sample (never later than now):
    for a live sensor that is the same thing, while a silent sensor keeps its last month and
    historical traces loaded into the service are not purged on arrival.
    """

    # Seconds between passes in each server (0: the service never runs retention itself).
    interval_s: float = 60.0
    served_log_days: float = 7.0
    served_log_max_rows: int = 100_000
    # Stored bytes of request + response JSON (estimated from the newest rows); 0: no limit.
    served_log_max_mb: float = 0.0
    # Finished (done or failed) replay jobs, with their reports; queued and running ones stay.
    replay_days: float = 30.0
    replay_max_jobs: int = 1_000
    # Raw measurements older than this are folded into `downsample_s` means (deleted instead
    # when downsample_s is 0). Keep it above FORECAST_LOOKBACK_S so forecasts read raw data.
    raw_days: float = 30.0
    downsample_s: float = 3_600.0
    # Every measurement older than this is deleted (downsampled ones included).
    measurement_days: float = 365.0
    # Newest rows kept per series (raw and downsampled); 0: no limit. When set it can delete
    # inside the age windows: the guarantee that nothing younger than raw_days goes is off.
    series_max_rows: int = 0
    # Rows per delete transaction (served-log rows, ~45 kB each, go a tenth at a time), and
    # the pause between transactions that lets ingestion take SQLite's write lock.
    batch_rows: int = 2_000
    pause_s: float = 0.02

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"retention {f.name} must be >= 0")
        if self.batch_rows < 1:
            raise ValueError("retention batch_rows must be >= 1")

    def with_values(self, values: Mapping[str, str]) -> RetentionPolicy:
        """Overrides by field name, values as text (flags and the environment)."""
        known = {f.name: f for f in fields(self)}
        changes: dict[str, float | int] = {}
        for name, text in values.items():
            if name not in known:
                raise ValueError(f"unknown retention setting {name!r} (one of {sorted(known)})")
            changes[name] = int(text) if known[name].type == "int" else float(text)
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RetentionPolicy:
        env = os.environ if env is None else env
        return cls().with_values({k: env[v] for k, v in RETENTION_ENV.items() if env.get(v)})

    def raw_window_s(self) -> float | None:
        """How far back from a series' newest sample its rows are raw (None: all of them)."""
        if self.downsample_s > 0 and self.raw_days > 0:
            return self.raw_days * DAY_S
        return None

    def warnings(self) -> list[str]:
        """Settings that work but hurt forecasting."""
        if self.downsample_s > 0 and 0 < self.raw_days * DAY_S < FORECAST_LOOKBACK_S:
            return [
                f"raw_days={self.raw_days:g} is shorter than the forecasts' look-back "
                f"({FORECAST_LOOKBACK_S / DAY_S:g} days): they will read downsampled rows"
            ]
        return []


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
    # Series whose history and forecaster state a worker keeps in memory (least recently used
    # go first): about 250 KB each at the default history limit.
    forecast_series: int = 2048
    # Where replay jobs may read server-side traces from.
    trace_dirs: tuple[str, ...] = field(default_factory=tuple)
    # Threads that run request handlers in each worker. Planning is CPU-bound Python: more
    # threads than cores only trade throughput for GIL contention.
    request_threads: int = 4
    # Of those, how many may plan at once (schedules, predictions); the rest stay free for
    # ingestion and reads, so a crowd of applications never starves the sensors.
    planning_threads: int = 2
    # Replay and what-if jobs. A Dask scheduler the server's own jobs may use (None: "dask"
    # is refused); callers never name one, so the server connects only where its operator
    # said.
    dask_scheduler: str | None = None
    # Most processes one replay job may use (a request's 0, "all cores", means this many);
    # also the size of a what-if job's process pool.
    replay_max_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    # Uploaded traces of one request: compressed bytes in all and number of files.
    max_upload_bytes: int = 64 * 2**20
    max_upload_files: int = 256
    # Any trace a job reads: decompressed bytes and data rows per file, rows of all files.
    trace_max_bytes: int = 50 * 2**20
    trace_max_rows: int = 1_000_000
    trace_max_total_rows: int = 5_000_000
    # Completed runs a host needs before planning uses the benchmark calibrated from them in
    # place of a missing one (ppe.service.calibration).
    calibration_min_runs: int = 3
    # Completed runs of an application (linked to served schedules) before its served makespan
    # intervals are widened by them (ppe.service.recalibration); 0 turns it off. The bound is
    # computed from the newest `recalibration_last` of them.
    recalibration_min_runs: int = 8
    recalibration_last: int = 50
    # Its score: "ratio" (|log(actual / mean)|) or "scaled" (over the model's own log
    # half-width; narrower where the model is sure, docs/runs.md "Recalibrated intervals").
    recalibration_score: str = "ratio"
    # Signature probes (``"probe": "signature"``, ppe.service.probes): the command that starts
    # one rank on a host (``{host}`` replaced; a cluster: ``mpiexec -n 1 -host {host}``) and
    # the seconds a probe may take before the host is left unprobed.
    probe_launcher: str = "mpiexec -n 1"
    probe_timeout_s: int = 120
    # What the store keeps, and how often each server trims it (store.retention).
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)

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
            planning_threads=int(os.environ.get("PPE_PLANNING_THREADS", "2")),
            dask_scheduler=os.environ.get("PPE_DASK_SCHEDULER") or None,
            recalibration_score=recalibration_score_from_env(),
            probe_launcher=os.environ.get("PPE_PROBE_LAUNCHER", "").strip() or "mpiexec -n 1",
            **{
                name: int(os.environ[env])
                for name, env in _INT_ENV.items()
                if os.environ.get(env, "").strip()
            },
            retention=RetentionPolicy.from_env(),
        )


def recalibration_score_from_env() -> str:
    """``PPE_RECALIBRATION_SCORE``: ``ratio`` (the default) or ``scaled``; anything else is a
    configuration error, refused at start."""
    value = os.environ.get("PPE_RECALIBRATION_SCORE", "").strip() or "ratio"
    if value not in ("ratio", "scaled"):
        raise ValueError(f"PPE_RECALIBRATION_SCORE must be ratio or scaled, not {value!r}")
    return value


#: Integer settings read from the environment when set (else the defaults above).
_INT_ENV = {
    "probe_timeout_s": "PPE_PROBE_TIMEOUT_S",
    "forecast_series": "PPE_FORECAST_SERIES",
    "replay_max_workers": "PPE_REPLAY_MAX_WORKERS",
    "max_upload_bytes": "PPE_MAX_UPLOAD_BYTES",
    "max_upload_files": "PPE_MAX_UPLOAD_FILES",
    "trace_max_bytes": "PPE_TRACE_MAX_BYTES",
    "trace_max_rows": "PPE_TRACE_MAX_ROWS",
    "trace_max_total_rows": "PPE_TRACE_MAX_TOTAL_ROWS",
    "calibration_min_runs": "PPE_CALIBRATION_MIN_RUNS",
    "recalibration_min_runs": "PPE_RECALIBRATION_MIN_RUNS",
    "recalibration_last": "PPE_RECALIBRATION_LAST",
}
