"""A nodeset's run-to-run ``variation``: the machine's own spread between runs with nothing
else on it. The simulated path draws it per run; the analytic path folds it into the
availability's spread. Without it, nothing changes (the dedicated tests elsewhere stay exact)."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.whatif import SpecError, evaluate, resolve
from ppe.whatif.simulated import SimOptions, simulate_point

from .conftest import MemoryResolver, cluster, parse


def _spec(variation: float | None, **kw: object) -> str:
    extra = "" if variation is None else f"variation = {variation}\n"
    return cluster(extra_nodeset=extra, **kw)  # type: ignore[arg-type]


def _simulated(variation: float | None, starts: int = 400) -> np.ndarray:
    # links that cost nothing: the makespan is the slower node's compute
    w = parse(_spec(variation, number=2, n=800, iterations=40, bandwidth=1e15, latency=0))
    sim = simulate_point(w.points[0], resolve(w, MemoryResolver()), sim=SimOptions(starts=starts))
    return np.asarray(sim.makespans)


def test_without_variation_dedicated_runs_do_not_spread() -> None:
    made = _simulated(None, starts=20)
    assert np.ptp(made) == 0
    assert np.array_equal(made, _simulated(0.0, starts=20))


def test_simulated_runs_spread_by_the_variation() -> None:
    """Two nodes, each drawn with a 10 % spread: the makespan (the slower of the two) spreads
    by about 0.83 of that and sits above the dedicated one by E[max of two], 0.56 of it."""
    base = float(_simulated(None, starts=1)[0])
    made = _simulated(0.10)
    cv = made.std() / made.mean()
    assert 0.07 < cv < 0.095
    assert base * 1.04 < made.mean() < base * 1.07
    assert made.min() < base < made.max()


def test_the_analytic_interval_widens_with_the_variation() -> None:
    point = evaluate(parse(_spec(None, number=2)), MemoryResolver()).points[0]
    varied = evaluate(parse(_spec(0.10, number=2)), MemoryResolver()).points[0]
    lo, hi = point.makespan.interval(0.95)
    vlo, vhi = varied.makespan.interval(0.95)
    assert hi - lo == pytest.approx(0.0, abs=1e-12)
    assert vlo < lo and vhi > hi
    assert (vhi - vlo) / varied.makespan.mean() > 0.2  # about +-2 sd of 10 %, at least


@pytest.mark.parametrize("value", ["-0.1", "1.5", '"much"'])
def test_a_variation_out_of_range_is_refused_at_its_line(value: str) -> None:
    text = cluster(extra_nodeset=f"variation = {value}\n")
    with pytest.raises(SpecError) as err:
        parse(text)
    assert "variation" in str(err.value)
