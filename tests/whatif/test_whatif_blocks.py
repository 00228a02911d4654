"""block2dim and block3dim in the analytic what-if: the process grid, jagged time-balanced
blocks, the halo exchanges of their faces, and agreement with block1dim where the two
layouts are the same (docs/whatif.md, "Blocks")."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from ppe.core.stochastic import Mixture, Normal, Point
from ppe.pipeline import PlanOptions
from ppe.whatif import (
    Options,
    Problem,
    SpecError,
    Spread,
    WhatIfError,
    evaluate,
    resolve,
)
from ppe.whatif.analytic import plan_point
from ppe.whatif.application import app_of
from ppe.whatif.blockeval import Shifted, _combined, _Layout, shifted
from ppe.whatif.blocks import Block, adjacent, face_overlaps, process_grid
from ppe.whatif.machine import Loads, build_machine
from ppe.whatif.report import format_table
from ppe.whatif.simulated import SimOptions, check_simulable, simulate_point

from .conftest import (
    SOR_SCRIPT,
    TWO_TRACES_LOAD,
    MemoryResolver,
    cluster,
    parse,
    two_nodesets,
    two_traces,
)

ROOT = Path(__file__).resolve().parents[2]


def blocks(text: str, kind: str = "block2dim") -> str:
    return text.replace('type = "block1dim"', f'type = "{kind}"')


def point(text: str, **options: object):  # type: ignore[no-untyped-def]
    w = parse(text)
    return plan_point(w.points[0], resolve(w, MemoryResolver()), Options(**options))  # type: ignore[arg-type]


def problems(text: str) -> list[Problem]:
    with pytest.raises(SpecError) as info:
        parse(text)
    return list(info.value.problems)


# ------------------------------------------------------------------------ geometry


@pytest.mark.parametrize(
    ("ranks", "size", "dims", "grid"),
    [
        (4, (1000, 1000), 2, (2, 2)),
        (6, (1000, 1000), 2, (3, 2)),  # 3 x 2 and 2 x 3 tie: more groups along axis 0
        (16, (1000, 1000), 2, (4, 4)),
        (12, (300, 1200), 2, (2, 6)),  # 200 + 2 x 150 beats 2 x 300 (1 x 12), 2 x 300 + 2 x 100
        # an unsplit axis has no face; an axis split in two, one face per rank: the inner
        # rank of 4 x 1 has two faces of 60 (120), a rank of 2 x 2 one of 30 and one of 50
        (4, (100, 60), 2, (2, 2)),
        (5, (60, 100), 2, (1, 5)),  # prime: the axis with the smaller faces is split
        (5, (100, 100), 2, (5, 1)),
        (7, (1000, 1000), 2, (7, 1)),  # prime: strips (n0 >= n1)
        (7, (3, 1000), 2, (1, 7)),  # prime, and only 3 rows: strips the other way
        (8, (64, 64, 64), 3, (2, 2, 2)),
        (7, (3, 3, 100), 3, (1, 1, 7)),
        (8, (40, 40, 40), 2, (4, 2)),  # block2dim of a grid3dim: the third axis stays whole
    ],
)
def test_the_process_grid_minimises_the_halo_surface(
    ranks: int, size: tuple[int, ...], dims: int, grid: tuple[int, ...]
) -> None:
    assert process_grid(ranks, size, dims) == grid


def test_no_process_grid_when_a_rank_would_get_no_element() -> None:
    assert process_grid(7, (3, 3), 2) is None
    assert process_grid(4, (1, 3), 2) is None


def test_neighbour_ranges_and_shared_faces() -> None:
    adj = adjacent((2, 3))
    outer = [a for a in adj if not a.innermost]
    inner = [a for a in adj if a.innermost]
    assert [(a.axis, list(a.a), list(a.b)) for a in outer] == [(0, [0, 1, 2], [3, 4, 5])]
    assert [(list(a.a), list(a.b)) for a in inner] == [
        ([0], [1]),
        ([1], [2]),
        ([3], [4]),
        ([4], [5]),
    ]
    top = [Block((0, 0), (5, 4)), Block((0, 4), (5, 10))]
    bottom = [Block((5, 0), (9, 3)), Block((5, 3), (9, 10))]
    # a jagged boundary: columns 0-3 | 4-9 above, 0-2 | 3-9 below
    assert sorted(face_overlaps(top, bottom, 0)) == [(0, 0, 3), (0, 1, 1), (1, 1, 6)]


def test_neighbour_ranges_in_three_dimensions() -> None:
    """2 x 2 x 2: two slabs of 4 ranks across axis 0, two bands of 2 in each slab across
    axis 1, two ranks in each band across axis 2."""
    got = [(a.axis, list(a.a), list(a.b), a.innermost) for a in adjacent((2, 2, 2))]
    assert got == [
        (0, [0, 1, 2, 3], [4, 5, 6, 7], False),
        (1, [0, 1], [2, 3], False),
        (1, [4, 5], [6, 7], False),
        (2, [0], [1], True),
        (2, [2], [3], True),
        (2, [4], [5], True),
        (2, [6], [7], True),
    ]
    # two slabs' blocks across axis 0: the faces are their overlaps on axes 1 and 2
    top = [
        Block((0, 0, 0), (2, 3, 4)), Block((0, 0, 4), (2, 3, 8)),
        Block((0, 3, 0), (2, 6, 5)), Block((0, 3, 5), (2, 6, 8)),
    ]  # fmt: skip
    bottom = [
        Block((2, 0, 0), (4, 4, 2)), Block((2, 0, 2), (4, 4, 8)),
        Block((2, 4, 0), (4, 6, 6)), Block((2, 4, 6), (4, 6, 8)),
    ]  # fmt: skip
    assert sorted(face_overlaps(top, bottom, 0)) == [
        (0, 0, 3 * 2), (0, 1, 3 * 2), (1, 1, 3 * 4),
        (2, 0, 1 * 2), (2, 1, 1 * 3), (2, 2, 2 * 5),
        (3, 1, 1 * 3), (3, 2, 2 * 1), (3, 3, 2 * 2),
    ]  # fmt: skip


def test_face_overlaps_of_long_runs_are_a_merge() -> None:
    """Two long runs, 2039 blocks above a plane and 2040 below, their boundaries offset:
    every block touches two across it (the ends one), 4078 faces summing to the plane,
    found by a merge (no 2039 x 2040 matrix)."""
    n = 2039
    top = [Block((0, 3 * i), (5, 3 * i + 3)) for i in range(n)]
    cuts = [0, *range(1, 3 * n - 1, 3), 3 * n]
    bottom = [Block((5, lo), (9, hi)) for lo, hi in zip(cuts, cuts[1:], strict=False)]
    got = face_overlaps(top, bottom, 0)
    assert len(bottom) == n + 1 and len(got) == 2 * n
    assert sum(e for _, _, e in got) == 3 * n
    assert all(top[i].hi[1] > bottom[j].lo[1] and bottom[j].hi[1] > top[i].lo[1] for i, j, _ in got)


def test_shifted_moves_a_distribution_by_a_number() -> None:
    mix = Mixture([0.8, 0.2], [1.0, 2.0], [0.05, 0.1])
    x = Shifted(mix, 0.5)
    assert x.mean() == pytest.approx(mix.mean() + 0.5)
    assert x.std() == pytest.approx(mix.std())
    q = np.array([0.01, 0.2, 0.5, 0.9, 0.99])
    assert np.allclose(x.ppf(q), np.asarray(mix.ppf(q)) + 0.5)
    assert np.allclose(x.cdf(x.ppf(q)), q)
    assert x.ppf(0.5) == pytest.approx(float(mix.ppf(0.5)) + 0.5)  # scalars stay scalars
    draws = x.sample(40_000, np.random.default_rng(1))
    assert float(np.mean(draws)) == pytest.approx(x.mean(), rel=5e-3)
    assert float(np.mean(draws <= x.ppf(0.8))) == pytest.approx(0.8, abs=0.01)
    assert [m for _, m, _ in x.components] == pytest.approx([1.5, 2.5])
    # a number and a normal stay exact; no shift is the value itself
    assert shifted(Point(1.0), 2.0).kind == "point" and shifted(Point(1.0), 2.0).mean() == 3.0
    n = shifted(Normal(1.0, 0.1), 2.0)
    assert n.kind == "normal" and (n.mean(), n.std()) == pytest.approx((3.0, 0.1))
    assert shifted(mix, 0.0) is mix


def test_a_groups_speed_moves_together_on_one_trace() -> None:
    """Two members of one group with the same time per layer: on one recorded trace they
    are slow together, so the group takes exactly half the time (std halved); on
    independent loads, the harmonic mean of two draws varies less (std / sqrt 2, halved)."""
    a = Normal(1.0, 0.2)
    trace = ("trace", "t0.csv", 0.0)
    together = _combined([a, a], [trace, trace], 20_000, 0)
    apart = _combined([a, a], [("normal", 1.0, 0.2, 0.0)] * 2, 20_000, 0)
    assert together.mean() == pytest.approx(0.5, rel=1e-2)
    assert together.std() == pytest.approx(0.1, rel=2e-2)
    assert apart.std() == pytest.approx(0.2 / 2 / math.sqrt(2), rel=5e-2)


# --------------------------------------------------------------- hand computations


def test_four_homogeneous_nodes_on_a_square_grid_by_hand() -> None:
    """4 nodes, 1000 x 1000, SOR, 10 iterations: a 2 x 2 grid of 500 x 500 blocks.

    compute: 250 000 elements x 8 flops / 1e9 flop/s = 2.0e-3 s per iteration;
    a message: one edge, 500 elements x 8 bytes = 4000 B: 4000 / 1.25e7 + 5e-4 = 8.2e-4 s;
    each block has 2 neighbours (one across each axis), SOR exchanges twice per iteration:
    2 x 2 x 8.2e-4 = 3.28e-3 s; (2.0e-3 + 3.28e-3) x 10 = 0.0528 s."""
    result, rows = point(blocks(cluster(number=4, n=1000, iterations=10)))
    assert result.process_grid == (2, 2)
    assert rows == (250_000,) * 4
    assert result.makespan.mean() == pytest.approx(0.0528, rel=1e-12)
    (ns,) = result.nodesets
    assert ns.compute == pytest.approx(0.020, rel=1e-12)
    assert ns.communication == pytest.approx(0.0328, rel=1e-12)
    assert ns.waiting == pytest.approx(0.0, abs=1e-12)
    assert result.path == "blocks"
    assert "process grid 2 x 2" in result.notes[-1]


GRID3 = """
[[nodeset]]
name = "node"
number = 8
floatspeed = 1e9

