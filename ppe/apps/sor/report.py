"""The run report rank 0 posts (``POST /api/v1/runs`` through ``ppe.client``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ppe.apps.sor.halo import halo_report
from ppe.apps.sor.runner import Outcome, Progress, RankStats
from ppe.client import RunReport

#: Per-rank iteration times beyond this many are averaged in blocks (the report stays small).
MAX_ITER_TIMES = 1000


@dataclass(frozen=True)
class RunSetup:
    """What the run was asked to do."""

    n: int
    iterations: int
    hosts: list[str]
    strategy: str
    k: float
    omega: float
    tolerance: float | None


def compact(times: Sequence[float], limit: int = MAX_ITER_TIMES) -> tuple[list[float], int]:
    """The times themselves, or means over blocks of ``b`` iterations when there are more than
    ``limit``; returns ``(values, b)``."""
    block = max(1, math.ceil(len(times) / limit))
    values = [
        sum(times[i : i + block]) / len(times[i : i + block]) for i in range(0, len(times), block)
    ]
    return [round(v, 7) for v in values], block


def rank_entry(stats: RankStats) -> dict[str, Any]:
    iter_s, block = compact(stats.iter_s)
    return {
        "rank": stats.rank,
        "host": stats.host,
        "core": stats.core,
        "iterations": len(stats.iter_s),
        "compute_s": stats.compute_s,
        "comm_s": stats.comm_s,
        "iter_s": iter_s,
        "iter_block": block,
        "segments": stats.segments,
        "halo": halo_report(stats.halo_s, stats.halo_bytes),
    }


def _details(
    setup: RunSetup,
    progress: Progress,
    ranks: Sequence[RankStats],
    started: float | None,
    finished: float | None,
) -> dict[str, Any]:
    """``started_at``/``finished_at`` (unix s, the ranks' clock) bound the timed part of the run:
    the service reads the hosts' CPU availability over that window (calibration)."""
    return {
        "strategy": setup.strategy,
        "k": setup.k,
        "hosts": setup.hosts,
        "omega": setup.omega,
        "tolerance": setup.tolerance,
        "iterations_requested": setup.iterations,
        "iterations_done": progress.done,
        "started_at": started,
        "finished_at": finished,
        "predicted": None if progress.plan is None else progress.plan.makespan,
        "rows": {"initial": progress.initial_split, "final": progress.split},
        "replans": progress.replans,
        "migrations": progress.migrations,
        "ranks": [rank_entry(r) for r in ranks],
    }


def _params(setup: RunSetup, progress: Progress) -> dict[str, float]:
    return {"n": setup.n, "iterations": progress.done, "p": len(setup.hosts)}


def _window_start(started: float | None, ranks: Sequence[RankStats]) -> float | None:
    """The timed window opens when the first rank leaves the start barrier: each rank reads
    its own clock after it, so another rank's first segment can begin microseconds before
    rank 0's mark (seen: 1.5 us)."""
    if started is None:
        return None
    return min([started, *(float(r.segments[0]["start"]) for r in ranks if r.segments)])


def completed(setup: RunSetup, outcome: Outcome) -> RunReport:
    p = outcome.progress
    started = _window_start(p.started, outcome.ranks)
    finished = None if started is None else started + outcome.total_s
    report = _details(setup, p, outcome.ranks, started, finished)
    report.update(
        residual=outcome.residual, checksum=outcome.checksum, checksum_ok=outcome.checksum_ok
    )
    return RunReport(
        app="sor",
        values=[outcome.total_s],
        kernel="total",
        params=_params(setup, p),
        system=",".join(setup.hosts),
        schedule_id=p.first_schedule,
        status="completed",
        report=report,
    )


def failed(
    setup: RunSetup, progress: Progress, mine: RankStats, error: str, at: float
) -> RunReport:
    """A run that stopped half-way: what rank 0 knows, the time until ``at``, the error."""
    report = _details(
        setup, progress, [mine], progress.started, at if progress.started is not None else None
    )
    report["error"] = error
    elapsed = 0.0 if progress.started is None else max(0.0, at - progress.started)
    return RunReport(
        app="sor",
        values=[elapsed],
        kernel="total",
        params=_params(setup, progress),
        system=",".join(setup.hosts),
        schedule_id=progress.first_schedule,
        status="failed",
        report=report,
    )
