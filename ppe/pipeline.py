"""Forecasts -> structural model -> scheduler: the one path both the service and replay take.

Pure glue, no I/O: the caller supplies forecasts through ``forecasts_for(horizon_s)``
(the service reads its store, replay reads the trace history strictly before the start
time), so what replay measures is exactly what the service would have answered.

Why a horizon loop: a run lasts a while, and what slows it is each host's availability
*averaged over the run*, not the next sample. The run's length depends on the schedule,
which depends on the forecasts — so :func:`plan` iterates horizon -> forecasts ->
schedule -> predicted makespan -> horizon until the horizon settles (DESIGN.md), with
:func:`settle_horizon`.

Inputs: :class:`HistoryForecasts` is a ready ``forecasts_for`` over in-memory histories
(what replay uses, and what the service can use with its stored series); its CPU inputs
are conditioned on the present by analogues (:func:`analog_horizon`, reasons and
measurements in the section comment below).

Public API: ``HostMeta``, ``HostForecasts``, ``PlanOptions``, ``plan``, ``PlanResult``,
``predict_allocation``, ``PredictResult``, ``settle_horizon``, ``host_inputs``,
``total_rows``, ``HistoryForecasts``, ``SeriesHistory``, ``analog_horizon``,
``analog_values``, ``kernel_mixture``, ``AnalogOptions``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

import forecaster
import scheduler
from forecaster.horizon import DEFAULT_LOOKBACK_S
from ppe import core
from ppe.core.stochastic import Mixture, Point

FloatArray = NDArray[np.float64]


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


# --------------------------------------------------------------------------- inputs
#
# How a host's history becomes the stochastic input of a run that lasts ``horizon_s``.
# Replay on the Bitbrains traces showed (see ppe/replay/README.md) that block means of the
# whole recent history (the forecaster's unconditional horizon distribution) ignore the
# state the host is in *now*: load epochs last hours, so a host idle now is likely idle
# for the next hour and a saturated one likely stays saturated. The per-host mean error
# of the run-average availability was 0.12 unconditional vs 0.04 conditional.
# So the pipeline conditions on the present, by analogues: among all past windows of the
# run's length, take those whose preceding state (mean of the last ``state_samples``
# values) is nearest the current one, and use the distribution of their means, smoothed
# by a Gaussian kernel (Silverman's bandwidth, with a floor) so a run of identical
# analogues still leaves room for drift; 10 % of the weight goes to *all* past starts
# (whatever the state), because epochs also change in ways the nearest analogues do not
# show. The quantity is the availability a run effectively gets: work done / time to do
# it (first passage), which a window mean understates when a slow epoch outlasts the
# window. On the shared traces the per-host lower 1 % quantile was then crossed by 1.0 %
# of actual runs (0.6 % at 0.3 %), vs 1.5 % (0.9 %) without the blend and 0.12 mean
# error for the unconditional block means.


@dataclass(frozen=True)
class AnalogOptions:
    """Knobs of :func:`analog_horizon` (defaults chosen on the shared traces, see above)."""

    lookback_s: float = 14 * 86400.0
    neighbours: float = 0.1  # share of past windows used as analogues
    min_neighbours: int = 40
    state_samples: int = 2
    floor_std: float = 0.005  # absolute kernel floor (availability units)
    floor_rel: float = 0.0  # kernel floor relative to the mean (for bandwidths)
    components: int = 32  # analogues are summarised into this many mixture components
    first_passage: bool = True  # effective availability to finish the work, not window mean
    unconditional_weight: float = 0.1  # share of all past starts blended in (regime changes)


CPU_ANALOG = AnalogOptions()
BANDWIDTH_ANALOG = AnalogOptions(floor_std=0.0, floor_rel=0.005)


def _spacing(ts: FloatArray) -> float:
    return float(np.median(np.diff(ts))) if ts.size > 1 else 1.0


def analog_values(
    timestamps: FloatArray, values: FloatArray, now: float, horizon_s: float | None,
    opts: AnalogOptions = CPU_ANALOG, conditional: bool = True,
) -> FloatArray | None:
    """Run-average availability of the past starts whose preceding state is nearest now's.

    With ``opts.first_passage`` the effective availability of getting a run's work done
    (see :func:`_first_passage`), otherwise the plain mean over the window. Uses samples
    with ``now - lookback_s <= t < now`` only; windows are counted in samples
    (``horizon_s`` / median spacing). ``conditional=False`` gives every past start (the
    unconditional distribution). None when the history is too short.
    """
    ts = np.asarray(timestamps, dtype=np.float64)
    xs = np.asarray(values, dtype=np.float64)
    keep = (ts < now) & (ts >= now - opts.lookback_s) & np.isfinite(xs)
    ts, xs = ts[keep], xs[keep]
    width = 1 if horizon_s is None else max(1, int(round(horizon_s / _spacing(ts))))
    k0 = opts.state_samples
    if xs.size < k0 + width + opts.min_neighbours // 4:
        return None
    csum = np.concatenate(([0.0], np.cumsum(xs)))
    last = xs.size if opts.first_passage else xs.size - width + 1
    j = np.arange(k0, last)  # window from j on, state [j - k0, j)
    state = (csum[j] - csum[j - k0]) / k0
    now_state = float(xs[-k0:].mean())
    k = min(j.size, max(opts.min_neighbours, int(opts.neighbours * j.size)))
    if conditional:
        nearest = j[np.argpartition(np.abs(state - now_state), k - 1)[:k]]
    else:
        nearest = j
    if opts.first_passage:
        return _first_passage(csum, xs, nearest, width)
    out: FloatArray = (csum[nearest + width] - csum[nearest]) / width
    return out


def _first_passage(csum: FloatArray, xs: FloatArray, starts: NDArray[np.int64],
                   width: int) -> FloatArray:
    """Availability each analogue *effectively* delivered to a run of ``width`` samples.

    The run's work is what the host typically does in ``width`` samples; the analogue's
    time to get it done (its first passage) may be far longer than ``width`` when a slow
    epoch starts and persists — which is what stalls a real run, and what a window mean
    caps. Past the end of the history the newest value is assumed to persist.
    """
    n = xs.size
    full = starts + width <= n
    block = (csum[np.minimum(starts + width, n)] - csum[starts]) / width
    typical = float(np.median(block[full])) if full.any() else float(xs[-1])
    work = width * typical
    target = csum[starts] + work
    inside = target <= csum[n]
    pos = np.clip(np.searchsorted(csum, target, side="left"), 1, n)
    t_in = (pos - 1) + (target - csum[pos - 1]) / np.maximum(xs[pos - 1], 1e-12)
    t_out = n + (target - csum[n]) / max(float(xs[-1]), 1e-12)
    took = np.where(inside, t_in, t_out) - starts
    out: FloatArray = work / np.maximum(took, 1e-12)
    return out


def _kernel_components(
    sample: FloatArray, opts: AnalogOptions, parts: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A Gaussian-kernel density of ``sample`` as ``parts`` components (weights sum to 1).

    Sorted values are cut into equal-count groups; each group becomes one component
    with the group's mean and its spread plus the kernel's (Silverman's bandwidth, at
    least the floor), so mean and variance match the kernel density's.
    """
    x = np.sort(np.asarray(sample, dtype=np.float64))
    n = x.size
    sd = float(x.std())
    q75, q25 = np.percentile(x, [75, 25])
    scale = min(sd, (q75 - q25) / 1.34) if q75 > q25 else sd
    h = max(0.9 * scale * n ** -0.2, opts.floor_std, opts.floor_rel * abs(float(x.mean())))
    groups = np.array_split(x, min(parts, n))
    weights = np.array([g.size for g in groups], dtype=np.float64) / n
    means = np.array([g.mean() for g in groups])
    stds = np.sqrt(np.array([g.var() for g in groups]) + h * h)
    return weights, means, stds


