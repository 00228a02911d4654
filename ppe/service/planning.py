"""Service side of the pipeline: hosts and forecasts read from the store for `ppe.pipeline`.

`ppe.pipeline` is pure and takes a `forecasts_for(horizon)` callable; this module builds that
callable from the forecast cache (or, with `at`, from data strictly before that time), so the
service and the replay run the very same planning code. :func:`schedule` and :func:`predict`
are what the HTTP routes call: a request in, the pipeline's answer out, domain errors raised
for the routes to map to HTTP.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from cachetools import LRUCache
from sqlalchemy import select
from sqlalchemy.orm import Session

import scheduler
from forecaster import snap_dependence_horizon
from ppe import core
from ppe.core import CompiledModel
from ppe.core.stochastic import Point, StochasticValue
from ppe.pipeline import (
    AllocationError,
    HostForecasts,
    HostMeta,
    PlanOptions,
    PredictResult,
    below_floor,
    check_allocation,
    host_inputs,
    plan,
    predict_allocation,
    replan,
    total_rows,
)
from ppe.pmac import Signature, SignatureError, parse_signature, profile_parameters
from ppe.service import models_registry
from ppe.service.calibration import (
    DEFAULT_MIN_RUNS,
    HostCalibration,
    LinkCalibration,
    host_calibration,
    link_calibrations,
    link_note,
    note,
)
from ppe.service.empirical import FitCache
from ppe.service.forecasts import ForecastCache, age_at
from ppe.service.plan_memo import Answer, PlanMemo
from ppe.service.schemas import PredictionRequest, ScheduleRequest
from ppe.service.speeds import Speed, profile_speed, signature_params
from ppe.service.store import pmac as pmac_store
from ppe.service.store.db import release
from ppe.service.store.models import Resource, Series
from ppe.service.store.pmac import StoredProfile

DEFAULT_ELEMENT_SIZE = 8


class PlanningError(ValueError):
    """A request names something the store cannot back (unknown host, missing benchmark)."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field


@dataclass(frozen=True)
class HostSpec:
    """A host as a request gives it; missing figures come from the host's registered properties."""

    name: str
    benchmark: float | None = None
    min_rows: int = 0
    max_rows: int | None = None


@dataclass
class SeriesIndex:
    """Series ids for a set of hosts: their cpu series and every measured link among them."""

    cpu: dict[str, int]
    bandwidth: dict[tuple[str, str], int]
    latency: dict[tuple[str, str], int]
    properties: dict[str, dict[str, Any]]
    #: hosts registered without a benchmark that a request left without one: what their
    #: reported runs say instead (filled by calibrate_missing)
    calibrated: dict[str, HostCalibration] = field(default_factory=dict)
    #: hosts with no benchmark by any other means: their newest machine profile, None for
    #: none (filled by profile_missing)
    profiles: dict[str, StoredProfile | None] = field(default_factory=dict)
    #: chain neighbours no sensor measures the bandwidth of (either way round): what their
    #: reported runs say instead, None for no runs (filled by calibrate_links)
    links: dict[tuple[str, str], LinkCalibration | None] = field(default_factory=dict)

    def measures_bandwidth(self, a: str, b: str) -> bool:
        return (a, b) in self.bandwidth or (b, a) in self.bandwidth

    def series_ids(self) -> list[int]:
        return [*self.cpu.values(), *self.bandwidth.values(), *self.latency.values()]


def host_specs(hosts: Sequence[Any], field: str = "hosts") -> list[HostSpec]:
    """Hosts as names or objects with name/benchmark/min_rows/max_rows; no repeats (reported
    on the request's `field`)."""
    specs = [
        HostSpec(h)
        if isinstance(h, str)
        else HostSpec(h.name, h.benchmark, getattr(h, "min_rows", 0), getattr(h, "max_rows", None))
        for h in hosts
    ]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise PlanningError(422, "a host is listed twice", field)
    return specs


