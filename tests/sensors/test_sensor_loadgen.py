"""`ppe loadgen`: the duty schedule follows the trace; a real run burns what it should on the
core it is pinned to; SIGTERM stops it cleanly (exit 0)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from ppe.traces import read_trace
from sensors.loadgen import duties, duty_schedule

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "traces" / "bitbrains-sample" / "41.csv.gz"


def write_trace(path: Path, rows: list[tuple[float, float]]) -> Path:
    """A timestamp,value trace; values above 1 make it CPU usage in percent."""
    path.write_text("timestamp,usage\n" + "".join(f"{t},{v}\n" for t, v in rows))
    return path


# ------------------------------------------------------------------- the schedule


def test_duty_follows_usage_step_by_step(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "t.csv", [(0, 20), (300, 80), (600, 150), (900, 5)]))
    plan = duty_schedule(trace, speedup=100)
    assert [s.duty for s in plan.steps] == pytest.approx([0.2, 0.8, 1.0, 0.05])
    assert [s.start_s for s in plan.steps] == pytest.approx([0, 3, 6, 9])
    assert plan.end_s == pytest.approx(12)  # the last sample holds for the median step
    assert plan.duty_at(0.0) == pytest.approx(0.2)
    assert plan.duty_at(4.5) == pytest.approx(0.8)
    assert plan.duty_at(11.9) == pytest.approx(0.05)
    assert plan.duty_at(12.0) is None and plan.duty_at(-1) is None


def test_real_trace_schedule_keeps_every_sample_and_its_length() -> None:
    trace = read_trace(SAMPLE)
    plan = duty_schedule(trace, speedup=60, max_step_s=1e9)
    assert len(plan.steps) == len(trace)
    assert [s.duty for s in plan.steps] == pytest.approx(
        np.clip(trace.cpu_usage_pct / 100, 0, 1).tolist()
    )
    lengths = np.diff([s.start_s for s in plan.steps])
    assert lengths == pytest.approx(np.diff(trace.timestamps) / 60)
    assert [s.trace_time for s in plan.steps] == pytest.approx(trace.timestamps.tolist())


def test_gaps_are_cut_and_offsets_skip_trace_time(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "t.csv", [(0, 10), (300, 50), (100_300, 90)]))
    plan = duty_schedule(trace, max_step_s=600)
    assert [s.duration_s for s in plan.steps] == pytest.approx([300, 600, 600])
    later = duty_schedule(trace, offset_s=450, max_step_s=600)
    assert later.steps[0].duty == pytest.approx(0.5)
    assert later.steps[0].duration_s == pytest.approx(450)
    assert later.steps[0].trace_time == pytest.approx(450)
    with pytest.raises(ValueError, match="past the end"):
        duty_schedule(trace, offset_s=10_000, max_step_s=600)


def test_availability_column_and_bad_settings(tmp_path: Path) -> None:
    trace = read_trace(write_trace(tmp_path / "t.csv", [(0, 100), (300, 40)]))
    assert duties(trace, "availability") == pytest.approx([0.99, 0.4])  # the floor: 1 % left
    with pytest.raises(ValueError, match="column"):
        duties(trace, "memory")
    with pytest.raises(ValueError):
        duty_schedule(trace, speedup=0)


# ------------------------------------------------------------------ real processes


def loadgen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ppe", "loadgen", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def started(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once the trace is read and the process pinned
    assert "started" in line, line + (proc.stderr.read() if proc.stderr else "")
    return line


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def cpu_share(p: psutil.Process, start: float, end: float) -> float:
    """CPU seconds per wall second the process got between two moments of the run."""
    time.sleep(max(0.0, start - time.monotonic()))
    c0, t0 = cpu_seconds(p), time.monotonic()
    time.sleep(max(0.0, end - time.monotonic()))
    return (cpu_seconds(p) - c0) / (time.monotonic() - t0)


@pytest.mark.slow
def test_a_real_run_burns_the_traces_usage_on_its_core(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    # 10 % for one 300 s step, then 35 %; at x150 each step lasts 2 s of wall time. Duties a
    # core shared with two other busy processes still has room for (this machine is shared).
    trace = write_trace(tmp_path / "t.csv", [(0, 10), (300, 35), (600, 35)])
    proc = loadgen(str(trace), "--core", "0", "--speedup", "150", "--period", "0.05")
    procs.append(proc)
    started(proc)
    t0 = time.monotonic()
    p = psutil.Process(proc.pid)
    assert p.cpu_affinity() == [0]
    low = cpu_share(p, t0 + 0.3, t0 + 1.7)
    high = cpu_share(p, t0 + 2.3, t0 + 4.5)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "finished" in out
    # Generous: the machine is shared, and a contended core may give the loop less.
    assert 0.04 <= low <= 0.2
    assert 0.2 <= high <= 0.5
    assert high >= low + 0.1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_cleanly(sig: signal.Signals, procs: list[subprocess.Popen[str]]) -> None:
    proc = loadgen(str(SAMPLE), "--core", "0", "--period", "0.05")  # a month, in real time
    procs.append(proc)
    started(proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"stopped by {sig.name}" in out and "process CPU" in out


def test_bad_input_exits_2_with_a_message(
    tmp_path: Path, procs: list[subprocess.Popen[str]]
) -> None:
    core = max(psutil.Process().cpu_affinity() or [0]) + 1000
    bad_core = loadgen(str(SAMPLE), "--core", str(core))
    missing = loadgen(str(tmp_path / "nope.csv"), "--core", "0")
    procs += [bad_core, missing]
    _, err = bad_core.communicate(timeout=30)
    assert bad_core.returncode == 2 and f"core {core}" in err
    _, err = missing.communicate(timeout=30)
    assert missing.returncode == 2 and "nope.csv" in err
