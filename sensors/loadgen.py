"""`ppe loadgen`: burn CPU on one core following a recorded trace, so that a real machine
reproduces recorded contention (issue 19's experiments).

The trace's CPU usage becomes a duty cycle: in every short period (0.1 s by default) the
generator spins until it has used ``duty`` of the period in CPU time, then sleeps the rest,
so a core's load averaged over a sensor's measurement follows the trace. A trace step
(5 minutes in Bitbrains) lasts ``step / speedup`` seconds of wall time.
:func:`duty_schedule` is the pure part (trace -> steps), :func:`run` the loop; ``main`` pins
the process with ``os.sched_setaffinity`` and stops cleanly on SIGTERM/SIGINT (exit 0,
printing what it did).
"""

from __future__ import annotations

import argparse
import bisect
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppe.traces import Trace, TraceFormatError, read_trace

#: What a step's duty is read from: the recorded CPU usage in percent (Bitbrains' "CPU usage
#: [%]", over 100 clipped: one core is all a generator burns), or one minus the derived
#: availability (the same, with the availability floor: at most 99 % busy).
COLUMNS = ("usage", "availability")
#: A recorded gap longer than this (trace seconds) is replayed this long: the load during a
#: gap is unknown, and a 31-hour hole should not hold one value for most of an experiment.
MAX_STEP_S = 3600.0


@dataclass(frozen=True)
class Step:
    """``duty`` of every period, from ``start_s`` for ``duration_s`` (wall seconds from the
    start of the run); it replays the trace sample at ``trace_time``."""

    start_s: float
    duration_s: float
    duty: float
    trace_time: float

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def duties(trace: Trace, column: str = "usage") -> np.ndarray:
    """The fraction of a core each sample keeps busy, in [0, 1]."""
    if column == "usage":
        return np.clip(trace.cpu_usage_pct / 100.0, 0.0, 1.0)
    if column == "availability":
        return np.clip(1.0 - trace.availability, 0.0, 1.0)
    raise ValueError(f"unknown column {column!r}; choose from {', '.join(COLUMNS)}")


def duty_schedule(
    trace: Trace,
    *,
    speedup: float = 1.0,
    column: str = "usage",
    offset_s: float = 0.0,
    max_step_s: float = MAX_STEP_S,
) -> DutySchedule:
    """The trace as wall-clock steps: sample i holds until sample i+1 (the last one for the
    trace's median step), gaps cut to ``max_step_s``, everything divided by ``speedup``;
    ``offset_s`` seconds of the trace so replayed (gaps cut) are skipped."""
    if not speedup > 0 or not max_step_s > 0 or offset_s < 0:
        raise ValueError("speedup and max_step_s must be > 0, offset_s >= 0")
    ts = trace.timestamps
    if ts.size == 0:
        raise ValueError("the trace has no samples")
    gaps = np.diff(ts)
    last = float(np.median(gaps)) if gaps.size else max_step_s
    lengths = np.minimum(np.append(gaps, last), max_step_s)
    duty = duties(trace, column)
    steps, start, skip = [], 0.0, offset_s
    for t, length, d in zip(ts, lengths, duty, strict=True):
        if skip >= length:
            skip -= length
            continue
        wall = (length - skip) / speedup
        steps.append(Step(start, wall, float(d), float(t) + skip))
        start += wall
        skip = 0.0
    if not steps:
        raise ValueError(f"offset {offset_s:g} s is past the end of the trace")
    return DutySchedule(tuple(steps))


@dataclass(frozen=True)
class DutySchedule:
    """Steps back to back from wall time 0."""

    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a duty schedule needs at least one step")

    @property
    def end_s(self) -> float:
        return self.steps[-1].end_s

    def duty_at(self, t: float) -> float | None:
        """The duty at ``t`` wall seconds into the run; None once the schedule is over."""
        if t < 0 or t >= self.end_s:
            return None
        i = bisect.bisect_right(self.steps, t, key=lambda s: s.start_s) - 1
        return self.steps[max(i, 0)].duty


@dataclass(frozen=True)
class Contention:
    """The share of a core a CPU-bound process gets beside a generator of duty ``d``: what
    a what-if spec gives as that core's availability while the generator replays a trace.

    Without ``points``, Linux's fair share, ``max(1 - d, 1/2)``: the generator spins until it
    has had its ``d`` of the period, taking half the core while both are runnable, so the
    process keeps ``1 - d`` when ``d <= 1/2`` and half otherwise. With ``points`` (measured
    ``(duty, availability)`` pairs, e.g. by ``benchmarks/whatif_validate.py``), the
    piecewise-linear curve through ``(0, 1)`` and them, flat past the last measured duty:
    a machine's scheduler need not give that share (docs/whatif.md, "Against real runs").
    """

    points: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        duties = [d for d, _ in self.points]
        if any(not 0 < d <= 1 for d in duties) or len(set(duties)) != len(duties):
            raise ValueError("measured duties must be distinct and in (0, 1]")
        if any(not 0 < a <= 1 for _, a in self.points):
            raise ValueError("measured availabilities must be in (0, 1]")

    def availability(self, duty: np.ndarray | float) -> np.ndarray:
        """The availability beside each duty (clipped to [0, 1] first), shaped as ``duty``."""
        d = np.clip(np.asarray(duty, dtype=np.float64), 0.0, 1.0)
        if not self.points:
            return np.asarray(np.maximum(1.0 - d, 0.5))
        xs, ys = zip(*sorted(self.points), strict=True)
        return np.asarray(np.interp(d, (0.0, *xs), (1.0, *ys)))


