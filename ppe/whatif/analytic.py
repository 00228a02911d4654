"""The analytic answer for a spec point: PPE's own pipeline over the machine the spec describes.

For each point: the chain of hosts (:mod:`ppe.whatif.machine`), the model (a built-in or file
grammar, or the script's generated one, :mod:`ppe.whatif.scriptmodel`), each host's linear
time ``a * rows + b`` (``ppe.core.linear_host_models``), the strategy's strips
(``scheduler.schedule_rows``: time-balanced over heterogeneous nodesets), the prediction of
that allocation (``ppe.core.predict``) and the horizon loop (``PlanOptions.settle``), exactly
as ``ppe.pipeline.plan`` runs them. That is block1dim (strips); a block2dim or block3dim
point goes to :mod:`ppe.whatif.blockeval` (jagged blocks over a process grid, the same steps
per band), and its "rows" are each node's elements.

**Collapsing identical nodes.** When it is exact, the pipeline's steps run on one
representative per slot (nodes with the same nodeset, links and load) instead of on every
node: each slot's ``(a, b)`` is the same for all its nodes; the scheduler still balances
every node (``schedule_rows`` over 4096 hosts takes ~25 ms); the chosen rows split a slot into
at most a few classes (rows differ by one at most), each predicted once; and the makespan is
the max of independent copies, ``prod_j F_j(t)^m_j`` (:class:`ppe.whatif.iidmax.IidMax`).
Every node holds at least one row (``min_rows = 1``): the distribution places a block on every
node of its nodesets, as in HPF, and the scheduler balances the rest; so no node leaves the
chain and its links stay what the spec says.
Exact when every load is dedicated (all values are numbers, the max over classes is the max
over nodes), or when loads are independent across nodes and the makespan is the max of the
host times (the built-in models; a script with one kind of phase). Otherwise, and for grammar
files (which may use the chain position), every node goes through ``ppe.pipeline.plan``.
tests/whatif check that both paths give the same answer.

**Breakdown** per nodeset (means over its nodes): ``communication`` is, for a grammar model,
the time that does not grow with rows (``b``; for SOR and Jacobi2D exactly the halo
exchanges), for a script the time of its ``send`` and ``move`` statements; ``compute`` is the
rest of the node's time; ``waiting`` is the predicted makespan's mean minus the node's time
(at synchronisations and at the end).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import scheduler
from ppe import core, pipeline
from ppe.core import StochasticValue
from ppe.core.stochastic import Point
from ppe.pipeline import HostForecasts, HostMeta
from ppe.whatif.application import App, app_of, compiled, ends_of
from ppe.whatif.blockeval import BlockRound, block_breakdown, block_notes, evaluate_blocks
from ppe.whatif.iidmax import IidMax, independent_classes
from ppe.whatif.machine import Loads, Machine, Slot, build_machine
from ppe.whatif.options import Options, Spread
from ppe.whatif.report import NodesetResult, PointResult, Report, nodeset_result
from ppe.whatif.resolve import Resolver, Resources, resolve
from ppe.whatif.scriptmodel import script_model_text
from ppe.whatif.spec import SpecPoint, WhatIf

__all__ = [
    "Options",
    "WhatIfError",
    "evaluate",
    "evaluate_point",
    "model_text",
    "plan_point",
    "portable",
]


class WhatIfError(ValueError):
    """A point that cannot be evaluated (the spec was valid); the message names the point."""


# ---------------------------------------------------------------------------- pieces


@dataclass(frozen=True)
class _Chain:
    """A chain to evaluate: host metadata and forecasts in order, with each host's slot."""

    metas: list[HostMeta]
    forecasts: dict[str, HostForecasts]
    slots: list[int]
    ends: list[int]


def _forecast(cpu: StochasticValue, slot: Slot, prev: str | None, nxt: str | None) -> HostForecasts:
    bw: dict[str, StochasticValue] = {}
    if prev is not None and slot.prev is not None:
        bw[prev] = Point(slot.prev.bandwidth)
    if nxt is not None and slot.next is not None:
        bw[nxt] = Point(slot.next.bandwidth)
    return HostForecasts(cpu=cpu, bandwidth=bw, latency=slot.latency)


def _chain(
    m: Machine, order: Sequence[tuple[int, str, int]], cpu: Callable[[Slot], StochasticValue]
) -> _Chain:
    """``order``: (slot index, host name, max rows) in chain order."""
    metas, slots, forecasts = [], [], {}
    names = [name for _, name, _ in order]
    for i, (s, name, _) in enumerate(order):
        slot = m.slots[s]
        seg = m.segments[slot.segment]
        metas.append(HostMeta(name, seg.benchmark, 1, seg.max_rows))
        prev = names[i - 1] if i > 0 else None
        nxt = names[i + 1] if i + 1 < len(names) else None
        forecasts[name] = _forecast(cpu(slot), slot, prev, nxt)
        slots.append(s)
    per_segment = Counter(m.slots[s].segment for s in slots)
    ends = ends_of([per_segment.get(k, 0) for k in range(len(m.segments))])
    return _Chain(metas, pipeline.floor_availability(forecasts), slots, ends)


