"""A host's dedicated speed (``benchmark``) and a link's bandwidth estimated from the runs
they took part in (the bandwidth: :func:`fit_link`, at the end).

The SOR model (``ppe/core/models/sor.ppg``) charges a strip of ``rows`` rows of an ``n``-wide
grid ``rows * n * Benchmark / FracAvailCPU`` seconds of computation per iteration (two
half-sweeps of ``rows * n / 2`` elements). A reported run gives, per rank and per segment
between migrations, the compute seconds, rows and iterations; the sensors give the host's CPU
availability over the segment's time window. So each segment measures

    benchmark = compute_s * share / (rows * n * iterations)

where ``share`` is the fraction of the CPU the application got inside its compute bursts.
Ranks that report their thread's CPU time over those bursts (``cpu_s``, ppe-sor does) measure
it exactly: ``share = cpu_s / compute_s``, so ``benchmark = cpu_s / elements``. Otherwise it is
what the sensors read over the window. While the application's processes run on a measured
CPU, the sensor reports the share they achieved (plus the idle time they left), not what a new
process would get (``sensors/cpu.py``): the application is never its own competitor in the
readings. But that window holds the halo waits too, where the rank leaves its core to the
other load or polls beside it, not only the bursts: the CPU time is the better witness
(docs/runs.md, "Calibration").

One estimate per run (its segments pooled: compute-weighted), then the mean over runs with its
standard error and a Student-t interval: runs are the independent repetitions, segments of one
run share its load. Pure: the service reads runs and samples.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
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
    cpu_s: float | None = None  # the rank's CPU time inside the compute bursts, if reported

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
    share_source: str = "sensors"  # "cpu time" (the ranks' own clocks), "sensors" or "both"


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


def cpu_share(segment: Segment) -> float | None:
    """The share of its core the rank's own CPU clock measured over its compute bursts, within
    [0, 1]; None when the report carries no CPU time (the sensors must say)."""
    if segment.cpu_s is None or not segment.compute_s > 0:
        return None
    return min(max(segment.cpu_s / segment.compute_s, 0.0), 1.0)


def run_estimate(segments: Sequence[Segment], shares: Sequence[float]) -> RunEstimate | None:
    """Pool one run's segments: compute seconds at full speed over elements updated.
    ``shares`` are the sensors' (per segment); a segment's own CPU time comes first."""
    measured = [cpu_share(s) for s in segments]
    used = [
        (s, a if m is None else m, m is not None)
        for s, a, m in zip(segments, shares, measured, strict=True)
        if s.work > 0 and (a if m is None else m) > 0
    ]
    if not used:
        return None
    work = sum(s.work for s, _, _ in used)
    dedicated = sum(s.compute_s * a for s, a, _ in used)
    spent = sum(s.compute_s for s, _, _ in used)
    clocks = {by_clock for _, _, by_clock in used}
    return RunEstimate(
        run_id=used[0][0].run_id,
        benchmark=dedicated / work,
        share=dedicated / spent if spent > 0 else 1.0,
        segments=len(used),
        started=min(s.start for s, _, _ in used),
        share_source="both" if len(clocks) == 2 else "cpu time" if True in clocks else "sensors",
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


# ----------------------------------------------------------------------- link bandwidth
#
# ppe-sor reports, per rank and chain neighbour, the bytes of one halo row and a robust
# transfer time: the mean of the fastest 10 % of the receives from that neighbour
# (``ppe.apps.sor.halo``: waiting for a slower neighbour only ever adds). A link's runs then
# give points (bytes, seconds) on ``time = latency + bytes / bandwidth``.

#: How a link estimate's latency was obtained.
LATENCY_FITTED = "fitted"
LATENCY_MEASURED = "measured"
LATENCY_NOT_SEPARATED = "not separated"


@dataclass(frozen=True)
class Transfer:
    """One run's halo transfer time over a link at one message size."""

    run_id: int
    nbytes: float
    seconds: float
    #: the statistic's standard error within the run (sd of the fastest / sqrt(count))
    std_error: float | None = None


@dataclass(frozen=True)
class LinkEstimate:
    """A link's effective bandwidth (bytes/s) and latency (s) from runs, with uncertainty.

    ``bandwidth`` is None when the runs cannot give one (``reason`` says why). ``interval``
    is the bandwidth's interval at ``confidence``; its upper end is None when the interval
    of ``1 / bandwidth`` reaches zero (the data cannot bound the bandwidth from above).
    ``latency_source``: ``fitted`` (two sizes or more, least squares), ``measured`` (one
    size, the sensors' latency subtracted) or ``not separated`` (one size, no latency
    known: ``bytes / time``, a lower bound of the link's bandwidth at that size).
    """

    bandwidth: float | None
    std_error: float | None
    interval: tuple[float, float | None] | None
    latency: float | None
    latency_std_error: float | None
    latency_source: str
    confidence: float
    sizes: tuple[float, ...]
    points: tuple[Transfer, ...]
    reason: str | None = None

    @property
    def runs(self) -> int:
        return len({p.run_id for p in self.points})

    def agrees(self, value: float) -> bool | None:
        """Whether a measured or configured bandwidth lies inside the interval."""
        if self.interval is None:
            return None
        low, high = self.interval
        return low <= value and (high is None or value <= high)


