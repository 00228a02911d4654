"""The simulated answer for a spec point: plan at each start time, then run the plan over the
recorded load (``ppe.replay.simulate``), for a distribution of makespans over start times.

For each of ``starts`` start times drawn (seeded) in the traces' common span, after a warm-up
of history:

1. **Plan** as the analytic path does (:func:`ppe.whatif.analytic.plan_point`, the same
   strategy), but forecasting each trace from its samples strictly *before* the start
   (``Loads(now=start)``): the planner never sees the load it will run under.
2. **Run** the planned rows for the spec's iterations through the trace-driven simulator:
   each node's work advances at its trace's recorded availability from the start (trace files
   assigned to the nodes round-robin, as the analytic path assigns them); iterations
   synchronise (SOR: red, halo, black, halo; Jacobi2D: sweep, halo).

Loads that are not traces: ``dedicated`` runs at availability 1; ``normal`` and ``mixture``
draw one availability per node per start (seeded, clipped to [0.01, 1]) held for the whole
run, the analytic path's "one draw per run" (ppe/core/GRAMMAR.md); ``forecasts`` (live hosts)
is refused. Only the built-in ``sor`` and ``jacobi2d`` models run: the simulator knows their
phases; scripts and grammar files are refused with a message. ``block2dim`` and ``block3dim``
are planned by the blocks' analytic path (:func:`ppe.whatif.analytic.plan_blocks`) and run
with each node's block elements and its own faces' exchanges (``RunSpec.elements``,
``RunSpec.comm``).

Links are the machine's (:mod:`ppe.whatif.machine`), constant. Strips: a node between two
links of different bandwidths gets the harmonic mean (the same time for its two messages);
the simulator has one latency, the largest of the chain's (noted when they differ). Blocks:
each node's exchanges are priced per link by the plan.

**Breakdown** per nodeset, means over its nodes and over the starts: ``compute`` is the time
the node spent computing, ``communication`` its halo messages, ``waiting`` the makespan minus
both (at each iteration's synchronisation and at the end).

Points and start times are independent, so (point, chunk of starts) tasks are spread over the
executor's workers (:class:`~ppe.whatif.options.Spread`: a process pool, or Dask); each task
plans and then simulates its chunk in one vectorised :func:`simulate` call, every start with
its own seed. Results are gathered by position: the answer does not depend on the executor or
the number of workers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from ppe.core import get_model
from ppe.executors import ProgressFn
from ppe.replay.simulate import (
    APP_PHASES,
    RateBank,
    RunSpec,
    SimConfig,
    chain_messages,
    simulate,
)
from ppe.whatif.analytic import WhatIfError, failed, plan_blocks, plan_point
from ppe.whatif.machine import Link, Machine, build_machine, load_key
from ppe.whatif.options import Options, Spread
from ppe.whatif.report import ABSENT, _value, aligned, nodeset_names
from ppe.whatif.resolve import Resolver, Resources, resolve
from ppe.whatif.spec import Spec, SpecPoint, WhatIf

__all__ = [
    "SimOptions",
    "SimPoint",
    "SimReport",
    "format_sim_table",
    "simulate_point",
    "simulate_whatif",
    "start_times",
]

FloatArray = NDArray[np.float64]
AVAILABILITY_FLOOR = 0.01
DAY_S = 86400.0


@dataclass(frozen=True)
class SimOptions:
    """How many start times, seeded how, with how much history before the first, on how many
    processes when no :class:`Spread` is given (``workers <= 0``: every core)."""

    starts: int = 20
    seed: int = 0
    warmup_s: float = DAY_S
    workers: int = 1

    def __post_init__(self) -> None:
        if self.starts < 1:
            raise ValueError("starts must be at least 1")
        if self.warmup_s < 0:
            raise ValueError("warmup_s must not be negative")


@dataclass(frozen=True)
class SimNodeset:
    """One nodeset's simulated share: mean seconds per node over its nodes and the starts."""

    nodeset: str
    nodes: int
    compute: float
    communication: float
    waiting: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodeset": self.nodeset,
            "nodes": self.nodes,
            "compute_s": self.compute,
            "communication_s": self.communication,
            "waiting_s": self.waiting,
        }


