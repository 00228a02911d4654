"""CPU availability: the fraction of one CPU a newly started process would get.

Measured the way the Network Weather Service did (Wolski, Spring & Hayes, 1999): a cheap
passive estimate every period, from the idle time in /proc/stat and the run queue, corrected by
a short active probe -- a busy loop whose achieved CPU share is timed -- taken at a lower rate.
The passive reading cannot see priorities, cgroup quotas or hypervisor steal the way a real
process does; the probe can, so the difference between the two at probe time (the bias) is
carried forward onto the passive readings until the next probe.

While an application PPE schedules runs on the measured CPUs (its command line matches
``APP_PATTERN``, e.g. ``ppe-sor``'s ranks), both readings would count the application as its
own competitor: a rank sharing a core with one busy process gets 1/2 of it, but the run queue
says a new process would get 1/3. The application is then the probe: what its processes
achieved, plus the idle time they left, is the availability reported (no probe is taken and
the bias is left alone). Measured on ppe-sor under ``ppe loadgen``: without this, availability
during runs read about half of what the ranks got, so runs were predicted ~2.5x too slow and
benchmarks calibrated from them came out 50 % low (docs/sor.md).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import psutil


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative tick counters: idle and total for the measured CPUs, busy for the host."""

    idle: float
    total: float
    host_busy: float


class CpuReader(Protocol):
    def times(self) -> CpuTimes: ...

    def competitors(self) -> float | None:
        """Runnable tasks on the host right now, not counting the caller."""
        ...


def usable_cpus() -> frozenset[int]:
    """CPUs this process may run on (a container's cpuset, taskset...)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(psutil.cpu_count() or 1))


def _busy_idle(fields: list[int]) -> tuple[int, int]:
    """(busy, idle) ticks from a /proc/stat cpu line; guest time is already inside user."""
    ticks = fields[:8]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, idle


class ProcStatReader:
    """Reads /proc/stat (per-CPU ticks and procs_running); psutil elsewhere."""

    def __init__(self, cpus: frozenset[int], path: str = "/proc/stat") -> None:
        self.cpus = cpus
        self.path = path
        self.linux = os.path.exists(path)

    def _read(self) -> tuple[dict[int, tuple[int, int]], int | None]:
        per_cpu: dict[int, tuple[int, int]] = {}
        running = None
        with open(self.path) as f:
            for line in f:
                if line.startswith("cpu") and line[3:4].isdigit():
                    name, *rest = line.split()
                    per_cpu[int(name[3:])] = _busy_idle([int(x) for x in rest])
                elif line.startswith("procs_running"):
                    running = int(line.split()[1])
        return per_cpu, running

    def times(self) -> CpuTimes:
        if not self.linux:
            t = psutil.cpu_times()
            idle = t.idle + getattr(t, "iowait", 0.0)
            total = sum(t)
            return CpuTimes(idle=idle, total=total, host_busy=total - idle)
        per_cpu, _ = self._read()
        mine = [per_cpu[c] for c in self.cpus if c in per_cpu]
        return CpuTimes(
            idle=float(sum(i for _, i in mine)),
            total=float(sum(b + i for b, i in mine)),
            host_busy=float(sum(b for b, _ in per_cpu.values())),
        )

    def competitors(self) -> float | None:
        if self.linux:
            _, running = self._read()
            if running is not None:
                return float(max(running - 1, 0))  # the reader itself is running
        return float(psutil.getloadavg()[0])  # NWS's "uptime" sensor where there is no vmstat


#: Command lines of the application processes PPE schedules (ppe-sor's MPI ranks).
APP_PATTERN = r"ppe[.]apps[.]sor|ppe-sor"
#: Share of the window an application must have run for its own share to be the reading.
APP_MIN_SHARE = 0.05


class AppReader(Protocol):
    def usage(self) -> Mapping[int, tuple[float, float]]:
        """pid -> (start time, CPU seconds so far) of the application's processes that may run
        on the measured CPUs."""
        ...


class AppProcesses:
    """The application's processes on the measured CPUs, found by command line (psutil)."""

    def __init__(self, cpus: frozenset[int], pattern: str = APP_PATTERN) -> None:
        self.cpus = cpus
        self.pattern = re.compile(pattern)
        self._seen: dict[tuple[int, float], bool] = {}  # (pid, start) -> its command matches

    def _ours(self, proc: psutil.Process) -> bool:
        key = (proc.pid, proc.create_time())
        if key not in self._seen:
            command = " ".join(proc.cmdline())
            self._seen[key] = proc.pid != os.getpid() and bool(self.pattern.search(command))
        if not self._seen[key]:
            return False
        # pinned within our CPUs (checked each time: ranks pin themselves after starting up);
        # an unpinned process may run anywhere, and what it got here cannot be told apart
        return not hasattr(proc, "cpu_affinity") or set(proc.cpu_affinity()) <= self.cpus

    def usage(self) -> dict[int, tuple[float, float]]:
        out: dict[int, tuple[float, float]] = {}
        live: set[tuple[int, float]] = set()
        for proc in psutil.process_iter():
            try:
                if self._ours(proc):
                    t = proc.cpu_times()
                    out[proc.pid] = (proc.create_time(), t.user + t.system)
                live.add((proc.pid, proc.create_time()))
            except (psutil.Error, OSError):
                continue
        self._seen = {k: v for k, v in self._seen.items() if k in live}
        return out


