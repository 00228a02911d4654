"""A host's dedicated speed (``benchmark``) estimated from the runs it took part in.

The SOR model (``ppe/core/models/sor.ppg``) charges a strip of ``rows`` rows of an ``n``-wide
grid ``rows * n * Benchmark / FracAvailCPU`` seconds of computation per iteration (two
half-sweeps of ``rows * n / 2`` elements). A reported run gives, per rank and per segment
between migrations, the compute seconds, rows and iterations; the sensors give the host's CPU
availability over the segment's time window. So each segment measures

    benchmark = compute_s * share / (rows * n * iterations)

where ``share`` is the fraction of the CPU the application got: what the sensors read over the
window. While the application's processes run on a measured CPU, the sensor reports the share
they achieved (plus the idle time they left), not what a new process would get
(``sensors/cpu.py``): the application is never its own competitor in the readings.

One estimate per run (its segments pooled: compute-weighted), then the mean over runs with its
standard error and a Student-t interval: runs are the independent repetitions, segments of one
run share its load. Pure: the service reads runs and samples.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import t as student_t

#: A segment whose window the cpu samples cover less than this fraction of is not used.
MIN_WINDOW_COVERAGE = 0.5
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Segment:
    """One rank's stretch of a run on one host with fixed rows (between migrations)."""

    run_id: int
    rows: int
    n: int
    iterations: int
    start: float
    end: float
    compute_s: float

    @property
    def work(self) -> float:
        """Grid elements updated: rows x n x iterations (the model's unit of Benchmark)."""
        return float(self.rows) * self.n * self.iterations


@dataclass(frozen=True)
class RunEstimate:
    """One run's benchmark on the host, and the application's mean CPU share behind it."""

    run_id: int
    benchmark: float
    share: float
    segments: int
    started: float


@dataclass(frozen=True)
class Calibration:
    """The benchmark over runs: mean, standard error, and its Student-t interval."""

    benchmark: float
    std_error: float | None
    interval: tuple[float, float] | None
    confidence: float
    runs: tuple[RunEstimate, ...]

    def agrees(self, configured: float) -> bool | None:
        """Whether a configured benchmark lies inside the interval (None: no interval yet)."""
        if self.interval is None:
            return None
        return self.interval[0] <= configured <= self.interval[1]


def window_mean(samples: Sequence[tuple[float, float]], start: float, end: float) -> float | None:
    """Time-weighted mean availability over ``[start, end]``, or None when the samples cover
    less than :data:`MIN_WINDOW_COVERAGE` of it.

    A sample at ``t`` reports the period since the previous one, ``(t_prev, t]``; the first
    sample's period is taken as long as the next spacing. ``samples`` are sorted by time.
    """
    if end <= start or len(samples) < 2:
        return None
    total = weight = 0.0
    for i, (t, value) in enumerate(samples):
        left = samples[i - 1][0] if i > 0 else t - (samples[1][0] - t)
        overlap = min(t, end) - max(left, start)
        if overlap > 0:
            total += overlap * value
            weight += overlap
    if weight < MIN_WINDOW_COVERAGE * (end - start):
        return None
    return total / weight


def app_share(reading: float) -> float:
    """The CPU share the application got from a reading taken while it ran: the reading
    itself, within [0, 1]."""
    return min(max(reading, 0.0), 1.0)


def run_estimate(segments: Sequence[Segment], shares: Sequence[float]) -> RunEstimate | None:
    """Pool one run's segments: compute seconds at full speed over elements updated."""
    used = [(s, a) for s, a in zip(segments, shares, strict=True) if s.work > 0 and a > 0]
    if not used:
        return None
    work = sum(s.work for s, _ in used)
    dedicated = sum(s.compute_s * a for s, a in used)
    spent = sum(s.compute_s for s, _ in used)
    return RunEstimate(
        run_id=used[0][0].run_id,
        benchmark=dedicated / work,
        share=dedicated / spent if spent > 0 else 1.0,
        segments=len(used),
        started=min(s.start for s, _ in used),
    )


def calibrate(
    runs: Sequence[RunEstimate], confidence: float = DEFAULT_CONFIDENCE
) -> Calibration | None:
    """Mean over runs; the standard error and interval need two runs or more."""
    if not runs:
        return None
    values = [r.benchmark for r in runs]
    mean = statistics.fmean(values)
    se = interval = None
    if len(values) >= 2:
        se = statistics.stdev(values) / math.sqrt(len(values))
        half = float(student_t.ppf(0.5 + confidence / 2, len(values) - 1)) * se
        interval = (mean - half, mean + half)
    return Calibration(mean, se, interval, confidence, tuple(runs))