def index_series(session: Session, names: Sequence[str]) -> SeriesIndex:
    """The hosts' series and properties."""
    r, s = Resource.__table__.c, Series.__table__.c
    # Core on the session's connection: plain rows, none of the ORM's result machinery (a
    # memoised schedule spends a good part of its time here otherwise).
    rows = (
        session.connection()
        .execute(
            select(r.name, r.properties, s.id, s.metric, s.peer)
            .join_from(Resource.__table__, Series.__table__, s.resource_id == r.id, isouter=True)
            .where(r.name.in_(list(names)))
        )
        .all()
    )
    wanted = set(names)
    idx = SeriesIndex({}, {}, {}, {})
    for name, props, sid, metric, peer in rows:
        idx.properties[name] = props or {}
        if sid is None:
            continue
        if metric == "cpu":
            idx.cpu[name] = sid
        elif peer in wanted:
            (idx.bandwidth if metric == "bandwidth" else idx.latency)[(name, peer)] = sid
    unknown = [n for n in names if n not in idx.properties]
    if unknown:
        raise PlanningError(404, f"unknown host(s): {', '.join(unknown)}", "hosts")
    no_cpu = [n for n in names if n not in idx.cpu]
    if no_cpu:
        raise PlanningError(409, f"no cpu measurements yet for: {', '.join(no_cpu)}", "hosts")
    return idx


def calibrate_missing(
    session: Session, idx: SeriesIndex, names: Sequence[str], min_runs: int
) -> None:
    """The calibrated benchmark of each of ``names`` registered without one, read from its
    reported runs once per index entry: only hosts a request gives no benchmark for need it."""
    for name in names:
        if name not in idx.calibrated and idx.properties[name].get("benchmark") is None:
            idx.calibrated[name] = host_calibration(session, name, None, min_runs)


def calibrate_links(
    session: Session, idx: SeriesIndex, names: Sequence[str], min_runs: int
) -> None:
    """The calibrated bandwidth of each pair of chain neighbours in ``names`` that no sensor
    measures, read from their reported runs once per index entry."""
    for a, b in zip(names, names[1:], strict=False):
        if (a, b) in idx.links or idx.measures_bandwidth(a, b):
            continue
        idx.links[(a, b)] = link_calibrations(session, a, min_runs, peers={b}).get(b)


def calibrated_links(
    idx: SeriesIndex, names: Sequence[str]
) -> dict[tuple[str, str], LinkCalibration]:
    """The chain links planning takes from the runs: unmeasured, enough runs behind them."""
    out = {}
    for a, b in zip(names, names[1:], strict=False):
        cal = idx.links.get((a, b))
        if cal is not None and cal.enough and not idx.measures_bandwidth(a, b):
            out[(a, b)] = cal
    return out


def profile_missing(session: Session, idx: SeriesIndex, names: Sequence[str]) -> None:
    """The newest machine profile of each of ``names``, read once per index entry."""
    wanted = [n for n in names if n not in idx.profiles]
    found = pmac_store.latest_profiles(session, wanted)
    for name in wanted:
        idx.profiles[name] = found.get(name)


class IndexCache:
    """Recently planned host sets' series ids and properties, re-read at most every `fresh_s`.

    The same freshness the forecast cache keeps for data: another worker's new link series or
    property change shows up within `fresh_s`; this worker's own `PUT /resources` clears it.
    Unknown hosts are never cached (the store is asked again next time). `fits` holds the
    empirical fits models read (`empirical(...)`, applications known from runs).
    """

    def __init__(
        self,
        fresh_s: float = 1.0,
        size: int = 256,
        calibration_min_runs: int | None = DEFAULT_MIN_RUNS,
    ) -> None:
        self.fresh_s = fresh_s
        self.calibration_min_runs = calibration_min_runs
        self._entries: LRUCache[tuple[str, ...], tuple[SeriesIndex, float]] = LRUCache(size)
        self._lock = threading.Lock()
        self.fits = FitCache()
        #: parsed signatures by their text (parsing compiles every formula)
        self.signatures: LRUCache[str, Signature] = LRUCache(64)

    def signature(self, text: str) -> Signature:
        with self._lock:
            sig = self.signatures.get(text)
        if sig is None:
            sig = parse_signature(text)
            with self._lock:
                self.signatures[text] = sig
        return sig

    def get(self, session: Session, names: Sequence[str]) -> SeriesIndex:
        key, now = tuple(names), time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and now - hit[1] < self.fresh_s:
            return hit[0]
        idx = index_series(session, names)
        with self._lock:
            self._entries[key] = (idx, now)
        return idx

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _calibrated(idx: SeriesIndex, name: str) -> HostCalibration | None:
    """The host's calibration when there are enough runs behind it to plan with."""
    cal = idx.calibrated.get(name)
    return cal if cal is not None and cal.enough else None


