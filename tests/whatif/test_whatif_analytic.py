"""The analytic what-if is PPE's own pipeline over the machine a spec describes: the same
answer as ppe.pipeline over equivalent hosts, time-balanced strips over heterogeneous
nodesets, a communication term that follows the bandwidth, scripts that equal the grammar
models they describe, and a collapsed evaluation that equals the node-by-node one."""

from __future__ import annotations

import math

import pytest

from ppe import pipeline
from ppe.core import Normal, Point
from ppe.pipeline import HostForecasts, HostMeta, PlanOptions
from ppe.pmac import builtin_signature, convolve
from ppe.whatif import (
    Options,
    RegisteredHost,
    WhatIfError,
    evaluate,
    model_text,
)

from ..pmac.conftest import curve, hand_profile
from .conftest import (
    SOR_SCRIPT,
    TWO_TRACES_LOAD,
    MemoryResolver,
    cluster,
    parse,
    two_nodesets,
    two_traces,
)


def run(text: str, resolver: MemoryResolver | None = None, **options: object):  # type: ignore[no-untyped-def]
    return evaluate(parse(text), resolver or MemoryResolver(), Options(**options))  # type: ignore[arg-type]


def pipeline_plan(
    cpus: list[object],
    benchmark: float,
    n: int,
    iterations: int,
    bw: float,
    lat: float,
    strategy: str = "mean",
) -> pipeline.PlanResult:
    """ppe.pipeline.plan over hosts h0..h{P-1} with the given CPU values and one link kind."""
    hosts = [HostMeta(f"h{i}", benchmark) for i in range(len(cpus))]
    fc = {
        h.name: HostForecasts(cpu=c, default_bandwidth=Point(bw), latency=lat)  # type: ignore[arg-type]
        for h, c in zip(hosts, cpus, strict=True)
    }
    return pipeline.plan(
        "sor",
        {"n": n, "iterations": iterations},
        hosts,
        lambda h: fc,
        strategy,
        PlanOptions(max_rounds=1),
    )


# ----------------------------------------------------------------- against ppe.pipeline


@pytest.mark.parametrize("number", [1, 2, 8, 300])
def test_homogeneous_dedicated_sor_equals_the_pipeline(number: int) -> None:
    report = run(cluster(number=number, n=1200, iterations=50))
    (point,) = report.points
    ref = pipeline_plan([Point(1.0)] * number, 8 / 1e9, 1200, 50, 1.25e7, 5e-4)
    assert point.makespan.std() == 0
    assert point.makespan.mean() == pytest.approx(ref.makespan.mean(), rel=1e-9)
    (ns,) = point.nodesets
    rows = sorted(ref.rows.values())
    assert (ns.rows, ns.rows_min, ns.rows_max) == (1200, rows[0], rows[-1])
    assert point.path == "collapsed"
    assert point.classes <= 4  # the ends, the interior, and rows differing by one


def test_homogeneous_normal_load_equals_the_pipeline() -> None:
    load = '{kind = "normal", mean = 0.7, std = 0.05}'
    report = run(cluster(number=24, load=load, n=2400, iterations=40))
    (point,) = report.points
    ref = pipeline_plan([Normal(0.7, 0.05) for _ in range(24)], 8e-9, 2400, 40, 1.25e7, 5e-4)
    assert point.path == "collapsed"
    assert point.makespan.mean() == pytest.approx(ref.makespan.mean(), rel=1e-4)
    assert point.makespan.std() == pytest.approx(ref.makespan.std(), rel=2e-3)
    for mine, theirs in zip(
        point.makespan.interval(0.95), ref.makespan.interval(0.95), strict=True
    ):
        assert mine == pytest.approx(theirs, rel=5e-4)


@pytest.mark.parametrize(
    "fast_load, slow_load",
    [
        ('{kind = "normal", mean = 0.8, std = 0.04}', '{kind = "dedicated"}'),
        (
            '{kind = "normal", mean = 0.8, std = 0.04}',
            '{kind = "mixture", components = [{weight = 0.7, mean = 0.9, std = 0.03}, '
            "{weight = 0.3, mean = 0.45, std = 0.05}]}",
        ),
    ],
)
def test_collapsed_evaluation_equals_node_by_node(fast_load: str, slow_load: str) -> None:
    text = two_nodesets(
        fast=40,
        slow=12,
        fast_load=fast_load,
        slow_load=slow_load,
        n=4000,
        bandwidth="100 Mb/s",
        latency="1 ms",
    )
    collapsed = run(text).points[0]
    full = run(text, collapse=False).points[0]
    assert (collapsed.path, full.path) == ("collapsed", "full")
    assert full.classes == 52 and collapsed.classes < 12
    assert collapsed.makespan.mean() == pytest.approx(full.makespan.mean(), rel=1e-4)
    assert collapsed.makespan.std() == pytest.approx(full.makespan.std(), rel=5e-3)
    for a, b in zip(collapsed.nodesets, full.nodesets, strict=True):
        assert (a.rows, a.rows_min, a.rows_max) == (b.rows, b.rows_min, b.rows_max)
        assert a.communication == pytest.approx(b.communication, rel=1e-9)
        assert a.time == pytest.approx(b.time, rel=1e-6)


