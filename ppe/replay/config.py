"""Replay settings: :class:`ReplayConfig`, everything that defines a replay.

The report echoes it under ``config``; the modelling choices behind the settings are in
``ppe/replay/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import scheduler
from ppe.replay.simulate import SimConfig


def replanned(strategy: str) -> str:
    """Report name of a strategy run with re-planning."""
    return f"{strategy}+replan"


#: Every strategy the scheduler offers (baselines first).
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(scheduler.STRATEGIES)


@dataclass(frozen=True)
class ReplayConfig:
    """Everything that defines a replay; the report echoes it under ``config``.

    Defaults are the issue's setting: SOR on 8 hosts, n=10000, 1000 iterations and a
    median benchmark of 1.5e-7 s per element, i.e. 31 minutes on 8 idle hosts; loaded
    runs take 30 minutes to a few hours. ``benchmark_spread`` makes hosts differ in
    speed (log-normal, per file). ``window_s``/``max_gap_s``/``min_history_s`` decide
    which hosts are usable at a start (module docstring); ``history_s`` is how much of
    the past the pipeline is given. ``inputs``: "analog" (default) or "forecaster", how
    the pipeline builds CPU inputs (see ppe.pipeline). ``start_method``: multiprocessing
    start method for the pool (None: the platform's default, or "forkserver" when called
    with other threads running, e.g. from the service).
    """

    traces: tuple[str, ...] = ()
    app: str = "sor"
    n: int = 10000
    iterations: int = 1000
    hosts: int = 8
    starts: int = 200
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    bandwidth: float = 1.25e7
    bandwidth_from_trace: bool = False
    latency: float = 5e-4
    benchmark: float = 1.5e-7
    benchmark_spread: float = 0.3
    confidence: float = 0.95
    k: float = 2.0
    quantile: float = 0.95
    seed: int = 0
    workers: int = 0
    executor: str = "process"
    scheduler_address: str | None = None
    min_history_s: float = 2 * 86400.0
    history_s: float | None = 14 * 86400.0
    window_s: float = 12 * 3600.0
    max_gap_s: float = 1800.0
    schedule_samples: int = 2000
    predict_samples: int = 4000
    include_runs: bool = True
    inputs: str = "analog"
    start_method: str | None = None
    replan: tuple[str, ...] = ("expected",)
    replan_every_s: float = 300.0
    replan_lag: float = 1.2
    replan_gain: float = 0.05

    def __post_init__(self) -> None:
        if self.hosts < 1:
            raise ValueError("hosts must be >= 1")
        if self.starts < 1:
            raise ValueError("starts must be >= 1")
        if self.n < 1 or self.iterations < 1:
            raise ValueError("n and iterations must be >= 1")
        if not self.strategies:
            raise ValueError("give at least one strategy")
        if self.executor not in ("process", "serial", "dask"):
            raise ValueError("executor must be 'process', 'serial' or 'dask'")
        if self.executor == "dask" and not self.scheduler_address:
            raise ValueError("--executor dask needs --scheduler-address")
        if not 0 < self.confidence < 1:
            raise ValueError("confidence must be in (0, 1)")
        if self.inputs not in ("analog", "forecaster"):
            raise ValueError("inputs must be 'analog' or 'forecaster'")
        if self.app not in ("sor", "jacobi2d"):
            raise ValueError("app must be 'sor' or 'jacobi2d'")
        twice = sorted({s for s in self.replan if self.replan.count(s) > 1})
        if twice:
            raise ValueError(f"strategies listed twice in replan: {twice}")
        unknown = sorted((set(self.strategies) | set(self.replan)) - set(scheduler.STRATEGIES))
        if unknown:
            raise ValueError(
                f"unknown strategies {unknown}; choose from {', '.join(scheduler.STRATEGIES)}"
            )
        if self.benchmark <= 0 or self.bandwidth <= 0 or self.latency < 0:
            raise ValueError("benchmark and bandwidth must be > 0, latency >= 0")
        self.policy()  # clear errors for bad re-planning settings

    def policy(self) -> scheduler.ReplanPolicy:
        """How the ``replan`` strategies' runs check their progress and re-plan."""
        return scheduler.ReplanPolicy(self.replan_every_s, self.replan_lag, self.replan_gain)

    def reported(self) -> tuple[str, ...]:
        """Every strategy in the report: the static ones, then the re-planning runs."""
        return (*self.strategies, *(replanned(s) for s in self.replan))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["traces"] = list(self.traces)
        d["strategies"] = list(self.strategies)
        d["replan"] = list(self.replan)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplayConfig:
        """From JSON (e.g. an API request); unknown keys are an error, not ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown replay settings: {unknown}")
        d = dict(data)
        for key in ("traces", "strategies", "replan"):
            if key in d and isinstance(d[key], str):
                d[key] = tuple(s for s in d[key].split(",") if s)
            elif key in d:
                d[key] = tuple(d[key])
        return cls(**d)

    def sim_config(self) -> SimConfig:
        return SimConfig(self.app, self.n, self.iterations, self.bandwidth, self.latency)