# -------------------------------------------------------------------------- collapsed


class _NotCollapsible(Exception):
    """The collapsed evaluation would not be exact for this point."""


@dataclass(frozen=True)
class _Class:
    slot: int
    rows: int
    count: int
    time: StochasticValue
    comm: float


@dataclass(frozen=True)
class _Round:
    makespan: StochasticValue
    engine: str
    classes: tuple[_Class, ...]
    floored: tuple[str, ...] = ()
    rows: tuple[int, ...] = ()  # every node's rows, in chain order


def _collapsed_round(
    m: Machine, app: App, loads: Loads, horizon: float | None, opts: Options, deterministic: bool
) -> _Round:
    reps = _chain(
        m, [(i, f"s{i}", 0) for i in range(len(m.slots))], lambda s: loads.value(s.load, horizon)
    )
    model = app.model(reps.ends)
    inputs = pipeline.host_inputs(reps.metas, reps.forecasts)
    ab = core.linear_host_models(
        model, app.params, inputs, engine=opts.engine, samples=opts.samples, seed=opts.seed
    )
    dedicated = opts.dedicated(model, app.params, inputs)
    hosts = [
        scheduler.StochasticHost(
            f"s{i}.{j}", a, b, 1, reps.metas[i].max_rows, dedicated[i] if dedicated else None
        )
        for i, ((a, b), slot) in enumerate(zip(ab, m.slots, strict=True))
        for j in range(slot.count)
    ]
    rows = opts.schedule(hosts, m.total_rows)
    split: list[tuple[int, int, int]] = []  # (slot, rows, count)
    for i, slot in enumerate(m.slots):
        got = Counter(rows[f"s{i}.{j}"] for j in range(slot.count))
        split.extend((i, r, c) for r, c in sorted(got.items(), reverse=True))
    sub = _chain(
        m,
        [(s, f"c{k}", 0) for k, (s, _, _) in enumerate(split)],
        lambda s: loads.value(s.load, horizon),
    )
    sub_inputs = pipeline.host_inputs(sub.metas, sub.forecasts)
    sub_rows = [r for _, r, _ in split]
    pred = core.predict(
        app.model(sub.ends),
        app.params,
        sub_inputs,
        sub_rows,
        engine=opts.engine,
        samples=opts.samples,
        seed=opts.seed,
    )
    if deterministic:
        makespan = pred.makespan
    elif app.single_phase and all(v.kind in ("point", "normal", "numeric") for v in pred.per_host):
        makespan = IidMax(*_independent(m, split, pred.per_host))
    else:
        raise _NotCollapsible("the makespan is not the max of independent host times")
    if app.script:
        comm_pred = core.predict(app.comm_model(sub.ends), app.params, sub_inputs, sub_rows)
        comm = [t.mean() for t in comm_pred.per_host]
    else:
        comm = [float(ab[s][1].mean()) for s, _, _ in split]
    classes = tuple(
        _Class(s, r, c, t, q) for (s, r, c), t, q in zip(split, pred.per_host, comm, strict=True)
    )
    floored = tuple(n for n, f in sub.forecasts.items() if f.floored)
    of = {
        (slot.segment, member): rows[f"s{i}.{j}"]
        for i, slot in enumerate(m.slots)
        for j, member in enumerate(slot.members)
    }
    chain_rows = tuple(of[(k, member)] for k, member, _ in m.chain())
    return _Round(makespan, pred.engine, classes, floored, chain_rows)


def _independent(
    m: Machine, split: Sequence[tuple[int, int, int]], times: Sequence[StochasticValue]
) -> tuple[list[StochasticValue], list[int]]:
    """The host times the makespan is the max of, as independent classes with their counts
    (:func:`ppe.whatif.iidmax.independent_classes`: the strips under one trace count once)."""
    return independent_classes(
        [m.slots[slot].load for slot, _, _ in split], [c for _, _, c in split], times
    )


def _collapsed(
    m: Machine, app: App, loads: Loads, opts: Options
) -> tuple[_Round, pipeline.Settled[_Round]]:
    keys = {s.load for s in m.slots}
    deterministic = loads.deterministic(keys)

    def step(h: float | None) -> tuple[float, _Round]:
        r = _collapsed_round(m, app, loads, h, opts, deterministic)
        return pipeline.run_length(r.makespan), r

    settled = opts.plan_options(loads.static(keys)).settle(step)
    return settled.value, settled