[[linkset]]
name = "net"
across = "node"
bandwidth = 1.25e7
latency = 5e-4

[[dataset]]
name = "cube"
type = "grid3dim"
size = 40
floatsperunit = 8

[[distribution]]
name = "blocks"
type = "block3dim"
dataset = "cube"
nodeset = "node"

[execution]
model = "jacobi2d"
iterations = 10
"""


def test_block3dim_on_a_cube_by_hand() -> None:
    """8 nodes, 40^3, Jacobi (one exchange per neighbour per iteration), 10 iterations: a
    2 x 2 x 2 grid of 20^3 blocks; every block is a corner with 3 neighbours.

    compute: 8000 x 8 / 1e9 = 6.4e-5 s; a face: 400 elements x 8 B = 3200 B:
    3200 / 1.25e7 + 5e-4 = 7.56e-4 s; 3 faces: 2.268e-3 s; (6.4e-5 + 2.268e-3) x 10."""
    result, rows = point(GRID3)
    assert result.process_grid == (2, 2, 2)
    assert rows == (8000,) * 8
    assert result.makespan.mean() == pytest.approx((6.4e-5 + 3 * 7.56e-4) * 10, rel=1e-12)
    assert result.nodesets[0].communication == pytest.approx(3 * 7.56e-4 * 10, rel=1e-12)


def test_homogeneous_nodes_get_equal_blocks() -> None:
    for number, each in ((16, 300 * 300), (12, 400 * 300)):
        _, rows = point(blocks(cluster(number=number, bandwidth=1e15, latency=0.0, n=1200)))
        assert set(rows) == {each}
    _, rows = point(GRID3.replace("bandwidth = 1.25e7", "bandwidth = 1e15").replace("5e-4", "0"))
    assert set(rows) == {8000}


# ---------------------------------------------------------------- against block1dim


@pytest.mark.parametrize("model", ["sor", "jacobi2d"])
@pytest.mark.parametrize(("number", "n"), [(7, 1000), (5, 333), (13, 4000)])
def test_a_prime_number_of_nodes_is_block1dim_exactly(model: str, number: int, n: int) -> None:
    """P prime: the grid is P x 1, every band one node, which is block1dim's strip host:
    the same rows and the same prediction, term by term (dedicated homogeneous hosts)."""
    text = cluster(number=number, n=n, iterations=20, execution=f'model = "{model}"')
    strips, strip_rows = point(text)
    grid, elements = point(blocks(text))
    assert grid.process_grid == (number, 1)
    assert any("prime" in x and "strips" in x for x in grid.notes)
    assert elements == tuple(r * n for r in strip_rows)
    assert grid.makespan.mean() == pytest.approx(strips.makespan.mean(), rel=1e-9)
    (a,), (b,) = strips.nodesets, grid.nodesets
    for field in ("time", "compute", "communication", "waiting"):
        assert getattr(b, field) == pytest.approx(getattr(a, field), rel=1e-9, abs=1e-15)


def test_a_prime_number_of_loaded_nodes_agrees_with_block1dim() -> None:
    """The same with independent normal loads: each node's time is its band's prediction
    shifted by its exchanges, the makespan the max of independent copies, as for strips.
    The same rows; the makespans agree to the max's tabulation (IidMax: 1e-5 here), since
    the strips' times come from one evaluation of ``a * rows + b`` and the blocks' from the
    compute's then shifted."""
    text = cluster(number=5, n=2000, load='{kind = "normal", mean = 0.8, std = 0.1}')
    strips, strip_rows = point(text)
    grid, elements = point(blocks(text))
    assert elements == tuple(r * 2000 for r in strip_rows)
    assert grid.makespan.mean() == pytest.approx(strips.makespan.mean(), rel=1e-5)
    lo1, hi1 = strips.makespan.interval(0.95)
    lo2, hi2 = grid.makespan.interval(0.95)
    assert (lo2, hi2) == (pytest.approx(lo1, rel=1e-5), pytest.approx(hi1, rel=1e-5))


