"""What-if in the service (docs/whatif.md, API): the store answers a spec's references, small
specs are answered at once, larger sweeps run as background jobs with progress.

The store-backed :class:`StoreResolver` gives ``ppe.whatif`` what the CLI cannot: registered
hosts (``host = "name"``: their registered or calibrated benchmark, as planning reads it, else
their newest machine profile), the live forecast of a host's cpu series
(``load = {kind = "forecasts"}``), profiles by host name, signatures and grammars posted to the
service, and trace files under the server's ``--trace-dir`` (as replays resolve them).
:func:`current_spec` writes "the hosts I have now" as a spec to start from.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from ppe.core.stochastic import StochasticValue
from ppe.pmac import MachineProfile
from ppe.service.config import Settings
from ppe.service.forecasts import ForecastCache
from ppe.service.jobs import LIVE, run_job
from ppe.service.planning import (
    HostSpec,
    IndexCache,
    SeriesIndex,
    calibrate_missing,
    measured_speed,
)
from ppe.service.replay_jobs import public_error, resolve_traces, trace_limits
from ppe.service.store import pmac as pmac_store
from ppe.service.store.db import session_scope
from ppe.service.store.models import Resource, Series, UserModel, WhatIfJob
from ppe.traces import read_trace, trace_files
from ppe.whatif import (
    LoadTrace,
    Options,
    RegisteredHost,
    ResolveError,
    Resources,
    Spread,
    WhatIf,
    evaluate_resolved,
    parse_spec,
    resolve,
)
from ppe.whatif.analytic import portable

#: A spec with one point and at most this many nodes is answered in the request (an analytic
#: point of 64 nodes takes tens of milliseconds); anything larger becomes a job.
SMALL_NODES = 64

__all__ = [
    "SMALL_NODES",
    "StoreResolver",
    "WhatIfRunner",
    "current_spec",
    "fail_interrupted",
    "is_small",
    "job_spread",
]


# ---------------------------------------------------------------------------- resolver


def _host_row(session: Session, name: str) -> tuple[dict[str, Any], int | None]:
    """A registered host's properties and its cpu series id (None without measurements)."""
    r, s = Resource.__table__.c, Series.__table__.c
    rows = session.execute(
        select(r.properties, s.id)
        .join_from(
            Resource.__table__,
            Series.__table__,
            (s.resource_id == r.id) & (s.metric == "cpu"),
            isouter=True,
        )
        .where(r.name == name)
    ).all()
    if not rows:
        raise ResolveError(f"no registered host {name!r}")
    props, sid = rows[0]
    return dict(props or {}), sid


class StoreResolver:
    """A spec's references read from the store (one session per read: the resolver is used
    from a request's thread or a job's)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        cache: ForecastCache,
        index: IndexCache,
        settings: Settings,
        confidence: float = 0.95,
    ) -> None:
        self.sessions = sessions
        self.cache = cache
        self.index = index
        self.settings = settings
        self.confidence = confidence

    def profile(self, ref: str) -> MachineProfile:
        """``profile = "h1"``: the newest profile stored for host h1."""
        with session_scope(self.sessions) as s:
            found = pmac_store.latest_profiles(s, [ref]).get(ref)
        if found is None:
            raise ResolveError(f"no stored machine profile for host {ref!r}")
        return found.profile

    def trace(self, ref: str) -> LoadTrace:
        """A trace file under the server's trace directories, read within its limits."""
        path = resolve_traces([ref], self.settings.trace_dirs)[0]
        try:
            t = read_trace(path, trace_limits(self.settings)).alive()
        except (OSError, ValueError) as exc:  # said without the server's paths
            roots = [Path(d).resolve() for d in self.settings.trace_dirs]
            raise ResolveError(public_error(exc, roots)) from None
        return LoadTrace(t.name, t.timestamps, t.availability)

    def trace_dir(self, ref: str) -> list[str]:
        """The trace files of a folder under the server's trace directories (``dir`` loads)."""
        path = Path(resolve_traces([ref], self.settings.trace_dirs)[0])
        if not path.is_dir():
            raise ResolveError(f"{ref!r} is not a folder of traces")
        return [f"{ref.rstrip('/')}/{f.name}" for f in trace_files(path)]

    def text(self, ref: str) -> str:
        """A signature posted to the service (``POST /signatures``), else a model's grammar
        (``POST /models``)."""
        with session_scope(self.sessions) as s:
            sig = pmac_store.signature_text(s, ref)
            if sig is not None:
                return sig.text
            grammar = s.execute(select(UserModel.text).where(UserModel.name == ref)).scalar()
        if grammar is None:
            raise ResolveError(f"no signature or model named {ref!r} in the service")
        return str(grammar)

    def host(self, name: str) -> RegisteredHost:
        """The host's benchmark as planning reads it (registered, else calibrated from its
        runs), else its newest profile; its cpu forecast when it has measurements."""
        with session_scope(self.sessions) as s:
            props, sid = _host_row(s, name)
            idx = SeriesIndex({}, {}, {}, {name: props})
            if self.index.calibration_min_runs is not None:
                calibrate_missing(s, idx, [name], self.index.calibration_min_runs)
            speed = measured_speed(HostSpec(name), idx)
            stored = None if speed is not None else pmac_store.latest_profiles(s, [name]).get(name)
        cpu = None if sid is None else self._cpu(name, sid)
        return RegisteredHost(
            name,
            benchmark=None if speed is None else speed.benchmark,
            profile=None if stored is None else stored.profile,
            cpu=cpu,
        )

    def _cpu(self, name: str, sid: int) -> Callable[[float | None], StochasticValue]:
        """The live forecast of the host's cpu series, tried once now so a series too short to
        forecast is a spec problem at the nodeset, not a failed job."""
        self.cache.refresh([sid])

        def cpu(horizon: float | None) -> StochasticValue:
            return self.cache.forecast_input(
                sid, "cpu", horizon_s=horizon, confidence=self.confidence
            )[1]

        try:
            cpu(None)
        except ValueError as exc:  # forecaster.InsufficientData
            raise ResolveError(f"host {name!r}: no cpu forecast: {exc}") from exc
        return cpu


