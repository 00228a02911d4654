from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sensors.cpu import (
    CpuSensor,
    CpuTimes,
    ProcStatReader,
    active_probe,
    passive_availability,
    usable_cpus,
)


@pytest.mark.parametrize(
    "idle, n, r, expected",
    [
        (1.0, 1, 0, 1.0),  # idle uniprocessor
        (0.0, 1, 1, 0.5),  # one CPU-bound competitor: share it
        (0.0, 1, 3, 0.25),
        (0.5, 2, 1, 1.0),  # one busy process on two CPUs leaves a CPU free
        (0.0, 2, 2, 2 / 3),  # two busy on two: three-way split of two CPUs
        (0.0, 2, 3, 0.5),
        (0.5, 1, 0, 1.0),  # half-busy but nothing runnable when we looked
        (0.5, 1, 1, 0.75),  # NWS vmstat: idle + busy / (r + 1)
    ],
)
def test_passive_formula(idle: float, n: int, r: float, expected: float) -> None:
    assert passive_availability(idle, n, r) == pytest.approx(expected)


def test_passive_formula_stays_in_unit_interval() -> None:
    for idle in (-0.1, 0.0, 0.3, 1.0, 1.2):
        for n in (1, 2, 8):
            for r in (-1.0, 0.0, 0.5, 7.0):
                assert 0.0 <= passive_availability(idle, n, r) <= 1.0


@dataclass
class ScriptedReader:
    """Advances the tick counters as if `busy_fraction` of the measured CPUs were in use."""

    n_cpus: int = 1
    busy_fraction: float = 0.0
    running: float = 0.0
    other_busy: float = 0.0  # busy ticks per step on CPUs we do not measure
    t: CpuTimes = field(default_factory=lambda: CpuTimes(0.0, 0.0, 0.0))

    def step(self, ticks: float = 100.0) -> None:
        busy = self.busy_fraction * ticks * self.n_cpus
        self.t = CpuTimes(
            idle=self.t.idle + ticks * self.n_cpus - busy,
            total=self.t.total + ticks * self.n_cpus,
            host_busy=self.t.host_busy + busy + self.other_busy,
        )

    def times(self) -> CpuTimes:
        return self.t

    def competitors(self) -> float | None:
        return self.running


def test_hybrid_bias_corrects_passive_readings() -> None:
    """A nice'd hog looks like load to the passive reading; the probe shows it is not."""
    reader = ScriptedReader(busy_fraction=1.0, running=1.0)
    sensor = CpuSensor(cpus=frozenset({0}), reader=reader, probe=lambda d: 0.95, bias_gain=1.0)
    reader.step()
    first = sensor.reading(with_probe=True)
    assert first.value == 0.95 and first.passive == pytest.approx(0.5)
    assert first.bias == pytest.approx(0.45)
    reader.step()
    second = sensor.reading(with_probe=False)
    assert second.active is None
    assert second.value == pytest.approx(0.95)  # 0.5 passive + 0.45 bias


def test_bias_is_smoothed_and_clamped() -> None:
    reader = ScriptedReader(busy_fraction=0.0, running=0.0)
    probes = iter([0.2, 1.0])
    sensor = CpuSensor(
        cpus=frozenset({0}), reader=reader, probe=lambda d: next(probes), bias_gain=0.5
    )
    reader.step()
    assert sensor.reading(with_probe=True).bias == pytest.approx(-0.4)  # half of -0.8
    reader.step()
    assert sensor.reading(with_probe=False).value == pytest.approx(0.6)
    reader.step()
    assert sensor.reading(with_probe=True).bias == pytest.approx(-0.2)
    reader.busy_fraction, reader.running = 1.0, 9.0
    reader.step()
    assert sensor.reading(with_probe=False).value == pytest.approx(0.0)  # 0.1 - 0.2 clamps