def app_seconds(
    start: Mapping[int, tuple[float, float]],
    now: Mapping[int, tuple[float, float]],
    since: float,
) -> list[float]:
    """CPU seconds each of the application's processes used since the window began at ``since``
    (a process started within the window counts from zero; one first seen now that started
    before the window is left out: its share of the window is unknown)."""
    out = []
    for pid, (created, seconds) in now.items():
        before = start.get(pid)
        if before is not None and before[0] == created:
            out.append(seconds - before[1])
        elif created >= since:
            out.append(seconds)
    return [d for d in out if d > 0]


def application_availability(
    app_share: float, idle_fraction: float, n_cpus: int, processes: int
) -> float:
    """What each of the application's ``processes`` got of one CPU: the share they achieved
    plus the idle time they left (a blocked rank leaves the CPU idle, and it was available)."""
    free = (min(max(app_share, 0.0), 1.0) + min(max(idle_fraction, 0.0), 1.0)) * n_cpus
    return min(free / max(processes, 1), 1.0)


def passive_availability(idle_fraction: float, n_cpus: int, competitors: float) -> float:
    """NWS's vmstat estimate, generalised to a set of N CPUs.

    A new process gets the idle time plus a fair share of the busy time, which it would split
    with the `competitors` runnable processes; never more than one CPU. For one CPU this is
    idle + busy / (r + 1); one busy process on one of two CPUs leaves a whole CPU free.
    """
    idle = min(max(idle_fraction, 0.0), 1.0)
    share = n_cpus * (idle + (1.0 - idle) / (max(competitors, 0.0) + 1.0))
    return min(share, 1.0)


def active_probe(duration: float) -> float:
    """Spin for `duration` seconds and return the CPU share the spinning thread achieved."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    x = 0
    while time.perf_counter() - wall0 < duration:
        for _ in range(2000):
            x += 1
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return min(max(cpu / wall, 0.0), 1.0) if wall > 0 else 1.0


@dataclass(frozen=True)
class CpuReading:
    value: float  # what is reported: the probe's result, or passive corrected by the bias
    passive: float
    active: float | None
    bias: float
    #: "passive", "probe", or "application" (what the application's processes achieved)
    source: str = "passive"


class CpuSensor:
    """Keeps the passive window and the bias between readings.

    Call `sample_run_queue` a few times per period (the run queue is instantaneous and noisy),
    then `reading` once per period; the window restarts after each reading, and after a probe
    so that the probe's own busy loop is never counted as load.
    """

    def __init__(
        self,
        cpus: frozenset[int] | None = None,
        probe_duration: float = 0.2,
        bias_gain: float = 0.5,
        reader: CpuReader | None = None,
        probe: Callable[[float], float] = active_probe,
        apps: AppReader | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cpus = cpus or usable_cpus()
        self.probe_duration = probe_duration
        self.bias_gain = bias_gain
        self.reader: CpuReader = reader or ProcStatReader(self.cpus)
        self.probe = probe
        self.apps: AppReader = apps or AppProcesses(self.cpus)
        self.clock = clock
        self.bias = 0.0
        self.restart_window()

    def restart_window(self, apps: Mapping[int, tuple[float, float]] | None = None) -> None:
        """Start a new window; ``apps`` is the application's usage just read, when the window
        starts where the last one ended (one scan of the processes per reading, not two)."""
        self._start = self.reader.times()
        self._queue: list[float] = []
        self._wall = self.clock()
        self._since = time.time()
        self._apps_start = self.apps.usage() if apps is None else apps
        self._apps_now = self._apps_start

    def application(self) -> float | None:
        """What the application's processes got over the window, when they ran in it."""
        wall = self.clock() - self._wall
        if wall <= 0:
            return None
        self._apps_now = self.apps.usage()
        used = app_seconds(self._apps_start, self._apps_now, self._since)
        # processes that ran for a real part of the window (not a launcher such as mpiexec)
        ran = sum(1 for d in used if d >= APP_MIN_SHARE * wall)
        share = sum(used) / (wall * len(self.cpus))
        if ran == 0:
            return None
        now = self.reader.times()
        total = now.total - self._start.total
        idle = (now.idle - self._start.idle) / total if total > 0 else 0.0
        return application_availability(share, idle, len(self.cpus), ran)

    def sample_run_queue(self) -> None:
        r = self.reader.competitors()
        if r is not None:
            self._queue.append(r)

    def passive(self) -> float:
        """Passive estimate over the window since the last restart."""
        now = self.reader.times()
        total = now.total - self._start.total
        if total <= 0:
            return 1.0  # no tick elapsed, so no load was seen
        idle = (now.idle - self._start.idle) / total
        host_busy = now.host_busy - self._start.host_busy
        mine_busy = total - (now.idle - self._start.idle)
        # Runnable tasks are counted host-wide: apportion them to our CPUs by busy time.
        share = min(mine_busy / host_busy, 1.0) if host_busy > 0 else 0.0
        if not self._queue:
            self.sample_run_queue()
        queue = sum(self._queue) / len(self._queue) if self._queue else 0.0
        return passive_availability(idle, len(self.cpus), queue * share)

    def reading(self, with_probe: bool) -> CpuReading:
        app = self.application()
        if app is not None:  # the application is the probe; its own load is no competitor
            self.restart_window(self._apps_now)
            return CpuReading(
                value=app, passive=app, active=None, bias=self.bias, source="application"
            )
        passive = self.passive()
        if not with_probe:
            self.restart_window(self._apps_now)
            value = min(max(passive + self.bias, 0.0), 1.0)
            return CpuReading(value=value, passive=passive, active=None, bias=self.bias)
        active = self.probe(self.probe_duration)
        self.bias += self.bias_gain * ((active - passive) - self.bias)
        self.restart_window()
        return CpuReading(
            value=active, passive=passive, active=active, bias=self.bias, source="probe"
        )
