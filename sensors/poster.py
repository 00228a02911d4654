"""Posting spooled measurements to the service: batching, retries with backoff, dead letters.

Delivery is at-least-once -- a batch leaves the spool only after the service said it stored
it -- and the service's idempotency on (resource, metric, peer, timestamp) turns that into
exactly-once storage. Failures split two ways: the server being away (connection errors,
timeouts, 5xx, 408/429) is retried forever with exponential backoff and jitter, the spool
holding everything meanwhile; the server refusing the batch (any other 4xx) is not going to
change by retrying, so the batch is logged loudly and moved to the dead-letter file.
"""

from __future__ import annotations

import enum
import logging
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from sensors.measurement import Measurement
from sensors.spool import DeadLetter, Entry, Spool

log = logging.getLogger("ppe.sensor.post")

MEASUREMENTS_PATH = "/api/v1/measurements"
PROFILES_PATH = "/api/v1/resources/{host}/profiles"
RETRYABLE_4XX = frozenset({408, 425, 429})


class Outcome(enum.Enum):
    STORED = "stored"
    RETRY = "retry"
    REJECTED = "rejected"


@dataclass(frozen=True)
class PostResult:
    outcome: Outcome
    status: int | None
    detail: str = ""
    retry_after: float | None = None
    inserted: int | None = None