def test_run_queue_is_apportioned_to_the_measured_cpus() -> None:
    """Host-wide runnable count 3, but only a third of the busy time is on our CPU."""
    reader = ScriptedReader(busy_fraction=1.0, running=3.0, other_busy=200.0)
    sensor = CpuSensor(cpus=frozenset({0}), reader=reader, probe=lambda d: 1.0)
    for _ in range(3):
        sensor.sample_run_queue()
    reader.step()
    assert sensor.passive() == pytest.approx(0.5)  # one competitor on our CPU, not three


def test_no_elapsed_ticks_means_no_load_seen() -> None:
    sensor = CpuSensor(cpus=frozenset({0}), reader=ScriptedReader(), probe=lambda d: 1.0)
    assert sensor.passive() == 1.0


def test_proc_stat_reader_parses_ticks(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  10 0 10 80 0 0 0 0 0 0\n"
        "cpu0 5 0 5 40 0 0 0 0 0 0\n"
        "cpu1 5 0 5 30 10 0 0 0 0 0\n"
        "intr 1 2 3\nprocs_running 4\nprocs_blocked 0\n"
    )
    reader = ProcStatReader(frozenset({1}), path=str(stat))
    t = reader.times()
    assert (t.idle, t.total, t.host_busy) == (40.0, 50.0, 20.0)  # iowait counts as idle
    assert reader.competitors() == 3.0  # minus the reader itself


def test_real_reader_and_probe_are_sane() -> None:
    sensor = CpuSensor(probe_duration=0.05)
    time.sleep(0.2)
    sensor.sample_run_queue()
    reading = sensor.reading(with_probe=True)
    assert 0.0 <= reading.passive <= 1.0
    assert 0.0 < reading.value <= 1.0
    assert 0.0 < active_probe(0.02) <= 1.0


def _spin_on(cpu: int) -> subprocess.Popen[bytes]:
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def _series(sensor: CpuSensor, n: int, period: float = 0.5) -> list[float]:
    """Readings as the daemon takes them: passive every period, a probe every third."""
    out = []
    for i in range(n):
        for _ in range(2):
            time.sleep(period / 2)
            sensor.sample_run_queue()
        out.append(round(sensor.reading(with_probe=i % 3 == 0).value, 3))
    return out


HOGS = 3  # busy processes on the watched CPU: a new process should get 1 / (HOGS + 1)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_busy_processes_lower_availability_and_recovery_restores_it() -> None:
    """Load one CPU with spinning processes; the sensor watching that CPU sees the drop.

    The sensor thread and the hogs are pinned to the same CPU (`--cpus`), so the expected
    reading is 1/(HOGS+1) = 0.25 whatever else runs on the other CPU. One hog would give 0.5,
    which other work on this shared 2-core machine can mimic on its own (idle readings here
    range 0.3..1), hence three. Tolerances are generous and relative to the idle readings.
    """
    cpu = max(usable_cpus())
    before_mask = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # this thread: where the active probe spins
    try:
        sensor = CpuSensor(cpus=frozenset({cpu}), probe_duration=0.15)
        idle = _series(sensor, 6)
        hogs = [_spin_on(cpu) for _ in range(HOGS)]
        try:
            time.sleep(0.5)
            sensor.restart_window()
            loaded = _series(sensor, 6)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait(timeout=10)
        time.sleep(0.5)
        sensor.restart_window()
        recovered = _series(sensor, 6)
    finally:
        os.sched_setaffinity(0, before_mask)
    idle_m, loaded_m, rec_m = (statistics.median(s) for s in (idle, loaded, recovered))
    summary = f"idle={idle} loaded={loaded} recovered={recovered}"
    if max(idle_m, rec_m) < 0.15:
        pytest.skip(f"CPU {cpu} already saturated by other work; cannot see a drop ({summary})")
    # With b background processes on that CPU: idle 1/(b+1), loaded 1/(b+1+HOGS), a ratio of
    # at most 0.5 for b <= 2; 0.65 leaves room for noise.
    assert loaded_m <= 1 / (HOGS + 1) + 0.15, summary
    assert loaded_m <= 0.65 * idle_m, summary
    assert rec_m >= loaded_m / 0.65, summary


