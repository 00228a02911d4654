"""The durable queue between measuring and posting, plus the dead-letter file.

Every measurement is committed to a SQLite database (stdlib, WAL, synchronous=FULL) the moment
it is taken, and deleted only once the service has acknowledged it. So a dead server, a
restart or a SIGKILL loses nothing that was measured; the uploader drains the queue in the
order measurements were taken. Re-posting after a crash between "acknowledged" and "deleted"
is harmless because the service is idempotent on (resource, metric, peer, timestamp).

The queue is bounded: past `max_items` the oldest measurements are dropped (loudly), on the
grounds that after a very long outage the newest data is what forecasts need.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sensors.measurement import Measurement

log = logging.getLogger("ppe.sensor.spool")

SCHEMA = """
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    enqueued REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


class SpoolLocked(RuntimeError):
    """Another sensor process owns this spool directory."""


@dataclass(frozen=True)
class Entry:
    id: int
    enqueued: float
    measurement: Measurement


class Spool:
    """A bounded FIFO of measurements in `directory/spool.sqlite3`, safe across threads."""

    def __init__(self, directory: Path, max_items: int = 500_000, journal: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_items = max_items
        self.journal_enabled = journal
        self._lockfile = self._take_lock()
        self._mutex = threading.Lock()
        self.path = self.directory / "spool.sqlite3"
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a committed measurement survives power loss
        self._db.executescript(SCHEMA)
        self._pending = self._count()

    def _take_lock(self) -> IO[str]:
        """Two daemons draining one spool would post everything twice; refuse instead."""
        f = open(self.directory / "spool.lock", "a+")  # noqa: SIM115 - held for our lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise SpoolLocked(f"spool {self.directory} is in use by another sensor") from None
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
        return f

    def _count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM pending").fetchone()[0])

    def append(self, measurements: Sequence[Measurement]) -> int:
        """Commit measurements durably; returns how many old ones the bound pushed out."""
        now = time.time()
        rows = [(now, json.dumps(m.check().to_json())) for m in measurements]
        with self._mutex:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT INTO pending (enqueued, body) VALUES (?, ?)", rows)
                if self.journal_enabled:
                    self._db.executemany(
                        "INSERT INTO journal (body) VALUES (?)", [(b,) for _, b in rows]
                    )
                excess = max(self._pending + len(rows) - self.max_items, 0)
                if excess:
                    self._db.execute(
                        "DELETE FROM pending WHERE id IN "
                        "(SELECT id FROM pending ORDER BY id LIMIT ?)",
                        (excess,),
                    )
                    self._bump("dropped", excess)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._pending += len(rows) - excess
        if excess:
            log.error("spool full (%d measurements): dropped the %d oldest", self.max_items, excess)
        return excess

    def _bump(self, name: str, by: int) -> None:
        self._db.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            (name, by),
        )

    def peek(self, limit: int) -> list[Entry]:
        """The oldest `limit` pending measurements, oldest first."""
        with self._mutex:
            rows = self._db.execute(
                "SELECT id, enqueued, body FROM pending ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
        return [Entry(i, t, Measurement.from_json(json.loads(b))) for i, t, b in rows]

    def ack(self, entries: Sequence[Entry], counter: str = "posted") -> None:
        """Forget entries the service has stored (or that went to the dead-letter file)."""
        if not entries:
            return
        with self._mutex:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.executemany(
                    "DELETE FROM pending WHERE id = ?", [(e.id,) for e in entries]
                )
                self._bump(counter, len(entries))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._pending -= max(cur.rowcount, 0)

    @property
    def pending(self) -> int:
        return self._pending

    def oldest_enqueued(self) -> float | None:
        with self._mutex:
            row = self._db.execute("SELECT enqueued FROM pending ORDER BY id LIMIT 1").fetchone()
        return None if row is None else float(row[0])

    def counters(self) -> dict[str, int]:
        with self._mutex:
            rows = self._db.execute("SELECT name, value FROM counters").fetchall()
        return {str(n): int(v) for n, v in rows}

    def journal(self) -> list[Measurement]:
        """Every measurement taken since the spool was created (with journal=True)."""
        with self._mutex:
            rows = self._db.execute("SELECT body FROM journal ORDER BY id").fetchall()
        return [Measurement.from_json(json.loads(b)) for (b,) in rows]

    def close(self) -> None:
        with self._mutex:
            self._db.close()
        self._lockfile.close()


class DeadLetter:
    """Append-only JSON lines of batches the service refused, for a human to look at.

    Each line is {"at", "status", "reason", "measurements": [...]}: the same `measurements` list
    the API takes, so a fixed batch can be re-posted as it is.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, measurements: Sequence[Measurement], status: int | None, reason: str) -> None:
        self.append(status, reason, measurements=[m.to_json() for m in measurements])

    def append(self, status: int | None, reason: str, **body: Any) -> None:
        """One line: when, the answer, and ``body`` (what was refused, as it was posted)."""
        record: dict[str, Any] = {"at": time.time(), "status": status, "reason": reason, **body}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


class PendingProfiles:
    """Machine profiles measured but not yet acknowledged by the service: one JSON file each,
    ``profile-pending-<measured_at in ms>.json`` in the spool directory, posted oldest first.

    A file is written whole (temporary file, fsync, rename), so a crash leaves a profile or
    nothing, and one found at start is posted before anything else. At most ``max_items``
    are kept; past that the oldest go, loudly (planning reads the newest).
    """

    PREFIX = "profile-pending-"

    def __init__(self, directory: Path, max_items: int = 30) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_items = max_items

    def paths(self) -> list[Path]:
        """Pending profiles, oldest measurement first."""
        return sorted(self.directory.glob(f"{self.PREFIX}*.json"))

    def add(self, text: str, measured_at: float) -> Path:
        stamp = int(max(measured_at, 0.0) * 1000)
        path = self.directory / f"{self.PREFIX}{stamp:015d}.json"
        while path.exists():  # two measurements in one millisecond: keep both
            stamp += 1
            path = self.directory / f"{self.PREFIX}{stamp:015d}.json"
        tmp = path.with_suffix(".tmp")
        with tmp.open("w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._sync_directory()
        for old in self.paths()[: -self.max_items]:
            log.error("%d profiles wait to be posted: dropped the oldest, %s", self.max_items, old)
            self.remove(old)
        return path

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self._sync_directory()

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