def classify(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.STORED
    if status >= 500 or status in RETRYABLE_4XX:
        return Outcome.RETRY
    return Outcome.REJECTED


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None  # an HTTP date: rare enough to fall back on our own backoff
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class MeasurementPoster:
    """POST /api/v1/measurements (and a machine profile to /api/v1/resources/{host}/profiles)
    with the sensor's bearer token; never raises."""

    def __init__(
        self,
        server: str,
        token: str,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self.url = self.server + MEASUREMENTS_PATH
        self.client = httpx.Client(
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "ppe-sensor/1"},
        )

    def post(self, measurements: Sequence[Measurement]) -> PostResult:
        body = {"measurements": [m.to_json() for m in measurements]}
        try:
            r = self.client.post(self.url, json=body)
        except httpx.HTTPError as e:
            return PostResult(Outcome.RETRY, None, f"{type(e).__name__}: {e}")
        outcome = classify(r.status_code)
        if outcome is Outcome.STORED:
            try:
                inserted = int(r.json().get("inserted", len(measurements)))
            except (ValueError, AttributeError, TypeError):
                inserted = None
            return PostResult(outcome, r.status_code, inserted=inserted)
        return PostResult(
            outcome, r.status_code, r.text[:2000], _retry_after(r.headers.get("retry-after"))
        )

    def post_profile(self, host: str, body: dict[str, Any]) -> PostResult:
        """A profile as ``ppe.pmac.profile_to_dict`` gives it; STORED's detail is the
        service's answer (201: a new version, 200: the same as the newest)."""
        url = f"{self.server}{PROFILES_PATH.format(host=quote(host, safe=''))}"
        try:
            r = self.client.post(url, json=body)
        except httpx.HTTPError as e:
            return PostResult(Outcome.RETRY, None, f"{type(e).__name__}: {e}")
        return PostResult(
            classify(r.status_code),
            r.status_code,
            r.text[:2000],
            _retry_after(r.headers.get("retry-after")),
        )

    def close(self) -> None:
        self.client.close()


@dataclass
class Backoff:
    """Exponential backoff with "equal jitter": half the delay fixed, half random.

    Sensors that lost the server together would otherwise come back in lock-step and hit it
    all at once; the fixed half keeps the delay from collapsing towards zero.
    """

    initial: float = 1.0
    maximum: float = 60.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next(self) -> float:
        cap = min(self.maximum, self.initial * 2.0 ** min(self.attempts, 30))
        self.attempts += 1
        return cap / 2.0 + self.rng.uniform(0.0, cap / 2.0)

    def reset(self) -> None:
        self.attempts = 0


@dataclass
class UploadStats:
    batches: int = 0
    measurements: int = 0
    duplicates: int = 0
    failures: int = 0
    rejected_batches: int = 0


class Uploader:
    """Drains the spool oldest-first in batches; posts when `batch_size` measurements are
    pending or the oldest has waited `batch_delay` seconds, whichever comes first."""

    def __init__(
        self,
        spool: Spool,
        poster: MeasurementPoster,
        dead_letter: DeadLetter,
        stop: threading.Event,
        batch_size: int = 100,
        batch_delay: float = 10.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.spool = spool
        self.poster = poster
        self.dead_letter = dead_letter
        self.stop = stop
        self.batch_size = batch_size
        self.batch_delay = batch_delay
        self.backoff = backoff or Backoff()
        self.wake = threading.Event()
        self.stats = UploadStats()
        self._failing_since: float | None = None

    def notify(self) -> None:
        """Called after measurements are spooled (and at shutdown)."""
        self.wake.set()

    def due_in(self) -> float:
        """Seconds until the next batch should go out (0: now)."""
        if self.spool.pending == 0:
            return math.inf
        if self.spool.pending >= self.batch_size:
            return 0.0
        oldest = self.spool.oldest_enqueued()
        if oldest is None:
            return math.inf
        return max(self.batch_delay - (time.time() - oldest), 0.0)

    def run(self) -> None:
        while not self.stop.is_set():
            self.wake.clear()
            due = self.due_in()
            if due > 0:
                self.wake.wait(min(due, 60.0))
                continue
            result = self.send_one()
            if result is not None and result.outcome is Outcome.RETRY:
                delay = self.backoff.next()
                if result.retry_after is not None:
                    delay = max(delay, min(result.retry_after, self.backoff.maximum))
                self._report_failure(result, delay)
                self.stop.wait(delay)

    def send_one(self) -> PostResult | None:
        """Post the oldest batch and settle it in the spool; None when nothing is pending."""
        entries = self.spool.peek(self.batch_size)
        if not entries:
            return None
        result = self.poster.post([e.measurement for e in entries])
        if result.outcome is Outcome.STORED:
            self._stored(entries, result)
        elif result.outcome is Outcome.REJECTED:
            self._rejected(entries, result)
        return result

    def flush(self, timeout: float) -> bool:
        """Post everything pending without backoff (shutdown); True when the spool is empty.

        Whatever cannot be posted now stays spooled for the next start.
        """
        deadline = time.monotonic() + timeout
        while self.spool.pending and time.monotonic() < deadline:
            result = self.send_one()
            if result is None:
                break
            if result.outcome is Outcome.RETRY:
                log.warning(
                    "shutdown: service unavailable (%s); %d measurements stay spooled for the "
                    "next start",
                    result.detail or result.status,
                    self.spool.pending,
                )
                return False
        return self.spool.pending == 0

    def _stored(self, entries: Sequence[Entry], result: PostResult) -> None:
        self.spool.ack(entries)
        self.stats.batches += 1
        self.stats.measurements += len(entries)
        if result.inserted is not None:
            self.stats.duplicates += len(entries) - result.inserted
        self.backoff.reset()
        if self._failing_since is not None:
            log.info(
                "service reachable again after %.0f s; draining %d spooled measurements",
                time.time() - self._failing_since,
                self.spool.pending + len(entries),
            )
            self._failing_since = None

    def _rejected(self, entries: Sequence[Entry], result: PostResult) -> None:
        hint = {401: " (is the token valid?)", 403: " (does the token have the sensor role?)"}
        log.error(
            "SERVICE REJECTED A BATCH of %d measurements with HTTP %s%s: %s -- not retrying; "
            "moved to the dead-letter file %s",
            len(entries),
            result.status,
            hint.get(result.status or 0, ""),
            result.detail,
            self.dead_letter.path,
        )
        self.dead_letter.write([e.measurement for e in entries], result.status, result.detail)
        self.spool.ack(entries, counter="dead_lettered")
        self.stats.rejected_batches += 1

    def _report_failure(self, result: PostResult, delay: float) -> None:
        self.stats.failures += 1
        why = result.detail or f"HTTP {result.status}"
        if self._failing_since is None:
            self._failing_since = time.time()
            log.warning(
                "cannot post measurements (%s); spooling them (%d pending), retrying in %.1f s",
                why,
                self.spool.pending,
                delay,
            )
        else:
            log.debug(
                "still cannot post (%s); %d pending; next try in %.1f s",
                why,
                self.spool.pending,
                delay,
            )