@dataclass(frozen=True)
class SimPoint:
    """One point simulated at every start: actual makespans, the analytic prediction made
    before each start, and the per-nodeset breakdown."""

    values: tuple[tuple[str, Any], ...]
    confidence: float
    starts: FloatArray
    makespans: FloatArray
    predicted: FloatArray  # the plan's predicted mean at each start
    lower: FloatArray  # and its central interval
    upper: FloatArray
    nodesets: tuple[SimNodeset, ...]
    analytic: dict[str, Any]  # the plan at the first start (PointResult.to_dict)
    notes: tuple[str, ...] = ()
    timing: tuple[float, float] = (0.0, 0.0)  # seconds planning, simulating (all workers)

    @property
    def coverage(self) -> float:
        """Fraction of starts whose actual makespan fell inside that start's interval."""
        inside = (self.makespans >= self.lower) & (self.makespans <= self.upper)
        return float(np.mean(inside))

    def interval(self) -> tuple[float, float]:
        tail = (1.0 - self.confidence) / 2.0
        lo, hi = np.quantile(self.makespans, [tail, 1.0 - tail])
        return float(lo), float(hi)

    def to_dict(self) -> dict[str, Any]:
        ms = self.makespans
        lo, hi = self.interval()
        qs = (0.05, 0.25, 0.5, 0.75, 0.95)
        return {
            "values": {k: list(v) if isinstance(v, tuple) else v for k, v in self.values},
            "starts": self.starts.tolist(),
            "makespans_s": ms.tolist(),
            "makespan": {
                "mean": float(ms.mean()),
                "std": float(ms.std(ddof=1)) if ms.size > 1 else 0.0,
                "quantiles": {f"{q:g}": float(np.quantile(ms, q)) for q in qs},
                "interval": [lo, hi],
                "confidence": self.confidence,
            },
            "predicted_mean_s": self.predicted.tolist(),
            "predicted_interval_s": [[a, b] for a, b in zip(self.lower, self.upper, strict=True)],
            "coverage": self.coverage,
            "nodesets": [n.to_dict() for n in self.nodesets],
            "analytic": self.analytic,
            "notes": list(self.notes),
            "timing_s": {"plan": self.timing[0], "simulate": self.timing[1]},
        }


@dataclass(frozen=True)
class SimReport:
    source: str
    title: str
    options: Options
    sim: SimOptions
    axes: tuple[str, ...]
    points: tuple[SimPoint, ...] = field(default_factory=tuple)
    together: tuple[tuple[str, ...], ...] = ()  # axes swept in step ([sweep] together)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "title": self.title,
            "mode": "simulated",
            "strategy": self.options.strategy,
            "confidence": self.options.confidence,
            "starts": self.sim.starts,
            "seed": self.sim.seed,
            "axes": list(self.axes),
            "together": [list(g) for g in self.together],
            "points": [p.to_dict() for p in self.points],
        }


# ------------------------------------------------------------------------------ checks


def check_simulable(point: SpecPoint) -> None:
    """Refuse what the simulator cannot run, with a reason."""
    ex = point.spec.execution
    if not ex.builtin or (ex.model or "").lower() not in APP_PHASES:
        raise WhatIfError(
            "--simulate runs the built-in models (model = "
            + " or ".join(repr(a) for a in sorted(APP_PHASES))
            + "): the trace-driven simulator knows their phases; scripts and grammar files are "
            "evaluated analytically only"
        )
    for name in point.spec.primary.nodesets:
        ns = point.spec.nodeset(name)
        if ns.load.kind == "forecasts":
            raise WhatIfError(
                f"nodeset {ns.name!r}: load = forecasts (live hosts) cannot be simulated; "
                "give it recorded traces"
            )


def start_times(resources: Resources, sim: SimOptions) -> FloatArray:
    """``sim.starts`` start times, uniform (seeded) in the traces' common span after
    ``warmup_s`` of history; all 0 when no load is a trace (the starts are then repetitions
    with fresh draws)."""
    if not resources.traces:
        return np.zeros(sim.starts)
    first = max(float(t.timestamps.min()) for t in resources.traces.values())
    last = min(float(t.timestamps.max()) for t in resources.traces.values())
    lo = first + sim.warmup_s
    if lo >= last:
        raise WhatIfError(
            f"the traces' common span ({last - first:g} s) is not longer than the warm-up "
            f"of history each plan needs ({sim.warmup_s:g} s)"
        )
    rng = np.random.default_rng(sim.seed)
    return np.sort(rng.uniform(lo, last, sim.starts))