def test_many_nodes_communicate_less_in_blocks_than_in_strips() -> None:
    """Surface to volume: 64 nodes on 4096 x 4096, 1 Gb/s. Strips send two rows of 4096
    elements per exchange; 8 x 8 blocks send up to four edges of 512."""
    text = cluster(number=64, n=4096, bandwidth="1 Gb/s", latency=5e-5, iterations=10)
    strips, _ = point(text)
    grid, _ = point(blocks(text))
    assert grid.process_grid == (8, 8)
    assert grid.nodesets[0].communication < 0.6 * strips.nodesets[0].communication
    assert grid.makespan.mean() < strips.makespan.mean()


# -------------------------------------------------------------------- heterogeneous


def test_two_nodesets_get_time_balanced_blocks() -> None:
    """6 nodes at 2 Gflop/s then 6 at 1 Gflop/s on 1200 x 1200: a 4 x 3 grid, the two fast
    bands about twice as tall as the slow ones. Every node's compute time (its elements x
    8 flops x 10 iterations / its speed, dedicated) is within 3 % of every other's (the
    rest is the exchanges the balance also evens out: about 1 % of the time here)."""
    text = blocks(two_nodesets(fast=6, slow=6, n=1200))
    result, rows = point(text)
    assert result.process_grid == (4, 3)
    speeds = [2e9] * 6 + [1e9] * 6
    compute = [e * 8 * 10 / s for e, s in zip(rows, speeds, strict=True)]
    assert max(compute) / min(compute) - 1 < 0.03
    fast, slow = result.nodesets
    assert fast.rows_min > 1.9 * slow.rows_max  # blocks follow speed, not equal shares
    assert sum(rows) == 1200 * 1200
    times = [fast.time, slow.time]
    assert max(times) / min(times) - 1 < 0.01
    # equal blocks instead: the slow nodes take twice as long
    eq, _ = point(text, strategy="block")
    assert eq.makespan.mean() > 1.3 * result.makespan.mean()


