"""Replay experiment: how good would PPE's predictions and schedules have been?

For many start times over recorded traces and host sets drawn from them, the *real*
pipeline (:func:`ppe.pipeline.plan`: forecaster -> structural model -> scheduler) plans
the run with each strategy from the history strictly before the start; the simulator
then executes each schedule against what the hosts actually did, and an oracle that
knew the future gives the yardstick. See :func:`run_replay`.

Design choices, stated rather than hidden:

- *Hosts.* Each trace file is one time-shared host. Its benchmark (dedicated seconds
  per element update) is ``benchmark * exp(spread * z)`` with ``z`` a standard normal
  drawn from ``(seed, file name)``, so hosts differ in speed as on a real grid and the
  same file keeps its speed across runs.
- *Forecasting input.* A switched-off VM (trace ``dead`` samples) sends no
  measurements: the forecaster sees its live samples only, strictly before the start.
- *Which hosts a run may use.* At a start time a host is offered only if it is alive
  at its last sample before the start, has ``min_history_s`` of live history, and is
  recorded without gaps longer than ``max_gap_s`` nor dead samples over the next
  ``window_s`` seconds. The last two look ahead, but only to decide which experiments
  can be scored at all (no record = no actual time); nothing the pipeline sees does.
- *Multi-mode sets.* A host set is multi-mode when the forecaster's distribution fit
  at the start calls any of its hosts multi-mode.
- *Re-planning runs.* Strategies in ``replan`` also run as an application that checks
  its progress and asks again when behind (:mod:`ppe.replay.adaptive`); each re-plan sees
  the history strictly before its own time. The oracle stays a static schedule, which a
  run that moves its strips after a fall can beat.
- *Determinism.* Start times, host sets, benchmarks and Monte Carlo seeds are drawn
  up front from ``seed``; workers only compute, and results are gathered by case
  index, so the report does not depend on the number of workers.

Running on a Dask cluster
-------------------------
When one machine is not enough, install ``dask[distributed]`` on the client and on
every worker, make the trace files readable at the same path on all workers (shared
filesystem or a copy), start a scheduler and workers (``dask scheduler`` /
``dask worker tcp://host:8786``), then::

    ppe replay /data/traces --hosts 8 --starts 5000 --executor dask \\
        --scheduler-address tcp://host:8786 --out report.json

Planning (the expensive part) is shipped to the cluster in chunks of cases; each
worker reads the traces once per chunk from the paths given. Simulation and the
oracle are vectorised and stay on the client. Results are identical to a local run.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import scheduler
from ppe.replay.simulate import RateBank, RunSpec, SimConfig, simulate
from ppe.traces import AVAILABILITY_FLOOR, Trace, read_traces

ProgressFn = Callable[[int, int], None]


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


# --------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class HostData:
    """One trace prepared for replay: forecasting history, simulation rates, checks."""

    name: str
    benchmark: float
    hist_t: np.ndarray  # live samples: what sensors would have sent
    hist_a: np.ndarray
    sim_a: np.ndarray  # all samples, dead ones at the floor (a switched-off host computes nothing)
    all_t: np.ndarray
    dead_t: np.ndarray
    bw_v: np.ndarray | None = None  # link bandwidth left by the host's own traffic, bytes/s


def host_benchmark(name: str, config: ReplayConfig) -> float:
    """Dedicated seconds per element for a host, fixed by (seed, file name)."""
    rng = np.random.default_rng([config.seed, zlib.crc32(name.encode())])
    return float(config.benchmark * math.exp(config.benchmark_spread * rng.standard_normal()))


def link_bandwidth(trace: Trace, capacity: float) -> np.ndarray | None:
    """Bandwidth left on a host's link by its recorded traffic (KB/s in GWA-T-12)."""
    if trace.net_rx_kbs is None or trace.net_tx_kbs is None:
        return None
    used = (trace.net_rx_kbs + trace.net_tx_kbs) * 1024.0
    return np.clip(capacity - used, 0.05 * capacity, capacity)


