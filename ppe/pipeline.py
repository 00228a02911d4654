"""Forecasts -> structural model -> scheduler: the one path both the service and replay take.

Pure glue, no I/O: the caller supplies forecasts through ``forecasts_for(horizon_s)``
(the service reads its store, replay reads the trace history strictly before the start
time), so what replay measures is exactly what the service would have answered.

Why a horizon loop: a run lasts a while, and what slows it is each host's availability
*averaged over the run*, not the next sample. The run's length depends on the schedule,
which depends on the forecasts — so :func:`plan` iterates horizon -> forecasts ->
schedule -> predicted makespan -> horizon until the horizon settles (docs/architecture.md), with
:func:`settle_horizon`.

Inputs: :class:`HistoryForecasts` is a ready ``forecasts_for`` over in-memory histories
(what replay uses, and what the service can use with its stored series); its CPU inputs
are conditioned on the present by analogues (``forecaster.analog``, where the reasons and
measurements are).

Contracts: a forecast source is anything that satisfies :class:`ForecastsFor` (replay's
:class:`HistoryForecasts`, the service's store-backed one); co-movement comes from a
:class:`DependenceFor`. The public names are in ``__all__``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

import forecaster
import scheduler
from forecaster import BANDWIDTH_ANALOG, CPU_ANALOG, AnalogOptions, Distribution
from forecaster.fleet import FleetSource, HostWindows
from ppe import core
from ppe.core import CompiledModel, HostInputs, Prediction, StochasticValue
from ppe.core.stochastic import Point

__all__ = [
    "DEFAULT_LINK",
    "AllocationError",
    "DependenceFor",
    "ForecastsFor",
    "HistoryForecasts",
    "HostForecasts",
    "HostMeta",
    "LinkDefaults",
    "PlanOptions",
    "PlanResult",
    "PredictResult",
    "Replan",
    "Round",
    "SeriesHistory",
    "Settled",
    "below_floor",
    "check_allocation",
    "dedicated_row_times",
    "floor_availability",
    "host_inputs",
    "plan",
    "predict_allocation",
    "replan",
    "resolve_model",
    "run_length",
    "settle_horizon",
    "total_rows",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class LinkDefaults:
    """What a link with no measurements is taken to deliver: bandwidth (bytes/s) and latency
    (s per message). The one home of these defaults: requests, replay and the simulator
    take theirs from :data:`DEFAULT_LINK`."""

    bandwidth: float = 1.25e7
    latency: float = 5e-4


DEFAULT_LINK = LinkDefaults()


@dataclass(frozen=True)
class HostMeta:
    """A host as the request names it: its dedicated speed, optional strip bounds and the
    machine-profile figures the model reads (``HostInputs.system``; pairs, so the host hashes
    into memo keys)."""

    name: str
    benchmark: float
    min_rows: int = 0
    max_rows: int | None = None
    system: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class HostForecasts:
    """What the forecaster says about one host for a given horizon.

    ``cpu`` is the available CPU fraction averaged over the horizon; ``bandwidth`` maps a
    peer name to the link's bandwidth (bytes/s) and ``default_bandwidth`` covers peers
    without measurements (a request's ``bandwidth``). ``details`` carries quality
    information (predictor, errors, sample count, age) for the caller to report.
    """

    cpu: StochasticValue
    bandwidth: Mapping[str, StochasticValue] = field(default_factory=dict)
    default_bandwidth: StochasticValue | None = None
    latency: float = 0.0
    multimode: bool = False
    age_s: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    #: ``cpu`` was below ``core.CPU_FLOOR`` and was raised to it (:func:`floor_availability`)
    floored: bool = False

    def link_to(self, peer: str) -> StochasticValue | None:
        """Bandwidth of the link to ``peer`` (falls back to the default)."""
        return self.bandwidth.get(peer, self.default_bandwidth)


class ForecastsFor(Protocol):
    """Where :func:`plan` gets its inputs: ``forecasts_for(horizon_s)`` maps every host name
    to its forecasts averaged over the next ``horizon_s`` seconds (``None``: one sample
    ahead). Implementations must look only at data before the time they predict from."""

    def __call__(self, horizon_s: float | None, /) -> Mapping[str, HostForecasts]: ...


class DependenceFor(Protocol):
    """``dependence_for(host names, horizon_s)``: correlation of the hosts' slowdowns over
    that horizon (``forecaster.co_movement``), or None to treat them as independent."""

    def __call__(self, names: Sequence[str], horizon_s: float | None, /) -> FloatArray | None: ...


@dataclass(frozen=True)
class SeriesHistory:
    """One host's measurements strictly before ``now``: CPU availability, optionally the
    bandwidth of its link (same timestamps or its own)."""

    timestamps: FloatArray
    cpu: FloatArray
    bw_timestamps: FloatArray | None = None
    bandwidth: FloatArray | None = None


class HistoryForecasts:
    """A ``forecasts_for(horizon)`` over in-memory histories — what the service and replay
    both hand to :func:`plan`. Memoised per horizon snapped to the forecaster's 5 % grid, so
    strategies whose run lengths are close share forecasts.

    ``method``: ``"analog"`` (default, conditioned on the present, see above) or
    ``"forecaster"`` (the forecaster's unconditional horizon distribution, kept for
    comparison). ``multimode`` is the forecaster's verdict on the recent values.
    """

    def __init__(
        self,
        histories: Mapping[str, SeriesHistory],
        now: float,
        *,
        bandwidth: float,
        latency: float,
        method: str = "analog",
        peer_bandwidth: Mapping[str, Mapping[str, Any]] | None = None,
        cpu_options: AnalogOptions | None = None,
        bandwidth_options: AnalogOptions | None = None,
    ) -> None:
        if method not in ("analog", "forecaster"):
            raise ValueError("method must be 'analog' or 'forecaster'")
        for name, h in histories.items():
            if h.timestamps.size and float(np.max(h.timestamps)) >= now:
                raise ValueError(f"history of {name!r} reaches {now}: only the past may be used")
        self.histories = dict(histories)
        self.now = now
        self.bandwidth = bandwidth
        self.latency = latency
        self.method = method
        self.peer_bandwidth = dict(peer_bandwidth or {})
        self.cpu_options = cpu_options or CPU_ANALOG
        self.bandwidth_options = bandwidth_options or BANDWIDTH_ANALOG
        self._cache: dict[float | None, dict[str, HostForecasts]] = {}
        self._modes: dict[str, tuple[bool, float]] = {}
        self._distributions: dict[tuple[str, str, float | None], Distribution] = {}
        self._dependence: dict[tuple[tuple[str, ...], float | None], FloatArray] = {}
        self._windows: dict[str, HostWindows] | None = None

    def __call__(self, horizon: float | None) -> dict[str, HostForecasts]:
        key = forecaster.snap_horizon(horizon)
        if key not in self._cache:
            self._cache[key] = {n: self._host(n, key) for n in self.histories}
        return self._cache[key]

    def dependence(self, names: Sequence[str], horizon: float | None) -> FloatArray:
        """How the hosts' CPU availability moves together over ``horizon`` (a ``DependenceFor``)."""
        key = (tuple(names), forecaster.snap_dependence_horizon(horizon))
        if key not in self._dependence:
            series = [(self.histories[n].timestamps, self.histories[n].cpu) for n in names]
            self._dependence[key] = forecaster.co_movement(
                series, self.now, key[1], lookback_s=self.cpu_options.lookback_s
            )
        return self._dependence[key]

    def mode(self, name: str) -> tuple[bool, float]:
        """(multi-mode?, age of the newest sample) from the forecaster's fit of recent values
        (the one-sample distribution)."""
        if name not in self._modes:
            h = self.histories[name]
            multimode = self._distribution(name, "cpu", None).multimode
            age = self.now - float(h.timestamps.max()) if h.timestamps.size else math.inf
            self._modes[name] = (bool(multimode), age)
        return self._modes[name]

    def _distribution(self, name: str, metric: str, horizon: float | None) -> Distribution:
        """The same distribution the service's forecasts use (forecaster.series_distribution),
        memoised; horizons up to one sample spacing all ask for the next sample's."""
        h = self.histories[name]
        if metric == "cpu":
            ts, xs, opts = h.timestamps, h.cpu, self.cpu_options
        else:
            assert h.bandwidth is not None
            ts = h.timestamps if h.bw_timestamps is None else h.bw_timestamps
            xs, opts = h.bandwidth, self.bandwidth_options
        keep = ts < self.now
        ts, xs = ts[keep], xs[keep]
        if horizon is not None and horizon <= forecaster.sample_spacing(ts):
            horizon = None
        key = (name, metric, horizon)
        if key not in self._distributions:
            self._distributions[key] = forecaster.series_distribution(
                ts,
                xs,
                now=self.now,
                horizon_s=horizon,
                analog=opts if self.method == "analog" else None,
                fleet=self._fleet(name) if metric == "cpu" else None,
            )
        return self._distributions[key]

    def _fleet(self, name: str) -> FleetSource:
        """The plan's other hosts, the fleet a settled-high host's fallback borrows from
        (``forecaster.fleet``), prepared once when first asked for."""

        def others() -> list[HostWindows]:
            if self._windows is None:
                value_range = self.cpu_options.value_range or (0.0, 1.0)
                self._windows = {
                    n: HostWindows.of(h.timestamps, h.cpu, value_range)
                    for n, h in self.histories.items()
                }
            return [w for n, w in self._windows.items() if n != name]

        return others

    def _host(self, name: str, horizon: float | None) -> HostForecasts:
        h = self.histories[name]
        d = self._distribution(name, "cpu", horizon)
        cpu = core.from_components(d.kind, d.components)
        bw: StochasticValue = Point(self.bandwidth)
        if h.bandwidth is not None:
            d = self._distribution(name, "bandwidth", horizon)
            bw = core.from_components(d.kind, d.components)
        multimode, age = self.mode(name)
        return HostForecasts(
            cpu=cpu,
            bandwidth=dict(self.peer_bandwidth.get(name, {})),
            default_bandwidth=bw,
            latency=self.latency,
            multimode=multimode,
            age_s=age,
            details={"method": self.method, "horizon_s": horizon, "samples": int(h.cpu.size)},
        )


@dataclass(frozen=True)
class PlanOptions:
    """Knobs of :func:`plan`; defaults are the service's."""

    confidence: float = 0.95
    k: float = 2.0
    quantile: float = 0.95
    schedule_samples: int = 4000
    predict_samples: int = 20000
    engine: str = "auto"
    seed: int = 0
    max_rounds: int = 8
    tolerance: float = 0.05
    initial_horizon: float | None = None
    #: the run re-plans this often (``scheduler.ReplanPolicy.every_s``): forecasts look that
    #: far ahead only, in one round, instead of settling on the whole run's length
    replan_every_s: float | None = None

    def settle(self, step: Callable[[float | None], tuple[float, P]]) -> Settled[P]:
        """The horizon loop these options ask for: one round at ``replan_every_s`` when the
        run re-plans (``initial_horizon`` and ``max_rounds`` then do not apply)."""
        if self.replan_every_s is not None:
            return settle_horizon(step, self.replan_every_s, self.tolerance, 1)
        return settle_horizon(step, self.initial_horizon, self.tolerance, self.max_rounds)


@dataclass(frozen=True)
class PredictResult:
    """Prediction of an allocation with everything that went into it, horizon settled.

    ``hosts`` is the chain order of the hosts given; ``rows`` has every host (0 when it got
    none); ``per_host`` and ``makespan`` are stochastic values; ``inputs`` are the forecasts
    of the last round, taken for ``horizon_s`` seconds.
    """

    hosts: list[str]
    rows: dict[str, int]
    per_host: dict[str, StochasticValue]
    makespan: StochasticValue
    inputs: dict[str, HostForecasts]
    horizon_s: float | None
    rounds: int
    converged: bool
    prediction: Prediction | None = None

    def allocation(self) -> list[int]:
        """Rows in chain order."""
        return [self.rows[h] for h in self.hosts]

    @property
    def warnings(self) -> list[str]:
        """What the caller should know the answer rests on: hosts planned at the CPU floor."""
        return [
            f"host {name!r}: CPU availability forecast below {core.CPU_FLOOR:g}; planned at "
            f"that floor (the host is nearly unusable)"
            for name in self.hosts
            if self.inputs[name].floored
        ]


@dataclass(frozen=True)
class PlanResult(PredictResult):
    """A schedule: the allocation a strategy chose (``rows``), predicted like any other."""

    strategy: str = ""


R = TypeVar("R", bound=PredictResult)


class AllocationError(ValueError):
    """An allocation that does not place the grid: no rows, negative rows, or a total that
    differs from the grid's (a prediction of part of the grid would answer for a smaller run)."""


def check_allocation(params: Mapping[str, Any], rows: Mapping[str, int]) -> None:
    """Every row of the grid placed, each once: ``rows`` add up to :func:`total_rows` (when
    ``params`` name the grid; a model without ``n`` or ``rows`` has nothing to check against)."""
    if any(r < 0 for r in rows.values()):
        raise AllocationError("rows must be non-negative")
    placed = sum(rows.values())
    if placed == 0:
        raise AllocationError("allocation gives no rows to any host")
    if "rows" in params or "n" in params:
        total = total_rows(params)
        if placed != total:
            raise AllocationError(
                f"allocation places {placed} rows but the grid has {total}: "
                "every row must go to a host"
            )


def below_floor(forecasts: HostForecasts) -> bool:
    """A CPU availability forecast under the floor the models apply (``core.CPU_FLOOR``)."""
    return not forecasts.cpu.mean() >= core.CPU_FLOOR


def floor_availability(forecasts: Mapping[str, HostForecasts]) -> dict[str, HostForecasts]:
    """Forecasts with every CPU availability below ``core.CPU_FLOOR`` raised to it (flagged
    ``floored``): a host measured at 0 is nearly unusable, not an error — replay floors its
    traces the same way — and the models need a positive availability to divide by."""
    return {
        name: replace(f, cpu=Point(core.CPU_FLOOR), floored=True) if below_floor(f) else f
        for name, f in forecasts.items()
    }


def total_rows(params: Mapping[str, Any]) -> int:
    """Rows to distribute: ``params["rows"]`` if given, else the grid side ``n``."""
    rows = params.get("rows", params.get("n"))
    if rows is None:
        raise ValueError("params need 'n' (grid side) or 'rows'")
    return int(rows)


def resolve_model(app: str | CompiledModel) -> CompiledModel:
    """A built-in model by name ("sor", "jacobi2d"), or a model object passed through."""
    return core.get_model(app)


def host_inputs(
    hosts: Sequence[HostMeta], forecasts: Mapping[str, HostForecasts]
) -> list[HostInputs]:
    """Model inputs in chain order: each host's CPU and its links to chain neighbours."""
    out = []
    for i, h in enumerate(hosts):
        try:
            f = forecasts[h.name]
        except KeyError:
            raise ValueError(f"no forecasts for host {h.name!r}") from None
        nxt = f.link_to(hosts[i + 1].name) if i + 1 < len(hosts) else None
        prv = f.link_to(hosts[i - 1].name) if i > 0 else None
        out.append(
            core.HostInputs(
                name=h.name,
                benchmark=float(h.benchmark),
                cpu=f.cpu,
                bw_next=nxt,
                bw_prev=prv,
                latency=float(f.latency),
                system=dict(h.system),
            )
        )
    return out


def dedicated_row_times(
    model: CompiledModel, params: Mapping[str, Any], inputs: list[HostInputs]
) -> list[float]:
    """Time per row on an idle host (the ``static`` strategy's speed measure)."""
    idle = [replace(x, cpu=Point(1.0)) for x in inputs]
    return [float(a.mean()) for a, _ in core.linear_host_models(model, params, idle)]


def _schedule(
    model: CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    inputs: list[HostInputs],
    strategy: str,
    opts: PlanOptions,
    dependence: FloatArray | None = None,
) -> dict[str, int]:
    """Rows per host; the chosen allocation is then predicted by the model, not the scheduler."""
    models = core.linear_host_models(model, params, inputs)
    dedicated: list[float | None] = [None] * len(hosts)
    if strategy == "static":
        dedicated = list(dedicated_row_times(model, params, inputs))
    stoch = [
        scheduler.StochasticHost(
            h.name, a, b, min_rows=h.min_rows, max_rows=h.max_rows, a_dedicated=ded
        )
        for h, (a, b), ded in zip(hosts, models, dedicated, strict=True)
    ]
    return scheduler.schedule_rows(
        stoch,
        total_rows(params),
        strategy,
        k=opts.k,
        quantile=opts.quantile,
        samples=opts.schedule_samples,
        seed=opts.seed,
        dependence=dependence,
    )


def _predict(
    model: CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts: Mapping[str, HostForecasts],
    rows: Mapping[str, int],
    opts: PlanOptions,
) -> Round:
    """Predict on the chain of hosts that got rows (a dropped host has no neighbours)."""
    active = [h for h in hosts if rows[h.name] > 0]
    if not active:
        raise AllocationError("allocation gives no rows to any host")
    inputs = host_inputs(active, forecasts)
    pred = core.predict(
        model,
        dict(params),
        inputs,
        [int(rows[h.name]) for h in active],
        engine=opts.engine,
        samples=opts.predict_samples,
        seed=opts.seed,
    )
    per_host: dict[str, StochasticValue] = {h.name: Point(0.0) for h in hosts}
    per_host.update({h.name: t for h, t in zip(active, pred.per_host, strict=True)})
    return Round(dict(forecasts), dict(rows), pred, per_host)


@dataclass(frozen=True)
class Round:
    """What one round of the horizon loop produced, for :func:`settle_horizon` to keep or
    drop: the forecasts it used, the allocation and its prediction (``per_host`` covers
    every host, 0 for those without rows)."""

    forecasts: dict[str, HostForecasts]
    rows: dict[str, int]
    prediction: Prediction
    per_host: dict[str, StochasticValue]


P = TypeVar("P")


@dataclass(frozen=True)
class Settled(Generic[P]):
    """Outcome of :func:`settle_horizon`: the chosen round's value and horizon."""

    value: P
    horizon_s: float | None
    makespan: float
    rounds: int
    converged: bool
    history: tuple[tuple[float | None, float], ...]


def run_length(makespan: StochasticValue) -> float:
    """The horizon a predicted makespan asks for: its median, the length of a typical run.

    Not its mean: the mean is pulled up by the rare runs in which a host stalls, and those
    stalls are already in each input (the availability a host *effectively* delivers, first
    passage); measuring the inputs over the mean's longer window counted that risk again, so
    the loop drifted to long horizons where risky hosts look worse, get fewer rows, and the
    run gets longer still. Replay: seed 0, `expected`, a case whose hosts all stayed idle
    settled at 4 900 s with 5 of 8 hosts nearly unused (actual 2.5x the oracle).
    """
    return float(makespan.median())


def settle_horizon(
    step: Callable[[float | None], tuple[float, P]],
    start: float | None = None,
    tol: float = 0.05,
    max_iter: int = 8,
) -> Settled[P]:
    """Fixed point ``T = f(H)`` of horizon -> predicted run length (:func:`run_length`), robustly.

    ``step(H)`` returns ``(f(H), payload)``. Plain iteration ``H <- f(H)`` oscillates when
    f falls steeply with H — a host saturated now looks far slower over a short horizon
    than over a long one — and replay saw it stop after its last round with a horizon 30x
    off the prediction. So: plain steps until the fixed point is bracketed (one H with
    ``f(H) > H``, one with ``f(H) < H``), then bisection in log space. Returns the round
    whose prediction is closest to its own horizon.
    """
    if not tol > 0 or max_iter < 1:
        raise ValueError("tol must be > 0 and max_iter >= 1")
    lo: float | None = None  # f(lo) > lo: horizon too short
    hi: float | None = None  # f(hi) < hi: horizon too long
    horizon = start
    history: list[tuple[float | None, float]] = []
    best: tuple[float, int, P] | None = None
    for k in range(1, max_iter + 1):
        length, payload = step(horizon)
        if not (math.isfinite(length) and length > 0):
            raise ValueError(f"predicted makespan must be positive and finite, got {length!r}")
        history.append((horizon, length))
        gap = math.inf if horizon is None else abs(math.log(length / horizon))
        if best is None or gap <= best[0]:
            best = (gap, k, payload)
        if horizon is not None and abs(length - horizon) <= tol * horizon:
            break
        if horizon is not None:
            if length > horizon:
                lo = horizon if lo is None else max(lo, horizon)
            else:
                hi = horizon if hi is None else min(hi, horizon)
        horizon = math.sqrt(lo * hi) if lo is not None and hi is not None else length
    assert best is not None
    _, k, payload = best
    h, length = history[k - 1]
    converged = h is not None and abs(length - h) <= tol * h
    return Settled(payload, h, length, len(history), converged, tuple(history))


def plan(
    app: str | CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts_for: ForecastsFor,
    strategy: str,
    options: PlanOptions | None = None,
    dependence_for: DependenceFor | None = None,
) -> PlanResult:
    """Schedule ``app`` over ``hosts`` (chain order) with ``strategy``, horizon settled.

    Each round asks ``forecasts_for(horizon)`` (``None`` first: one sample ahead,
    unless ``options.initial_horizon``), balances, predicts the chosen allocation, and
    proposes the next horizon from the predicted run length (:func:`run_length`,
    :func:`settle_horizon`); it stops when prediction and horizon agree within
    ``options.tolerance`` or after ``options.max_rounds`` rounds, returning the most
    self-consistent round.
    ``dependence_for`` lets the Monte Carlo strategies sample hosts jointly (hosts that slow
    down together); without it they are independent.
    """
    opts = options or PlanOptions()
    if not hosts:
        raise ValueError("no hosts to schedule on")
    model = resolve_model(app)

    def step(horizon: float | None) -> tuple[float, Round]:
        forecasts = floor_availability(forecasts_for(horizon))
        inputs = host_inputs(hosts, forecasts)
        joint = strategy in scheduler.MONTE_CARLO_STRATEGIES
        names = [h.name for h in hosts]
        dep = dependence_for(names, horizon) if dependence_for is not None and joint else None
        chosen = _schedule(model, params, hosts, inputs, strategy, opts, dep)
        rows = {h.name: int(chosen.get(h.name, 0)) for h in hosts}
        done = _predict(model, params, hosts, forecasts, rows, opts)
        return run_length(done.prediction.makespan), done

    return _settled(PlanResult, hosts, opts.settle(step), strategy=strategy)


def predict_allocation(
    app: str | CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts_for: ForecastsFor,
    rows: Mapping[str, int],
    options: PlanOptions | None = None,
) -> PredictResult:
    """Predict a given allocation, with the same horizon loop as :func:`plan`."""
    opts = options or PlanOptions()
    model = resolve_model(app)
    missing = [h.name for h in hosts if h.name not in rows]
    if missing:
        raise AllocationError(f"allocation has no rows for {missing}")
    clean = {h.name: int(rows[h.name]) for h in hosts}
    check_allocation(params, clean)

    def step(horizon: float | None) -> tuple[float, Round]:
        forecasts = floor_availability(forecasts_for(horizon))
        done = _predict(model, params, hosts, forecasts, clean, opts)
        return run_length(done.prediction.makespan), done

    return _settled(PredictResult, hosts, opts.settle(step))


@dataclass(frozen=True)
class Replan:
    """A running application's new schedule, its current one re-predicted from the same
    forecasts, the time to move strips, and whether moving pays (``policy.worth_moving``)."""

    plan: PlanResult
    keep: PredictResult
    migration_s: float
    move: bool


def replan(
    app: str | CompiledModel,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts_for: ForecastsFor,
    strategy: str,
    current: Mapping[str, int],
    policy: scheduler.ReplanPolicy,
    options: PlanOptions | None = None,
    dependence_for: DependenceFor | None = None,
    *,
    row_bytes: float,
    bandwidth: float,
    latency: float = 0.0,
) -> Replan:
    """Schedule the rest of a running application (``params`` give the iterations left)
    and compare with keeping ``current``; both forecast ``policy.every_s`` ahead, as the
    run will check again by then. ``row_bytes``/``bandwidth``/``latency`` price the move
    (``scheduler.migration_seconds``)."""
    opts = replace(options or PlanOptions(), replan_every_s=policy.every_s)
    new = plan(app, params, hosts, forecasts_for, strategy, opts, dependence_for)
    keep = predict_allocation(app, params, hosts, forecasts_for, current, opts)
    migration = scheduler.migration_seconds(
        keep.allocation(), new.allocation(), row_bytes, bandwidth, latency
    )
    move = policy.worth_moving(float(keep.makespan.mean()), float(new.makespan.mean()), migration)
    return Replan(new, keep, migration, move)


def _settled(cls: type[R], hosts: Sequence[HostMeta], res: Settled[Round], **extra: Any) -> R:
    """The result of the round :func:`settle_horizon` chose."""
    chosen = res.value
    return cls(
        hosts=[h.name for h in hosts],
        rows=chosen.rows,
        per_host=chosen.per_host,
        makespan=chosen.prediction.makespan,
        inputs=chosen.forecasts,
        horizon_s=res.horizon_s,
        rounds=res.rounds,
        converged=res.converged,
        prediction=chosen.prediction,
        **extra,
    )