def _slow_lan(text: str, latency: float, bandwidth: float) -> str:
    """``two_nodesets`` with the links inside 'slow' replaced."""
    out, n = re.subn(
        r'(name = "lan-slow"\nacross = "slow"\n)bandwidth = .*\nlatency = .*\n',
        rf"\1bandwidth = {bandwidth!r}\nlatency = {latency!r}\n",
        text,
    )
    assert n == 1
    return out


@pytest.mark.parametrize(
    ("latency", "bandwidth", "slow_rows"),
    [
        (0.0, 1e12, 500),
        # a band's member sends 2 messages an iteration to its neighbour in the band, 10
        # iterations: 1e-3 s each is 0.02 s fixed; 4e-5 s per row of compute either band:
        # 4e-5 (1000 - h) = 4e-5 h + 0.02, h = 250
        (1e-3, 1e12, 250),
        # 20 messages of h x 8 B at 1e7 B/s: 1.6e-5 s per row more in the slow band:
        # 4e-5 (1000 - h) = 5.6e-5 h, h = 416.7
        (0.0, 1e7, 416.7),
    ],
)
def test_a_bands_own_exchanges_size_it(latency: float, bandwidth: float, slow_rows: float) -> None:
    """2 + 2 nodes of equal speed on 1000 x 1000, a 2 x 2 grid: bands [fast fast] and
    [slow slow]. When the links inside the slow band are slower, its members spend longer
    exchanging with each other (latency: a fixed time; bandwidth: a time growing with the
    band's height), so the slow band is thinner and the two bands finish together."""
    text = blocks(
        two_nodesets(
            fast=2, slow=2, fast_speed=1e9, slow_speed=1e9, n=1000, bandwidth=1e12
        )
    )  # fmt: skip
    result, rows = point(_slow_lan(text, latency, bandwidth))
    assert result.process_grid == (2, 2)
    fast_rows, slow_rows_got = sum(rows[:2]) / 1000, sum(rows[2:]) / 1000
    assert fast_rows + slow_rows_got == 1000
    assert slow_rows_got == pytest.approx(slow_rows, rel=2e-3)
    fast, slow = result.nodesets
    assert slow.time == pytest.approx(fast.time, rel=2e-3)
    assert not any("latencies" in x for x in result.notes)  # uniform links in each band


JAGGED = blocks(two_nodesets(fast=3, slow=1, n=1000, bandwidth=1e15, latency=1e-4))


