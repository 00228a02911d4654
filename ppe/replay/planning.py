"""Planning one replay case: histories strictly before the start, then the pipeline.

The causal half of replay: :func:`case_histories` cuts every host's series to
timestamps strictly before the start *before* anything else sees it, and the same
:class:`ppe.pipeline.HistoryForecasts` and :func:`ppe.pipeline.plan` the service uses
turn them into schedules and predictions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ppe.pipeline import (
    HistoryForecasts,
    HostMeta,
    PlanOptions,
    PlanResult,
    SeriesHistory,
    plan,
    replan,
)
from ppe.replay.cases import Case, CasePlan, HostData, StrategyOutcome
from ppe.replay.config import ReplayConfig, replanned


def history_before(
    ts: np.ndarray, values: np.ndarray, start: float, window_s: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Samples with ``start - window_s <= t < start`` — never at or after ``start``."""
    hi = int(np.searchsorted(ts, start, side="left"))
    lo = 0 if window_s is None else int(np.searchsorted(ts, start - window_s, side="left"))
    return ts[lo:hi], values[lo:hi]


def case_histories(
    case: Case, hosts: Sequence[HostData], config: ReplayConfig
) -> dict[str, SeriesHistory]:
    """What each host's sensor had sent before the start (live samples only)."""
    out = {}
    for i in case.hosts:
        h = hosts[i]
        ts, cpu = history_before(
            h.history_times, h.history_availability, case.start, config.history_s
        )
        bw = None
        if h.bandwidth is not None:
            _, bw = history_before(
                h.history_times,
                h.bandwidth[~np.isin(h.times, h.dead_times)],
                case.start,
                config.history_s,
            )
        out[h.name] = SeriesHistory(ts, cpu, None, bw)
    return out


def case_forecasts(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> HistoryForecasts:
    return HistoryForecasts(
        case_histories(case, hosts, config),
        case.start,
        bandwidth=config.sim.bandwidth,
        latency=config.sim.latency,
        method=config.inputs,
    )


def plan_case(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> CasePlan:
    """Every strategy's plan for one case, and the first plan of each re-planning run
    (forecasts ``replan_every_s`` ahead); a failing strategy is recorded, not raised."""
    t0 = time.perf_counter()
    metas = case_hosts(case, hosts)
    fc = case_forecasts(case, hosts, config)
    result = CasePlan(index=case.index)
    result.multimode = {m.name: fc.mode(m.name)[0] for m in metas}
    opts = plan_options(case, config)
    ahead = replace(opts, replan_every_s=config.replan_policy.every_s)
    for name, strategy, options in [
        *((s, s, opts) for s in config.strategies),
        *((replanned(s), s, ahead) for s in config.replan),
    ]:
        try:
            res = plan(
                config.sim.app,
                _params(config, config.sim.iterations),
                metas,
                fc,
                strategy,
                options,
                dependence_for=fc.dependence,
            )
        except Exception as exc:  # noqa: BLE001 - a strategy failing is a result to report
            result.outcomes[name] = _failed(exc, len(metas))
        else:
            result.outcomes[name] = _recorded(res, config)
    result.seconds = time.perf_counter() - t0
    return result


@dataclass(frozen=True)
class ReplanJob:
    """A re-planning run that fell behind: its case (hosts, seed), when it asks again, the
    iterations it has left and the rows it runs with."""

    case: Case
    at: float
    left: int
    rows: tuple[int, ...]
    strategy: str


@dataclass(frozen=True)
class ReplanOutcome:
    """The new plan for the rest of the run, keeping the current rows predicted alike, and
    the verdict (``ppe.pipeline.replan``)."""

    plan: StrategyOutcome
    keep_mean: float = math.nan
    migration_s: float = 0.0
    move: bool = False


def replan_case(job: ReplanJob, hosts: Sequence[HostData], config: ReplayConfig) -> ReplanOutcome:
    """``ppe.pipeline.replan`` from the history strictly before ``job.at``."""
    case = replace(job.case, start=job.at)
    metas = case_hosts(case, hosts)
    fc = case_forecasts(case, hosts, config)
    try:
        r = replan(
            config.sim.app,
            _params(config, job.left),
            metas,
            fc,
            job.strategy,
            {m.name: rows for m, rows in zip(metas, job.rows, strict=True)},
            config.replan_policy,
            plan_options(case, config),
            fc.dependence,
            row_bytes=config.sim.message_bytes(),
            bandwidth=config.sim.bandwidth,
            latency=config.sim.latency,
        )
    except Exception as exc:  # noqa: BLE001 - a failed re-plan keeps the run going as it is
        return ReplanOutcome(_failed(exc, len(metas)))
    return ReplanOutcome(
        _recorded(r.plan, config), float(r.keep.makespan.mean()), r.migration_s, r.move
    )


def case_hosts(case: Case, hosts: Sequence[HostData]) -> list[HostMeta]:
    return [HostMeta(hosts[i].name, hosts[i].benchmark) for i in case.hosts]


def plan_options(case: Case, config: ReplayConfig) -> PlanOptions:
    """The replay's plan options with the case's own seed."""
    return replace(config.plan, seed=case.seed)


def _params(config: ReplayConfig, iterations: int) -> dict[str, int]:
    return {"n": config.sim.n, "iterations": iterations}


def _recorded(res: PlanResult, config: ReplayConfig) -> StrategyOutcome:
    """A plan as replay records it."""
    lo, hi = res.makespan.interval(config.plan.confidence)
    return StrategyOutcome(
        rows=res.allocation(),
        mean=float(res.makespan.mean()),
        std=float(res.makespan.std()),
        lo=float(lo),
        hi=float(hi),
        horizon_s=res.horizon_s,
        rounds=res.rounds,
    )


def _failed(exc: Exception, hosts: int) -> StrategyOutcome:
    return StrategyOutcome(rows=[0] * hosts, error=f"{type(exc).__name__}: {exc}")
