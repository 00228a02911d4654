"""ppe-sor's run report, built without MPI: each rank's halo statistics per neighbour sit
beside the fields the report always had, small (no per-message lists)."""

from __future__ import annotations

import json

import pytest

from ppe.apps.sor import report
from ppe.apps.sor.planner import Plan
from ppe.apps.sor.runner import Outcome, Progress, RankStats


def stats(rank: int, peers: dict[int, list[float]]) -> RankStats:
    s = RankStats(rank=rank, host=f"h{rank}", core=rank, iter_s=[0.01] * 100)
    s.compute_s, s.comm_s = 0.8, 0.2
    s.halo_s = peers
    s.halo_bytes = dict.fromkeys(peers, 9616)
    return s


def test_the_completed_report_carries_each_ranks_halo_statistics() -> None:
    # Rank 0 waits for rank 1 at most exchanges; rank 1 finds rank 0 waiting.
    waits = [2e-5] * 20 + [1e-3] * 180
    ranks = [stats(0, {1: waits}), stats(1, {0: [2.2e-5] * 200})]
    progress = Progress(plan=Plan([150, 150], 7, 1.0, 100), first_schedule=7)
    progress.split = progress.initial_split = [150, 150]
    progress.done, progress.started = 100, 1000.0
    outcome = Outcome(progress, 1.0, 0.5, None, None, ranks)
    setup = report.RunSetup(300, 100, ["h0", "h1"], "mean", 1.0, 1.9, None)
    run = report.completed(setup, outcome)
    body = run.report
    assert body is not None
    entries = body["ranks"]
    # The fields the report always had are still there.
    for key in ("rank", "host", "core", "iterations", "compute_s", "comm_s", "iter_s", "segments"):
        assert key in entries[0]
    h0, h1 = entries[0]["halo"], entries[1]["halo"]
    assert [e["peer"] for e in h0] == [1] and [e["peer"] for e in h1] == [0]
    assert h0[0]["bytes"] == 9616 and h0[0]["exchanges"] == 200 and h0[0]["fast_n"] == 20
    assert h0[0]["fast_s"] == pytest.approx(2e-5)  # the waits left out
    assert h0[0]["median_s"] == pytest.approx(1e-3)  # what comm_s-like figures would say
    assert h1[0]["fast_s"] == pytest.approx(2.2e-5)
    assert run.system == "h0,h1" and run.params == {"n": 300, "iterations": 100, "p": 2}
    # Small: a thousand exchanges per neighbour still make a few hundred bytes.
    assert len(json.dumps(h0)) < 300


def test_a_rank_without_neighbours_reports_no_halo() -> None:
    entry = report.rank_entry(stats(0, {}))
    assert entry["halo"] == []


def test_the_timed_window_opens_with_the_first_rank_out_of_the_barrier() -> None:
    """Each rank reads its own clock after the start barrier: rank 1's first segment began
    1.5 us before rank 0's mark, so the window starts there, and still lasts the run's
    total (the service reads CPU availability over it)."""
    ranks = [stats(0, {}), stats(1, {})]
    ranks[0].segments = [{"from": 0, "start": 1000.0, "end": 1000.9}]
    ranks[1].segments = [{"from": 0, "start": 1000.0 - 1.5e-6, "end": 1000.9}]
    progress = Progress(plan=Plan([150, 150], 7, 1.0, 100), first_schedule=7)
    progress.split = progress.initial_split = [150, 150]
    progress.done, progress.started = 100, 1000.0
    setup = report.RunSetup(300, 100, ["h0", "h1"], "mean", 1.0, 1.9, None)
    body = report.completed(setup, Outcome(progress, 1.0, 0.5, None, None, ranks)).report
    assert body is not None
    assert body["started_at"] == 1000.0 - 1.5e-6
    assert body["finished_at"] - body["started_at"] == pytest.approx(1.0, abs=1e-9)
    ranks[1].segments[0]["start"] = 1000.2  # a later rank does not move it
    body = report.completed(setup, Outcome(progress, 1.0, 0.5, None, None, ranks)).report
    assert body is not None and body["started_at"] == 1000.0
