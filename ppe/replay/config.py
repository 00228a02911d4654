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

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
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

#: Strategies that also run as re-planning applications when a request names neither
#: ``strategies`` nor ``replan``; naming ``strategies`` alone keeps those of them it names.
DEFAULT_REPLAN: tuple[str, ...] = ("expected",)

DAY = 86400.0


@dataclass(frozen=True)
class Bound:
    """What one flat key accepts: its kind (``int``, ``float``, ``bool``, ``str``, ``names``),
    an inclusive range (for ``str``/``names``: the longest length), allowed words, and
    whether it may be None."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False

    def check(self, key: str, value: Any) -> Any:
        """The value as the config holds it, or ValueError naming ``key`` and the bound."""
        if value is None and self.nullable:
            return None
        if self.kind in ("int", "float"):
            return self._number(key, value)
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false, got {value!r:.80}")
            return value
        if self.kind == "names":
            names = value.split(",") if isinstance(value, str) else value
            if not isinstance(names, list | tuple) or not all(
                isinstance(n, str | os.PathLike) for n in names
            ):
                raise ValueError(f"{key} must be a list of names, got {value!r:.80}")
            names = tuple(os.fspath(n) for n in names if n)
            if self.hi is not None and len(names) > self.hi:
                raise ValueError(f"{key}: at most {self.hi:.0f} names, got {len(names)}")
            return names
        if not isinstance(value, str):
            raise ValueError(f"{key} must be a string, got {type(value).__name__}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{key} must be one of {', '.join(self.choices)}, got {value!r:.80}")
        if self.hi is not None and len(value) > self.hi:
            raise ValueError(f"{key}: at most {self.hi:.0f} characters")
        return value

    def _show(self, x: float | None) -> str:
        if x is None:
            return "(no bound)"
        return str(int(x)) if self.kind == "int" else f"{x:g}"

    def _number(self, key: str, value: Any) -> float | int:
        kind = "an integer" if self.kind == "int" else "a number"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{key} must be {kind}, got {value!r:.80}")
        if not math.isfinite(value):
            raise ValueError(f"{key} must be a finite number, got {value!r:.80}")
        if self.kind == "int":
            if value != int(value):
                raise ValueError(f"{key} must be an integer, got {value!r:.80}")
            value = int(value)
        else:
            value = float(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            lo, hi, got = (self._show(x) for x in (self.lo, self.hi, value))
            raise ValueError(f"{key} must be between {lo} and {hi}, got {got}")
        return value


@dataclass(frozen=True)
class Limits:
    """The bounds :meth:`ReplayConfig.from_flat` enforces: one :class:`Bound` per flat key,
    and ``max_run_s``, the longest run (:meth:`ReplayConfig.dedicated_run_s`) a replay may
    simulate, since run length sets the number of re-planning checks."""

    bounds: Mapping[str, Bound]
    max_run_s: float = field(default=DAY)

    def widen(self, max_run_s: float | None = None, **hi: float) -> Limits:
        """These limits with larger upper ends for the keys named."""
        bounds = {k: replace(b, hi=hi[k]) if k in hi else b for k, b in self.bounds.items()}
        return Limits(bounds, self.max_run_s if max_run_s is None else max_run_s)


#: Bounds for settings from others (the service's replay jobs, and ``from_flat``'s default):
#: every size a request sets is capped, so one request cannot ask for unbounded work (nor
#: overflow the store's 32-bit counters). The CLI uses :data:`LOCAL_LIMITS`.
LIMITS = Limits(
    {
        "traces": Bound("names", hi=1024),
        "app": Bound("str", choices=APPS),
        "n": Bound("int", 1, 100_000),
        "iterations": Bound("int", 1, 100_000),
        "hosts": Bound("int", 1, 64),
        "starts": Bound("int", 1, 5_000),
        "strategies": Bound("names", hi=len(DEFAULT_STRATEGIES)),
        "bandwidth": Bound("float", 1e3, 1e12),
        "bandwidth_from_trace": Bound("bool"),
        "latency": Bound("float", 0, 10),
        "benchmark": Bound("float", 1e-12, 1e-3),
        "benchmark_spread": Bound("float", 0, 3),
        "confidence": Bound("float", 0.01, 0.999),
        "k": Bound("float", 0, 100),
        "quantile": Bound("float", 0.01, 0.999),
        "seed": Bound("int", 0, 2**32 - 1),
        "workers": Bound("int", 0, os.cpu_count() or 1),
        "executor": Bound("str", choices=("process", "serial", "dask")),
        "scheduler_address": Bound("str", hi=256, nullable=True),
        "min_history_s": Bound("float", 0, 90 * DAY),
        "history_s": Bound("float", 300, 90 * DAY, nullable=True),
        "window_s": Bound("float", 0, 7 * DAY),
        "max_gap_s": Bound("float", 0, 7 * DAY),
        "schedule_samples": Bound("int", 10, 100_000),
        "predict_samples": Bound("int", 10, 100_000),
        "include_runs": Bound("bool"),
        "inputs": Bound("str", choices=("analog", "forecaster")),
        "start_method": Bound("str", choices=("fork", "spawn", "forkserver"), nullable=True),
        "replan": Bound("names", hi=len(DEFAULT_STRATEGIES)),
        "replan_every_s": Bound("float", 60, DAY),
        "replan_lag": Bound("float", 1, 100),
        "replan_gain": Bound("float", 0, 0.99),
    }
)

#: ``ppe replay`` on one's own machine or Dask cluster: the same checks, larger experiments.
LOCAL_LIMITS = LIMITS.widen(
    max_run_s=30 * DAY,
    starts=1_000_000,
    hosts=1024,
    workers=4096,
    n=10_000_000,
    iterations=10_000_000,
    schedule_samples=1_000_000,
    predict_samples=1_000_000,
    traces=1_000_000,
)


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
    replan: tuple[str, ...] = DEFAULT_REPLAN
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

    def dedicated_run_s(self) -> float:
        """A run's length on idle median hosts: each iteration computes ``n / hosts`` rows of
        ``n`` elements and exchanges two halo rows; loaded hosts take longer."""
        sim = self.sim
        exchange = 2 * sim.message_seconds()
        return sim.iterations * (sim.n * sim.n * self.benchmark / self.hosts + exchange)

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
    def from_flat(cls, data: Mapping[str, Any], limits: Limits = LIMITS) -> ReplayConfig:
        """From the flat form (e.g. an API request); unknown keys are an error, not ignored,
        and every value is checked against ``limits`` (type, finite, range). Missing keys keep
        their defaults, except that naming ``strategies`` without ``replan`` re-plans only
        the :data:`DEFAULT_REPLAN` strategies named; name lists may be comma-separated."""
        unknown = sorted(set(data) - set(FLAT_KEYS))
        if unknown:
            raise ValueError(f"unknown replay settings: {unknown}")
        values = {key: limits.bounds[key].check(key, value) for key, value in data.items()}
        if "strategies" in values and "replan" not in values:
            values["replan"] = tuple(s for s in DEFAULT_REPLAN if s in values["strategies"])
        own: dict[str, Any] = {}
        owned: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            if key in OWNED:
                part, attr = OWNED[key]
                owned.setdefault(part, {})[attr] = value
            else:
                own[key] = value
        defaults: dict[str, Any] = {f.name: f.default for f in fields(cls)}
        parts = {part: replace(defaults[part], **v) for part, v in owned.items()}
        cfg = cls(**own, **parts)
        run_s = cfg.dedicated_run_s()
        if run_s > limits.max_run_s:
            raise ValueError(
                f"a run would take {run_s:.3g} s on idle hosts (iterations x n^2 x benchmark / "
                f"hosts, plus halo exchanges); at most {limits.max_run_s:g} s"
            )
        return cfg
