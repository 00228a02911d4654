"""The sensor daemon: measuring threads feed the spool, one uploader drains it.

Threads: CPU (a reading every period, an active probe every cpu_probe_interval), prober (one
experiment per peer per period), responder (serves other sensors' probes), uploader, and
profile (the machine profile at start, every profile_every seconds and on request_profile(),
i.e. SIGUSR1; sensors/profiler.py). They share one stop event; stopping joins the measuring
threads, then flushes the spool once.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence

import httpx

from sensors.config import ConfigError, Peer, SensorConfig, describe
from sensors.cpu import CpuSensor, usable_cpus
from sensors.measurement import InvalidMeasurement, Measurement
from sensors.netprobe import HostLock, Prober, ProbeResult, Responder, SweepConfig
from sensors.poster import Backoff, MeasurementPoster, Uploader
from sensors.probe_config import ProbeConfig
from sensors.profiler import ProfileSettings, ProfileTask, QuietWindow
from sensors.spool import DeadLetter, PendingProfiles, Spool

log = logging.getLogger("ppe.sensor")

RUN_QUEUE_SAMPLES = 4  # per period: the run queue is instantaneous, so sample it a few times
STATUS_EVERY_S = 300.0


class SensorDaemon:
    def __init__(
        self,
        cfg: SensorConfig,
        transport: httpx.BaseTransport | None = None,
        *,
        probe: ProbeConfig | None = None,
        sweep: SweepConfig | None = None,
    ) -> None:
        """``probe`` and ``sweep`` set what the machine profile measures (default: the quick
        probe and 8 B .. 4 MiB messages); tests pass small ones."""
        if cfg.cpus and not cfg.cpus <= usable_cpus():
            raise ConfigError(
                f"--cpus {sorted(cfg.cpus)}: this process may only use CPUs {sorted(usable_cpus())}"
            )
        self.cfg = cfg
        self.stop_event = threading.Event()
        self.lock = HostLock()
        self.spool = Spool(cfg.spool_dir, cfg.spool_max, journal=cfg.record)
        self.dead_letter = DeadLetter(cfg.spool_dir / "dead-letter.jsonl")
        self.poster = MeasurementPoster(cfg.server, cfg.token, cfg.http_timeout, transport)
        self.uploader = Uploader(
            self.spool,
            self.poster,
            self.dead_letter,
            self.stop_event,
            batch_size=cfg.batch_size,
            batch_delay=cfg.batch_delay,
            backoff=Backoff(cfg.backoff_initial, cfg.backoff_max),
        )
        self.responder = (
            Responder(cfg.name, cfg.listen, self.lock, io_timeout=cfg.probe_timeout)
            if cfg.listen is not None
            else None
        )
        self.quiet = QuietWindow()
        self.profiler = ProfileTask(
            ProfileSettings(
                host=cfg.name,
                every=cfg.profile_every,
                probe=probe or ProbeConfig.quick(),
                sweep=sweep or SweepConfig(),
                peers=cfg.peers,
                cpus=cfg.cpus,
                probe_timeout=cfg.probe_timeout,
            ),
            lock=self.lock,
            quiet=self.quiet,
            # its own client: the uploader's is not shared across threads
            poster=MeasurementPoster(cfg.server, cfg.token, cfg.http_timeout, transport),
            pending=PendingProfiles(cfg.spool_dir),
            dead_letter=DeadLetter(cfg.spool_dir / "profile-dead-letter.jsonl"),
            stop=self.stop_event,
            backoff=Backoff(cfg.backoff_initial, cfg.backoff_max),
        )
        self.taken = 0
        self._warned_self_probe: set[Peer] = set()
        self._last_stamp: dict[tuple[str, str | None], float] = {}
        self._measurers: list[threading.Thread] = []
        self._uploader_thread: threading.Thread | None = None
        self._profile_thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        log.info("sensor %s starting: %s", self.cfg.name, describe(self.cfg))
        if self.spool.pending:
            log.info("resuming with %d spooled measurements to post first", self.spool.pending)
        waiting = self.profiler.pending.paths()
        if waiting:
            log.info("resuming with %d machine profiles to post first", len(waiting))
        if self.responder is not None:
            self.responder.start()
        if self.cfg.cpu:
            self._measurers.append(self._spawn("cpu", self._cpu_loop))
        if self.cfg.peers:
            prober = Prober(
                self.cfg.peers,
                self.lock,
                self.cfg.period,
                self._on_probe,
                self.stop_event,
                size=self.cfg.probe_size,
                timeout=self.cfg.probe_timeout,
            )
            self._measurers.append(self._spawn("prober", prober.run))
        self._uploader_thread = self._spawn("uploader", self.uploader.run)
        self._profile_thread = self._spawn("profile", self.profiler.run)

    def request_stop(self) -> None:
        """Safe from a signal handler: only sets events."""
        self.stop_event.set()
        self.uploader.notify()
        self.profiler.notify()

    def request_profile(self) -> None:
        """Measure and post a machine profile now (SIGUSR1). Safe from a signal handler."""
        self.profiler.request()

    def stop(self, flush_timeout: float = 10.0) -> bool:
        """Stop measuring, post what is pending (bounded), close. True if nothing is left."""
        self.request_stop()
        for t in self._measurers:
            t.join(timeout=self.cfg.probe_timeout + self.cfg.cpu_probe_duration + 2.0)
        if self._uploader_thread is not None:
            self._uploader_thread.join(timeout=self.cfg.http_timeout + 2.0)
        if self._profile_thread is not None:  # a probe child is ended at once; a post or sweep
            self._profile_thread.join(timeout=self.cfg.http_timeout + self.cfg.probe_timeout)
        if self.responder is not None:
            self.responder.stop()
        flushed = self.uploader.flush(flush_timeout)
        log.info("sensor %s stopped; %s", self.cfg.name, self.status())
        self.poster.close()
        self.profiler.poster.close()
        self.spool.close()
        return flushed

    def run(self) -> int:
        """Run until request_stop() (SIGTERM/SIGINT in the CLI), logging a status now and then."""
        self.start()
        next_status = time.monotonic() + STATUS_EVERY_S
        while not self.stop_event.wait(1.0):
            if time.monotonic() >= next_status:
                log.info("status: %s", self.status())
                next_status += STATUS_EVERY_S
        self.stop()
        return 0

    def status(self) -> str:
        s, c, p = self.uploader.stats, self.spool.counters(), self.profiler.stats
        return (
            f"taken={self.taken} posted={s.measurements} in {s.batches} batches "
            f"pending={self.spool.pending} post_failures={s.failures} "
            f"dead_lettered={c.get('dead_lettered', 0)} dropped={c.get('dropped', 0)} "
            f"profiles measured={p.measured} posted={p.posted} "
            f"pending={len(self.profiler.pending.paths())} refused={p.rejected}"
        )

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        t = threading.Thread(target=self._supervised, args=(name, target), name=name, daemon=True)
        t.start()
        return t

    def _supervised(self, name: str, target: Callable[[], None]) -> None:
        """Restart a thread that died of a bug rather than silently stop measuring."""
        while not self.stop_event.is_set():
            try:
                target()
                return
            except Exception:
                log.exception("%s thread failed; restarting it in 5 s", name)
                self.stop_event.wait(5.0)

    # -- measurements ----------------------------------------------------------------------

    def emit(self, measurements: Sequence[Measurement]) -> None:
        measurements = [self._monotonic(m) for m in measurements]
        try:
            self.spool.append(measurements)
        except InvalidMeasurement as e:
            log.error("discarding an invalid measurement (a sensor bug): %s", e)
            return
        except sqlite3.Error as e:
            log.error("CANNOT SPOOL %d measurements (%s); they are lost", len(measurements), e)
            return
        self.taken += len(measurements)
        self.uploader.notify()

    def _monotonic(self, m: Measurement) -> Measurement:
        """Keep each series' timestamps increasing even if the wall clock steps back: the
        service keys measurements on their timestamp, so a repeat would be taken as a copy."""
        key = (m.metric, m.peer)
        last = self._last_stamp.get(key)
        if last is not None and m.timestamp <= last:
            m = dataclasses.replace(m, timestamp=math.nextafter(last, math.inf))
        self._last_stamp[key] = m.timestamp
        return m

    def _cpu_loop(self) -> None:
        cfg = self.cfg
        if cfg.cpus:
            os.sched_setaffinity(0, cfg.cpus)  # this thread only: the probe runs on these CPUs
        mark = self.quiet.mark()  # before the sensor's first window starts
        sensor = CpuSensor(cpus=cfg.cpus, probe_duration=cfg.cpu_probe_duration)
        next_probe = time.monotonic()  # probe at the first reading to learn the bias early
        tick = time.monotonic()
        while True:
            for k in range(1, RUN_QUEUE_SAMPLES + 1):
                if self.stop_event.wait(
                    max(tick + k * cfg.period / RUN_QUEUE_SAMPLES - time.monotonic(), 0.0)
                ):
                    return
                sensor.sample_run_queue()
            tick = max(tick + cfg.period, time.monotonic() - cfg.period / 2)  # no bursts
            probe = (
                not self.quiet.disturbed(mark)
                and time.monotonic() >= next_probe
                and self.lock.acquire(min(cfg.period / 4, 1.0))
            )
            next_mark = self.quiet.mark()  # the next window starts inside reading()
            try:
                reading = sensor.reading(with_probe=probe)
            finally:
                if probe:
                    self.lock.release()
            stamp = time.time()
            if self.quiet.disturbed(mark):  # the profile probe loaded the CPUs in this window
                log.debug("cpu reading dropped: the profile probe ran during its window")
                mark = next_mark
                continue
            mark = next_mark
            if probe:
                next_probe = time.monotonic() + cfg.cpu_probe_interval
                log.debug(
                    "cpu probe: active %.3f passive %.3f bias %+.3f",
                    reading.value,
                    reading.passive,
                    reading.bias,
                )
            self.emit([Measurement(cfg.name, "cpu", stamp, reading.value)])

    def _on_probe(self, peer: Peer, result: ProbeResult) -> None:
        name = peer.name or result.peer
        if name == self.cfg.name:
            if peer not in self._warned_self_probe:
                self._warned_self_probe.add(peer)
                log.warning(
                    "peer %s is this sensor (%s); not recording a link to itself", peer, name
                )
            return
        self.emit(
            [
                Measurement(self.cfg.name, "latency", result.timestamp, result.latency, peer=name),
                Measurement(
                    self.cfg.name, "bandwidth", result.timestamp, result.bandwidth, peer=name
                ),
            ]
        )