# ----------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class _Layout:
    """Every node in chain order: its nodeset (segment), dedicated seconds per element, the
    bank series of its load (-1: a drawn or dedicated load), and its link bandwidth."""

    segment: NDArray[np.int64]
    benchmark: FloatArray
    series: NDArray[np.int64]
    draws: tuple[tuple[object, ...], ...]  # load key per node (for drawn loads)
    variation: FloatArray  # run-to-run spread of each node's dedicated speed (relative sd)
    bandwidth: FloatArray
    latency: float
    notes: tuple[str, ...]


def _harmonic(a: Link | None, b: Link | None) -> float:
    bws = [x.bandwidth for x in (a, b) if x is not None]
    if not bws:
        return np.inf
    return len(bws) / sum(1.0 / x for x in bws)


def _layout(m: Machine, traces: Sequence[str]) -> _Layout:
    index = {ref: i for i, ref in enumerate(traces)}
    seg: list[int] = []
    series: list[int] = []
    bench: list[float] = []
    bw: list[float] = []
    lat: list[float] = []
    draws: list[tuple[object, ...]] = []
    variation: list[float] = []
    for k, member, s in m.chain():
        slot = m.slots[s]
        ns = m.segments[k].nodeset
        key = load_key(ns, member)
        seg.append(k)
        bench.append(m.segments[k].benchmark)
        variation.append(ns.variation)
        series.append(index[str(key[1])] if key[0] == "trace" else -1)
        draws.append(key)
        bw.append(_harmonic(slot.prev, slot.next))
        lat.extend(x.latency for x in (slot.prev, slot.next) if x is not None)
    notes = []
    if lat and min(lat) != max(lat):
        notes.append(
            f"links have latencies from {min(lat):g} s to {max(lat):g} s; the simulator has one "
            f"and uses the largest, {max(lat):g} s"
        )
    return _Layout(
        np.array(seg, dtype=np.int64),
        np.array(bench),
        np.array(series, dtype=np.int64),
        tuple(draws),
        np.array(variation),
        np.array(bw),
        max(lat, default=0.0),
        tuple(notes),
    )


def _drawn(layout: _Layout, rng: np.random.Generator) -> FloatArray:
    """Each node's availability for one run: 1 for dedicated and trace nodes (the trace
    supplies the rate), one draw for normal and mixture loads."""
    out = np.ones(len(layout.draws))
    for i, key in enumerate(layout.draws):
        if key[0] == "normal":
            out[i] = rng.normal(cast(float, key[1]), cast(float, key[2]))
        elif key[0] == "mixture":
            comps = np.array(key[1], dtype=np.float64)
            j = rng.choice(len(comps), p=comps[:, 0] / comps[:, 0].sum())
            out[i] = rng.normal(comps[j, 1], comps[j, 2])
    return np.clip(out, AVAILABILITY_FLOOR, 1.0)


def _noise(layout: _Layout, rng: np.random.Generator) -> FloatArray:
    """Each node's dedicated-time factor for one run: lognormal with mean 1 and the nodeset's
    relative spread (``variation``; 1 without one), drawn independently per node and run."""
    sigma = np.sqrt(np.log1p(layout.variation**2))
    return np.exp(rng.standard_normal(sigma.size) * sigma - sigma**2 / 2)


# ------------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class _Chunk:
    """What a worker needs for some starts of one point (picklable)."""

    point: SpecPoint
    resources: Resources  # without its model (rebuilt in the worker)
    options: Options
    starts: tuple[float, ...]
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class _ChunkResult:
    makespans: FloatArray
    predicted: FloatArray
    lower: FloatArray
    upper: FloatArray
    compute: FloatArray  # (starts, nodesets) mean seconds per node
    communication: FloatArray
    waiting: FloatArray
    first: dict[str, Any]  # as a dict: stochastic values do not cross processes
    notes: tuple[str, ...]
    plan_s: float  # seconds spent planning and simulating (for the benchmark)
    simulate_s: float


