"""The simulated what-if path: plans made before each start, run over the recorded load.

Real Bitbrains traces (/work/shared/traces, else the sample in examples/traces), small counts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ppe.whatif import LoadTrace, WhatIfError, evaluate, resolve
from ppe.whatif.simulated import SimOptions, simulate_point, simulate_whatif, start_times
from ppe.whatif_cli import FileResolver
from ppe.whatif_cli import main as whatif_main

from .conftest import SOR_SCRIPT, MemoryResolver, cluster, parse, two_nodesets

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path("/work/shared/traces/bitbrains-rnd-2013-7")
TRACES = SHARED if SHARED.is_dir() else ROOT / "examples/traces/bitbrains-sample"
QUIET = ["2.csv.gz", "4.csv.gz"]  # availability 1.0 and 0.992 ± 0.005 over the month
BUSY = ["1.csv.gz", "41.csv.gz", "198.csv.gz"]


def _files(names: list[str]) -> str:
    return "{kind = " + '"traces"' + ", files = [" + ", ".join(f'"{n}"' for n in names) + "]}"


def _traced(names: list[str], **kw: object) -> str:
    return cluster(load=_files(names), **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------- agreement


def test_dedicated_simulation_equals_the_analytic_prediction() -> None:
    """Constant availability: the simulator's I x max(host iteration) is the SOR model's
    ExecTime, so the mapping of speeds, rows, halos and links is exact."""
    w = parse(cluster(number=6, n=1200, iterations=50))
    res = resolve(w, MemoryResolver())
    sim = simulate_point(w.points[0], res, sim=SimOptions(starts=2))
    predicted = evaluate(w, MemoryResolver()).points[0]
    assert sim.makespans == pytest.approx([predicted.makespan.mean()] * 2, rel=1e-9)
    assert sim.coverage == 1.0
    ns, pn = sim.nodesets[0], predicted.nodesets[0]
    assert ns.compute == pytest.approx(pn.compute, rel=1e-9)
    assert ns.communication == pytest.approx(pn.communication, rel=1e-9)
    assert ns.waiting == pytest.approx(pn.waiting, rel=1e-6, abs=1e-12)


def test_heterogeneous_links_map_exactly() -> None:
    """Two nodesets, a slower bridge: nodes between links of two bandwidths (harmonic mean)."""
    text = two_nodesets(fast=3, slow=3, n=600, iterations=20, latency=1e-4).replace(
        'name = "bridge"\nupdown = ["fast", "slow"]\nbandwidth = 1000000000.0',
        'name = "bridge"\nupdown = ["fast", "slow"]\nbandwidth = 1e7',
    )
    w = parse(text)
    sim = simulate_point(w.points[0], resolve(w, MemoryResolver()), sim=SimOptions(starts=1))
    predicted = evaluate(w, MemoryResolver()).points[0]
    assert sim.makespans[0] == pytest.approx(predicted.makespan.mean(), rel=1e-9)
    for s, p in zip(sim.nodesets, predicted.nodesets, strict=True):
        assert s.communication == pytest.approx(p.communication, rel=1e-9)


def test_quiet_traces_agree_with_the_analytic_prediction() -> None:
    """Nearly dedicated recorded load: the simulated mean is within 2 % of the mean of the
    predictions made at the same starts, and the makespans barely vary."""
    w = parse(_traced(QUIET, number=4, n=1000, iterations=200))
    res = resolve(w, FileResolver(TRACES))
    sim = simulate_point(w.points[0], res, sim=SimOptions(starts=4, seed=3))
    assert sim.makespans.mean() == pytest.approx(sim.predicted.mean(), rel=0.02)
    assert sim.makespans.std() < 0.02 * sim.makespans.mean()
    total = sum(n.compute + n.communication + n.waiting for n in sim.nodesets)
    assert total == pytest.approx(sim.makespans.mean(), rel=1e-9)


# -------------------------------------------------------------------------- causality


def _future_changed(t: LoadTrace, after: float) -> LoadTrace:
    """The same trace with every sample at or after ``after`` turned nearly idle-less."""
    avail = np.where(t.timestamps >= after, 0.05, t.availability)
    return LoadTrace(t.name, t.timestamps, avail)


def test_nodes_on_one_trace_move_together_in_the_prediction_too() -> None:
    """24 nodes over 3 busy traces: the 8 nodes on each file see the same load in the
    simulator, and the analytic makespan counts them once, not as 8 independent draws (which
    predicted 3.95 s against 2.50 s simulated, covering 2 of 6 starts; counted once: 2.77 s,
    6 of 6)."""
    w = parse(_traced(BUSY, number=24, n=2400, iterations=200))
    res = resolve(w, FileResolver(TRACES))
    sim = simulate_point(w.points[0], res, sim=SimOptions(starts=6, seed=5))
    assert sim.predicted.mean() == pytest.approx(sim.makespans.mean(), rel=0.25)
    assert sim.coverage >= 5 / 6


def test_plans_never_look_past_their_start() -> None:
    """Rewriting the load after the (single) start leaves the plan unchanged (rows and
    prediction), while the simulated makespan, which runs over that load, changes."""
    w = parse(_traced(BUSY, number=6, n=1200, iterations=100, floatspeed=1e5))  # ~30 min
    res = resolve(w, FileResolver(TRACES))
    so = SimOptions(starts=1, seed=5)
    (start,) = start_times(res, so)
    changed = replace(res, traces={k: _future_changed(t, start) for k, t in res.traces.items()})
    a = simulate_point(w.points[0], res, sim=so)
    b = simulate_point(w.points[0], changed, sim=so)
    assert b.starts[0] == start
    assert a.analytic == b.analytic  # rows per nodeset, prediction, breakdown
    assert a.predicted[0] == b.predicted[0]
    assert (a.lower[0], a.upper[0]) == (b.lower[0], b.upper[0])
    assert b.makespans[0] > 2 * a.makespans[0]


def test_starts_lie_in_the_common_span_after_the_warm_up() -> None:
    w = parse(_traced(BUSY, number=3))
    res = resolve(w, FileResolver(TRACES))
    starts = start_times(res, SimOptions(starts=50, seed=1, warmup_s=3600.0))
    first = max(float(t.timestamps.min()) for t in res.traces.values())
    last = min(float(t.timestamps.max()) for t in res.traces.values())
    assert starts.min() >= first + 3600.0 and starts.max() <= last
    assert len(np.unique(starts)) == 50


# ---------------------------------------------------------------- processes, loads


def test_workers_do_not_change_the_answer() -> None:
    w = parse(_traced(BUSY, number=5, n=800, iterations=30))
    one = simulate_whatif(w, FileResolver(TRACES), sim=SimOptions(starts=4, workers=1))
    two = simulate_whatif(w, FileResolver(TRACES), sim=SimOptions(starts=4, workers=2))
    np.testing.assert_array_equal(one.points[0].makespans, two.points[0].makespans)
    np.testing.assert_array_equal(one.points[0].predicted, two.points[0].predicted)


def test_normal_load_is_drawn_once_per_node_per_start() -> None:
    """Drawn availability: makespans vary over starts, and the analytic interval (the max of
    independent normal-loaded nodes) covers most of them."""
    w = parse(
        cluster(number=4, n=400, iterations=20, load='{kind = "normal", mean = 0.7, std = 0.1}')
    )
    sim = simulate_point(w.points[0], resolve(w, MemoryResolver()), sim=SimOptions(starts=40))
    assert sim.makespans.std() > 0
    assert sim.coverage >= 0.8
    assert sim.makespans.mean() == pytest.approx(sim.predicted[0], rel=0.1)


# ----------------------------------------------------------------------------- refusals


def test_scripts_are_refused() -> None:
    w = parse(cluster(execution=f"script = {SOR_SCRIPT}"))
    with pytest.raises(WhatIfError, match="built-in models"):
        simulate_whatif(w, MemoryResolver())


def test_a_span_shorter_than_the_warm_up_is_refused() -> None:
    w = parse(_traced(QUIET, number=2))
    with pytest.raises(WhatIfError, match="warm-up"):
        simulate_whatif(w, FileResolver(TRACES), sim=SimOptions(starts=1, warmup_s=1e9))


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="starts"):
        SimOptions(starts=0)


# ---------------------------------------------------------------------------------- CLI


def test_cli_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(_traced(BUSY, number=4, n=600, iterations=20))
    out = tmp_path / "report.json"
    code = whatif_main(
        [str(spec), "--simulate", "--traces", str(TRACES), "--starts", "3", "--out", str(out)]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    point = doc["points"][0]
    assert doc["mode"] == "simulated" and len(point["makespans_s"]) == 3
    assert set(point["makespan"]) >= {"mean", "quantiles", "interval"}
    assert 0.0 <= point["coverage"] <= 1.0
    assert point["nodesets"][0]["nodeset"] == "node"
    assert "simulated at 3 start time(s)" in capsys.readouterr().out


def test_cli_simulate_refuses_a_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(cluster(execution=f"script = {SOR_SCRIPT}"))
    assert whatif_main([str(spec), "--simulate"]) == 2
    assert "built-in models" in capsys.readouterr().err