def _quantile(confidence: float, dof: int) -> float:
    """Student-t quantile for ``dof`` degrees of freedom, normal for none (within-run
    errors alone)."""
    if dof > 0:
        return float(student_t.ppf(0.5 + confidence / 2, dof))
    return float(norm.ppf(0.5 + confidence / 2))


def _inverse_interval(slope: float, half: float) -> tuple[float, float | None]:
    """The interval of ``1 / s`` for ``s`` in ``slope ± half`` (slope > 0)."""
    low_s = slope - half
    return 1.0 / (slope + half), (1.0 / low_s if low_s > 0 else None)


def _weights(points: Sequence[Transfer]) -> tuple[list[float], bool]:
    """1 / standard error² when every point has a positive one (and ``True``), else 1."""
    errors = [p.std_error for p in points]
    if all(e is not None and e > 0 for e in errors):
        return [1.0 / (e * e) for e in errors if e is not None], True
    return [1.0] * len(points), False


def _none(points: Sequence[Transfer], source: str, confidence: float, reason: str) -> LinkEstimate:
    sizes = tuple(sorted({p.nbytes for p in points}))
    return LinkEstimate(
        None, None, None, None, None, source, confidence, sizes, tuple(points), reason
    )


def fit_link(
    points: Sequence[Transfer],
    measured_latency: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> LinkEstimate | None:
    """Bandwidth (and latency) of one link from its runs' transfer times; None for no points.

    Two sizes or more: weighted least squares of seconds on bytes (weights from the
    within-run standard errors when all have one). The parameters' covariance is scaled by
    the reduced chi-square when there are more points than parameters, never below the
    within-run errors' (``max(1, chi2 / dof)``), so runs that scatter more than their own
    errors say widen the interval; Student-t with the residual degrees of freedom.

    One size: the weighted mean time ``t``; with ``measured_latency`` ``L`` the bandwidth is
    ``bytes / (t - L)``, otherwise ``bytes / t`` (latency not separated). Its error: the runs'
    standard error (two runs or more), else the within-run one.
    """
    if not points:
        return None
    sizes = sorted({p.nbytes for p in points})
    w, have_errors = _weights(points)
    x = np.array([p.nbytes for p in points], dtype=float)
    y = np.array([p.seconds for p in points], dtype=float)
    wa = np.array(w)
    if len(sizes) >= 2:
        design = np.column_stack([np.ones_like(x), x])
        normal = design.T @ (wa[:, None] * design)
        coef = np.linalg.solve(normal, design.T @ (wa * y))
        latency, slope = float(coef[0]), float(coef[1])
        if slope <= 0:
            return _none(points, LATENCY_FITTED, confidence, "time does not grow with message size")
        dof = len(points) - 2
        resid = y - design @ coef
        chi2 = float(np.sum(wa * resid * resid))
        if dof > 0:
            scale = chi2 / dof if not have_errors else max(1.0, chi2 / dof)
        else:
            scale = 1.0 if have_errors else math.nan  # two points, no errors: exact, no spread
        se_lat = se_slope = None
        interval: tuple[float, float | None] | None = None
        if math.isfinite(scale):
            cov = np.linalg.inv(normal) * scale
            se_lat, se_slope = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
            interval = _inverse_interval(slope, _quantile(confidence, dof) * se_slope)
        return LinkEstimate(
            bandwidth=1.0 / slope,
            std_error=None if se_slope is None else se_slope / slope**2,
            interval=interval,
            latency=latency,
            latency_std_error=se_lat,
            latency_source=LATENCY_FITTED,
            confidence=confidence,
            sizes=tuple(sizes),
            points=tuple(points),
        )
    nbytes = sizes[0]
    mean = float(np.sum(wa * y) / np.sum(wa))
    if len(points) >= 2:
        spread = math.sqrt(float(np.sum(wa * (y - mean) ** 2)) / (np.sum(wa) * (len(y) - 1)))
        se: float | None = spread
        if have_errors:
            se = max(spread, math.sqrt(1.0 / float(np.sum(wa))))
        dof = len(points) - 1
    else:
        se = points[0].std_error if have_errors else None
        dof = 0
    source = LATENCY_NOT_SEPARATED if measured_latency is None else LATENCY_MEASURED
    transfer = mean - (measured_latency or 0.0)
    if transfer <= 0:
        return _none(points, source, confidence, "the measured latency exceeds the transfer time")
    slope = transfer / nbytes
    interval = None
    if se is not None and se > 0:
        interval = _inverse_interval(slope, _quantile(confidence, dof) * se / nbytes)
    return LinkEstimate(
        bandwidth=1.0 / slope,
        std_error=None if se is None else (se / nbytes) / slope**2,
        interval=interval,
        latency=measured_latency,
        latency_std_error=None,
        latency_source=source,
        confidence=confidence,
        sizes=(nbytes,),
        points=tuple(points),
    )