def _bank(resources: Resources, traces: Sequence[str]) -> RateBank:
    """The traces' availability as rates, then one series of constant rate 1 (drawn loads
    scale the node's benchmark instead)."""
    series: list[tuple[FloatArray, FloatArray]] = []
    for ref in traces:
        t = resources.traces[ref]
        series.append((t.timestamps, np.clip(t.availability, AVAILABILITY_FLOOR, 1.0)))
    series.append((np.array([0.0]), np.array([1.0])))
    return RateBank(series)


def _run_chunk(chunk: _Chunk) -> _ChunkResult:
    """Plan each start from the data before it, then simulate them all at once."""
    point, opts = chunk.point, chunk.options
    spec = point.spec
    # The compiled model is rebuilt here, not unpickled: a copy loses what the engines key on
    # by identity (a 1000-iteration SOR then asks Monte Carlo for 1000 x hosts columns).
    resources = replace(chunk.resources, model=get_model(spec.execution.model or ""))
    m = build_machine(spec, resources)
    traces = sorted(resources.traces)
    layout = _layout(m, traces)
    bank = _bank(resources, traces)
    ones = len(traces)
    config, net_bank, net_idx = _network(spec, layout)
    blocks = spec.primary.type != "block1dim"
    if blocks:  # each node's exchanges come with its plan (its faces, its links)
        net_bank, net_idx = None, None
    hosts = np.where(layout.series >= 0, layout.series, ones).tolist()
    runs, plans, comms = [], [], []
    strip_comm = _comm_seconds(config, layout)  # strips: the same at every start
    t0 = time.perf_counter()
    for start, seed in zip(chunk.starts, chunk.seeds, strict=True):
        now = start if resources.traces else None
        if blocks:
            result, r = plan_blocks(point, resources, opts, now)
            elements: list[float] | None = [float(e) for e in r.rows]
            phases = max(config.iterations * len(APP_PHASES[config.app]), 1)
            per_phase = np.asarray(r.comm) / phases
            comm: list[float] | None = per_phase.tolist()
            rows = tuple(1 for _ in r.rows)
            comms.append(np.asarray(r.comm))
        else:
            result, rows = plan_point(point, resources, opts, now=now)
            elements = comm = None
            comms.append(strip_comm)
        plans.append(result)
        rng = np.random.default_rng(seed)
        avail = _drawn(layout, rng)
        runs.append(
            RunSpec(
                hosts,
                list(rows),
                (layout.benchmark * _noise(layout, rng) / avail).tolist(),
                start,
                net=net_idx,
                elements=elements,
                comm=comm,
            )
        )
    t1 = time.perf_counter()
    sim = simulate(bank, runs, config, net_bank)
    t2 = time.perf_counter()
    per = _breakdown(sim.makespan, sim.busy, np.array(comms), layout, len(m.segments))
    bounds = np.array([p.makespan.interval(p.confidence) for p in plans]).reshape(-1, 2)
    return _ChunkResult(
        sim.makespan.copy(),
        np.array([p.makespan.mean() for p in plans]),
        bounds[:, 0],
        bounds[:, 1],
        per[0],
        per[1],
        per[2],
        plans[0].to_dict(),
        (*plans[0].notes, *(() if blocks else layout.notes)),  # blocks: latencies per link
        t1 - t0,
        t2 - t1,
    )


def _breakdown(
    makespan: FloatArray, busy: FloatArray, comm: FloatArray, layout: _Layout, nseg: int
) -> FloatArray:
    """(compute, communication, waiting) x runs x nodesets: means over each nodeset's nodes;
    waiting is what is left of the makespan. ``comm``: each run's nodes' exchange seconds."""
    P = len(layout.segment)
    per = np.zeros((3, makespan.size, nseg))
    counts = np.bincount(layout.segment, minlength=nseg)
    for r in range(makespan.size):
        node_busy = busy[r, :P]
        wait = makespan[r] - node_busy - comm[r]
        for j, arr in enumerate((node_busy, comm[r], wait)):
            per[j, r] = np.bincount(layout.segment, weights=arr, minlength=nseg) / counts
    return per