def kernel_mixture(
    sample: FloatArray, opts: AnalogOptions = CPU_ANALOG, background: FloatArray | None = None
) -> Any:
    """Kernel density of the analogues, blended with ``background`` (all past starts) at
    weight ``opts.unconditional_weight``; a point when nothing varies."""
    w, m, sd = _kernel_components(sample, opts, opts.components)
    if background is not None and background.size and opts.unconditional_weight > 0:
        bw, bm, bsd = _kernel_components(background, opts, max(4, opts.components // 2))
        e = opts.unconditional_weight
        w, m, sd = (np.concatenate(((1 - e) * w, e * bw)), np.concatenate((m, bm)),
                    np.concatenate((sd, bsd)))
    if not np.any(sd > 0) and np.ptp(m) == 0:
        return Point(float(m[0]))
    return Mixture(w / w.sum(), m, sd)


def analog_horizon(
    timestamps: FloatArray, values: FloatArray, now: float, horizon_s: float | None,
    opts: AnalogOptions = CPU_ANALOG,
) -> Any:
    """The run-average distribution conditioned on the present (see the section comment).

    Falls back to the forecaster's own horizon distribution when history is short.
    """
    sample = analog_values(timestamps, values, now, horizon_s, opts)
    if sample is not None:
        background = None
        if opts.unconditional_weight > 0:
            background = analog_values(timestamps, values, now, horizon_s, opts, conditional=False)
        return kernel_mixture(sample, opts, background)
    fc = forecaster.forecast_series(timestamps, values, now=now, horizon_s=horizon_s)
    dist = fc.distribution
    return core.from_components(dist.kind, dist.components)


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
    both hand to :func:`plan`. Memoised per horizon on a 5 % geometric grid, so strategies
    whose run lengths are close share forecasts.

    ``method``: ``"analog"`` (default, conditioned on the present, see above) or
    ``"forecaster"`` (the forecaster's unconditional horizon distribution, kept for
    comparison). ``multimode`` is the forecaster's verdict on the recent values.
    """

    GRID = 0.05

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

    @classmethod
    def bucket(cls, horizon: float | None) -> float | None:
        if horizon is None:
            return None
        step = math.log1p(cls.GRID)
        return float(math.exp(round(math.log(max(horizon, 1.0)) / step) * step))

    def __call__(self, horizon: float | None) -> dict[str, HostForecasts]:
        key = self.bucket(horizon)
        if key not in self._cache:
            self._cache[key] = {n: self._host(n, key) for n in self.histories}
        return self._cache[key]

    def mode(self, name: str) -> tuple[bool, float]:
        """(multi-mode?, age of the newest sample) from the forecaster's fit of recent values."""
        if name not in self._modes:
            h = self.histories[name]
            recent = h.cpu[h.timestamps >= self.now - DEFAULT_LOOKBACK_S]
            dist = forecaster.fit_distribution(recent if recent.size else h.cpu[-1:])
            age = self.now - float(h.timestamps.max()) if h.timestamps.size else math.inf
            self._modes[name] = (bool(dist.multimode), age)
        return self._modes[name]

    def _series(self, ts: FloatArray, xs: FloatArray, horizon: float | None,
                opts: AnalogOptions) -> Any:
        if self.method == "analog":
            return analog_horizon(ts, xs, self.now, horizon, opts)
        fc = forecaster.forecast_series(ts, xs, now=self.now, horizon_s=horizon)
        return core.from_components(fc.distribution.kind, fc.distribution.components)

    def _host(self, name: str, horizon: float | None) -> HostForecasts:
        h = self.histories[name]
        cpu = self._series(h.timestamps, h.cpu, horizon, self.cpu_options)
        bw: Any = Point(self.bandwidth)
        if h.bandwidth is not None:
            bts = h.timestamps if h.bw_timestamps is None else h.bw_timestamps
            bw = self._series(bts, h.bandwidth, horizon, self.bandwidth_options)
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


@dataclass(frozen=True)
class Settled:
    """Outcome of :func:`settle_horizon`: the chosen round's value and horizon."""

    value: Any
    horizon_s: float | None
    makespan: float
    rounds: int
    converged: bool
    history: tuple[tuple[float | None, float], ...]


def settle_horizon(
    step: Callable[[float | None], tuple[float, Any]],
    start: float | None = None,
    tol: float = 0.05,
    max_iter: int = 8,
) -> Settled:
    """Fixed point ``T = f(H)`` of horizon -> predicted mean makespan, robustly.

    ``step(H)`` returns ``(f(H), payload)``. Plain iteration ``H <- f(H)`` (what
    ``ppe.core.iterate_horizon`` does) oscillates when f falls steeply with H — a host
    saturated now looks far slower over a short horizon than over a long one — and
    replay saw it stop after its last round with a horizon 30x off the prediction. So:
    plain steps until the fixed point is bracketed (one H with ``f(H) > H``, one with
    ``f(H) < H``), then bisection in log space. Returns the round whose prediction is
    closest to its own horizon.
    """
    if not tol > 0 or max_iter < 1:
        raise ValueError("tol must be > 0 and max_iter >= 1")
    lo: float | None = None  # f(lo) > lo: horizon too short
    hi: float | None = None  # f(hi) < hi: horizon too long
    horizon = start
    history: list[tuple[float | None, float]] = []
    best: tuple[float, int, Any] | None = None
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
    app: Any,
    params: Mapping[str, Any],
    hosts: Sequence[HostMeta],
    forecasts_for: ForecastsFor,
    strategy: str,
    options: PlanOptions | None = None,
) -> PlanResult:
    """Schedule ``app`` over ``hosts`` (chain order) with ``strategy``, horizon settled.

    Each round asks ``forecasts_for(horizon)`` (``None`` first: one sample ahead,
    unless ``options.initial_horizon``), balances, predicts the chosen allocation, and
    proposes the next horizon from the predicted mean makespan (:func:`settle_horizon`);
    it stops when prediction and horizon agree within ``options.tolerance`` or after
    ``options.max_rounds`` rounds, returning the most self-consistent round.
    """
    opts = options or PlanOptions()
    if not hosts:
        raise ValueError("no hosts to schedule on")
    model = resolve_model(app)
    def step(horizon: float | None) -> tuple[float, tuple[Any, ...]]:
        forecasts = dict(forecasts_for(horizon))
        inputs = host_inputs(hosts, forecasts)
        sched = _schedule(model, params, hosts, inputs, strategy, opts)
        rows = {h.name: int(sched.rows.get(h.name, 0)) for h in hosts}
        pred, per_host = _predict(model, params, hosts, forecasts, rows, opts)
        return float(pred.makespan.mean()), (forecasts, sched, rows, pred, per_host)

    res = settle_horizon(step, opts.initial_horizon, opts.tolerance, opts.max_rounds)
    forecasts, sched, rows, pred, per_host = res.value
    return PlanResult(
        strategy=strategy,
        hosts=[h.name for h in hosts],
        rows=rows,
        per_host=per_host,
        makespan=pred.makespan,
        inputs=forecasts,
        horizon_s=res.horizon_s,
        rounds=res.rounds,
        converged=res.converged,
        schedule=sched,
        prediction=pred,
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
    def step(horizon: float | None) -> tuple[float, tuple[Any, ...]]:
        forecasts = dict(forecasts_for(horizon))
        pred, per_host = _predict(model, params, hosts, forecasts, clean, opts)
        return float(pred.makespan.mean()), (forecasts, pred, per_host)

    res = settle_horizon(step, opts.initial_horizon, opts.tolerance, opts.max_rounds)
    forecasts, pred, per_host = res.value
    return PredictResult(
        hosts=[h.name for h in hosts],
        rows=clean,
        per_host=per_host,
        makespan=pred.makespan,
        inputs=forecasts,
        horizon_s=res.horizon_s,
        rounds=res.rounds,
        converged=res.converged,
        prediction=pred,
    )