# --------------------------------------------------------------------- heterogeneity


def test_heterogeneous_nodesets_get_time_balanced_strips() -> None:
    """Interior nodes share links, so balancing gives rows in the ratio of speeds (3:1)."""
    point = run(two_nodesets(fast=6, slow=6, fast_speed=3e9, slow_speed=1e9, n=6000)).points[0]
    fast, slow = point.nodesets
    assert fast.rows > 2.9 * slow.rows
    # interior nodes (the ends and the boundary have less or more communication)
    assert fast.rows_max == pytest.approx(3 * slow.rows_max, abs=4)
    assert fast.compute == pytest.approx(slow.compute, rel=0.01)  # the same time each
    assert fast.waiting == pytest.approx(slow.waiting, abs=0.01 * point.makespan.mean())


def test_block_is_not_what_it_does() -> None:
    """The block strategy gives equal strips; mean balances (and finishes sooner)."""
    text = two_nodesets(fast=4, slow=4, fast_speed=4e9, slow_speed=1e9, n=4000)
    block = run(text, strategy="block").points[0]
    mean = run(text, strategy="mean").points[0]
    assert block.nodesets[0].rows == block.nodesets[1].rows == 2000
    assert mean.nodesets[0].rows > 3 * mean.nodesets[1].rows
    assert mean.makespan.mean() < 0.7 * block.makespan.mean()


def test_conservative_gives_the_variable_nodeset_fewer_rows() -> None:
    text = two_nodesets(
        fast=4,
        slow=4,
        fast_speed=1e9,
        slow_speed=1e9,
        n=4000,
        fast_load='{kind = "normal", mean = 0.8, std = 0.15}',
        slow_load='{kind = "normal", mean = 0.8, std = 0.01}',
    )
    mean = run(text, strategy="mean").points[0]
    conservative = run(text, strategy="conservative").points[0]
    assert conservative.nodesets[0].rows < mean.nodesets[0].rows


# ----------------------------------------------------------------- communication term


@pytest.mark.parametrize("script", [False, True])
def test_doubling_a_linkset_bandwidth_halves_the_communication_term(script: bool) -> None:
    execution = f"script = {SOR_SCRIPT}" if script else 'model = "sor"'
    base = run(two_nodesets(bandwidth=1e8, execution=execution)).points[0]
    double = run(two_nodesets(bandwidth=2e8, execution=execution)).points[0]
    for a, b in zip(base.nodesets, double.nodesets, strict=True):
        assert b.communication == pytest.approx(a.communication / 2, rel=1e-9)
        assert a.communication > 0


def test_half_duplex_and_a_bus_cost_what_they_share() -> None:
    full = run(cluster(number=4, latency=0.0)).points[0]
    half = run(
        cluster(number=4, latency=0.0).replace(
            'topology = "chain"', 'topology = "chain"\nduplex = "half"'
        )
    ).points[0]
    bus = run(
        cluster(number=4, latency=0.0).replace('topology = "chain"', 'topology = "bus"\nnumber = 2')
    ).points[0]
    assert half.nodesets[0].communication == pytest.approx(
        2 * full.nodesets[0].communication, rel=1e-9
    )
    assert bus.nodesets[0].communication == pytest.approx(
        2 * full.nodesets[0].communication, rel=1e-9
    )


def test_a_nodeset_interface_caps_its_links() -> None:
    capped = cluster(number=4, latency=0.0, extra_nodeset='bandwidth = "50 Mb/s"')
    base = run(cluster(number=4, latency=0.0, bandwidth="50 Mb/s")).points[0]
    assert run(capped).points[0].nodesets[0].communication == pytest.approx(
        base.nodesets[0].communication, rel=1e-12
    )


# ----------------------------------------------------------------------------- scripts