def _network(spec: Spec, layout: _Layout) -> tuple[SimConfig, RateBank | None, list[int] | None]:
    """The simulator's constants, and a bank of constant bandwidths (one series per distinct
    value) with each node's index in it when the links differ."""
    ds = spec.dataset(spec.primary.dataset)
    app = (spec.execution.model or "").lower()
    iterations = int(spec.execution.iterations or 0)
    finite = np.isfinite(layout.bandwidth)
    bws = np.unique(layout.bandwidth[finite])
    if bws.size <= 1:
        bw = float(bws[0]) if bws.size else SimConfig(app, 1, 0).bandwidth
        config = SimConfig(app, ds.units_per_row, iterations, bw, layout.latency, ds.bytesperunit)
        return config, None, None
    config = SimConfig(
        app, ds.units_per_row, iterations, latency=layout.latency, elt_size=ds.bytesperunit
    )
    bank = RateBank([(np.array([0.0]), np.array([b])) for b in bws])
    idx = np.searchsorted(bws, np.where(finite, layout.bandwidth, bws[0]))
    return config, bank, idx.tolist()


def _comm_seconds(config: SimConfig, layout: _Layout) -> FloatArray:
    """Each node's halo time over the run: messages per phase x phases x iterations (links
    are constant, so it is the same at every start)."""
    P = len(layout.segment)
    nmsg = chain_messages(P)
    bw = np.where(np.isfinite(layout.bandwidth), layout.bandwidth, config.bandwidth)
    if not np.isfinite(bw).all() or layout.bandwidth.size == 0:
        bw = np.full(P, config.bandwidth)
    per_msg = config.message_seconds(bw)
    return nmsg * per_msg * len(APP_PHASES[config.app]) * config.iterations


