"""Re-planning runs: an application that checks its progress and asks for a new schedule.

Each such run starts from its strategy's plan for the next ``replan_every_s`` seconds
(``planning.plan_case``), then the simulator executes it in slices of that length, stopping
at the first iteration boundary at or after each check. A run that is behind
(``scheduler.ReplanPolicy.behind``: slower than ``lag`` times the pace predicted at its
last plan, for its new strips or for keeping the old ones) asks the same pipeline again
with the history strictly before that moment and the iterations it has left
(``planning.replan_case``); it moves its strips when the new plan, migration included, is
predicted to pay (``ReplanPolicy.worth_moving``), and waits the migration time
(``scheduler.migration_seconds`` at the constant ``--bandwidth``) before going on. All runs
advance together, one simulator call per check; the re-plans of one check go to the
workers together.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ppe.replay.cases import Case, CasePlan, HostData, rows_or_block, run_specs
from ppe.replay.config import ReplayConfig, replanned
from ppe.replay.planning import ReplanJob, ReplanOutcome
from ppe.replay.simulate import RateBank, simulate

ReplanMap = Callable[[str, Sequence[ReplanJob]], list[ReplanOutcome]]


def run_adaptive(
    cases: Sequence[Case],
    hosts: Sequence[HostData],
    plans: Sequence[CasePlan],
    strategy: str,
    config: ReplayConfig,
    banks: tuple[RateBank, RateBank | None],
    replan_map: ReplanMap,
    checkpoint: Callable[[], None] | None = None,
) -> np.ndarray:
    """Actual makespan of every case run with ``strategy`` and re-planning; each case's
    ``plans[i].outcomes[replanned(strategy)].replans`` records what happened at each
    re-plan (time, iterations left, verdict, rows). ``checkpoint()`` is called at every
    progress check (a service job stops there when it was cancelled)."""
    bank, net_bank = banks
    policy = config.replan_policy
    name = replanned(strategy)
    starts = np.array([c.start for c in cases], dtype=float)
    t = starts.copy()
    left = np.full(len(cases), config.sim.iterations, dtype=np.int64)
    rows = [rows_or_block(p.outcomes[name], c, config) for p, c in zip(plans, cases, strict=True)]
    since_t = t.copy()  # when the current plan was made
    since_done = np.zeros(len(cases), dtype=np.int64)  # iterations done under it
    pace = np.array([_pace(p.outcomes[name].mean, config.sim.iterations) for p in plans])
    while True:
        if checkpoint is not None:
            checkpoint()
        live = np.flatnonzero(left > 0)
        if live.size == 0:
            break
        idx = live.tolist()
        base = run_specs(
            [cases[i] for i in idx], hosts, [rows[i] for i in idx], net_bank is not None
        )
        specs = [
            replace(s, start=float(t[i]), iterations=int(left[i]))
            for i, s in zip(idx, base, strict=True)
        ]
        res = simulate(bank, specs, config.sim, net_bank, until=t[live] + policy.every_s)
        assert res.done is not None
        t[live] += res.makespan
        left[live] -= res.done
        since_done[live] += res.done
        late = [
            i
            for i in idx
            if left[i] > 0 and policy.behind(t[i] - since_t[i], int(since_done[i]), pace[i])
        ]
        if not late:
            continue
        jobs = [
            ReplanJob(cases[i], float(t[i]), int(left[i]), tuple(rows[i]), strategy) for i in late
        ]
        for i, out in zip(late, replan_map("replan", jobs), strict=True):
            plans[i].outcomes[name].replans.append(_event(out, t[i] - starts[i], int(left[i])))
            if out.move:
                rows[i] = list(out.plan.rows)
                t[i] += out.migration_s
                pace[i] = _pace(out.plan.mean, int(left[i]))
            elif out.plan.error is None:
                pace[i] = _pace(out.keep_mean, int(left[i]))
            # (a failed re-plan keeps the run and the pace it had: it will ask again)
            since_t[i], since_done[i] = t[i], 0  # the pace is judged from after the move
    return t - starts


def _pace(predicted_s: float, iterations: int) -> float:
    """Predicted seconds per iteration; a failed plan (NaN) never counts as behind."""
    return predicted_s / iterations if np.isfinite(predicted_s) else np.inf


def _event(out: ReplanOutcome, elapsed_s: float, left: int) -> dict[str, Any]:
    return {
        "after_s": float(elapsed_s),
        "iterations_left": left,
        "moved": out.move,
        "rows": list(out.plan.rows),
        "predicted_s": _finite(out.plan.mean),
        "keep_predicted_s": _finite(out.keep_mean),
        "migration_s": float(out.migration_s),
        "error": out.plan.error,
    }


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None