# ------------------------------------------------------------------------------- full


def _full(m: Machine, app: App, loads: Loads, opts: Options) -> tuple[_Round, pipeline.PlanResult]:
    order = [(s, m.node_name(k, member), 0) for k, member, s in _slot_of_nodes(m)]
    cache: dict[float | None, _Chain] = {}

    def chain_at(h: float | None) -> _Chain:
        if h not in cache:
            cache[h] = _chain(m, order, lambda s: loads.value(s.load, h))
        return cache[h]

    base = chain_at(None)

    def forecasts_for(h: float | None) -> Mapping[str, HostForecasts]:
        return chain_at(h).forecasts

    keys = {s.load for s in m.slots}
    result = pipeline.plan(
        app.model(base.ends),
        app.params,
        base.metas,
        forecasts_for,
        opts.strategy,
        opts.plan_options(loads.static(keys)),
    )
    active = [meta for meta in base.metas if result.rows[meta.name] > 0]
    inputs = pipeline.host_inputs(active, result.inputs)
    slot_of = dict(zip((x.name for x in base.metas), base.slots, strict=True))
    if app.script:
        per_seg = Counter(m.slots[slot_of[x.name]].segment for x in active)
        ends = ends_of([per_seg.get(k, 0) for k in range(len(m.segments))])
        comm_pred = core.predict(
            app.comm_model(ends), app.params, inputs, [result.rows[x.name] for x in active]
        )
        comm = {x.name: t.mean() for x, t in zip(active, comm_pred.per_host, strict=True)}
    else:
        ab = core.linear_host_models(
            app.model(base.ends),
            app.params,
            inputs,
            engine=opts.engine,
            samples=opts.samples,
            seed=opts.seed,
        )
        comm = {x.name: float(b.mean()) for x, (_, b) in zip(active, ab, strict=True)}
    classes = tuple(
        _Class(
            slot_of[x.name], result.rows[x.name], 1, result.per_host[x.name], comm.get(x.name, 0.0)
        )
        for x in base.metas
    )
    engine = result.prediction.engine if result.prediction is not None else "auto"
    floored = tuple(n for n, f in result.inputs.items() if f.floored)
    chain_rows = tuple(result.rows[x.name] for x in base.metas)
    return _Round(result.makespan, engine, classes, floored, chain_rows), result


def _slot_of_nodes(m: Machine) -> list[tuple[int, int, int]]:
    return list(m.chain())


# ---------------------------------------------------------------------------- answer


def _breakdown(m: Machine, r: _Round) -> tuple[NodesetResult, ...]:
    span = r.makespan.mean()
    return tuple(
        nodeset_result(
            seg.nodeset.name,
            seg.benchmark,
            [
                (c.count, c.rows, c.time.mean(), c.comm)
                for c in r.classes
                if m.slots[c.slot].segment == k
            ],
            span,
        )
        for k, seg in enumerate(m.segments)
    )


def evaluate_point(
    point: SpecPoint, resources: Resources, options: Options | None = None
) -> PointResult:
    """The analytic prediction of one point (see the module docstring)."""
    return plan_point(point, resources, options)[0]


def plan_point(
    point: SpecPoint,
    resources: Resources,
    options: Options | None = None,
    now: float | None = None,
) -> tuple[PointResult, tuple[int, ...]]:
    """The analytic prediction of one point and the rows it placed on every node (chain
    order; for block2dim and block3dim, :mod:`ppe.whatif.blockeval`, each node's elements).
    ``now``: traces are forecast from that time (their samples before it only; the
    simulated path plans each start time so); default just after their last sample."""
    opts = options or Options()
    if point.spec.primary.type != "block1dim":
        result, blocks = plan_blocks(point, resources, opts, now)
        return result, blocks.rows
    try:
        m = build_machine(point.spec, resources)
        app = app_of(point, resources)
        loads = Loads(resources, now)
        path = "collapsed"
        try:
            if not (opts.collapse and app.collapsible):
                raise _NotCollapsible("off")
            r, settled = _collapsed(m, app, loads, opts)
            horizon, rounds = settled.horizon_s, settled.rounds
        except _NotCollapsible:
            path = "full"
            r, res = _full(m, app, loads, opts)
            horizon, rounds = res.horizon_s, res.rounds
    except (ValueError, scheduler.Infeasible) as exc:  # ModelError, ParameterError are ValueErrors
        raise failed(point, exc) from exc
    notes = [*m.notes, *_floored_notes(r.floored)]
    result = PointResult(
        point.values,
        r.makespan,
        opts.confidence,
        _breakdown(m, r),
        r.engine,
        path,
        m.hosts,
        len(r.classes),
        horizon,
        rounds,
        tuple(notes),
    )
    return result, r.rows