def _chunks(n: int, parts: int) -> list[range]:
    parts = max(1, min(parts, n))
    edges = np.linspace(0, n, parts + 1).round().astype(int)
    return [range(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _point_chunks(
    point: SpecPoint, resources: Resources, opts: Options, so: SimOptions, parts: int
) -> tuple[FloatArray, list[_Chunk]]:
    """A point's start times and its tasks: the starts split into ``parts`` chunks, each
    start with its own seed (so the chunking does not change the answer)."""
    check_simulable(point)
    starts = start_times(resources, so)
    seeds = np.random.default_rng([so.seed, 1]).integers(0, 2**63 - 1, so.starts)
    bare = replace(resources, model=None)
    chunks = [
        _Chunk(point, bare, opts, tuple(starts[r].tolist()), tuple(int(s) for s in seeds[r]))
        for r in _chunks(so.starts, parts)
    ]
    return starts, chunks


def _run_task(chunk: _Chunk) -> _ChunkResult:
    """A worker's task: :func:`_run_chunk`, its failures naming the point."""
    try:
        return _run_chunk(chunk)
    except WhatIfError:
        raise
    except ValueError as exc:
        raise failed(chunk.point, exc) from exc


def _assemble(
    point: SpecPoint,
    resources: Resources,
    opts: Options,
    starts: FloatArray,
    results: Sequence[_ChunkResult],
) -> SimPoint:
    """A point's chunks, in start order, as one :class:`SimPoint`."""

    def cat(name: str) -> FloatArray:
        return np.concatenate([getattr(r, name) for r in results])

    comp, comm, wait = cat("compute"), cat("communication"), cat("waiting")
    m = build_machine(point.spec, resources)
    nodesets = tuple(
        SimNodeset(
            seg.nodeset.name,
            seg.nodeset.number,
            float(comp[:, k].mean()),
            float(comm[:, k].mean()),
            float(wait[:, k].mean()),
        )
        for k, seg in enumerate(m.segments)
    )
    first = results[0]
    notes = tuple(dict.fromkeys(first.notes))
    return SimPoint(
        point.values,
        opts.confidence,
        starts,
        cat("makespans"),
        cat("predicted"),
        cat("lower"),
        cat("upper"),
        nodesets,
        first.first,
        notes,
        (sum(r.plan_s for r in results), sum(r.simulate_s for r in results)),
    )


def _simulate(
    points: Sequence[SpecPoint],
    resources: Resources,
    opts: Options,
    so: SimOptions,
    spread: Spread,
    progress: ProgressFn | None = None,
) -> tuple[SimPoint, ...]:
    """Every (point, chunk of starts) task on ``spread``'s executor; each point assembled
    from its chunks by position, ``progress(done, total)`` as each point's last chunk ends."""
    tasks = len(points) * so.starts
    with spread.executor_for(tasks) as ex:
        # enough chunks per point to keep every slot busy, no more (each chunk plans its
        # starts and simulates them in one vectorised call)
        parts = -(-ex.slots // len(points)) if ex.slots > 1 else 1
        split = [_point_chunks(p, resources, opts, so, parts) for p in points]
        owner = [(i, j) for i, (_, chunks) in enumerate(split) for j in range(len(chunks))]
        args = [(chunk,) for _, chunks in split for chunk in chunks]
        parts_of: list[list[_ChunkResult | None]] = [[None] * len(c) for _, c in split]
        left = [len(c) for _, c in split]
        done = 0
        for pos, result in ex.completed(_run_task, args):
            i, j = owner[pos]
            parts_of[i][j] = result
            left[i] -= 1
            if left[i] == 0:
                done += 1
                if progress is not None:
                    progress(done, len(points))
    return tuple(
        _assemble(p, resources, opts, starts, [r for r in parts_of[i] if r is not None])
        for i, (p, (starts, _)) in enumerate(zip(points, split, strict=True))
    )


def simulate_point(
    point: SpecPoint,
    resources: Resources,
    options: Options | None = None,
    sim: SimOptions | None = None,
    spread: Spread | None = None,
) -> SimPoint:
    """Every start time of one point, planned and simulated (see the module docstring)."""
    opts, so = options or Options(), sim or SimOptions()
    return _simulate([point], resources, opts, so, spread or Spread())[0]


def simulate_whatif(
    whatif: WhatIf,
    resolver: Resolver,
    options: Options | None = None,
    sim: SimOptions | None = None,
    spread: Spread | None = None,
    progress: ProgressFn | None = None,
) -> SimReport:
    """Every point of a checked spec, simulated at ``sim.starts`` start times; the (point,
    chunk of starts) tasks spread over ``spread`` (default: a process pool of
    ``sim.workers``), ``progress(done, total)`` per finished point."""
    opts, so = options or Options(), sim or SimOptions()
    for p in whatif.points:
        check_simulable(p)
    resources = resolve(whatif, resolver, pick_warmup=so.warmup_s)
    run = spread or Spread("process", so.workers)
    points = _simulate(whatif.points, resources, opts, so, run, progress)
    return SimReport(
        whatif.source,
        whatif.points[0].spec.title,
        opts,
        so,
        tuple(a.label for a in whatif.axes),
        points,
        whatif.together,
    )


def sim_table_rows(report: SimReport) -> tuple[list[str], list[list[str]]]:
    """The simulated table's header and rows (shared by the text table and the HTML page)."""
    pct = f"{report.options.confidence * 100:g}%"
    head = [*report.axes, "mean s", f"{pct} interval s", "predicted s", "in analytic"]
    names = nodeset_names([p.nodesets for p in report.points])
    head += [f"{n} compute/comm/wait s" for n in names]
    rows = []
    for p in report.points:
        lo, hi = p.interval()
        row = [_value(v) for _, v in p.values]
        row += [
            f"{p.makespans.mean():.4g}",
            f"[{lo:.4g}, {hi:.4g}]",
            f"{p.predicted.mean():.4g}",
            f"{p.coverage * 100:.0f}%",
        ]
        here = {n.nodeset: n for n in p.nodesets}
        row += [
            f"{n.compute:.4g}/{n.communication:.4g}/{n.waiting:.4g}" if n else ABSENT
            for n in (here.get(name) for name in names)
        ]
        rows.append(row)
    return head, rows


def format_sim_table(report: SimReport) -> str:
    """One row per point: the simulated makespans' mean and interval, the analytic interval's
    coverage, and each nodeset's compute / communication / waiting seconds; then the points'
    notes, each once (what a pick chose, what the simulator approximated)."""
    title = (
        f"{report.title or report.source}: simulated at {report.sim.starts} start time(s), "
        f"strategy {report.options.strategy}, {len(report.points)} point(s)"
    )
    notes = [f"note: {n}" for n in dict.fromkeys(x for p in report.points for x in p.notes)]
    return "\n".join([title, *aligned(*sim_table_rows(report)), *notes])
