"""Live accuracy: served makespan predictions judged against the runs that followed them.

PPE promises a makespan distribution; applications report what happened. For one group of runs
(an application under one strategy) this module says how often the actual time fell inside the
served interval (coverage, against the interval's own stated confidence), how far the predicted
mean was from it (mean relative error, ``|predicted - actual| / actual``), and the ratio
``actual / predicted`` (above 1: slower than promised). Pure: the service reads the runs.

A run that stopped early (fewer iterations than the schedule was asked for) is judged against
the prediction scaled to the iterations it did: the model's makespan is linear in the number of
iterations (one availability draw for the whole run, ``docs/architecture.md``), so its interval
scales with them exactly.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import binomtest

COMPLETED, FAILED = "completed", "failed"


@dataclass(frozen=True)
class Served:
    """What a served schedule promised: the makespan mean and its central interval."""

    mean: float
    low: float
    high: float
    confidence: float
    #: iterations the schedule was asked for (None: unknown, no scaling)
    iterations: float | None = None


@dataclass(frozen=True)
class RunOutcome:
    """One reported run next to the schedule it followed."""

    run_id: int
    created_at: float
    status: str
    actual: float
    served: Served
    #: iterations the run did (None: unknown)
    iterations: float | None = None


@dataclass(frozen=True)
class Judged:
    """A completed run judged: the prediction as it applies to the run, and the verdicts."""

    run_id: int
    created_at: float
    actual: float
    mean: float
    low: float
    high: float
    scale: float
    inside: bool
    relative_error: float | None
    ratio: float | None


@dataclass(frozen=True)
class Accuracy:
    """One group's figures over its runs; None where no completed run backs a figure."""

    runs: int
    completed: int
    failed: int
    inside: int
    coverage: float | None
    #: Wilson 95 % interval of the coverage (the runs are a sample of the promise)
    coverage_interval: tuple[float, float] | None
    #: mean served confidence: what the coverage should be
    nominal: float | None
    mean_relative_error: float | None
    mean_ratio: float | None
    median_ratio: float | None
    judged: tuple[Judged, ...]


def scale_of(outcome: RunOutcome) -> float:
    """Fraction of the served iterations the run did (1 when either is unknown or zero)."""
    asked, done = outcome.served.iterations, outcome.iterations
    if asked is None or done is None or asked <= 0 or done <= 0:
        return 1.0
    return done / asked


def judge(outcome: RunOutcome) -> Judged:
    """A completed run against its (scaled) prediction."""
    s = scale_of(outcome)
    mean, low, high = outcome.served.mean * s, outcome.served.low * s, outcome.served.high * s
    actual = outcome.actual
    return Judged(
        run_id=outcome.run_id,
        created_at=outcome.created_at,
        actual=actual,
        mean=mean,
        low=low,
        high=high,
        scale=s,
        inside=low <= actual <= high,
        relative_error=abs(mean - actual) / actual if actual > 0 else None,
        ratio=actual / mean if mean > 0 else None,
    )


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def accuracy(outcomes: Sequence[RunOutcome]) -> Accuracy:
    """The group's figures: completed runs are judged, failed ones only counted."""
    done = [judge(o) for o in outcomes if o.status == COMPLETED]
    failed = sum(1 for o in outcomes if o.status == FAILED)
    inside = sum(1 for j in done if j.inside)
    errors = [j.relative_error for j in done if j.relative_error is not None]
    ratios = [j.ratio for j in done if j.ratio is not None]
    interval = None
    if done:
        ci = binomtest(inside, len(done)).proportion_ci(0.95, method="wilson")
        interval = (float(ci.low), float(ci.high))
    return Accuracy(
        runs=len(outcomes),
        completed=len(done),
        failed=failed,
        inside=inside,
        coverage=inside / len(done) if done else None,
        coverage_interval=interval,
        nominal=_mean([o.served.confidence for o in outcomes if o.status == COMPLETED]),
        mean_relative_error=_mean(errors),
        mean_ratio=_mean(ratios),
        median_ratio=statistics.median(ratios) if ratios else None,
        judged=tuple(done),
    )