@dataclass
class ScriptedApps:
    """The application's processes: pid -> (start time, CPU seconds so far)."""

    procs: dict[int, tuple[float, float]] = field(default_factory=dict)

    def usage(self) -> dict[int, tuple[float, float]]:
        return dict(self.procs)


def _no_probe(duration: float) -> float:
    raise AssertionError("no probe while the application runs: it would compete with it")


def test_a_running_application_is_the_probe_not_a_competitor() -> None:
    """A rank and one busy process share our CPU: the rank gets 1/2, while a new process would
    get 1/3 (two competitors) -- the figure the application should be planned with is 1/2."""
    now = [0.0]
    reader = ScriptedReader(busy_fraction=1.0, running=2.0)
    apps = ScriptedApps({7: (0.0, 10.0), 8: (0.0, 1.0)})  # 8: the launcher (mpiexec)
    sensor = CpuSensor(
        cpus=frozenset({0}), reader=reader, probe=_no_probe, apps=apps, clock=lambda: now[0]
    )
    sensor.sample_run_queue()
    now[0] += 1.0
    reader.step()
    apps.procs = {7: (0.0, 10.5), 8: (0.0, 1.001)}
    reading = sensor.reading(with_probe=True)
    assert reading.source == "application" and reading.active is None
    assert reading.value == pytest.approx(0.5 + 0.001)  # its share (the launcher's is noise)
    assert passive_availability(0.0, 1, 2.0) == pytest.approx(1 / 3)  # what it would say


def test_an_application_that_waits_leaves_idle_time_that_was_available() -> None:
    now = [0.0]
    reader = ScriptedReader(busy_fraction=0.6, running=1.0)
    apps = ScriptedApps({7: (0.0, 0.0)})
    sensor = CpuSensor(
        cpus=frozenset({0}), reader=reader, probe=_no_probe, apps=apps, clock=lambda: now[0]
    )
    now[0] += 2.0
    reader.step()
    apps.procs = {7: (0.0, 0.6)}  # 0.3 of the window; 0.4 idle: it could have had 0.7
    assert sensor.reading(with_probe=False).value == pytest.approx(0.7)


def test_without_the_application_the_readings_are_the_usual_ones() -> None:
    now = [0.0]
    reader = ScriptedReader(busy_fraction=1.0, running=1.0)
    apps = ScriptedApps({9: (-100.0, 50.0)})  # first seen now, started long ago: unknown share
    sensor = CpuSensor(
        cpus=frozenset({0}),
        reader=reader,
        probe=lambda d: 0.5,
        apps=ScriptedApps(),
        clock=lambda: now[0],
    )
    sensor.apps = apps
    now[0] += 1.0
    reader.step()
    apps.procs = {9: (-100.0, 51.0)}
    reading = sensor.reading(with_probe=True)
    assert reading.source == "probe" and reading.value == 0.5


def _spin_on_named(cpu: int, *argv: str) -> subprocess.Popen[bytes]:
    code = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass\n"
    return subprocess.Popen([sys.executable, "-c", code, *argv])


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_real_application_process_is_measured_by_what_it_gets() -> None:
    """One hog and one process whose command line says ppe-sor, on one CPU: the sensor reports
    about the half the application gets; a sensor blind to it reports about a third."""
    cpu = max(usable_cpus())
    hog, app = _spin_on(cpu), _spin_on_named(cpu, "ppe-sor")
    try:
        time.sleep(0.5)
        aware = CpuSensor(cpus=frozenset({cpu}), probe=_no_probe)
        blind = CpuSensor(cpus=frozenset({cpu}), probe=_no_probe, apps=ScriptedApps())
        seen, passive = [], []
        for _ in range(4):
            for _ in range(4):
                time.sleep(0.1)
                blind.sample_run_queue()
            seen.append(aware.reading(with_probe=False))
            passive.append(blind.reading(with_probe=False).value)
    finally:
        for p in (hog, app):
            p.kill()
            p.wait(timeout=10)
    assert all(r.source == "application" for r in seen), seen
    got = statistics.median(r.value for r in seen)
    assert 0.3 <= got <= 0.75, seen
    assert got >= 1.2 * statistics.median(passive), (seen, passive)
