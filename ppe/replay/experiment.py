"""Replay experiment: how good would PPE's predictions and schedules have been?

For many start times over recorded traces and host sets drawn from them, the real pipeline
(:func:`ppe.pipeline.plan`) plans the run with each strategy from the history strictly before
the start; the simulator executes each schedule against what the hosts actually did, and an
oracle that knew the future gives the yardstick. The modelling choices (hosts, dead VMs, which
hosts a run may use, re-planning runs, determinism) and how to run on a Dask cluster are in
``ppe/replay/README.md``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ppe.replay.adaptive import run_adaptive
from ppe.replay.cases import (
    CasePlan,
    draw_cases,
    make_banks,
    prepare_hosts,
    rows_or_block,
    run_specs,
)
from ppe.replay.config import ReplayConfig, replanned
from ppe.replay.oracle import oracle
from ppe.replay.report import build_report
from ppe.replay.simulate import simulate
from ppe.replay.workers import ProgressFn, Workers, worker_count
from ppe.traces import Trace, read_traces


def run_experiment(
    traces: Sequence[Trace], config: ReplayConfig, progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Replay ``traces`` as ``config`` says; returns the JSON report (see ``report``)."""
    t0 = time.perf_counter()
    hosts = prepare_hosts(traces, config)
    cases = draw_cases(hosts, config)
    bank, net_bank = make_banks(hosts)
    actual: dict[str, np.ndarray] = {}

    def checkpoint() -> None:
        """Between the steps after planning: the planned count again (a service job's
        progress writer stops a cancelled job there)."""
        if progress is not None:
            progress(len(cases), len(cases))

    with Workers(hosts, config) as workers:
        plans: list[CasePlan] = workers.map("plan", cases, progress)
        t_plan = time.perf_counter() - t0
        for s in config.replan:
            actual[replanned(s)] = run_adaptive(
                cases, hosts, plans, s, config, (bank, net_bank), workers.map, checkpoint
            )
    cands = [
        [rows_or_block(p.outcomes[s], c, config) for p, c in zip(plans, cases, strict=True)]
        for s in config.strategies
    ]
    for s, rows in zip(config.strategies, cands, strict=True):
        checkpoint()
        specs = run_specs(cases, hosts, rows, net_bank is not None)
        actual[s] = simulate(bank, specs, config.sim, net_bank).makespan
    checkpoint()
    base = run_specs(cases, hosts, [[0] * config.hosts for _ in cases], net_bank is not None)
    orc = oracle(bank, base, config.sim, config.sim.n, net_bank, candidates=cands)
    timing = {
        "plan_s": t_plan,
        "total_s": time.perf_counter() - t0,
        "workers": worker_count(config),
        "schedules": len(cases) * len(config.reported()),
        "replans": sum(len(p.outcomes[replanned(s)].replans) for p in plans for s in config.replan),
    }
    return build_report(config, cases, hosts, plans, actual, orc, timing)


def run_replay(
    config: ReplayConfig | Mapping[str, Any], progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Entry point for ``ppe replay`` and the service's replay jobs.

    ``config`` is a :class:`ReplayConfig` or its flat form (``traces``: files or
    directories); ``progress(done, total)`` is called as cases are planned.
    """
    cfg = config if isinstance(config, ReplayConfig) else ReplayConfig.from_flat(config)
    if not cfg.traces:
        raise ValueError("no traces given")
    return run_experiment(read_traces(cfg.traces), cfg, progress)
