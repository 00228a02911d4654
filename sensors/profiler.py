"""The sensor's machine profile (docs/pmac.md): measured at start, every ``profile_every``
seconds and on request (SIGUSR1), with a message sweep to every peer, and posted to
``/api/v1/resources/{host}/profiles`` until the service acknowledges it.

One thread does it all, in order: take this host's experiment lock, run the quick probe in a
child process while CPU readings are held back (``QuietWindow``), release the lock, sweep
message sizes to each peer's responder (each sweep one experiment under the lock, like the
latency and bandwidth probes), write the profile to the spool directory, post it. A profile
the service cannot take now (down, 5xx, 408/425/429) stays on disk and is retried with the
daemon's backoff, across restarts, oldest first; one it refuses (any other 4xx) goes to
``profile-dead-letter.jsonl`` with the answer, once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sensors.config import Peer
from sensors.netprobe import HostLock, SweepConfig, sweep_peers
from sensors.poster import Backoff, MeasurementPoster, Outcome, PostResult
from sensors.probe_config import ProbeConfig
from sensors.spool import DeadLetter, PendingProfiles

log = logging.getLogger("ppe.sensor.profile")

PROFILE_FORMAT = "ppe-pmac-profile"  # ppe.pmac.profile.FORMAT; a test keeps them equal

REFUSAL_HINTS = {
    401: " (is the token valid?)",
    403: " (does the token have the sensor role?)",
    404: " (is the service older than profiles, /api/v1/resources/{name}/profiles?)",
    405: " (is the service older than profiles, /api/v1/resources/{name}/profiles?)",
    422: " (the service found the profile invalid)",
}


class ProbeFailed(RuntimeError):
    """The probe process failed, was cancelled or ran past its time limit."""


def _probe_child(argv: list[str]) -> int:
    """``python -m sensors.profiler REQUEST``: measure, print the profile's JSON."""
    request = json.loads(argv[0])
    cpus = request.get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)
    from ppe.pmac import profile_to_json  # numpy and ppe.pmac: in this process only
    from sensors.profile import measure_profile

    cfg = ProbeConfig(**request["probe"])
    profile = measure_profile(cfg, quick=request["quick"], host=request["host"])
    sys.stdout.write(profile_to_json(profile))
    return 0


def measure_in_child(
    cfg: ProbeConfig,
    host: str,
    *,
    quick: bool = True,
    cpus: frozenset[int] | None = None,
    cancel: threading.Event | None = None,
    time_limit: float = 900.0,
) -> dict[str, Any]:
    """``sensors.profile.measure_profile`` in a fresh Python process, on ``cpus`` when given;
    the profile's JSON object. The probe's CPU time is its own (``process_time`` would
    otherwise count the daemon's threads), its sharing copies are not forked from a threaded
    process, numpy and its arrays stay out of the daemon, and the probe, copies included (its
    own session), is ended at once when ``cancel`` is set or ``time_limit`` passes."""
    request = {
        "probe": dataclasses.asdict(cfg),
        "host": host,
        "quick": quick,
        "cpus": sorted(cpus) if cpus else None,
    }
    root = str(Path(__file__).resolve().parent.parent)  # the code this daemon runs
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sensors.profiler", json.dumps(request)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + time_limit
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    raise ProbeFailed("cancelled") from None
                if time.monotonic() > deadline:
                    raise ProbeFailed(f"the probe took longer than {time_limit:g} s") from None
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        raise ProbeFailed(f"the probe exited with {proc.returncode}: {' | '.join(tail)}")
    return dict(json.loads(out))


