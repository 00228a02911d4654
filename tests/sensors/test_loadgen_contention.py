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
