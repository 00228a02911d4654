"""Re-planning runs (``ppe.replay.adaptive``): a host that falls mid-run loses its strip at
the next progress check, judged by the simulator; a re-plan never sees data from after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ppe.replay.adaptive import run_adaptive
from ppe.replay.cases import Case, StrategyOutcome, make_banks, prepare_hosts, run_specs
from ppe.replay.config import REPLAY_PLAN, ReplayConfig
from ppe.replay.planning import ReplanJob, ReplanOutcome, plan_case
from ppe.replay.simulate import SimConfig, simulate
from ppe.replay.workers import Workers
from ppe.traces import Trace

STEP = 300.0  # sensor period, s
DAYS = 4
START = DAYS * 86400.0
FALL = START + 600.0  # host "a" falls 10 minutes into the run


def _trace(name: str, values: np.ndarray, ts: np.ndarray) -> Trace:
    return Trace(
        name,
        ts,
        (1 - values) * 100,
        values,
        np.ones(values.size),
        np.zeros(values.size, dtype=bool),
    )


def _traces(late_change: float | None = None) -> list[Trace]:
    """Three quiet hosts for four days; "a" drops to 2 % of a CPU at ``FALL`` for good.
    ``late_change``: host "b" gets a sample at exactly that time and drops to 5 % from it
    on (what a re-plan made at that time must not see)."""
    rng = np.random.default_rng(3)
    ts = np.arange(int((DAYS + 1) * 86400 / STEP)) * STEP
    out = []
    for name in ("a", "b", "c"):
        v = np.clip(rng.normal(0.95, 0.01, ts.size), 0.01, 1.0)
        t = ts
        if name == "a":
            v[ts >= FALL] = 0.02
        if name == "b" and late_change is not None:
            at = int(np.searchsorted(ts, late_change))
            t, v = np.insert(ts, at, late_change), np.insert(v, at, 0.05)
            v[t >= late_change] = 0.05
        out.append(_trace(name, v, t))
    return out


def _config() -> ReplayConfig:
    # 200 rows each x 600 x 200 iterations x 1e-4 s: 40 minutes on three quiet hosts
    return ReplayConfig(
        traces=("synthetic",),
        sim=SimConfig("sor", n=600, iterations=200, latency=0.0),
        plan=replace(REPLAY_PLAN, schedule_samples=1000, predict_samples=2000),
        hosts=3,
        starts=1,
        strategies=("expected",),
        replan=("expected",),
        benchmark=1e-4,
        benchmark_spread=0.0,
        executor="serial",
    )


def _run(traces: list[Trace], fail_first: bool = False) -> tuple[float, float, list[dict]]:
    """(static actual, re-planning actual, re-plan events) of one run starting at START;
    ``fail_first``: the first re-plan fails (as a planning error would)."""
    config = _config()
    hosts = prepare_hosts(traces, config)
    case = Case(0, START, (0, 1, 2), seed=1)
    plans = [plan_case(case, hosts, config)]
    banks = make_banks(hosts)
    static = simulate(
        banks[0],
        run_specs([case], hosts, [plans[0].outcomes["expected"].rows], False),
        config.sim,
    ).makespan[0]
    calls: list[int] = []

    def replan_map(kind: str, jobs: Sequence[ReplanJob]) -> list[ReplanOutcome]:
        calls.append(len(jobs))
        if fail_first and len(calls) == 1:
            return [ReplanOutcome(StrategyOutcome(rows=[0, 0, 0], error="boom")) for _ in jobs]
        return workers.map(kind, jobs)

    with Workers(hosts, config) as workers:
        adaptive = run_adaptive([case], hosts, plans, "expected", config, banks, replan_map)
    return float(static), float(adaptive[0]), plans[0].outcomes["expected+replan"].replans


def test_a_host_that_falls_mid_run_loses_its_strip_at_the_next_check() -> None:
    static, adaptive, events = _run(_traces())
    assert events and events[0]["moved"]
    first = events[0]
    # noticed at the first check after the fall (checks every 300 s from the start)
    assert 600.0 <= first["after_s"] <= 600.0 + 2 * STEP + 60.0
    assert first["rows"][0] < 0.25 * sum(first["rows"]) and first["migration_s"] > 0
    # once its sensor has reported the fall twice (the forecast's present state), it keeps
    # next to nothing
    assert any(e["moved"] and e["rows"][0] < 0.02 * sum(e["rows"]) for e in events)
    # the static plan waits for a host at 2 % of a CPU; the re-planning run does not
    assert adaptive < 0.5 * static


def test_a_replan_never_sees_data_from_after_it() -> None:
    _, _, events = _run(_traces())
    first_at = START + events[0]["after_s"]
    # host "b" falls in a sample taken at the very moment of the first re-plan
    _, _, changed = _run(_traces(late_change=first_at))
    assert changed[0] == events[0]
    # ... which the next re-plan does see: "b" loses its strip then
    assert len(changed) > 1 and changed[-1]["rows"][1] < 0.1 * sum(changed[-1]["rows"])
    assert changed[-1]["rows"] != events[-1]["rows"]


def test_a_failed_replan_leaves_the_run_as_it_was_and_it_asks_again() -> None:
    static, adaptive, events = _run(_traces(), fail_first=True)
    assert events[0]["error"] == "boom" and not events[0]["moved"]
    assert any(e["moved"] and e["rows"][0] < 0.02 * sum(e["rows"]) for e in events[1:])
    assert adaptive < 0.5 * static