def test_a_jagged_layout_exchanges_with_every_block_it_touches() -> None:
    """3 fast nodes (2 Gflop/s) and 1 slow (1) on 1000 x 1000, a 2 x 2 grid: bands
    [fast fast] and [fast slow]. The bottom band's fast block is wider than half, so the
    boundary between the bands is jagged: the bottom-left block touches both top blocks,
    the top-right block both bottom ones. By hand, with exchanges costing only their
    latency (1e-4 s, 2 messages an iteration, 10 iterations: 2e-3 s a neighbour): one
    neighbour in the band for each, then top-left 1 + 1, top-right 1 + 2, bottom-left
    1 + 2, bottom-right 1 + 1; the fast nodes' mean 8/3 x 2e-3, the slow node's 4e-3."""
    result, rows = point(JAGGED)
    assert result.process_grid == (2, 2)
    top, bottom = (rows[0] + rows[1]) / 1000, (rows[2] + rows[3]) / 1000
    assert top == int(top) and bottom == int(bottom) and top + bottom == 1000
    left_top, left_bottom = rows[0] / top, rows[2] / bottom
    assert left_bottom > left_top  # the two boundaries differ: jagged
    fast, slow = result.nodesets
    assert fast.communication == pytest.approx(8 / 3 * 2e-3, rel=1e-6)
    assert slow.communication == pytest.approx(4e-3, rel=1e-6)


def test_the_second_sizing_is_kept_when_it_is_better() -> None:
    """On the jagged layout, the first sizing does not know that the top-right and
    bottom-left blocks each exchange with two blocks across the bands; the second does,
    gives them less, and predicts a smaller makespan: run() keeps it."""
    w = parse(JAGGED)
    res = resolve(w, MemoryResolver())
    p = w.points[0]
    m, app = build_machine(p.spec, res), app_of(p, res)
    first, _ = _Layout(m, app, Loads(res), None, Options()).layout()
    kept = _Layout(m, app, Loads(res), None, Options()).run()
    assert kept.rows != first.rows
    assert kept.makespan.mean() < first.makespan.mean()
    assert point(JAGGED)[1] == kept.rows


def test_conservative_gives_a_noisy_nodeset_smaller_blocks_than_mean() -> None:
    text = blocks(
        two_nodesets(
            fast=4, slow=4, fast_speed=1e9, n=1200,
            slow_load='{kind = "normal", mean = 0.9, std = 0.25}',
        )
    )  # fmt: skip
    mean, _ = point(text, strategy="mean")
    cons, _ = point(text, strategy="conservative")
    assert cons.nodesets[1].rows < mean.nodesets[1].rows


def test_missing_links_between_nodesets_whose_blocks_touch_are_refused() -> None:
    """a (2 nodes), b (1), c (3) fill a 3 x 2 grid: bands [a a], [b c], [c c]. The middle
    band holds a c node under the a band, so a and c need a linkset, though they are not
    consecutive in the chain."""
    text = """
[[nodeset]]
name = "a"
number = 2
floatspeed = 1e9
[[nodeset]]
name = "b"
number = 1
floatspeed = 1e9
[[nodeset]]
name = "c"
number = 3
floatspeed = 1e9
[[linkset]]
name = "la"
across = "a"
[[linkset]]
name = "lc"
across = "c"
[[linkset]]
name = "ab"
updown = ["a", "b"]
[[linkset]]
name = "bc"
updown = ["b", "c"]
[[dataset]]
name = "grid"
type = "grid2dim"
size = 600
floatsperunit = 8
[[distribution]]
name = "d"
type = "block2dim"
dataset = "grid"
nodeset = ["a", "b", "c"]
[execution]
model = "sor"
iterations = 1
"""
    found = problems(text)
    assert len(found) == 1, found
    (p,) = found
    assert p.field == "distribution[0].nodeset"
    assert "no linkset joins 'a' and 'c'" in p.message
    assert "3 x 2 process grid" in p.message
    fixed = text.replace(
        "[[dataset]]", '[[linkset]]\nname = "ac"\nupdown = ["a", "c"]\n[[dataset]]'
    )
    result, rows = point(fixed)
    assert result.process_grid == (3, 2) and sum(rows) == 600 * 600


# ---------------------------------------------------------------------------- checks


def test_a_script_or_a_grammar_file_is_refused_for_blocks() -> None:
    (p,) = problems(blocks(cluster(execution=f"script = {SOR_SCRIPT}")))
    assert p.field == "execution.script" and "block2dim" in p.message
    (p,) = problems(blocks(cluster(execution='model = "mine.ppg"')))
    assert p.field == "execution.model" and "built-in" in p.message