@pytest.mark.parametrize(
    "load", ['{kind = "dedicated"}', '{kind = "normal", mean = 0.75, std = 0.05}']
)
def test_a_script_equivalent_to_sor_gives_the_sor_model_time(load: str) -> None:
    model = run(cluster(number=16, load=load, n=3000, iterations=30)).points[0]
    script = run(
        cluster(number=16, load=load, n=3000, iterations=30, execution=f"script = {SOR_SCRIPT}")
    ).points[0]
    assert script.makespan.mean() == pytest.approx(model.makespan.mean(), rel=1e-9)
    assert script.makespan.std() == pytest.approx(model.makespan.std(), rel=1e-9, abs=1e-12)
    assert script.nodesets[0].communication == pytest.approx(
        model.nodesets[0].communication, rel=1e-9
    )


def test_the_generated_model_of_a_script_reads_as_sor() -> None:
    w = parse(cluster(number=3, execution=f"script = {SOR_SCRIPT}"))
    from ppe.whatif import resolve

    text = model_text(w.points[0], resolve(w, MemoryResolver()))
    assert text is not None and "HostTime[p] = 10.0 * Ph0[p]" in text
    assert "ExecTime = 10.0 * max(p in hosts: Ph0[p])" in text
    assert "rows[p] * Benchmark[p] / FracAvailCPU[p]" in text


MULTI_PHASE = '''"""
use distribution strips
move from disk
repeat iterations {
  compute
  synchronize
  send halo width 2
  synchronize
}
move strips to disk
"""'''

DISK = """
[[nodeset]]
name = "disk"
type = "disk"
number = 2
bandwidth = "200 MB/s"
grainsize = "1 TB"

[[linkset]]
name = "io"
updown = ["node", "disk"]
bandwidth = "1 Gb/s"
latency = "1 ms"
"""


def test_a_multi_phase_script_with_moves_collapses_exactly_when_dedicated() -> None:
    text = (
        cluster(
            number=32, n=3200, iterations=5, execution=f"script = {MULTI_PHASE}", extra_nodeset=""
        )
        + DISK
    )
    collapsed = run(text).points[0]
    full = run(text, collapse=False).points[0]
    assert collapsed.path == "collapsed"
    assert collapsed.makespan.mean() == pytest.approx(full.makespan.mean(), rel=1e-9)
    comm = collapsed.nodesets[0].communication
    assert comm == pytest.approx(full.nodesets[0].communication, rel=1e-9)
    # the moves by hand: each node's 100 rows x 3200 x 8 bytes twice, at the disks' 400 MB/s
    # shared by 32 nodes (12.5 MB/s each, below the 125 MB/s link), plus the link's latency
    moves = 2 * (100 * 3200 * 8 / 12.5e6 + 1e-3)
    assert comm > moves


def test_a_multi_phase_script_with_stochastic_load_goes_node_by_node() -> None:
    text = (
        cluster(
            number=8,
            n=800,
            iterations=5,
            load='{kind = "normal", mean = 0.8, std = 0.05}',
            execution=f"script = {MULTI_PHASE}",
        )
        + DISK
    )
    point = run(text).points[0]
    assert point.path == "full"
    assert point.makespan.std() > 0


# ------------------------------------------------------------------------ references


def test_a_profile_nodeset_plans_with_the_convolution() -> None:
    profile = hand_profile()
    text = cluster(number=4, n=400).replace("floatspeed = 1000000000.0", 'profile = "h0.json"')
    point = run(text, MemoryResolver(profiles={"h0.json": profile})).points[0]
    expected = convolve(builtin_signature("sor"), profile, {"n": 400.0, "rows": 100.0, "Size": 8.0})
    assert point.nodesets[0].benchmark == pytest.approx(expected.per_unit.mean(), rel=1e-12)
    assert any("convolved with signature 'sor'" in n for n in point.notes)


def test_members_sharing_a_machine_read_the_profiles_sharing_curves() -> None:
    """`sharing = 2`: two members per machine (its cores), so the convolution uses the
    profile's 2-copy curves, as two ranks on one host do."""
    alone_only = hand_profile()
    halved = tuple(
        curve(c.pattern, c.kind, {pt.bytes: pt.rate.value / 2 for pt in c.points}, copies=2)
        for c in alone_only.memory
    )
    profile = hand_profile(memory=alone_only.memory + halved)
    text = cluster(number=4, n=400).replace(
        "floatspeed = 1000000000.0", 'profile = "h0.json"\nsharing = 2'
    )
    point = run(text, MemoryResolver(profiles={"h0.json": profile})).points[0]
    params = {"n": 400.0, "rows": 100.0, "Size": 8.0}
    shared = convolve(builtin_signature("sor"), profile, params, ranks_per_host=2)
    alone = convolve(builtin_signature("sor"), profile, params)
    assert point.nodesets[0].benchmark == pytest.approx(shared.per_unit.mean(), rel=1e-12)
    assert shared.per_unit.mean() != pytest.approx(alone.per_unit.mean(), rel=1e-6)