def prepare_hosts(traces: Sequence[Trace], config: ReplayConfig) -> list[HostData]:
    """Per-trace arrays the experiment needs; names must be unique."""
    seen: set[str] = set()
    out = []
    for tr in traces:
        if tr.name in seen:
            raise ValueError(f"two traces are both named {tr.name!r}; host names must be unique")
        seen.add(tr.name)
        live = ~tr.dead
        bw = link_bandwidth(tr, config.bandwidth) if config.bandwidth_from_trace else None
        if config.bandwidth_from_trace and bw is None:
            raise ValueError(f"trace {tr.name!r} has no network columns for --bandwidth-from-trace")
        out.append(
            HostData(
                name=tr.name,
                benchmark=host_benchmark(tr.name, config),
                hist_t=tr.timestamps[live],
                hist_a=tr.availability[live],
                sim_a=np.where(tr.dead, AVAILABILITY_FLOOR, tr.availability),
                all_t=tr.timestamps,
                dead_t=tr.timestamps[tr.dead],
                bw_v=bw,
            )
        )
    return out


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One experiment: a start time and a chain of hosts (indices into the host list)."""

    index: int
    start: float
    hosts: tuple[int, ...]
    seed: int


def eligible(host: HostData, start: float, config: ReplayConfig) -> bool:
    """May this host be used for a run starting at ``start``? (see module docstring)"""
    i = int(np.searchsorted(host.hist_t, start, side="left"))
    if i == 0 or host.hist_t[i - 1] < start - config.max_gap_s:
        return False
    if host.hist_t[i - 1] - host.hist_t[0] < config.min_history_s:
        return False
    j = int(np.searchsorted(host.all_t, start, side="left"))
    if j == 0 or j >= host.all_t.size:
        return False
    if host.all_t[-1] < start + config.window_s:
        return False
    k = int(np.searchsorted(host.all_t, start + config.window_s, side="right"))
    window = host.all_t[j - 1 : k + 1]
    if np.diff(window).max(initial=0.0) > config.max_gap_s:
        return False
    d0 = int(np.searchsorted(host.dead_t, start, side="left"))
    return not (d0 < host.dead_t.size and host.dead_t[d0] <= start + config.window_s)


def draw_cases(hosts: Sequence[HostData], config: ReplayConfig) -> list[Case]:
    """Start times uniform over the traces, host sets uniform among eligible hosts."""
    if len(hosts) < config.hosts:
        raise ValueError(f"{config.hosts} hosts per run but only {len(hosts)} traces given")
    rng = np.random.default_rng([config.seed, 1])
    lo = min(float(h.all_t[0]) for h in hosts) + config.min_history_s
    hi = max(float(h.all_t[-1]) for h in hosts) - config.window_s
    if hi <= lo:
        raise ValueError("traces are too short for the history and run window asked for")
    cases: list[Case] = []
    attempts = 0
    while len(cases) < config.starts and attempts < 200 * config.starts:
        attempts += 1
        start = float(np.floor(rng.uniform(lo, hi)))
        ok = [i for i, h in enumerate(hosts) if eligible(h, start, config)]
        if len(ok) < config.hosts:
            continue
        chosen = rng.choice(len(ok), size=config.hosts, replace=False)
        chain = tuple(ok[int(c)] for c in chosen)
        cases.append(Case(len(cases), start, chain, int(rng.integers(0, 2**31 - 1))))
    if len(cases) < config.starts:
        raise ValueError(
            f"found only {len(cases)} start times with {config.hosts} usable hosts "
            f"(asked for {config.starts}); relax --window/--max-gap or use fewer hosts"
        )
    return cases


# --------------------------------------------------------------------------- planning


@dataclass
class StrategyOutcome:
    """What one strategy planned for one case (or why it could not)."""

    rows: list[int]
    mean: float = math.nan
    std: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    horizon_s: float | None = None
    rounds: int = 0
    error: str | None = None
    #: re-planning runs only: each time the run asked again (``ppe.replay.adaptive``)
    replans: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CasePlan:
    """All strategies' plans for one case, plus the modes the forecaster saw."""

    index: int
    multimode: dict[str, bool] = field(default_factory=dict)
    outcomes: dict[str, StrategyOutcome] = field(default_factory=dict)
    seconds: float = 0.0