def measured_speed(spec: HostSpec, idx: SeriesIndex) -> Speed | None:
    """The host's benchmark from the request, its registration or its reported runs
    (``Settings.calibration_min_runs`` of them at least), in that order; None without one."""
    if spec.benchmark is not None:
        return Speed(float(spec.benchmark), "request")
    registered = idx.properties.get(spec.name, {}).get("benchmark")
    if registered is not None:
        return Speed(float(registered), "registered")
    cal = _calibrated(idx, spec.name)
    if cal is not None and cal.calibration is not None:
        return Speed(cal.calibration.benchmark, "calibrated", note(cal))
    return None


def no_benchmark(spec: HostSpec, idx: SeriesIndex, why_no_profile: str) -> PlanningError:
    known = idx.calibrated.get(spec.name)
    have = 0 if known is None or known.calibration is None else len(known.calibration.runs)
    need = known.min_runs if known is not None else DEFAULT_MIN_RUNS
    return PlanningError(
        422,
        f"host {spec.name!r} has no benchmark: give it in the request, register it with "
        f"PUT /api/v1/resources/{spec.name}, let ppe-sor report {need} runs on it with "
        f"its sensor running ({have} usable so far), or post its machine profile for the "
        f"model's signature ({why_no_profile})",
        "hosts",
    )


def host_speeds(
    specs: Sequence[HostSpec],
    idx: SeriesIndex,
    needs_benchmark: bool,
    profiled: Mapping[str, Speed],
    why_no_profile: str = "",
    probed: Mapping[str, Speed] | None = None,
) -> dict[str, Speed]:
    """Each host's speed and its source (``ppe.service.speeds``); a model that reads no
    benchmark, such as an empirical strip model, gets the one given or 1.0, never read. A
    signature probe's speed (``probed``) comes before all but the request's."""
    probed = probed or {}
    out: dict[str, Speed] = {}
    for s in specs:
        if not needs_benchmark:
            given = s.benchmark or idx.properties.get(s.name, {}).get("benchmark") or 1.0
            out[s.name] = Speed(float(given), "unused")
            continue
        speed = (
            (probed.get(s.name) if s.benchmark is None else None)
            or measured_speed(s, idx)
            or profiled.get(s.name)
        )
        if speed is None:
            raise no_benchmark(s, idx, why_no_profile or "it has none")
        out[s.name] = speed
    return out