def test_trace_loads_use_the_forecaster_and_the_horizon_loop() -> None:
    traces, load = two_traces(), TWO_TRACES_LOAD
    point = run(
        cluster(number=6, load=load, n=6000, iterations=200), MemoryResolver(traces=traces)
    ).points[0]
    assert point.makespan.std() > 0
    assert point.rounds >= 2 and point.horizon_s is not None
    assert point.path == "collapsed"


def test_registered_host_forecasts_are_a_load() -> None:
    host = RegisteredHost("h1", benchmark=8e-9, cpu=lambda h: Normal(0.6, 0.02))
    text = cluster(number=4, load='{kind = "forecasts"}').replace(
        "floatspeed = 1000000000.0", 'host = "h1"'
    )
    point = run(text, MemoryResolver(hosts={"h1": host})).points[0]
    assert point.nodesets[0].benchmark == 8e-9
    assert point.makespan.mean() > run(cluster(number=4)).points[0].makespan.mean()


def test_a_grammar_file_model_runs_node_by_node_and_equals_the_builtin() -> None:
    from ppe.core import builtin_models

    text = cluster(number=6, execution='model = "mine.ppg"')
    point = run(text, MemoryResolver(texts={"mine.ppg": builtin_models()["sor"]})).points[0]
    builtin = run(cluster(number=6)).points[0]
    assert point.path == "full"
    assert point.makespan.mean() == pytest.approx(builtin.makespan.mean(), rel=1e-12)


def test_jacobi2d_is_a_builtin_model_too() -> None:
    point = run(cluster(number=4, execution='model = "jacobi2d"')).points[0]
    sor = run(cluster(number=4)).points[0]
    # one sweep over every element and one exchange, against SOR's two half sweeps and two
    assert point.makespan.mean() < sor.makespan.mean()
    assert point.nodesets[0].communication == pytest.approx(
        sor.nodesets[0].communication / 2, rel=1e-9
    )


# ---------------------------------------------------------------------------- sweeps


def test_a_sweep_is_answered_point_by_point() -> None:
    report = run(cluster(number=[2, 4, 8], n=1200))
    assert report.axes == ("nodeset.node.number",)
    assert [p.values for p in report.points] == [
        (("nodeset.node.number", float(k)),) for k in (2, 4, 8)
    ]
    spans = [p.makespan.mean() for p in report.points]
    assert spans[0] > spans[1] > spans[2]
    document = report.to_dict()
    assert document["points"][1]["values"] == {"nodeset.node.number": 4.0}
    assert set(document["points"][0]["makespan"]) >= {"mean", "std", "interval", "kind"}


def test_4096_nodes_collapse_to_a_few_classes() -> None:
    load = '{kind = "normal", mean = 0.8, std = 0.05}'
    point = run(
        cluster(number=4096, load=load, n=40960, iterations=10, bandwidth="10 Gb/s")
    ).points[0]
    assert point.path == "collapsed" and point.hosts == 4096
    assert point.classes <= 6
    assert math.isfinite(point.makespan.mean()) and point.makespan.std() > 0


def test_an_unknown_strategy_is_refused_before_anything_runs() -> None:
    with pytest.raises(WhatIfError, match="unknown strategy 'fastest'"):
        run(cluster(), strategy="fastest")


def test_an_absent_nodeset_predicts_as_the_spec_without_it() -> None:
    """A point with number = 0 is the machine without that nodeset, to the last digit."""
    swept = two_nodesets().replace('name = "fast"\nnumber = 4', 'name = "fast"\nnumber = [0, 4]')
    text = two_nodesets()
    start, end = text.index('[[nodeset]]\nname = "fast"'), text.index('[[nodeset]]\nname = "slow"')
    alone = text[:start] + text[end:]
    for name in ("lan-fast", "bridge"):
        at = alone.index(f'[[linkset]]\nname = "{name}"')
        alone = alone[:at] + alone[alone.index("\n\n", at) + 2 :]
    alone = alone.replace('nodeset = ["fast", "slow"]', 'nodeset = ["slow"]')
    absent = evaluate(parse(swept), MemoryResolver()).points[0]
    (only_slow,) = evaluate(parse(alone), MemoryResolver()).points
    assert absent.makespan.mean() == only_slow.makespan.mean()
    assert [n.nodeset for n in absent.nodesets] == ["slow"]
