"""Calibration by hand: window means, the application's share, per-run pooling, the interval."""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as student_t

from ppe.evaluation.calibration import (
    Calibration,
    RunEstimate,
    Segment,
    app_share,
    calibrate,
    cpu_share,
    run_estimate,
    window_mean,
)


def test_window_mean_weights_each_sample_by_the_period_it_reports() -> None:
    # Samples every 10 s; the one at 20 reports (10, 20], the one at 30 reports (20, 30].
    samples = [(10.0, 0.2), (20.0, 0.4), (30.0, 0.8), (40.0, 0.1)]
    # [15, 25]: 5 s of 0.4 and 5 s of 0.8.
    assert window_mean(samples, 15.0, 25.0) == pytest.approx(0.6)
    # [0, 10] is the first sample's own period (as long as the next spacing).
    assert window_mean(samples, 0.0, 10.0) == pytest.approx(0.2)
    # [35, 60]: only 5 of 25 s covered -> too little to say anything.
    assert window_mean(samples, 35.0, 60.0) is None
    assert window_mean(samples[:1], 0.0, 10.0) is None


@pytest.mark.parametrize(
    ("reading", "share"),
    [(0.5, 0.5), (1.0, 1.0), (1 / 3, 1 / 3), (1.2, 1.0), (-0.1, 0.0)],
)
def test_a_reading_taken_while_the_application_ran_is_its_share(
    reading: float, share: float
) -> None:
    # The sensor reports what the application's processes got while they run (sensors/cpu.py).
    assert app_share(reading) == pytest.approx(share)


def test_run_estimate_pools_segments_by_work() -> None:
    # Benchmark 2e-8: 100 rows x 1000 x 50 iterations = 5e6 elements = 0.1 s dedicated.
    a = Segment(1, rows=100, n=1000, iterations=50, start=0, end=1, compute_s=0.2)  # share 0.5
    b = Segment(1, rows=300, n=1000, iterations=50, start=1, end=2, compute_s=0.3)  # share 1
    est = run_estimate([a, b], [0.5, 1.0])
    assert est is not None
    assert est.benchmark == pytest.approx((0.2 * 0.5 + 0.3 * 1.0) / (400 * 1000 * 50))
    assert est.benchmark == pytest.approx(2e-8)
    assert est.share == pytest.approx(0.4 / 0.5) and est.segments == 2
    assert run_estimate([a], [0.0]) is None


def test_a_segment_s_own_cpu_time_comes_before_the_sensor() -> None:
    """0.1 s of CPU inside 0.25 s of compute bursts: the rank had 0.4 of its core whatever the
    sensor read over the window (which holds its halo waits too)."""
    a = Segment(1, rows=100, n=1000, iterations=50, start=0, end=1, compute_s=0.25, cpu_s=0.1)
    b = Segment(1, rows=100, n=1000, iterations=50, start=1, end=2, compute_s=0.2)
    assert cpu_share(a) == pytest.approx(0.4) and cpu_share(b) is None
    own = run_estimate([a], [0.9])
    assert own is not None and own.share_source == "cpu time"
    assert own.benchmark == pytest.approx(0.1 / 5e6) and own.share == pytest.approx(0.4)
    both = run_estimate([a, b], [0.9, 0.5])
    assert both is not None and both.share_source == "both"
    assert both.benchmark == pytest.approx((0.1 + 0.2 * 0.5) / 1e7)
    assert run_estimate([b], [0.5]).share_source == "sensors"  # type: ignore[union-attr]
    # a clock that ran longer than the burst (rounding) is a whole core, no more
    assert cpu_share(Segment(1, 1, 1, 1, 0, 1, compute_s=0.1, cpu_s=0.11)) == 1.0
    assert run_estimate([Segment(1, 1, 1, 1, 0, 1, compute_s=0.1, cpu_s=0.0)], [0.9]) is None


def test_calibrate_mean_standard_error_and_t_interval() -> None:
    values = [1.0e-8, 1.2e-8, 1.1e-8]
    runs = [RunEstimate(i, v, 1.0, 1, float(i)) for i, v in enumerate(values)]
    cal = calibrate(runs)
    assert isinstance(cal, Calibration)
    assert cal.benchmark == pytest.approx(1.1e-8)
    se = 1e-9 / math.sqrt(3)  # sample std of (1.0, 1.2, 1.1) e-8 is 1e-9
    assert cal.std_error == pytest.approx(se)
    half = student_t.ppf(0.975, 2) * se
    assert cal.interval == pytest.approx((1.1e-8 - half, 1.1e-8 + half))
    assert cal.agrees(1.1e-8) is True
    assert cal.agrees(2e-8) is False  # a wrong configured value is flagged
    one = calibrate(runs[:1])
    assert one is not None and one.std_error is None and one.agrees(1e-8) is None
    assert calibrate([]) is None
