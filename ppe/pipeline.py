"""Forecasts -> structural model -> scheduler: the one path both the service and replay take.

Pure glue, no I/O: the caller supplies forecasts through ``forecasts_for(horizon_s)``
(the service reads its store, replay reads the trace history strictly before the start
time), so what replay measures is exactly what the service would have answered.

Why a horizon loop: a run lasts a while, and what slows it is each host's availability
*averaged over the run*, not the next sample. The run's length depends on the schedule,
which depends on the forecasts — so :func:`plan` iterates horizon -> forecasts ->
schedule -> predicted makespan -> horizon until the horizon settles (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import scheduler
from ppe import core
from ppe.core.stochastic import Point


class Stochastic(Protocol):
    """The scipy.stats-shaped protocol of INTERFACES.md (what pipeline relies on)."""

    def mean(self) -> float: ...

    def std(self) -> float: ...

    def interval(self, confidence: float) -> tuple[float, float]: ...


@dataclass(frozen=True)
class HostMeta:
    """A host as the request names it: its dedicated speed and optional strip bounds."""

    name: str
    benchmark: float
    min_rows: int = 0
    max_rows: int | None = None


@dataclass(frozen=True)
class HostForecasts:
    """What the forecaster says about one host for a given horizon.

    ``cpu`` is the available CPU fraction averaged over the horizon; ``bandwidth`` maps a
    peer name to the link's bandwidth (bytes/s) and ``default_bandwidth`` covers peers
    without measurements (a request's ``bandwidth``). ``details`` carries quality
    information (predictor, errors, sample count, age) for the caller to report.
    """

    cpu: Any
    bandwidth: Mapping[str, Any] = field(default_factory=dict)
    default_bandwidth: Any = None
    latency: float = 0.0
    multimode: bool = False
    age_s: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def link_to(self, peer: str) -> Any:
        """Bandwidth of the link to ``peer`` (falls back to the default)."""
        return self.bandwidth.get(peer, self.default_bandwidth)


ForecastsFor = Callable[[float | None], Mapping[str, HostForecasts]]


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
    max_rounds: int = 5
    tolerance: float = 0.05
    initial_horizon: float | None = None


@dataclass(frozen=True)
class PlanResult:
    """A schedule with its prediction and everything that went into it.

    ``hosts`` is the chain order of the hosts given; ``rows`` has every host (0 when the
    scheduler dropped it); ``per_host`` and ``makespan`` are stochastic values;
    ``inputs`` are the forecasts of the last round, taken for ``horizon_s`` seconds.
    """

    strategy: str
    hosts: list[str]
    rows: dict[str, int]
    per_host: dict[str, Any]
    makespan: Any
    inputs: dict[str, HostForecasts]
    horizon_s: float | None
    rounds: int
    converged: bool
    schedule: Any = None
    prediction: Any = None

    def allocation(self) -> list[int]:
        """Rows in chain order."""
        return [self.rows[h] for h in self.hosts]


@dataclass(frozen=True)
class PredictResult:
    """Prediction of a given allocation (``POST /predictions``), horizon settled."""

    hosts: list[str]
    rows: dict[str, int]
    per_host: dict[str, Any]
    makespan: Any
    inputs: dict[str, HostForecasts]
    horizon_s: float | None
    rounds: int
    converged: bool
    prediction: Any = None


def total_rows(params: Mapping[str, Any]) -> int:
    """Rows to distribute: ``params["rows"]`` if given, else the grid side ``n``."""
    rows = params.get("rows", params.get("n"))
    if rows is None:
        raise ValueError("params need 'n' (grid side) or 'rows'")
    return int(rows)


def resolve_model(app: Any) -> Any:
    """A built-in model by name ("sor", "jacobi2d"), or a model object passed through."""
    return core.get_model(app)


def host_inputs(
    hosts: Sequence[HostMeta], forecasts: Mapping[str, HostForecasts]
) -> list[Any]:
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
            )
        )
    return out


def _dedicated_row_times(model: Any, params: Mapping[str, Any], inputs: list[Any]) -> list[float]:
    """Time per row on an idle host (the ``static`` strategy's speed measure)."""
    idle = [_with_cpu(x, Point(1.0)) for x in inputs]
    return [float(a.mean()) for a, _ in core.linear_host_models(model, params, idle)]


def _with_cpu(inp: Any, cpu: Any) -> Any:
    return core.HostInputs(
        name=inp.name,
        benchmark=inp.benchmark,
        cpu=cpu,
        bw_next=inp.bw_next,
        bw_prev=inp.bw_prev,
        latency=inp.latency,
    )


def _schedule(
    model: Any,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    inputs: list[Any],
    strategy: str,
    opts: PlanOptions,
) -> Any:
    models = core.linear_host_models(model, params, inputs)
    dedicated: list[float | None] = [None] * len(hosts)
    if strategy == "static":
        dedicated = list(_dedicated_row_times(model, params, inputs))
    stoch = [
        scheduler.StochasticHost(
            h.name, a, b, min_rows=h.min_rows, max_rows=h.max_rows, a_dedicated=ded
        )
        for h, (a, b), ded in zip(hosts, models, dedicated, strict=True)
    ]
    return scheduler.schedule(
        stoch,
        total_rows(params),
        strategy,
        k=opts.k,
        quantile=opts.quantile,
        samples=opts.schedule_samples,
        seed=opts.seed,
    )


def _predict(
    model: Any,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts: Mapping[str, HostForecasts],
    rows: Mapping[str, int],
    opts: PlanOptions,
) -> tuple[Any, dict[str, Any]]:
    """Predict on the chain of hosts that got rows (a dropped host has no neighbours)."""
    active = [h for h in hosts if rows[h.name] > 0]
    if not active:
        raise ValueError("allocation gives no rows to any host")
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
    per_host: dict[str, Any] = {h.name: Point(0.0) for h in hosts}
    per_host.update({h.name: t for h, t in zip(active, pred.per_host, strict=True)})
    return pred, per_host


def plan(
    app: Any,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts_for: ForecastsFor,
    strategy: str,
    options: PlanOptions | None = None,
) -> PlanResult:
    """Schedule ``app`` over ``hosts`` (chain order) with ``strategy``, horizon settled.

    Each round asks ``forecasts_for(horizon)`` (``None`` first: the forecaster's own
    default, unless ``options.initial_horizon``), balances, predicts the chosen
    allocation, and uses the predicted mean makespan as the next horizon; it stops when
    the horizon moves by less than ``options.tolerance`` (relative) or after
    ``options.max_rounds`` rounds, returning the last round.
    """
    opts = options or PlanOptions()
    if not hosts:
        raise ValueError("no hosts to schedule on")
    model = resolve_model(app)
    last: dict[str, Any] = {}

    def predict_fn(forecasts: Mapping[str, HostForecasts]) -> Any:
        inputs = host_inputs(hosts, forecasts)
        sched = _schedule(model, params, hosts, inputs, strategy, opts)
        rows = {h.name: int(sched.rows.get(h.name, 0)) for h in hosts}
        pred, per_host = _predict(model, params, hosts, forecasts, rows, opts)
        last.update(schedule=sched, rows=rows, per_host=per_host)
        return pred

    res = core.iterate_horizon(
        predict_fn,
        lambda h: dict(forecasts_for(h)),
        start_horizon=opts.initial_horizon,
        tol=opts.tolerance,
        max_iter=opts.max_rounds,
    )
    return PlanResult(
        strategy=strategy,
        hosts=[h.name for h in hosts],
        rows=last["rows"],
        per_host=last["per_host"],
        makespan=res.prediction.makespan,
        inputs=res.inputs,
        horizon_s=res.horizon_s,
        rounds=res.iterations,
        converged=res.converged,
        schedule=last["schedule"],
        prediction=res.prediction,
    )


def predict_allocation(
    app: Any,
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
        raise ValueError(f"allocation has no rows for {missing}")
    clean = {h.name: int(rows[h.name]) for h in hosts}
    if any(r < 0 for r in clean.values()):
        raise ValueError("rows must be non-negative")
    per_host_box: dict[str, Any] = {}

    def predict_fn(forecasts: Mapping[str, HostForecasts]) -> Any:
        pred, per_host = _predict(model, params, hosts, forecasts, clean, opts)
        per_host_box.update(per_host)
        return pred

    res = core.iterate_horizon(
        predict_fn,
        lambda h: dict(forecasts_for(h)),
        start_horizon=opts.initial_horizon,
        tol=opts.tolerance,
        max_iter=opts.max_rounds,
    )
    return PredictResult(
        hosts=[h.name for h in hosts],
        rows=clean,
        per_host=dict(per_host_box),
        makespan=res.prediction.makespan,
        inputs=res.inputs,
        horizon_s=res.horizon_s,
        rounds=res.iterations,
        converged=res.converged,
        prediction=res.prediction,
    )