_CTX: dict[str, Any] = {}


def _init_worker(hosts: Sequence[HostData], config: ReplayConfig) -> None:
    # One BLAS/OpenMP thread per process: the pool already uses every core, and sklearn's
    # k-means initialisation of the mixture fits is 10-30x slower with oversubscribed threads.
    # threadpoolctl only limits libraries already loaded, hence the import first.
    from ppe.replay import planning  # noqa: F401

    threadpool_limits(1)
    _CTX["hosts"] = hosts
    _CTX["config"] = config


def _work_chunk(kind: str, items: Sequence[Any]) -> list[Any]:
    """Plan cases (``kind="plan"``) or re-plan running applications (``"replan"``)."""
    from ppe.replay import planning

    fn = planning.plan_case if kind == "plan" else planning.replan_case
    return [fn(item, _CTX["hosts"], _CTX["config"]) for item in items]


def _chunk_from_paths(
    kind: str, items: Sequence[Any], paths: Sequence[str], config: ReplayConfig
) -> list[Any]:
    """Dask task: read the traces (cached per worker process) and work through a chunk."""
    key = ("paths", tuple(paths), config)
    if _CTX.get("key") != key:
        _init_worker(prepare_hosts(read_traces(paths), config), config)
        _CTX["key"] = key
    return _work_chunk(kind, items)


def worker_count(config: ReplayConfig) -> int:
    return config.workers if config.workers > 0 else (os.cpu_count() or 1)


