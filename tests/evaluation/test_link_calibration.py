"""A link's bandwidth from halo transfer times, by hand: two sizes recover latency and
bandwidth exactly, one size uses the measured latency or reports it not separated, noisy runs
give an interval that holds the truth; the robust per-run statistic ignores waits."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.apps.sor.halo import fast_mean, halo_report, summarise
from ppe.evaluation.calibration import (
    LATENCY_FITTED,
    LATENCY_MEASURED,
    LATENCY_NOT_SEPARATED,
    Transfer,
    fit_link,
)

LATENCY, BANDWIDTH = 2e-5, 5e8  # 20 us, 500 MB/s


def exact(run: int, nbytes: float, se: float | None = None) -> Transfer:
    return Transfer(run, nbytes, LATENCY + nbytes / BANDWIDTH, se)


def test_two_sizes_recover_latency_and_bandwidth_exactly() -> None:
    est = fit_link([exact(1, 2416), exact(2, 9616)])
    assert est is not None and est.latency_source == LATENCY_FITTED
    assert est.bandwidth == pytest.approx(BANDWIDTH, rel=1e-9)
    assert est.latency == pytest.approx(LATENCY, rel=1e-9)
    assert est.sizes == (2416, 9616) and est.runs == 2
    # Two points, two parameters, no within-run errors: no spread to speak of.
    assert est.interval is None and est.agrees(1.25e7) is None


def test_more_exact_runs_give_a_tight_interval_around_the_truth() -> None:
    pts = [exact(k, size) for k, size in enumerate([2416, 2416, 9616, 9616, 38416])]
    est = fit_link(pts)
    assert est is not None and est.interval is not None
    low, high = est.interval
    assert est.bandwidth == pytest.approx(BANDWIDTH)
    assert high is not None and low == pytest.approx(BANDWIDTH) == high
    assert est.agrees(1.25e7) is False


def test_one_size_with_the_measured_latency() -> None:
    pts = [exact(1, 9616), exact(2, 9616)]
    est = fit_link(pts, measured_latency=LATENCY)
    assert est is not None and est.latency_source == LATENCY_MEASURED
    assert est.bandwidth == pytest.approx(BANDWIDTH)
    assert est.latency == LATENCY


def test_one_size_without_latency_is_bytes_over_time() -> None:
    est = fit_link([exact(1, 9616, se=1e-6)])
    assert est is not None and est.latency_source == LATENCY_NOT_SEPARATED
    t = LATENCY + 9616 / BANDWIDTH
    assert est.bandwidth == pytest.approx(9616 / t)  # below the link's: latency included
    assert est.bandwidth is not None and est.bandwidth < BANDWIDTH and est.latency is None
    # One run: the within-run error gives a normal interval around it.
    assert est.interval is not None
    low, high = est.interval
    assert high is not None and low < est.bandwidth < high


def test_a_latency_above_the_time_gives_no_bandwidth() -> None:
    est = fit_link([exact(1, 2416)], measured_latency=1e-3)
    assert est is not None and est.bandwidth is None and est.reason is not None
    assert fit_link([]) is None


def test_time_falling_with_size_gives_no_bandwidth() -> None:
    est = fit_link([Transfer(1, 1000, 5e-5), Transfer(2, 9000, 4e-5)])
    assert est is not None and est.bandwidth is None and "grow" in (est.reason or "")


def test_noisy_runs_give_an_interval_that_holds_the_truth() -> None:
    rng = np.random.default_rng(19)
    sizes = [2416, 4816, 9616, 19216]
    held = 0
    trials = 200
    for _ in range(trials):
        pts = [
            Transfer(k, s, LATENCY + s / BANDWIDTH + rng.normal(0, 2e-6), 2e-6)
            for k, s in enumerate(sizes * 3)
        ]
        est = fit_link(pts)
        assert est is not None and est.interval is not None
        held += bool(est.agrees(BANDWIDTH))
    # A 95 % interval: about 190 of 200 (binomial sd ~3); far fewer means it is too narrow.
    assert held >= 180


def test_the_fastest_tenth_ignores_waits_for_a_slower_neighbour() -> None:
    rng = np.random.default_rng(7)
    transfer = 3e-5
    clean = transfer + rng.uniform(0, 2e-6, 300)  # the neighbour was already waiting
    waited = transfer + rng.uniform(5e-4, 3e-3, 700)  # waited for its compute
    times = list(rng.permutation(np.concatenate([clean, waited])))
    fast, sd, k = fast_mean(times)
    assert k == 100 and fast == pytest.approx(transfer, abs=2e-6) and sd < 2e-6
    assert float(np.median(times)) > 10 * transfer  # what a median would have said
    assert fast_mean([4.0]) == (4.0, 0.0, 1)
    with pytest.raises(ValueError):
        fast_mean([])


def test_the_summary_is_small_and_per_neighbour() -> None:
    times = {2: [3e-5] * 50 + [1e-3] * 50, 0: [4e-5] * 10}
    entry = halo_report(times, {0: 9616, 2: 9616})
    assert [e["peer"] for e in entry] == [0, 2]
    assert entry[1] == summarise(2, 9616, times[2])
    assert entry[1]["exchanges"] == 100 and entry[1]["fast_n"] == 10
    assert entry[1]["fast_s"] == pytest.approx(3e-5) and entry[1]["median_s"] == pytest.approx(
        (3e-5 + 1e-3) / 2
    )
    assert set(entry[0]) == {
        "peer",
        "bytes",
        "exchanges",
        "fast_s",
        "fast_sd",
        "fast_n",
        "min_s",
        "median_s",
    }