@dataclass(frozen=True)
class LoadReport:
    """What a run did: periods run, wall seconds, the CPU time it aimed at, and the CPU time
    this process really got (less when other processes keep the core from it)."""

    periods: int
    wall_s: float
    intended_busy_s: float
    cpu_s: float
    finished: bool

    @property
    def mean_duty(self) -> float:
        return self.intended_busy_s / self.wall_s if self.wall_s > 0 else 0.0


def burn(cpu_s: float, deadline: float, stop: threading.Event) -> None:
    """Spin until this thread has used ``cpu_s`` more CPU seconds, or the deadline
    (``time.monotonic``) passes, or ``stop`` is set.

    The target is CPU time, not wall time: on a core shared with another runnable process the
    scheduler splits the busy stretch between them, and a wall-clock loop would burn only
    half its duty -- the recorded contention, halved. Spinning until the CPU time is used
    takes that share from the other process, as the recorded load did (up to the period's end:
    more than the scheduler's fair share cannot be had)."""
    target = time.thread_time() + cpu_s
    while time.thread_time() < target and time.monotonic() < deadline and not stop.is_set():
        pass  # the load itself


def run(
    schedule: DutySchedule,
    *,
    period_s: float = 0.1,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
) -> LoadReport:
    """Burn ``duty`` x ``period_s`` CPU seconds in every period (:func:`burn`) until the
    schedule (or ``duration_s``) ends or ``stop`` is set. Periods sit on a fixed grid from the
    start: one delayed by other load is not made up later, the next starts on time."""
    if not period_s > 0:
        raise ValueError("period_s must be > 0")
    stop = stop or threading.Event()
    cpu0, t0 = time.process_time(), time.monotonic()
    end = schedule.end_s if duration_s is None else min(schedule.end_s, duration_s)
    periods, busy, k = 0, 0.0, 0
    while not stop.is_set():
        start = k * period_s
        duty = schedule.duty_at(start) if start < end else None
        if duty is None:
            break
        period_end = t0 + start + period_s
        if duty > 0:
            burn(duty * period_s, period_end, stop)
        periods += 1
        busy += duty * period_s
        stop.wait(max(0.0, period_end - time.monotonic()))
        k = max(k + 1, int((time.monotonic() - t0) / period_s))  # late: resume on the grid
    wall = time.monotonic() - t0
    return LoadReport(periods, wall, busy, time.process_time() - cpu0, not stop.is_set())


# --------------------------------------------------------------------------- command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ppe loadgen",
        description="burn CPU on one core following a recorded trace's CPU usage",
    )
    p.add_argument("trace", type=Path, help="a Bitbrains (GWA-T-12) or timestamp,value trace")
    p.add_argument("--core", type=int, required=True, help="the core to pin to and load")
    p.add_argument(
        "--speedup", type=float, default=1.0, help="a trace step lasts step/F seconds (default 1)"
    )
    p.add_argument(
        "--period", type=float, default=0.1, help="seconds of one busy+sleep cycle (default 0.1)"
    )
    p.add_argument("--column", choices=COLUMNS, default="usage", help="what the duty follows")
    p.add_argument("--offset", type=float, default=0.0, help="trace seconds to skip from its start")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    return p


def _pin(core: int) -> None:
    allowed = sorted(os.sched_getaffinity(0))
    if core not in allowed:
        raise ValueError(f"core {core} is not one this process may use ({allowed})")
    os.sched_setaffinity(0, {core})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not args.period > 0 or (args.duration is not None and not args.duration > 0):
            raise ValueError("--period and --duration must be > 0")
        trace = read_trace(args.trace)
        schedule = duty_schedule(
            trace, speedup=args.speedup, column=args.column, offset_s=args.offset
        )
        _pin(args.core)
    except (OSError, ValueError, TraceFormatError) as exc:
        print(f"ppe loadgen: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    caught: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        caught.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    total = schedule.end_s if args.duration is None else min(schedule.end_s, args.duration)
    print(
        f"ppe loadgen: trace {trace.name} ({len(schedule.steps)} steps, {args.column}) "
        f"x{args.speedup:g} on core {args.core}, periods of {args.period:g} s, "
        f"{total:.1f} s; started",
        flush=True,
    )
    report = run(schedule, period_s=args.period, stop=stop, duration_s=args.duration)
    how = "finished" if report.finished else f"stopped by {caught[0] if caught else 'request'}"
    print(
        f"ppe loadgen: {how} after {report.wall_s:.1f} s, {report.periods} periods; "
        f"intended CPU {report.intended_busy_s:.2f} s (mean duty {100 * report.mean_duty:.0f} %)"
        f", process CPU {report.cpu_s:.2f} s",
        flush=True,
    )
    return 0
