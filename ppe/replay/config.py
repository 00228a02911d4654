"""Replay settings: :class:`ReplayConfig`, everything that defines a replay.

Each knob has one home. The application and links are a :class:`~ppe.replay.simulate.SimConfig`,
the planning knobs a :class:`ppe.pipeline.PlanOptions`, the re-planning rule a
:class:`scheduler.ReplanPolicy`; ReplayConfig holds those objects and only the settings that
belong to the experiment itself. The flat form (``ppe replay`` flags, the service's replay
jobs, the report's ``config``) is an edge: :meth:`ReplayConfig.from_flat` and
:meth:`~ReplayConfig.to_flat` map its keys (:data:`FLAT_KEYS`) onto the owners' fields. The
modelling choices behind the settings are in ``ppe/replay/README.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import scheduler
from ppe.pipeline import PlanOptions
from ppe.replay.simulate import APP_PHASES, SimConfig
from scheduler import ReplanPolicy


def replanned(strategy: str) -> str:
    """Report name of a strategy run with re-planning."""
    return f"{strategy}+replan"


#: Every strategy the scheduler offers (baselines first).
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(scheduler.STRATEGIES)

#: The applications the simulator (and the pipeline's models) know.
APPS: tuple[str, ...] = tuple(APP_PHASES)

#: The issue's setting: SOR with n=10000 and 1000 iterations, links at ``ppe.pipeline``'s
#: ``DEFAULT_LINK`` (SimConfig's defaults).
REPLAY_APP = SimConfig(app="sor", n=10000, iterations=1000)

#: Fewer Monte Carlo draws than the service's PlanOptions (4000 / 20000): replay plans a few
#: thousand schedules per experiment and judges strategies on means over cases. Each case
#: plans with its own seed (``Case.seed``), so this ``seed`` is not used.
REPLAY_PLAN = PlanOptions(schedule_samples=2000, predict_samples=4000)

#: Flat keys that live in an owner's object: key -> (ReplayConfig field, attribute there).
#: Every other flat key is a ReplayConfig field of the same name.
OWNED: dict[str, tuple[str, str]] = {
    "app": ("sim", "app"),
    "n": ("sim", "n"),
    "iterations": ("sim", "iterations"),
    "bandwidth": ("sim", "bandwidth"),
    "latency": ("sim", "latency"),
    "confidence": ("plan", "confidence"),
    "k": ("plan", "k"),
    "quantile": ("plan", "quantile"),
    "schedule_samples": ("plan", "schedule_samples"),
    "predict_samples": ("plan", "predict_samples"),
    "replan_every_s": ("replan_policy", "every_s"),
    "replan_lag": ("replan_policy", "lag"),
    "replan_gain": ("replan_policy", "min_gain"),
}

#: Every flat key, in the order the report's ``config`` and the service list them.
FLAT_KEYS: tuple[str, ...] = (
    "traces",
    "app",
    "n",
    "iterations",
    "hosts",
    "starts",
    "strategies",
    "bandwidth",
    "bandwidth_from_trace",
    "latency",
    "benchmark",
    "benchmark_spread",
    "confidence",
    "k",
    "quantile",
    "seed",
    "workers",
    "executor",
    "scheduler_address",
    "min_history_s",
    "history_s",
    "window_s",
    "max_gap_s",
    "schedule_samples",
    "predict_samples",
    "include_runs",
    "inputs",
    "start_method",
    "replan",
    "replan_every_s",
    "replan_lag",
    "replan_gain",
)

_NAME_LISTS = ("traces", "strategies", "replan")


@dataclass(frozen=True)
class ReplayConfig:
    """Everything that defines a replay; the report echoes its flat form under ``config``.

    ``sim``: the application (SOR or Jacobi2D, grid side ``n``, iterations) and the links'
    bandwidth and latency. ``plan``: the pipeline's knobs (confidence, ``k``, quantile, Monte
    Carlo draws). ``replan_policy``: when the ``replan`` strategies' runs ask again and move.
    With a median benchmark of 1.5e-7 s per element the defaults take 31 minutes on 8 idle
    hosts; loaded runs take 30 minutes to a few hours. ``benchmark_spread`` makes hosts differ
    in speed (log-normal, per file). ``window_s``/``max_gap_s``/``min_history_s`` decide which
    hosts are usable at a start (README, modelling choices); ``history_s`` is how much of the
    past the pipeline is given. ``inputs``: "analog" (default) or "forecaster", how the
    pipeline builds CPU inputs (see ppe.pipeline). ``start_method``: multiprocessing start
    method for the pool (None: the platform's default, or "forkserver" when called with other
    threads running, e.g. from the service).
    """

    traces: tuple[str, ...] = ()
    sim: SimConfig = REPLAY_APP
    plan: PlanOptions = REPLAY_PLAN
    replan_policy: ReplanPolicy = ReplanPolicy()
    hosts: int = 8
    starts: int = 200
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    replan: tuple[str, ...] = ("expected",)
    bandwidth_from_trace: bool = False
    benchmark: float = 1.5e-7
    benchmark_spread: float = 0.3
    seed: int = 0
    workers: int = 0
    executor: str = "process"
    scheduler_address: str | None = None
    min_history_s: float = 2 * 86400.0
    history_s: float | None = 14 * 86400.0
    window_s: float = 12 * 3600.0
    max_gap_s: float = 1800.0
    include_runs: bool = True
    inputs: str = "analog"
    start_method: str | None = None

    def __post_init__(self) -> None:
        if self.hosts < 1:
            raise ValueError("hosts must be >= 1")
        if self.starts < 1:
            raise ValueError("starts must be >= 1")
        if self.sim.n < 1 or self.sim.iterations < 1:
            raise ValueError("n and iterations must be >= 1")
        if not self.strategies:
            raise ValueError("give at least one strategy")
        if self.executor not in ("process", "serial", "dask"):
            raise ValueError("executor must be 'process', 'serial' or 'dask'")
        if self.executor == "dask" and not self.scheduler_address:
            raise ValueError("--executor dask needs --scheduler-address")
        if not 0 < self.plan.confidence < 1:
            raise ValueError("confidence must be in (0, 1)")
        if self.inputs not in ("analog", "forecaster"):
            raise ValueError("inputs must be 'analog' or 'forecaster'")
        if self.sim.app not in APPS:
            raise ValueError("app must be 'sor' or 'jacobi2d'")
        if self.plan.replan_every_s is not None:
            raise ValueError("plan.replan_every_s is set per run from replan_policy; leave it None")
        twice = sorted({s for s in self.replan if self.replan.count(s) > 1})
        if twice:
            raise ValueError(f"strategies listed twice in replan: {twice}")
        unknown = sorted((set(self.strategies) | set(self.replan)) - set(scheduler.STRATEGIES))
        if unknown:
            raise ValueError(
                f"unknown strategies {unknown}; choose from {', '.join(scheduler.STRATEGIES)}"
            )
        if self.benchmark <= 0 or self.sim.bandwidth <= 0 or self.sim.latency < 0:
            raise ValueError("benchmark and bandwidth must be > 0, latency >= 0")

    def reported(self) -> tuple[str, ...]:
        """Every strategy in the report: the static ones, then the re-planning runs."""
        return (*self.strategies, *(replanned(s) for s in self.replan))

    def to_flat(self) -> dict[str, Any]:
        """The flat form (JSON-ready, :data:`FLAT_KEYS` in order)."""
        out: dict[str, Any] = {}
        for key in FLAT_KEYS:
            part, attr = OWNED.get(key, ("", key))
            value = getattr(getattr(self, part) if part else self, attr)
            out[key] = list(value) if key in _NAME_LISTS else value
        return out

    @classmethod
    def from_flat(cls, data: Mapping[str, Any]) -> ReplayConfig:
        """From the flat form (e.g. an API request); unknown keys are an error, not ignored.
        Missing keys keep their defaults; name lists may be comma-separated strings."""
        unknown = sorted(set(data) - set(FLAT_KEYS))
        if unknown:
            raise ValueError(f"unknown replay settings: {unknown}")
        own: dict[str, Any] = {}
        owned: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            if key in _NAME_LISTS:
                value = (
                    tuple(s for s in value.split(",") if s)
                    if isinstance(value, str)
                    else tuple(value)
                )
            if key in OWNED:
                part, attr = OWNED[key]
                owned.setdefault(part, {})[attr] = value
            else:
                own[key] = value
        defaults: dict[str, Any] = {f.name: f.default for f in fields(cls)}
        parts = {part: replace(defaults[part], **values) for part, values in owned.items()}
        return cls(**own, **parts)
