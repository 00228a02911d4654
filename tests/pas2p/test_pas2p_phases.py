"""Phase detection and the signature on synthetic traces with a known period, and on a real
ppe-sor trace shipped as a fixture."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace

import pytest

from ppe.pas2p import Event, logical_trace, read_sor, signature
from tests.pas2p.conftest import DATA, bsp, ev


def test_planted_period_and_weights() -> None:
    # 40 steps, a collective after every 4th. Logically rank 1's next burst comes before rank
    # 0's (it waits for nothing), so a step's segment ends with rank 1's next burst: three
    # shapes, each with its exact count: steps 1, 5, 9, ... (after a collective or the start:
    # both ranks compute in one tick) x10, steps 2, 3, 6, 7, ... x20, steps 4, 8, ... x10.
    sig = signature(logical_trace(bsp([1e-3] * 40, collective_every=4)), keep=1.0)
    assert [(p.weight, p.first) for p in sig.phases] == [(10, 0), (20, 1), (10, 3)]
    assert sig.phases[0].pattern() == (
        "r0: compute send(+1,800B) recv(+1,800B); r1: compute recv(-1,800B) send(-1,800B) compute"
    )
    assert sig.phases[1].pattern() == (
        "r0: compute send(+1,800B) recv(+1,800B); r1: recv(-1,800B) send(-1,800B) compute"
    )
    assert "collective" in sig.phases[2].pattern()
    assert sig.predicted == pytest.approx(sig.total, rel=1e-12)
    # the collective step's time: 1 ms compute + two 0.1 ms messages + 0.5 ms collective
    assert sig.phases[2].mean == pytest.approx(1.7e-3, rel=1e-9)
    assert sig.phases[2].sd == pytest.approx(0.0, abs=1e-12)


def test_tolerance_parts_different_work_but_not_jitter() -> None:
    rng = random.Random(7)
    jitter = [1e-3 * (1 + rng.uniform(-0.1, 0.1)) for _ in range(30)]
    # the first step (both ranks compute in one tick), 28 alike, the last (no burst follows)
    assert [p.weight for p in signature(logical_trace(bsp(jitter))).phases] == [1, 28, 1]
    # 20 steps of 1 ms then 10 of 3 ms: a phase each at tolerance 0.5, one at tolerance 5
    work = [1e-3] * 20 + [3e-3] * 10
    parted = signature(logical_trace(bsp(work)), tolerance=0.5)
    # first, 18 light steps, 10 heavy ones (the 20th's segment holds rank 1's first 3 ms
    # burst, so it goes with them), the last
    assert [p.weight for p in parted.phases] == [1, 18, 10, 1]
    assert parted.phases[1].mean == pytest.approx(1e-3 + 2e-4, rel=1e-9)
    assert parted.phases[2].volume[1] == pytest.approx(3e-3, rel=1e-9)
    merged = signature(logical_trace(bsp(work)), tolerance=5.0)
    assert [p.weight for p in merged.phases] == [1, 28, 1]


def test_occurrences_cover_the_run_when_another_rank_starts_first() -> None:
    # rank 1 starts 0.5 s before the anchor (rank 0); nothing is logically before the anchor
    events = [e for e in bsp([1e-3] * 5) if e.rank == 0]
    events = [replace(e, start=e.start + 0.5, end=e.end + 0.5) for e in events]
    events += [e for e in bsp([1e-3] * 5) if e.rank == 1]
    sig = signature(logical_trace(events), keep=1.0)
    assert sig.occurrences[0].start == 0.0
    assert sig.total == pytest.approx(0.5 + 5 * 1.2e-3, rel=1e-9)
    assert sig.predicted == pytest.approx(sig.total, rel=1e-12)


@pytest.mark.parametrize("keep", [0.5, 0.8, 0.9, 0.99, 1.0])
def test_signature_keeps_at_least_the_asked_share_and_no_more_phases(keep: float) -> None:
    work = [1e-3] * 30 + [5e-3] * 5 + [2e-2] * 2
    sig = signature(logical_trace(bsp(work, collective_every=7)), keep=keep, tolerance=0.5)
    assert sig.kept_share >= keep - 1e-12
    shares = [sig.share(sig.phases[i]) for i in sig.kept]
    assert shares == sorted(shares, reverse=True)
    assert math.fsum(shares[:-1]) < keep  # the last kept phase was needed
    assert sig.error == pytest.approx(sig.kept_share - 1, abs=1e-12)


def test_real_sor_trace_fixture() -> None:
    """ppe-sor, 2 ranks, n=800, 100 iterations, residual every 10 (docs/pas2p.md):
    200 half-sweeps; 180 steady ones, 10 after a residual check, 9 with one, and the last."""
    files = sorted(DATA.glob("sor-n800-i100-r10.jsonl.*.gz"))
    assert len(files) == 2
    lt = logical_trace(read_sor(files))
    assert len(lt.events) == 1234
    by_pattern = signature(lt, tolerance=math.inf, keep=1.0)
    counts = Counter(p.weight for p in by_pattern.phases)
    assert sorted(p.weight for p in by_pattern.phases) == [1, 1, 9, 10, 180]
    assert counts[180] == 1
    steady = next(p for p in by_pattern.phases if p.weight == 180)
    assert steady.pattern() == (
        "r0: compute recv(+1,6416B) send(+1,6416B); r1: recv(-1,6416B) compute send(-1,6416B)"
    )
    checks = next(p for p in by_pattern.phases if p.weight == 9)
    assert checks.pattern().count("collective") == 2  # the allreduce, on each rank
    sig = signature(lt)  # defaults: keep 0.99, tolerance 0.5
    top = sig.phases[sig.kept[0]]
    assert top.pattern() == steady.pattern() and top.weight == 180
    assert sig.kept_share >= 0.99
    assert abs(sig.error) < 0.03
    assert sig.total == pytest.approx(1.6238, abs=1e-3)


def test_the_communicator_of_a_collective_parts_phases() -> None:
    """Three ranks, six steps of one burst and one collective each: even steps over all ranks,
    odd ones over ranks 0 and 1 with rank 2 alone on its own. Without members the six steps
    look alike; with them they are two phases, and the pattern names the sub-communicators."""
    per: dict[int, list[Event]] = {0: [], 1: [], 2: []}
    t = 0.0
    for k in range(6):
        for r in range(3):
            comm = None if k % 2 == 0 else (0, 1) if r < 2 else (2,)
            per[r] += [
                ev(r, "compute", t, t + 1e-3),
                ev(r, "collective", t + 1e-3, t + 1.1e-3, nbytes=8, members=comm),
            ]
        t += 1.1e-3
    events = per[0] + per[1] + per[2]
    sig = signature(logical_trace(events), keep=1.0)
    assert [(p.weight, p.steps) for p in sig.phases] == [(3, [0, 2, 4]), (3, [1, 3, 5])]
    assert sig.phases[0].pattern() == (
        "r0: compute collective; r1: compute collective; r2: compute collective"
    )
    assert sig.phases[1].pattern() == (
        "r0: compute collective[0,1]; r1: compute collective[0,1]; r2: compute collective[2]"
    )
    alike = signature(logical_trace([replace(e, members=None) for e in events]), keep=1.0)
    assert [p.weight for p in alike.phases] == [6]