class Workers:
    """Where planning runs: in this process, a process pool or a Dask cluster.

    Kept open for the whole experiment, since re-planning runs ask for schedules in rounds
    as their simulations reach each progress check.
    """

    def __init__(self, hosts: Sequence[HostData], config: ReplayConfig) -> None:
        self.hosts, self.config = hosts, config
        self.count = worker_count(config)
        self._pool: ProcessPoolExecutor | None = None
        self._client: Any = None
        self._paths: list[str] = []

    def __enter__(self) -> Workers:
        cfg = self.config
        if cfg.executor == "dask":
            try:
                from dask.distributed import Client
            except ImportError as exc:  # optional dependency
                raise RuntimeError(
                    "--executor dask needs `pip install 'dask[distributed]'`"
                ) from exc
            from ppe.traces import expand_paths

            self._paths = [str(p.resolve()) for p in expand_paths(cfg.traces)]
            self._client = Client(cfg.scheduler_address)
        elif cfg.executor == "process" and self.count > 1:
            ctx = multiprocessing.get_context(_start_method(cfg))
            self._pool = ProcessPoolExecutor(
                self.count, mp_context=ctx, initializer=_init_worker, initargs=(self.hosts, cfg)
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._client is not None:
            self._client.close()

    def map(self, kind: str, items: Sequence[Any], progress: ProgressFn | None = None) -> list[Any]:
        """``planning.plan_case`` or ``planning.replan_case`` over ``items``, in their order;
        ``progress(done, total)`` after each chunk."""
        size = max(1, min(8, math.ceil(len(items) / (4 * self.count))))
        chunks = [list(items[i : i + size]) for i in range(0, len(items), size)]
        parts: list[list[Any]] = [[] for _ in chunks]
        done = 0
        for pos, part in self._run(kind, chunks):
            parts[pos] = part
            done += len(part)
            if progress:
                progress(done, len(items))
        return [x for part in parts for x in part]

    def _run(self, kind: str, chunks: list[list[Any]]) -> Iterable[tuple[int, list[Any]]]:
        if self._client is not None:
            from dask.distributed import as_completed

            futures = {
                self._client.submit(
                    _chunk_from_paths, kind, ch, self._paths, self.config, pure=False
                ): pos
                for pos, ch in enumerate(chunks)
            }
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        elif self._pool is not None:
            yield from enumerate(self._pool.map(_work_chunk, [kind] * len(chunks), chunks))
        else:
            from ppe.replay import planning  # noqa: F401  (load sklearn before limiting threads)

            with threadpool_limits(1):
                _CTX["hosts"], _CTX["config"] = self.hosts, self.config
                for pos, ch in enumerate(chunks):
                    yield pos, _work_chunk(kind, ch)


def _start_method(config: ReplayConfig) -> str | None:
    """The configured start method; by default "fork" unless other threads are running
    (a service's replay job): forking a threaded process can copy a lock some other
    thread holds and hang the worker, so then "forkserver"."""
    if config.start_method:
        return config.start_method
    methods = multiprocessing.get_all_start_methods()
    if threading.active_count() > 1 and "forkserver" in methods:
        return "forkserver"
    return None


# --------------------------------------------------------------------------- run


def make_banks(hosts: Sequence[HostData]) -> tuple[RateBank, RateBank | None]:
    """The simulator's CPU bank, and a bandwidth bank when links come from the traces."""
    bank = RateBank([(h.all_t, h.sim_a) for h in hosts])
    links = [(h.all_t, h.bw_v) for h in hosts if h.bw_v is not None]
    return bank, (RateBank(links) if len(links) == len(hosts) else None)


def run_specs(
    cases: Sequence[Case], hosts: Sequence[HostData], rows: Sequence[Sequence[int]], with_net: bool
) -> list[RunSpec]:
    return [
        RunSpec(
            hosts=list(c.hosts),
            rows=list(r),
            benchmark=[hosts[i].benchmark for i in c.hosts],
            start=c.start,
            net=list(c.hosts) if with_net else None,
        )
        for c, r in zip(cases, rows, strict=True)
    ]


def run_experiment(
    traces: Sequence[Trace], config: ReplayConfig, progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Replay ``traces`` as ``config`` says; returns the JSON report (see ``report``)."""
    from ppe.replay.adaptive import run_adaptive
    from ppe.replay.oracle import oracle
    from ppe.replay.report import build_report

    t0 = time.perf_counter()
    hosts = prepare_hosts(traces, config)
    cases = draw_cases(hosts, config)
    bank, net_bank = make_banks(hosts)
    sim_cfg = config.sim_config()
    actual: dict[str, np.ndarray] = {}
    with Workers(hosts, config) as workers:
        plans: list[CasePlan] = workers.map("plan", cases, progress)
        t_plan = time.perf_counter() - t0
        for s in config.replan:
            actual[replanned(s)] = run_adaptive(
                cases, hosts, plans, s, config, (bank, net_bank), workers.map
            )
    cands = [
        [rows_or_block(p.outcomes[s], c, config) for p, c in zip(plans, cases, strict=True)]
        for s in config.strategies
    ]
    for s, rows in zip(config.strategies, cands, strict=True):
        specs = run_specs(cases, hosts, rows, net_bank is not None)
        actual[s] = simulate(bank, specs, sim_cfg, net_bank).makespan
    base = run_specs(cases, hosts, [[0] * config.hosts for _ in cases], net_bank is not None)
    orc = oracle(bank, base, sim_cfg, config.n, net_bank, candidates=cands)
    timing = {
        "plan_s": t_plan,
        "total_s": time.perf_counter() - t0,
        "workers": worker_count(config),
        "schedules": len(cases) * len(config.reported()),
        "replans": sum(len(p.outcomes[replanned(s)].replans) for p in plans for s in config.replan),
    }
    return build_report(config, cases, hosts, plans, actual, orc, timing)


def rows_or_block(outcome: StrategyOutcome, case: Case, config: ReplayConfig) -> list[int]:
    """A failed plan is scored as equal strips (the user would have had to run something)."""
    if outcome.error is None:
        return outcome.rows
    k = len(case.hosts)
    base, extra = divmod(config.n, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def run_replay(
    config: ReplayConfig | Mapping[str, Any], progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Entry point for ``ppe replay`` and the service's replay jobs.

    ``config`` is a :class:`ReplayConfig` or its dict form (``traces``: files or
    directories); ``progress(done, total)`` is called as cases are planned.
    """
    cfg = config if isinstance(config, ReplayConfig) else ReplayConfig.from_dict(config)
    if not cfg.traces:
        raise ValueError("no traces given")
    return run_experiment(read_traces(cfg.traces), cfg, progress)
