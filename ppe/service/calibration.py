"""A host's benchmark calibrated from its reported runs and the CPU its sensor measured.

Reads ppe-sor's run reports (per rank and per segment between migrations: host, rows, the
iterations ``from``/``to``, ``start``/``end`` unix times, compute seconds) and the host's cpu
samples over each segment's window; ``ppe.evaluation.calibration`` does the arithmetic. Planning
uses the result in place of a missing benchmark once ``min_runs`` runs back it; the API and the
host's dashboard page show it beside the configured one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ppe.evaluation.calibration import (
    Calibration,
    Segment,
    app_share,
    calibrate,
    run_estimate,
    window_mean,
)
from ppe.service.store.run_evidence import ReportedRun, cpu_samples, runs_on_host

DEFAULT_MIN_RUNS = 3
#: Newest reported runs on a host that a calibration reads.
DEFAULT_LAST = 50
#: Samples read either side of a segment: the one before it bounds the first period, the first
#: after it reports the segment's tail (sensor periods are seconds to a minute).
SAMPLE_PAD_S = 300.0


@dataclass(frozen=True)
class HostCalibration:
    """What a host's runs say about its benchmark, beside what is configured."""

    host: str
    configured: float | None
    calibration: Calibration | None
    min_runs: int
    #: reported runs on the host read, and those that gave no estimate (no cpu samples over
    #: their windows, or no segment of theirs on this host)
    runs_read: int
    unusable: int

    @property
    def enough(self) -> bool:
        """Enough runs for planning to use it in place of a missing benchmark."""
        return self.calibration is not None and len(self.calibration.runs) >= self.min_runs

    @property
    def agrees(self) -> bool | None:
        """The configured benchmark inside the calibration's interval (None: nothing to
        compare); False is what an operator should look at."""
        if self.configured is None or self.calibration is None:
            return None
        return self.calibration.agrees(self.configured)


def _number(x: Any) -> float:
    value = float(x)
    if not math.isfinite(value):
        raise ValueError("not finite")
    return value


def segments_of(run: ReportedRun, host: str) -> list[Segment]:
    """The run's segments on ``host`` (a report that lacks a field gives none: the report is
    free JSON, and runs of older clients carry no segments)."""
    out = []
    try:
        n = int(_number(run.params["n"]))
        for rank in run.report.get("ranks") or []:
            if not isinstance(rank, dict) or rank.get("host") != host:
                continue
            for seg in rank.get("segments") or []:
                out.append(
                    Segment(
                        run_id=run.id,
                        rows=int(_number(seg["rows"])),
                        n=n,
                        iterations=int(_number(seg["to"]) - _number(seg["from"])),
                        start=_number(seg["start"]),
                        end=_number(seg["end"]),
                        compute_s=_number(seg["compute_s"]),
                    )
                )
    except (KeyError, TypeError, ValueError, AttributeError):
        return []
    return out


def host_calibration(
    session: Session,
    host: str,
    configured: float | None,
    min_runs: int = DEFAULT_MIN_RUNS,
    last: int = DEFAULT_LAST,
) -> HostCalibration:
    """The host's benchmark from its newest ``last`` completed, reported runs."""
    runs = runs_on_host(session, host, last)
    estimates = []
    for run in runs:
        segments = segments_of(run, host)
        shares = []
        for seg in segments:
            samples = cpu_samples(session, host, seg.start - SAMPLE_PAD_S, seg.end + SAMPLE_PAD_S)
            reading = window_mean(samples, seg.start, seg.end)
            shares.append(0.0 if reading is None else app_share(reading))
        est = run_estimate(segments, shares) if segments else None
        if est is not None:
            estimates.append(est)
    return HostCalibration(
        host=host,
        configured=configured,
        calibration=calibrate(estimates),
        min_runs=min_runs,
        runs_read=len(runs),
        unusable=len(runs) - len(estimates),
    )


def configured_benchmark(properties: Mapping[str, Any]) -> float | None:
    value = properties.get("benchmark")
    return None if value is None else float(value)


def note(cal: HostCalibration) -> str:
    """What a schedule's warnings say when it planned a host with the calibrated benchmark."""
    c = cal.calibration
    assert c is not None
    se = "" if c.std_error is None else f" ± {c.std_error:.3g} (standard error)"
    return (
        f"host {cal.host!r} has no benchmark: planned with {c.benchmark:.4g} s per element "
        f"calibrated from {len(c.runs)} reported runs{se} "
        f"(GET /api/v1/resources/{cal.host}/calibration)"
    )