def test_too_many_nodes_for_the_dataset_is_refused_at_the_distribution() -> None:
    text = blocks(cluster(number=7, n=[3, 3]))
    (p,) = problems(text)
    assert p.field == "distribution[0].nodeset"
    assert "no process grid" in p.message and "at least one element" in p.message
    assert p.line == text.splitlines().index('nodeset = "node"') + 1
    # 6 nodes fit a 3 x 3 grid as 3 x 2; strips of it would not (more nodes than rows)
    assert point(blocks(cluster(number=6, n=[3, 3])))[0].process_grid == (3, 2)


def test_a_node_smaller_than_an_element_is_refused() -> None:
    text = blocks(cluster(extra_nodeset="grainsize = 4"))
    (p,) = [q for q in problems(text) if q.field == "nodeset[0].grainsize"]
    assert "less than one element" in p.message


def test_a_block_distribution_needs_the_dimensions() -> None:
    (p,) = problems(GRID3.replace('type = "grid3dim"', 'type = "grid2dim"'))
    assert p.field == "distribution[0].type" and "3 dimensions" in p.message


def test_memory_bounds_a_blocks_width() -> None:
    """grainsize bounds each node's block: 100 x 100 doubles need 80 kB a node; with one
    node of 70 kB the four cannot hold the grid (refused before anything runs)."""
    (p,) = problems(blocks(cluster(number=4, n=200, extra_nodeset="grainsize = 70000")))
    assert p.field == "distribution[0].nodeset" and "too small" in p.message
    assert point(blocks(cluster(number=4, n=200, extra_nodeset="grainsize = 80000")))[1] == (
        (10_000,) * 4
    )


def test_memory_bounds_a_fast_bands_height() -> None:
    """1 node at 2 Gflop/s and 1 at 1 on 1000 x 1000 doubles (8 MB), 4.8 MB each: a 2 x 1
    grid. By speed the fast band would take 667 rows (5.3 MB); its memory holds 600 rows
    of 1000, so it gets 600 and the slow one 400, as block1dim's strips."""
    text = two_nodesets(fast=1, slow=1, n=1000).replace(
        'load = {kind = "dedicated"}\n', 'load = {kind = "dedicated"}\ngrainsize = 4.8e6\n'
    )
    strips, strip_rows = point(text)
    assert strip_rows == (600, 400)
    result, rows = point(blocks(text))
    assert result.process_grid == (2, 1)
    assert rows == (600_000, 400_000)
    assert result.makespan.mean() == pytest.approx(strips.makespan.mean(), rel=1e-9)


def test_memory_no_layout_can_hold_is_a_clear_error() -> None:
    """4 nodes of 242 bytes hold 968 bytes, all of 11 x 11 doubles (the checks accept it),
    but no node holds 30.25 elements: no blocks fit, and the error says why."""
    with pytest.raises(WhatIfError, match=r"2 x 2 process grid.*not enough memory"):
        point(blocks(cluster(number=4, n=11, extra_nodeset="grainsize = 242")))


@pytest.mark.parametrize("kind", ["block2dim", "block3dim"])
def test_a_dedicated_block_simulation_equals_the_analytic_prediction(kind: str) -> None:
    """Constant availability: each node runs its block's elements and its faces' exchanges
    at every iteration, and the simulated makespan is the analytic one (the slowest node's
    compute and exchanges), for two nodesets on a jagged grid and a 3-D one."""
    text = two_nodesets(fast=3, slow=3, n=600, iterations=20, latency=1e-4)
    if kind == "block3dim":
        text = blocks(
            cluster(number=8, n=64, iterations=20).replace('"grid2dim"', '"grid3dim"'), kind
        )
    else:
        text = blocks(text, kind)
    w = parse(text)
    check_simulable(w.points[0])
    res = resolve(w, MemoryResolver())
    sim = simulate_point(w.points[0], res, sim=SimOptions(starts=2))
    predicted = evaluate(w, MemoryResolver()).points[0]
    assert sim.makespans == pytest.approx([predicted.makespan.mean()] * 2, rel=1e-9)
    for s, p in zip(sim.nodesets, predicted.nodesets, strict=True):
        assert s.compute == pytest.approx(p.compute, rel=1e-9)
        assert s.communication == pytest.approx(p.communication, rel=1e-9)


def test_blocks_of_a_prime_count_simulate_as_strips() -> None:
    """Five nodes: the grid is 5 x 1, the blocks are block1dim's strips, and the two
    simulated paths agree over recorded load (same plans, the same load at each start)."""
    traces, load = two_traces(), TWO_TRACES_LOAD
    text = cluster(number=5, load=load, n=3000, iterations=100)
    res = resolve(parse(text), MemoryResolver(traces=traces))
    so = SimOptions(starts=3, seed=2)
    strips = simulate_point(parse(text).points[0], res, sim=so)
    grid = simulate_point(parse(blocks(text)).points[0], res, sim=so)
    assert grid.makespans == pytest.approx(strips.makespans, rel=1e-9)
    assert np.ptp(grid.makespans) > 0  # the load moves them