class QuietWindow:
    """The time the profile probe loads this host; CPU readings that overlap it are dropped.

    The CPU sensor reports what a new process would get. While the probe runs (numpy kernels
    and, for the sharing curves, a copy on each CPU it may use, for 10-30 s), the idle time
    and the run queue count the probe as a competitor, and the reading would say the host is
    busy when nothing but the sensor itself is. Correcting for it is not honest: the probe's
    ticks could be subtracted, but it also takes the shared cache and memory bandwidth from
    everything else, which no tick count shows, and an active probe during it would learn a
    wrong bias. So readings whose window overlaps the probe are dropped: a gap of about two
    samples a day at the default period, which forecasts treat like any missed period.

    ``mark()`` before a reading's window starts and ``disturbed(mark)`` after it ends tell
    whether the probe ran at any time in between (it is running, or started or ended since).
    """

    def __init__(self, keep: int = 16) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._epoch = 0
        #: (start, end) wall-clock times of the recent windows, newest last
        self.windows: deque[tuple[float, float]] = deque(maxlen=keep)

    def mark(self) -> int:
        with self._lock:
            return self._epoch

    def disturbed(self, mark: int) -> bool:
        with self._lock:
            return self._active > 0 or self._epoch != mark

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._lock:
            self._active += 1
            self._epoch += 1
        start = time.time()  # after the epoch moved: a reading stamped later sees it
        try:
            yield
        finally:
            end = time.time()
            with self._lock:
                self.windows.append((start, end))
                self._active -= 1
                self._epoch += 1


class Measure(Protocol):
    def __call__(
        self,
        cfg: ProbeConfig,
        host: str,
        *,
        quick: bool = ...,
        cpus: frozenset[int] | None = ...,
        cancel: threading.Event | None = ...,
    ) -> dict[str, Any]: ...


@dataclass
class ProfileStats:
    measured: int = 0
    posted: int = 0
    rejected: int = 0
    probe_failures: int = 0
    post_failures: int = 0


@dataclass(frozen=True)
class ProfileSettings:
    """What the task measures and how often: ``every`` seconds (0: only on request)."""

    host: str
    every: float
    probe: ProbeConfig
    sweep: SweepConfig
    peers: tuple[Peer, ...] = ()
    cpus: frozenset[int] | None = None
    probe_timeout: float = 5.0


