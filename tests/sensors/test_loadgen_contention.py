"""The availability a process gets beside a duty-cycle generator (``Contention``), as the
what-if validation turns a replayed trace into a spec's load: hand-computed curve values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ppe.traces import read_trace
from sensors.loadgen import Contention


def test_fair_share_keeps_the_idle_part_and_at_least_half() -> None:
    got = Contention().availability(np.array([-0.1, 0.0, 0.2, 0.5, 0.6, 0.97, 1.3]))
    np.testing.assert_allclose(got, [1.0, 1.0, 0.8, 0.5, 0.5, 0.5, 0.5])


def test_measured_points_are_joined_from_an_idle_core_and_held_past_the_last() -> None:
    # given out of order: the curve sorts them
    c = Contention(((0.97, 0.46), (0.5, 0.48)))
    got = c.availability(np.array([0.0, 0.25, 0.5, 0.735, 0.97, 1.0]))
    # 0.25: half way from (0, 1) to (0.5, 0.48); 0.735: half way from 0.48 to 0.46
    np.testing.assert_allclose(got, [1.0, 0.74, 0.48, 0.47, 0.46, 0.46])
    assert float(c.availability(0.25)) == pytest.approx(0.74)


@pytest.mark.parametrize(
    "points",
    [((0.0, 0.9),), ((1.2, 0.5),), ((0.5, 0.5), (0.5, 0.4)), ((0.5, 0.0),), ((0.5, 1.1),)],
)
def test_bad_measurements_are_refused(points: tuple[tuple[float, float], ...]) -> None:
    with pytest.raises(ValueError):
        Contention(points)


def test_the_validation_writes_the_curve_as_the_spec_load(tmp_path: Path) -> None:
    """benchmarks/whatif_validate.py: a trace's CPU usage becomes the curve's availability."""
    from benchmarks.whatif_validate import availability_csv

    src = tmp_path / "usage.csv"
    src.write_text("timestamp,value\n0,0\n300,50\n600,97\n")
    dst = tmp_path / "avail.csv"
    availability_csv(src, dst, Contention(((0.5, 0.48), (0.97, 0.46))))
    np.testing.assert_allclose(read_trace(dst).availability, [1.0, 0.48, 0.46])
    availability_csv(src, dst, Contention())
    np.testing.assert_allclose(read_trace(dst).availability, [1.0, 0.5, 0.5])


def test_the_probe_models_by_hand() -> None:
    """benchmarks/coupling_probe.py: time over dedicated under min, product and shared."""
    from benchmarks.coupling_probe import Condition, models

    both = models(Condition("both", 0.2, 2, (0.2, 0.2)), {0.2: 0.9})
    assert both["min"] == pytest.approx(1 / 0.8)
    assert both["product"] == pytest.approx(1 / 0.64)
    # windows of 0.4 of the period at half rate: the pair at 1/2 while either is in one
    # (1 - 0.6 * 0.6 = 0.64 of the time), so 0.36 + 0.64 / 2 = 0.68 of dedicated speed
    assert both["shared"] == pytest.approx(1 / 0.68)
    assert both["min meas"] == pytest.approx(1 / 0.9)
    assert both["product meas"] == pytest.approx(1 / 0.81)
    one = models(Condition("core1", 0.97, 2, (0.0, 0.97)), {0.97: 0.46})
    assert (one["min"], one["product"], one["shared"]) == pytest.approx((2.0, 2.0, 2.0))
    assert one["min meas"] == pytest.approx(1 / 0.46)


def test_the_probe_rebuilds_its_table_from_a_log() -> None:
    from benchmarks.coupling_probe import conditions, parse_log, table

    conds = conditions([0.5], phased=False, mixed=[])
    log = """round 0  dedicated 0,0: 1.000 s  (other work 2% of the cores)
round 0     single 0,0: 1.000 s  (other work 2% of the cores)
round 0      core0 0.5,0: 2.000 s  (other work 1% of the cores)
round 1      core0 0.5,0: 9.000 s  (other work 40% of the cores)
round 0 single+gen 0.5,0: 2.500 s  (other work 3% of the cores)"""
    runs = parse_log(log, conds)
    assert [t for t, _ in runs[conds[2]]] == [2.0, 9.0]
    rows = table(runs, max_other=0.1)
    core0 = next(r for r in rows if r.startswith("| core0 "))
    assert "(1/2) | 2.00 |" in core0  # the disturbed run left out
    assert "availability" in rows[-1] and "d=0.5: 0.400" in rows[-1]