def test_a_block_simulation_under_load_adds_up_and_covers() -> None:
    """Six nodes on two recorded traces, a 3 x 2 grid: per nodeset, compute, exchanges and
    waiting add up to the makespan, the loaded runs are slower than dedicated ones, and the
    plan made before each start covers what the simulator ran."""
    traces, load = two_traces(), TWO_TRACES_LOAD
    text = blocks(cluster(number=6, load=load, n=3000, iterations=100))
    w = parse(text)
    res = resolve(w, MemoryResolver(traces=traces))
    sim = simulate_point(w.points[0], res, sim=SimOptions(starts=6, seed=1))
    total = sum(n.compute + n.communication + n.waiting for n in sim.nodesets)
    assert total == pytest.approx(sim.makespans.mean(), rel=1e-9)
    dedicated = evaluate(parse(blocks(cluster(number=6, n=3000, iterations=100))), MemoryResolver())
    assert sim.makespans.min() > dedicated.points[0].makespan.mean()
    assert sim.coverage >= 5 / 6
    assert sim.analytic["process_grid"] == [3, 2]


# ------------------------------------------------------------ sweeps, report, example


def test_a_sweep_over_the_nodes_reports_each_points_grid() -> None:
    w = parse(blocks(cluster(number=[4, 9, 16, 7], n=1200, bandwidth="10 Gb/s", latency=0.0)))
    report = evaluate(w, MemoryResolver(), Options())
    grids = [p.to_dict()["process_grid"] for p in report.points]
    assert grids == [[2, 2], [3, 3], [4, 4], [7, 1]]
    means = [p.makespan.mean() for p in report.points]
    assert means[0] > means[1] > means[2]  # compute-bound: more nodes, faster
    table = format_table(report)
    assert "node elements/node" in table and "process grid 3 x 3" in table
    json.dumps(report.to_dict())  # the report stays JSON


def test_the_example_evaluates() -> None:
    path = ROOT / "examples/whatif/block2dim.toml"
    w = parse(path.read_text())
    report = evaluate(w, MemoryResolver(), Options())
    assert len(report.points) > 1
    for p in report.points:
        assert p.process_grid and math.prod(p.process_grid) == p.hosts
        assert p.makespan.mean() > 0
        fast, old = p.nodesets
        assert old.rows / old.nodes < fast.rows / fast.nodes  # 1 Gflop/s against 4
    # 16 nodes: bands of 4, the old ones in bands of their own: every old block is smaller
    first = report.points[0].nodesets
    assert report.points[0].process_grid == (4, 4) and first[1].rows_max < first[0].rows_min


def test_a_sweep_spread_over_processes_is_the_serial_one() -> None:
    """Block points travel to worker processes and back (pickled): the same report."""
    w = parse(blocks(cluster(number=[4, 6, 7], n=600, bandwidth="1 Gb/s")))
    serial = evaluate(w, MemoryResolver(), Options()).to_dict()
    pool = evaluate(w, MemoryResolver(), Options(), spread=Spread("process", 2)).to_dict()
    assert [p["process_grid"] for p in serial["points"]] == [[2, 2], [3, 2], [7, 1]]
    assert json.dumps(pool, sort_keys=True) == json.dumps(serial, sort_keys=True)


def test_trace_loads_run_the_horizon_loop_and_count_each_trace_once() -> None:
    """Recorded loads: the forecaster at each horizon, as for strips; nodes on one trace move
    together (the max counts each trace once). A prime number of nodes plans block1dim's
    rows and predicts its makespan."""
    traces, load = two_traces(), TWO_TRACES_LOAD

    def plan(text: str):  # type: ignore[no-untyped-def]
        w = parse(text)
        return plan_point(w.points[0], resolve(w, MemoryResolver(traces=traces)), Options())

    text = cluster(number=5, load=load, n=6000, iterations=200)
    strips, strip_rows = plan(text)
    grid, elements = plan(blocks(text))
    assert grid.rounds >= 2 and grid.horizon_s is not None
    assert elements == tuple(r * 6000 for r in strip_rows)
    assert grid.makespan.mean() == pytest.approx(strips.makespan.mean(), rel=1e-4)
    assert grid.makespan.std() > 0
    six, _ = plan(blocks(cluster(number=6, load=load, n=6000, iterations=200)))
    assert six.process_grid == (3, 2) and six.classes >= 2


