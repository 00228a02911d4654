"""CPU availability: the fraction of one CPU a newly started process would get.

Measured the way the Network Weather Service did (Wolski, Spring & Hayes, 1999): a cheap
passive estimate every period, from the idle time in /proc/stat and the run queue, corrected by
a short active probe -- a busy loop whose achieved CPU share is timed -- taken at a lower rate.
The passive reading cannot see priorities, cgroup quotas or hypervisor steal the way a real
process does; the probe can, so the difference between the two at probe time (the bias) is
carried forward onto the passive readings until the next probe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
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
    ) -> None:
        self.cpus = cpus or usable_cpus()
        self.probe_duration = probe_duration
        self.bias_gain = bias_gain
        self.reader: CpuReader = reader or ProcStatReader(self.cpus)
        self.probe = probe
        self.bias = 0.0
        self._start = self.reader.times()
        self._queue: list[float] = []

    def restart_window(self) -> None:
        self._start = self.reader.times()
        self._queue = []

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
        passive = self.passive()
        if not with_probe:
            self.restart_window()
            value = min(max(passive + self.bias, 0.0), 1.0)
            return CpuReading(value=value, passive=passive, active=None, bias=self.bias)
        active = self.probe(self.probe_duration)
        self.bias += self.bias_gain * ((active - passive) - self.bias)
        self.restart_window()
        return CpuReading(value=active, passive=passive, active=active, bias=self.bias)