def host_meta(
    specs: Sequence[HostSpec],
    idx: SeriesIndex,
    n: int,
    speeds: Mapping[str, Speed],
    system: Mapping[str, tuple[tuple[str, float], ...]] | None = None,
) -> list[HostMeta]:
    """The hosts as the pipeline takes them: ``speeds``' benchmarks, ``system``'s profile
    figures; memory bounds a strip (no spilling)."""
    system = system or {}
    out = []
    for s in specs:
        props = idx.properties.get(s.name, {})
        max_rows = s.max_rows
        memory = props.get("memory_bytes")
        if memory and n > 0:
            size = int(props.get("element_size", DEFAULT_ELEMENT_SIZE))
            fit = int(memory // (n * size))
            max_rows = fit if max_rows is None else min(max_rows, fit)
        out.append(
            HostMeta(s.name, speeds[s.name].benchmark, s.min_rows, max_rows, system.get(s.name, ()))
        )
    return out


def current_rows(current: Sequence[Any], metas: Sequence[HostMeta], total: int) -> dict[str, int]:
    """A running application's rows (items with ``host`` and ``rows``), checked against the
    request: the same hosts, each once, and every row of the grid placed."""
    rows: dict[str, int] = {}
    for item in current:
        if item.host in rows:
            raise PlanningError(422, f"host {item.host!r} is listed twice", "current")
        rows[item.host] = int(item.rows)
    names = {m.name for m in metas}
    if set(rows) != names:
        missing, extra = sorted(names - set(rows)), sorted(set(rows) - names)
        raise PlanningError(
            422,
            f"current must give rows for exactly the request's hosts (missing {missing}, "
            f"not in hosts {extra})",
            "current",
        )
    try:
        check_allocation({"rows": total}, rows)
    except AllocationError as exc:
        raise PlanningError(422, f"current: {exc}", "current") from exc
    return rows


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def quality(fc: Any, now: float | None = None) -> dict[str, Any]:
    """Quality of information of one forecast; its age against ``now`` when given (live data)."""
    return {
        "predictor": fc.predictor,
        "mse": _finite(fc.mse),
        "mae": _finite(fc.mae),
        "samples": fc.n,
        "age_s": age_at(fc, now),
        "horizon_s": fc.horizon_s,
        "support": fc.distribution.support,
        "fallback": fc.distribution.fallback,
        "fleet": fc.distribution.fleet,
    }


def _neighbours(pairs: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    """host -> peer -> series id; a link measured only the other way round serves both."""
    out: dict[str, dict[str, int]] = {}
    for (a, b), sid in pairs.items():
        out.setdefault(a, {})[b] = sid
    for (a, b), sid in pairs.items():
        out.setdefault(b, {}).setdefault(a, sid)
    return out


class StoreForecasts:
    """The `forecasts_for(horizon)` callable `ppe.pipeline.plan` iterates on, over the cache.

    Forecasts are memoised per (series, horizon) for the request, so the horizon loop and
    the answer's report read each one once.
    """

    def __init__(
        self,
        cache: ForecastCache,
        idx: SeriesIndex,
        names: Sequence[str],
        *,
        confidence: float,
        at: float | None,
        default_bandwidth: float,
        default_latency: float,
        link_bandwidth: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.cache = cache
        self.idx = idx
        self.names = list(names)
        self.confidence = confidence
        self.at = at
        self.default_bandwidth = Point(default_bandwidth)
        self.default_latency = default_latency
        self._bandwidth = _neighbours(idx.bandwidth)
        self._latency = _neighbours(idx.latency)
        #: unmeasured links' calibrated bandwidth, both ways round
        self._calibrated: dict[str, dict[str, float]] = {}
        for (a, b), value in (link_bandwidth or {}).items():
            self._calibrated.setdefault(a, {})[b] = value
            self._calibrated.setdefault(b, {})[a] = value
        self._memo: dict[tuple[int, float | None], tuple[Any, StochasticValue, dict[str, Any]]] = {}
        self._dependence: dict[tuple[tuple[str, ...], float | None], np.ndarray] = {}
        if at is None:
            cache.refresh(idx.series_ids())

    def data_version(self) -> tuple[Any, ...] | None:
        """What every forecast here is computed from; None for `at` (read from the store)."""
        return None if self.at is not None else self.cache.versions(self.idx.series_ids())

    def __call__(self, horizon: float | None) -> Mapping[str, HostForecasts]:
        return {name: self._host(name, horizon) for name in self.names}

    def dependence(self, names: Sequence[str], horizon: float | None) -> np.ndarray:
        """How the hosts' CPU availability moves together (a ``pipeline.DependenceFor``);
        once per horizon bucket for the request, so the horizon loop does not re-read the
        store for every round of an ``at`` request."""
        key = (tuple(names), snap_dependence_horizon(horizon))
        if key not in self._dependence:
            self._dependence[key] = self.cache.co_movement(
                [self.idx.cpu[n] for n in names], key[1], self.at
            )
        return self._dependence[key]

    def _forecast(
        self, sid: int, metric: str, horizon: float | None
    ) -> tuple[Any, StochasticValue, dict[str, Any]]:
        key = (sid, horizon)
        if key not in self._memo:
            self._memo[key] = self.cache.forecast_input(
                sid, metric, horizon_s=horizon, confidence=self.confidence, at=self.at
            )
        return self._memo[key]

    def _host(self, name: str, horizon: float | None) -> HostForecasts:
        cpu, cpu_value, cpu_json = self._forecast(self.idx.cpu[name], "cpu", horizon)
        # Modes describe the recent values (the one-step fit), whatever the horizon.
        recent = self._forecast(self.idx.cpu[name], "cpu", None)[0]
        bw: dict[str, StochasticValue] = {}
        links: dict[str, Any] = {}
        for peer, sid in self._bandwidth.get(name, {}).items():
            fc, value, as_json = self._forecast(sid, "bandwidth", horizon)
            bw[peer] = value
            links[peer] = {"forecast": as_json, "fc": fc}
        for peer, calibrated in self._calibrated.get(name, {}).items():
            bw.setdefault(peer, Point(calibrated))
        lat = [
            self._forecast(sid, "latency", horizon)[0].mean
            for sid in self._latency.get(name, {}).values()
        ]
        return HostForecasts(
            cpu=cpu_value,
            bandwidth=bw,
            default_bandwidth=self.default_bandwidth,
            latency=sum(lat) / len(lat) if lat else self.default_latency,
            multimode=recent.multimode,
            age_s=age_at(cpu, time.time() if self.at is None else None),
            details={"cpu": cpu, "cpu_json": cpu_json, "links": links},
        )


@dataclass(frozen=True)
class Prepared:
    """One request's model, hosts and forecasts: what the pipeline takes."""

    model: CompiledModel
    hosts: list[HostMeta]
    forecasts_for: StoreForecasts
    #: what the caller should know about the hosts' figures (a calibrated benchmark)
    notes: tuple[str, ...] = ()
    #: each host's benchmark and where it came from
    speeds: Mapping[str, Speed] = field(default_factory=dict)


def prepare(
    session: Session,
    cache: ForecastCache,
    index: IndexCache,
    hosts: Sequence[Any],
    n: int,
    *,
    model: str | None,
    model_field: str,
    grammar: str | None = None,
    params: Mapping[str, float] | None = None,
    confidence: float,
    at: float | None,
    default_bandwidth: float,
    default_latency: float,
    bandwidth_given: bool = False,
    probed: Mapping[str, Speed] | None = None,
) -> Prepared:
    """What a schedule and a prediction both start from: the hosts (no repeats; see
    `host_specs`), the model (a name, or `grammar` text), the hosts' series and forecasts.
    The session's read transaction ends before any forecast reads the store (`release`); an
    unknown model is reported on the request's `model_field`. ``params`` (the model's) name
    the signature's parameters when a host's speed comes from its machine profile. Chain
    neighbours no sensor measures take the bandwidth their reported runs calibrate (enough
    of them) unless the request gives ``bandwidth`` (``bandwidth_given``)."""
    params = params or {}
    specs = host_specs(hosts)
    try:
        resolved = models_registry.resolve(session, model, grammar, index.fits)
    except LookupError as exc:
        raise PlanningError(422, str(exc).strip("'\""), model_field) from exc
    names = [s.name for s in specs]
    idx = index.get(session, names)
    needs_benchmark = resolved.model.uses("Benchmark")
    if needs_benchmark and index.calibration_min_runs is not None:
        unbenchmarked = [s.name for s in specs if s.benchmark is None]
        calibrate_missing(session, idx, unbenchmarked, index.calibration_min_runs)
    if not bandwidth_given and index.calibration_min_runs is not None:
        calibrate_links(session, idx, names, index.calibration_min_runs)
    links = {} if bandwidth_given else calibrated_links(idx, names)
    profiled, why = (
        profiled_speeds(session, index, idx, specs, model, n, params)
        if needs_benchmark
        else ({}, "")
    )
    system, figure_notes = profile_figures(session, idx, names, resolved.model.profile_names())
    release(session)
    speeds = host_speeds(specs, idx, needs_benchmark, profiled, why, probed)
    forecasts_for = StoreForecasts(
        cache,
        idx,
        names,
        confidence=confidence,
        at=at,
        default_bandwidth=default_bandwidth,
        default_latency=default_latency,
        link_bandwidth={
            pair: cal.estimate.bandwidth
            for pair, cal in links.items()
            if cal.estimate is not None and cal.estimate.bandwidth is not None
        },
    )
    notes = tuple(sp.note for sp in speeds.values() if sp.note is not None)
    return Prepared(
        resolved.model,
        host_meta(specs, idx, n, speeds, system),
        forecasts_for,
        (*resolved.notes, *notes, *figure_notes, *(link_note(cal) for cal in links.values())),
        speeds,
    )


def profile_figures(
    session: Session, idx: SeriesIndex, names: Sequence[str], figures: Sequence[str]
) -> tuple[dict[str, tuple[tuple[str, float], ...]], tuple[str, ...]]:
    """The machine-profile figures a model reads (``flops_dense[p]``, ...) for every host, from
    its newest stored profile (``ppe.pmac.profile_parameters``), and a note of what they rest
    on; a host without a profile is a 422 naming it and the figure."""
    if not figures:
        return {}, ()
    profile_missing(session, idx, names)
    out: dict[str, tuple[tuple[str, float], ...]] = {}
    versions: list[str] = []
    for name in names:
        stored = idx.profiles.get(name)
        if stored is None:
            raise PlanningError(
                422,
                f"host {name!r} has no machine profile, but the model reads {figures[0]}[p] "
                f"(a figure of the host's profile): run `ppe profile` on it, or post one "
                f"with POST /api/v1/resources/{name}/profiles",
                "hosts",
            )
        values = profile_parameters(stored.profile)
        out[name] = tuple((f, values[f]) for f in figures)
        versions.append(f"{name!r} version {stored.version}")
    note = (
        f"the model reads {', '.join(figures)} from the hosts' machine profiles "
        f"({', '.join(versions)})"
    )
    return out, (note,)


def profiled_speeds(
    session: Session,
    index: IndexCache,
    idx: SeriesIndex,
    specs: Sequence[HostSpec],
    model: str | None,
    n: int,
    params: Mapping[str, float],
) -> tuple[dict[str, Speed], str]:
    """Speeds from machine profiles for the hosts that have no other (``ppe.service.speeds``),
    and, when some host still has none, why (for the error that names the ways to give one)."""
    lacking = [s.name for s in specs if measured_speed(s, idx) is None]
    if not lacking:
        return {}, ""
    if model is None:
        return {}, "a model given as grammar text has no signature"
    text = pmac_store.signature_text(session, model)
    if text is None:
        return {}, f"no signature named {model!r}: POST /api/v1/signatures"
    signature = index.signature(text.text)
    profile_missing(session, idx, lacking)
    values = signature_params(signature, n, len(specs), params)
    out: dict[str, Speed] = {}
    for name in lacking:
        stored = idx.profiles.get(name)
        if stored is None:
            continue
        try:
            out[name] = profile_speed(name, stored, signature, values)
        except (SignatureError, ValueError) as exc:
            raise PlanningError(
                422, f"host {name!r}: its profile cannot be convolved: {exc}", "hosts"
            ) from exc
    return out, "it has none"


@dataclass(frozen=True)
class Predicted:
    """A prediction, the hosts' speeds it used and what the caller should know about them."""

    result: PredictResult
    speeds: Mapping[str, Speed]
    notes: tuple[str, ...]


def predict(
    body: PredictionRequest, session: Session, cache: ForecastCache, index: IndexCache
) -> Predicted:
    """The request's allocation predicted over the hosts' forecasts (the horizon loop of
    `ppe.pipeline.predict_allocation`); `n` defaults to the allocation's rows, which must place
    the whole grid (`ppe.pipeline.check_allocation`, checked before anything is read)."""
    specs = host_specs([HostSpec(a.host, a.benchmark) for a in body.allocation], "allocation")
    rows = {a.host: a.rows for a in body.allocation}
    params: dict[str, float] = {"n": sum(rows.values()), **body.params}
    check_allocation(params, rows)
    inputs = prepare(
        session,
        cache,
        index,
        specs,
        int(params["n"]),
        model=body.model,
        model_field="model",
        grammar=body.grammar,
        params=params,
        confidence=body.confidence,
        at=body.at,
        default_bandwidth=body.bandwidth,
        default_latency=body.latency,
        bandwidth_given="bandwidth" in body.model_fields_set,
    )
    options = PlanOptions(
        confidence=body.confidence,
        engine=body.engine,
        predict_samples=body.samples,
        seed=body.seed,
    )
    result = predict_allocation(
        inputs.model, params, inputs.hosts, inputs.forecasts_for, rows, options
    )
    return Predicted(result, inputs.speeds, inputs.notes)


def check_schedule(body: ScheduleRequest) -> None:
    """What the schema alone cannot refuse: a strategy the scheduler lacks, select with current."""
    if body.strategy not in scheduler.STRATEGIES:
        raise PlanningError(
            422,
            f"unknown strategy {body.strategy!r}; choose from {', '.join(scheduler.STRATEGIES)}",
            "strategy",
        )
    if body.current is not None and body.select:
        raise PlanningError(
            422,
            "a running application keeps its hosts and chain: select cannot go with current",
            "select",
        )


def schedule(
    body: ScheduleRequest,
    session: Session,
    cache: ForecastCache,
    index: IndexCache,
    memo: PlanMemo,
    probed: Mapping[str, Speed] | None = None,
) -> Answer:
    """The request's schedule, memoised on the data its forecasts come from (`PlanMemo`):
    repeat requests between two sensor reports cost a look-up. ``probed``: speeds from
    signature probes (``ppe.service.probing``)."""
    check_schedule(body)
    inputs = prepare(
        session,
        cache,
        index,
        body.hosts,
        body.n,
        model=body.app,
        model_field="app",
        params=body.params,
        confidence=body.confidence,
        at=body.at,
        default_bandwidth=body.bandwidth,
        default_latency=body.latency,
        bandwidth_given="bandwidth" in body.model_fields_set,
        probed=probed,
    )
    version = inputs.forecasts_for.data_version()
    key = (
        None
        if version is None
        else (
            inputs.model.digest,
            inputs.model.binding,
            body.model_dump_json(exclude={"hosts"}),
            tuple(inputs.hosts),
            inputs.notes,  # the same figures from another source say so in the warnings
            tuple(sp.source for sp in inputs.speeds.values()),
        )
    )
    return memo.answer(key, lambda: _plan(body, inputs, memo), version)


def _plan(body: ScheduleRequest, inputs: Prepared, memo: PlanMemo) -> Answer:
    """Plan the request, starting the horizon loop where the last identical request settled."""
    model, metas, forecasts_for = inputs.model, inputs.hosts, inputs.forecasts_for
    names = [m.name for m in metas]
    params = {**body.params, "n": body.n, "I": body.iterations}
    hint_key = (
        model.digest,
        model.binding,
        body.n,
        body.iterations,
        tuple(names),
        body.strategy,
        body.k,
        body.quantile,
        body.at,
        body.select,
    )
    options = PlanOptions(
        confidence=body.confidence,
        k=body.k,
        quantile=body.quantile,
        initial_horizon=memo.hint(hint_key),
    )
    if body.replan_every_s is not None:
        options = replace(options, replan_every_s=body.replan_every_s)
    left_out: list[str] = []
    if body.select:
        metas, left_out = select_chain(model, params, metas, forecasts_for, body.strategy, options)
    c = body.confidence
    verdict = None
    if body.current is None:
        result = plan(
            model,
            params,
            metas,
            forecasts_for,
            body.strategy,
            options,
            dependence_for=forecasts_for.dependence,
        )
    else:
        policy = scheduler.ReplanPolicy(body.replan_every_s or scheduler.ReplanPolicy.every_s)
        again = replan(
            model,
            params,
            metas,
            forecasts_for,
            body.strategy,
            current_rows(body.current, metas, total_rows(params)),
            policy,
            options,
            forecasts_for.dependence,
            row_bytes=body.n * params.get("Size", DEFAULT_ELEMENT_SIZE),
            bandwidth=body.bandwidth,
            latency=body.latency,
        )
        result = again.plan
        verdict = {
            "move": again.move,
            "migration_s": again.migration_s,
            "keep": again.keep.makespan.to_dict(c),
        }
    if body.replan_every_s is None:  # a re-plan's one-round horizon is no hint for others
        memo.remember_hint(hint_key, result.horizon_s)
    return Answer(
        horizon_s=result.horizon_s,
        rounds=result.rounds,
        engine=getattr(result.prediction, "engine", None),
        inputs=result.inputs,
        allocation=[
            {
                "host": h,
                "rows": result.rows[h],
                "time": result.per_host[h].to_dict(c),
                "speed": inputs.speeds[h].to_dict(),
            }
            for h in result.hosts
        ],
        makespan=result.makespan.to_dict(c),
        replan=verdict,
        warnings=(*inputs.notes, *left_out, *result.warnings),
    )


def inputs_report(
    inputs: Mapping[str, HostForecasts], confidence: float, at: float | None
) -> list[dict[str, Any]]:
    """What a caller needs to judge the quality of information behind an answer.

    Live forecasts (``at`` None) are aged at answer time, also when the plan was memoised;
    forecasts as of a past ``at`` keep their age at that time.
    """
    now = time.time() if at is None else None
    report = []
    for host, hf in inputs.items():
        cpu = hf.details.get("cpu")
        entry: dict[str, Any] = {
            "host": host,
            "metric": "cpu",
            "forecast": hf.details.get("cpu_json") or hf.cpu.to_dict(confidence),
        }
        if cpu is not None:
            entry.update(quality(cpu, now))
        entry["multimode"] = hf.multimode
        report.append(entry)
        for peer, d in hf.details.get("links", {}).items():
            report.append(
                {
                    "host": host,
                    "metric": "bandwidth",
                    "peer": peer,
                    "forecast": d["forecast"],
                    **quality(d["fc"], now),
                }
            )
    return report


def select_chain(
    model: Any,
    params: Mapping[str, Any],
    metas: Sequence[HostMeta],
    forecasts_for: Any,
    strategy: str,
    options: PlanOptions,
) -> tuple[list[HostMeta], list[str]]:
    """AppLeS resource selection: the subset and chain order with the least predicted makespan,
    and a warning per host left out for want of CPU (forecast below ``core.CPU_FLOOR``: it
    would slow every iteration down, so no chain should include it).

    Trial chains are judged on the one-step forecasts; the chosen chain is then planned with
    the horizon loop like any other request.
    """
    forecasts = forecasts_for(None)
    dead = [m.name for m in metas if below_floor(forecasts[m.name])]
    warnings = [
        f"host {name!r} left out: its CPU availability forecast is below {core.CPU_FLOOR:g}"
        for name in dead
    ]
    by_name = {m.name: m for m in metas if m.name not in dead}
    if not by_name:
        raise PlanningError(
            409, f"no host has CPU available (every forecast is below {core.CPU_FLOOR:g})", "hosts"
        )

    def evaluate(order: list[str]) -> list[scheduler.StochasticHost]:
        chain = [by_name[n] for n in order]
        linear = core.linear_host_models(model, params, host_inputs(chain, forecasts))
        return [
            scheduler.StochasticHost(h.name, a, b, min_rows=h.min_rows, max_rows=h.max_rows)
            for h, (a, b) in zip(chain, linear, strict=True)
        ]

    order, _ = scheduler.select_resources(
        list(by_name),
        evaluate,
        total_rows(params),
        strategy,
        k=options.k,
        quantile=options.quantile,
        seed=options.seed,
    )
    return [by_name[n] for n in order], warnings