# ---------------------------------------------------------------------------- evaluation


def nodes(whatif: WhatIf) -> int:
    """The most nodes any point of the spec has."""
    return max(sum(ns.number for ns in p.spec.nodesets) for p in whatif.points)


def is_small(whatif: WhatIf) -> bool:
    """One point of at most :data:`SMALL_NODES` nodes: answered in the request."""
    return len(whatif.points) == 1 and nodes(whatif) <= SMALL_NODES


def fail_interrupted(sessions: sessionmaker[Session]) -> None:
    """Once per server start: jobs a dead server left queued or running will never finish."""
    with session_scope(sessions) as s:
        s.execute(
            update(WhatIfJob)
            .where(WhatIfJob.status.in_(LIVE))
            .values(
                status="failed", error="interrupted: the server stopped", finished_at=time.time()
            )
        )


def job_spread(settings: Settings, executor: str, resources: Resources) -> Spread:
    """Where a job's points run, as replay jobs choose (``replay_jobs.job_config``): a process
    pool of the server's ``replay_max_workers``, this process ("serial"), or the server's own
    Dask scheduler (never an address a caller names). A spec reading live forecasts runs in
    this process whatever was asked: the forecasts are this process's store's (the answer is
    the same). Raises ValueError for Dask on a server without a scheduler."""
    if executor == "dask" and not settings.dask_scheduler:
        raise ValueError("executor 'dask' needs a server started with --dask-scheduler")
    if not portable(resources):
        return Spread("serial")
    if executor == "dask":
        return Spread("dask", scheduler_address=settings.dask_scheduler)
    return Spread(executor, settings.replay_max_workers)


class WhatIfRunner:
    """One background thread per job at a time: a sweep's points run on the job's executor
    (a process pool, or Dask), progress recorded as each point finishes."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif")

    def submit(
        self,
        text: str,
        whatif: WhatIf,
        resources: Resources,
        options: Options,
        hide: Sequence[Path] = (),
        spread: Spread | None = None,
        executor: str = "serial",
    ) -> int:
        """Queue a checked spec whose references are read, its points to run on ``spread``
        (the caller's ``executor`` is recorded with the options); returns the job's id. A
        failure's message leaves out the folders in ``hide`` (the server's trace
        directories)."""
        with session_scope(self.sessions) as s:
            job = WhatIfJob(
                status="queued",
                spec=text,
                options={**asdict(options), "executor": executor},
                total=len(whatif.points),
            )
            s.add(job)
            s.flush()
            job_id = job.id
        run = spread or Spread()
        self.pool.submit(self._run, job_id, whatif, resources, options, list(hide), run)
        return job_id

    def _run(
        self,
        job_id: int,
        whatif: WhatIf,
        resources: Resources,
        options: Options,
        hide: list[Path],
        spread: Spread,
    ) -> None:
        def work(progress: Callable[[int, int], None]) -> dict[str, Any]:
            report = evaluate_resolved(whatif, resources, options, progress, spread).to_dict()
            # through JSON once: numpy scalars and tuples become what the store keeps
            out: dict[str, Any] = json.loads(json.dumps(report, default=float))
            return out

        run_job(self.sessions, WhatIfJob, job_id, work, lambda exc: public_error(exc, hide))

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def _no_platform_files(ref: str) -> str:
    raise ValueError(
        "the service reads no SimGrid platform files: write the platform's nodesets and "
        f"linksets in the spec, or run `ppe whatif --simgrid {ref} SPEC.toml` locally"
    )


def check(text: str) -> WhatIf:
    """Parse and check a spec (raises ``ppe.whatif.SpecError``)."""
    return parse_spec(text, "spec", read=_no_platform_files)


def read_references(whatif: WhatIf, resolver: StoreResolver) -> Resources:
    """Every reference read up front (raises ``ppe.whatif.SpecError`` at their lines)."""
    return resolve(whatif, resolver)


# ---------------------------------------------------------------------------- current hosts


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def _nodeset_name(host: str, taken: set[str]) -> str:
    base = _UNSAFE.sub("_", host)
    if not base or not re.match(r"[A-Za-z_]", base):
        base = "h_" + base
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


@dataclass(frozen=True)
class LinkFigures:
    """A measured link's bandwidth (bytes/s) and latency (s), each None when not measured."""

    bandwidth: float | None
    latency: float | None