def test_block3dim_balances_slabs_by_combined_speed() -> None:
    """8 nodes at 1 Gflop/s then 8 at 0.5 on 80^3 over a fast network: a 4 x 2 x 2 grid, two
    slabs of each nodeset; the slow slabs are about half as thick (27, 27, 13, 13 of 80),
    the bands and widths inside a slab equal."""
    fast_links = "\nbandwidth = 1e12\nlatency = 0\n"
    text = GRID3.replace("bandwidth = 1.25e7\nlatency = 5e-4\n", fast_links).replace(
        "[[dataset]]",
        f'[[nodeset]]\nname = "slow"\nnumber = 8\nfloatspeed = 5e8\n'
        f'[[linkset]]\nname = "ls"\nacross = "slow"{fast_links}'
        f'[[linkset]]\nname = "b"\nupdown = ["node", "slow"]{fast_links}[[dataset]]',
    )
    text = text.replace('nodeset = "node"', 'nodeset = ["node", "slow"]').replace(
        "size = 40", "size = 80"
    )
    result, rows = point(text)
    assert result.process_grid == (4, 2, 2)
    assert rows == (27 * 40 * 40,) * 8 + (13 * 40 * 40,) * 8
    fast, slow = result.nodesets
    assert abs(fast.time / slow.time - 1) < 0.05  # 80 rows in 4 slabs: rounding


def test_a_slabs_own_exchanges_size_it() -> None:
    """8 + 8 nodes of equal speed on 400^3, a 4 x 2 x 2 grid: two slabs of each nodeset. The
    links inside 'slow' have 1e-3 s latency: each slow member exchanges (Jacobi, 10
    iterations) with 3 slow neighbours (across the band, the slab's other band, the other
    slow slab): 0.03 s. 3.2e-3 s of compute per layer of a member: 3.2e-3 h_f = 3.2e-3 h_s +
    0.03 and h_f + h_s = 200, so h_s = 95.3; the slabs finish within rounding of a layer."""
    fast_links = "\nbandwidth = 1e12\nlatency = 0\n"
    text = GRID3.replace("bandwidth = 1.25e7\nlatency = 5e-4\n", fast_links).replace(
        "[[dataset]]",
        '[[nodeset]]\nname = "slow"\nnumber = 8\nfloatspeed = 1e9\n'
        '[[linkset]]\nname = "ls"\nacross = "slow"\nbandwidth = 1e12\nlatency = 1e-3\n'
        f'[[linkset]]\nname = "b"\nupdown = ["node", "slow"]{fast_links}[[dataset]]',
    )
    text = text.replace('nodeset = "node"', 'nodeset = ["node", "slow"]')
    result, rows = point(text.replace("size = 40", "size = 400"))
    assert result.process_grid == (4, 2, 2)
    assert rows == (105 * 200 * 200,) * 8 + (95 * 200 * 200,) * 8
    fast, slow = result.nodesets
    assert slow.communication == pytest.approx(0.03, rel=1e-3)
    assert abs(fast.time / slow.time - 1) < 0.01  # 3.2e-3 s a layer: rounding


def test_the_html_page_shows_elements_per_node() -> None:
    from ppe.whatif.html import render_html

    report = evaluate(parse(blocks(cluster(number=[4, 9]))), MemoryResolver(), Options())
    page = render_html(report)
    assert "node elements/node" in page and "process grid 3 x 3" in page


def test_groups_of_the_same_members_draw_their_combined_speed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An 8 x 8 grid of one loaded nodeset: the eight bands are made of the same chain
    representatives, so their combined speed is drawn once per composition; the draws are
    seeded alike, so the layout, its sizes and its makespan are those of drawing per band."""
    import ppe.whatif.blockeval as blockeval

    text = blocks(cluster(number=64, n=800, load='{kind = "normal", mean = 0.8, std = 0.1}'))
    w = parse(text)
    res = resolve(w, MemoryResolver())
    p = w.points[0]
    m, app = build_machine(p.spec, res), app_of(p, res)
    calls: list[int] = []
    real = blockeval._combined

    def counted(*args: object) -> object:
        calls.append(1)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(blockeval, "_combined", counted)
    memo, _ = _Layout(m, app, Loads(res), None, Options()).layout()
    assert 1 <= len(calls) <= 3  # the first band (a chain end), the inner ones, the last
    samples = PlanOptions().schedule_samples

    def fresh(self: object, a: list[object], loads: list[object]) -> object:
        return real(a, loads, samples, 0)  # type: ignore[arg-type]

    monkeypatch.setattr(blockeval._Layout, "combined_speed", fresh)
    calls.clear()
    each, _ = _Layout(m, app, Loads(res), None, Options()).layout()
    assert len(calls) == 0 and each.rows == memo.rows  # (fresh bypasses the counter)
    assert each.makespan.mean() == memo.makespan.mean()
    assert np.array_equal(each.makespan.ppf(QS), memo.makespan.ppf(QS))


QS = np.linspace(0.01, 0.99, 50)