def failed(point: SpecPoint, exc: Exception) -> WhatIfError:
    """``exc`` as a what-if error that names the point (its swept values, if any)."""
    where = ", ".join(f"{k} = {v}" for k, v in point.values)
    return WhatIfError(f"{where + ': ' if where else ''}{exc}")


def _floored_notes(floored: Sequence[str]) -> list[str]:
    if not floored:
        return []
    return [f"{len(floored)} host class(es) planned at the CPU floor {core.CPU_FLOOR:g}"]


def plan_blocks(
    point: SpecPoint, resources: Resources, options: Options | None = None, now: float | None = None
) -> tuple[PointResult, BlockRound]:
    """A block2dim or block3dim point's prediction and the round behind it (each node's
    elements, its "rows" in :func:`plan_point`, and exchanges, which the simulated path
    runs)."""
    opts = options or Options()
    try:
        m = build_machine(point.spec, resources)
        r, settled = evaluate_blocks(m, app_of(point, resources), Loads(resources, now), opts)
    except (ValueError, scheduler.Infeasible) as exc:
        raise failed(point, exc) from exc
    result = PointResult(
        point.values,
        r.makespan,
        opts.confidence,
        block_breakdown(m, r),
        r.engine,
        "blocks",
        m.hosts,
        len(r.classes),
        settled.horizon_s,
        settled.rounds,
        tuple([*m.notes, *block_notes(r), *_floored_notes(r.floored)]),
        r.grid,
    )
    return result, r


def model_text(point: SpecPoint, resources: Resources) -> str | None:
    """A script's generated grammar over the point's full chain (None for a grammar model)."""
    app = app_of(point, resources)
    if app.fixed is not None:
        return None
    counts = [point.spec.nodeset(n).number for n in point.spec.primary.nodesets]
    return script_model_text(point.spec, app.phases, ends_of(counts))


def evaluate(
    whatif: WhatIf,
    resolver: Resolver,
    options: Options | None = None,
    spread: Spread | None = None,
) -> Report:
    """Every point of a checked spec: references read first (:func:`resolve`), then each point
    planned and predicted (spread over ``spread``'s workers)."""
    opts = options or Options()
    check_strategy(opts)
    return evaluate_resolved(whatif, resolve(whatif, resolver), opts, spread=spread)


def check_strategy(options: Options) -> None:
    if options.strategy not in scheduler.STRATEGIES:
        raise WhatIfError(
            f"unknown strategy {options.strategy!r}; choose from {', '.join(scheduler.STRATEGIES)}"
        )


def portable(resources: Resources) -> bool:
    """Whether the references can travel to other processes: live forecasts of registered
    hosts are read from this process's store, so a spec using them is evaluated here."""
    return all(h.cpu is None for h in resources.hosts.values())


def _point_task(
    point: SpecPoint, resources: Resources, model: str | None, options: Options
) -> PointResult:
    """A worker's point: the compiled model rebuilt from its text (a pickled copy loses what
    the engines key on by identity), then the point as :func:`evaluate_point` answers it."""
    if model is not None:
        resources = replace(resources, model=compiled(model))
    return evaluate_point(point, resources, options)


def evaluate_resolved(
    whatif: WhatIf,
    resources: Resources,
    options: Options,
    progress: Callable[[int, int], None] | None = None,
    spread: Spread | None = None,
) -> Report:
    """Every point of a spec whose references are read, calling ``progress(done, total)``
    as each finishes (the service's jobs report it). Points are independent: with ``spread``
    they run on its executor's workers, results in point order, the same as one by one."""
    run = spread or Spread()
    points = list(whatif.points)
    if run.spreads(len(points)):
        if not portable(resources):
            raise WhatIfError(
                "a spec reading live forecasts (load = forecasts) is evaluated in one process: "
                "use the serial executor"
            )
        model = resources.model.text if resources.model is not None else None
        bare = replace(resources, model=None)
        with run.executor_for(len(points)) as ex:
            args = [(p, bare, model, options) for p in points]
            results = ex.map(_point_task, args, progress)
    else:
        results = []
        for i, point in enumerate(points):
            results.append(evaluate_point(point, resources, options))
            if progress is not None:
                progress(i + 1, len(points))
    return Report(
        whatif.source,
        whatif.points[0].spec.title,
        options,
        tuple(a.label for a in whatif.axes),
        tuple(results),
        model_text(whatif.points[0], resources),
        whatif.together,
    )