def _q(v: str) -> str:
    return json.dumps(v)  # a TOML basic string is a JSON string for these names


def _measured(
    session: Session, cache: ForecastCache, names: Sequence[str]
) -> dict[tuple[str, str], LinkFigures]:
    """The forecast mean of each measured bandwidth and latency series between two of
    ``names`` (either direction), for the linksets between consecutive hosts."""
    r, s = Resource.__table__.c, Series.__table__.c
    rows = session.execute(
        select(r.name, s.metric, s.peer, s.id)
        .join_from(Resource.__table__, Series.__table__, s.resource_id == r.id)
        .where(s.metric.in_(["bandwidth", "latency"]), r.name.in_(list(names)))
    ).all()
    figures: dict[tuple[str, str], dict[str, float]] = {}
    for name, metric, peer, sid in rows:
        if peer not in names:
            continue
        try:
            mean = cache.forecast_input(sid, metric)[1].mean()
        except ValueError:  # too short to forecast: the default
            continue
        for key in ((name, peer), (peer, name)):
            figures.setdefault(key, {}).setdefault(metric, float(mean))
    return {k: LinkFigures(v.get("bandwidth"), v.get("latency")) for k, v in figures.items()}


def current_spec(
    session: Session,
    cache: ForecastCache,
    resolver: StoreResolver,
    *,
    n: int,
    iterations: int,
    model: str,
) -> str:
    """'The hosts I have now' as a spec: one nodeset per registered host with cpu measurements
    and a speed (``host = name``, ``load = {kind = "forecasts"}``, its memory as grainsize),
    chained by name with linksets from measured links (else the defaults), running ``model``
    on an ``n`` x ``n`` grid. Hosts left out are named in a comment."""
    hosts = session.execute(
        select(Resource.name, Resource.properties).order_by(Resource.name)
    ).all()
    usable: list[tuple[str, dict[str, Any]]] = []
    left: list[str] = []
    for name, props in hosts:
        try:
            h = resolver.host(name)
        except ResolveError as exc:
            left.append(f"{name} ({exc})")
            continue
        if h.cpu is None:
            left.append(f"{name} (no cpu measurements)")
        elif h.benchmark is None and h.profile is None:
            left.append(f"{name} (no benchmark, calibration or profile)")
        else:
            usable.append((name, dict(props or {})))
    if not usable:
        raise ResolveError(
            "no registered host has cpu measurements and a speed (benchmark, runs or profile)"
        )
    names = [h for h, _ in usable]
    links = _measured(session, cache, names)
    taken: set[str] = set()
    ns_names = [_nodeset_name(h, taken) for h in names]
    out = [
        "# The hosts registered now, with their live forecasts (GET /api/v1/whatif/current).",
        "# Edit it (add nodesets, scale numbers, sweep bandwidths) and POST it to /api/v1/whatif.",
    ]
    out += [f"# left out: {why}" for why in left]
    out += [f"title = {_q(f'{len(names)} registered host(s), {model} on {n} x {n}')}", ""]
    for host, ns in zip(names, ns_names, strict=True):
        props = dict(usable[names.index(host)][1])
        out += ["[[nodeset]]", f"name = {_q(ns)}", "number = 1", f"host = {_q(host)}"]
        memory = props.get("memory_bytes")
        if isinstance(memory, int | float) and memory > 0:
            out.append(f"grainsize = {int(memory)}")
        out += ['load = {kind = "forecasts"}', ""]
    for (a, na), (b, nb) in zip(
        zip(names, ns_names, strict=True), zip(names[1:], ns_names[1:], strict=True), strict=False
    ):
        fig = links.get((a, b), LinkFigures(None, None))
        out += ["[[linkset]]", f"name = {_q(f'{na}--{nb}')}", f"updown = [{_q(na)}, {_q(nb)}]"]
        if fig.bandwidth is not None and fig.bandwidth > 0:
            out.append(f"bandwidth = {fig.bandwidth:.6g}  # measured, bytes/s")
        if fig.latency is not None and fig.latency >= 0:
            out.append(f"latency = {fig.latency:.6g}  # measured, s")
        out.append("")
    out += [
        "[[dataset]]",
        'name = "grid"',
        'type = "grid2dim"',
        f"size = {n}",
        "bytesperunit = 8",
        "",
        "[[distribution]]",
        'name = "strips"',
        'type = "block1dim"',
        'dataset = "grid"',
        f"nodeset = [{', '.join(_q(x) for x in ns_names)}]",
        "",
        "[execution]",
        f"model = {_q(model)}",
        f"iterations = {iterations}",
        "",
    ]
    return "\n".join(out)
