"""Planning one replay case: histories strictly before the start, then the pipeline.

The causal half of replay: :func:`case_histories` cuts every host's series to
timestamps strictly before the start *before* anything else sees it, and the same
:class:`ppe.pipeline.HistoryForecasts` and :func:`ppe.pipeline.plan` the service uses
turn them into schedules and predictions.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ppe.pipeline import HistoryForecasts, HostMeta, PlanOptions, SeriesHistory, plan

if TYPE_CHECKING:
    from ppe.replay.experiment import Case, CasePlan, HostData, ReplayConfig


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
        ts, cpu = history_before(h.hist_t, h.hist_a, case.start, config.history_s)
        bw = None
        if h.bw_v is not None:
            _, bw = history_before(h.hist_t, h.bw_v[~np.isin(h.all_t, h.dead_t)], case.start,
                                   config.history_s)
        out[h.name] = SeriesHistory(ts, cpu, None, bw)
    return out


def case_forecasts(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> HistoryForecasts:
    return HistoryForecasts(
        case_histories(case, hosts, config), case.start, bandwidth=config.bandwidth,
        latency=config.latency, method=config.inputs,
    )


def plan_case(case: Case, hosts: Sequence[HostData], config: ReplayConfig) -> CasePlan:
    """Every strategy's plan for one case; a failing strategy is recorded, not raised."""
    from ppe.replay.experiment import CasePlan, StrategyOutcome

    t0 = time.perf_counter()
    metas = [HostMeta(hosts[i].name, hosts[i].benchmark) for i in case.hosts]
    fc = case_forecasts(case, hosts, config)
    result = CasePlan(index=case.index)
    result.multimode = {m.name: fc.mode(m.name)[0] for m in metas}
    opts = PlanOptions(
        confidence=config.confidence, k=config.k, quantile=config.quantile,
        schedule_samples=config.schedule_samples, predict_samples=config.predict_samples,
        seed=case.seed,
    )
    params = {"n": config.n, "iterations": config.iterations}
    for s in config.strategies:
        try:
            res = plan(config.app, params, metas, fc, s, opts, dependence_for=fc.dependence)
        except Exception as exc:  # noqa: BLE001 - a strategy failing is a result to report
            result.outcomes[s] = StrategyOutcome(
                rows=[0] * len(metas), error=f"{type(exc).__name__}: {exc}"
            )
            continue
        lo, hi = res.makespan.interval(config.confidence)
        result.outcomes[s] = StrategyOutcome(
            rows=res.allocation(), mean=float(res.makespan.mean()), std=float(res.makespan.std()),
            lo=float(lo), hi=float(hi), horizon_s=res.horizon_s, rounds=res.rounds,
        )
    result.seconds = time.perf_counter() - t0
    return result