class ProfileTask:
    """The profile thread's loop (``run``); ``request()`` asks for a profile now."""

    def __init__(
        self,
        settings: ProfileSettings,
        *,
        lock: HostLock,
        quiet: QuietWindow,
        poster: MeasurementPoster,
        pending: PendingProfiles,
        dead_letter: DeadLetter,
        stop: threading.Event,
        backoff: Backoff,
        measure: Measure = measure_in_child,
    ) -> None:
        self.settings = settings
        self.lock = lock
        self.quiet = quiet
        self.poster = poster
        self.pending = pending
        self.dead_letter = dead_letter
        self.stop = stop
        self.backoff = backoff
        self.measure = measure
        self.stats = ProfileStats()
        self.wake = threading.Event()
        self._requested = threading.Event()
        self._failing_since: float | None = None
        # kept here, not in run(): a restarted thread keeps the schedule (no burst of probes)
        self.next_due = time.monotonic() if settings.every > 0 else math.inf

    def request(self) -> None:
        """Measure a profile as soon as possible. Safe from a signal handler: sets events."""
        self._requested.set()
        self.wake.set()

    def notify(self) -> None:
        """Wake the loop (at shutdown)."""
        self.wake.set()

    def run(self) -> None:
        while not self.stop.is_set():
            self.wake.clear()
            retry_in = self.post_pending()
            if self.stop.is_set():
                return
            if self._requested.is_set() or time.monotonic() >= self.next_due:
                self._requested.clear()
                self.measure_one()
                every = self.settings.every
                self.next_due = time.monotonic() + every if every > 0 else math.inf
                continue
            wait = min(self.next_due - time.monotonic(), retry_in)
            self.wake.wait(None if math.isinf(wait) else max(wait, 0.0))

    # -- measuring -------------------------------------------------------------------------

    def measure_one(self) -> Path | None:
        """Measure, sweep, and queue the profile for posting; None if it failed or stopped."""
        s = self.settings
        log.info("measuring this host's machine profile (quick probe; CPU readings paused)")
        while not self.lock.acquire(0.5):  # an experiment in progress ends within its timeout
            if self.stop.is_set():
                return None
        try:
            with self.quiet.hold():
                body = self.measure(s.probe, s.host, quick=True, cpus=s.cpus, cancel=self.stop)
        except ProbeFailed as exc:
            if not self.stop.is_set():
                self.stats.probe_failures += 1
                log.error("the profile probe failed (%s); next try at the next schedule", exc)
            return None
        finally:
            self.lock.release()
        # a stop cuts the sweeps short; what was measured is kept for the next start
        sweeps = sweep_peers(
            s.peers, self.lock, s.sweep, self.stop, me=s.host, timeout=s.probe_timeout
        )
        body["messages"] = [sweep.to_json() for sweep in sweeps]
        path = self.pending.add(json.dumps(body), float(body["measured_at"]))
        self.stats.measured += 1
        log.info(
            "profile measured in %s s (message sweeps to %s); posting it",
            body.get("machine", {}).get("probe_wall_seconds", "?"),
            ", ".join(sweep.peer for sweep in sweeps) or "no peer",
        )
        return path

    # -- posting ---------------------------------------------------------------------------

    def post_pending(self) -> float:
        """Post the pending profiles oldest first; seconds until a retry is due (inf: none)."""
        for path in self.pending.paths():
            if self.stop.is_set():
                break
            body = self._read(path)
            if body is None:
                continue
            result = self.poster.post_profile(str(body["host"]), body)
            if result.outcome is Outcome.RETRY:
                return self._retry(result)
            if result.outcome is Outcome.STORED:
                self._stored(body, result)
            else:
                self._refused(body, result)
            self.pending.remove(path)
        return math.inf

    def _read(self, path: Path) -> dict[str, Any] | None:
        """A pending profile's JSON object; a file that is not one (the service checks the
        figures) goes to the dead-letter file, as the service would never take it."""
        try:
            body = json.loads(path.read_text())
            if not isinstance(body, dict) or body.get("format") != PROFILE_FORMAT:
                raise ValueError("not a machine profile")
            if not isinstance(body.get("host"), str) or not body["host"]:
                raise ValueError("the profile names no host")
        except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
            log.error("pending profile %s is unreadable (%s); moved to %s", path, exc, self._dl)
            self.dead_letter.append(None, f"unreadable: {exc}", file=str(path))
            self.pending.remove(path)
            return None
        return dict(body)

    @property
    def _dl(self) -> Path:
        return self.dead_letter.path

    def _retry(self, result: PostResult) -> float:
        self.stats.post_failures += 1
        delay = self.backoff.next()
        if result.retry_after is not None:
            delay = max(delay, min(result.retry_after, self.backoff.maximum))
        why = result.detail if result.status is None else f"HTTP {result.status}"
        if self._failing_since is None:
            self._failing_since = time.time()
            log.warning(
                "cannot post the machine profile (%s); it waits in %s, retrying in %.1f s",
                why,
                self.pending.directory,
                delay,
            )
        else:
            log.debug("still cannot post the profile (%s); next try in %.1f s", why, delay)
        return delay

    def _stored(self, body: dict[str, Any], result: PostResult) -> None:
        self.stats.posted += 1
        self.backoff.reset()
        self._failing_since = None
        try:
            version = json.loads(result.detail).get("version", "?")
        except (ValueError, AttributeError):
            version = "?"
        log.info(
            "machine profile of %s (measured at %.0f) stored as version %s%s",
            body["host"],
            body.get("measured_at", 0.0),
            version,
            " (the same as the newest)" if result.status == 200 else "",
        )

    def _refused(self, body: dict[str, Any], result: PostResult) -> None:
        self.stats.rejected += 1
        self._failing_since = None
        log.error(
            "SERVICE REFUSED THE MACHINE PROFILE of %s with HTTP %s%s: %s -- not retrying; "
            "moved to the dead-letter file %s",
            body["host"],
            result.status,
            REFUSAL_HINTS.get(result.status or 0, ""),
            result.detail,
            self._dl,
        )
        self.dead_letter.append(result.status, result.detail, host=body["host"], profile=body)


if __name__ == "__main__":
    raise SystemExit(_probe_child(sys.argv[1:]))
