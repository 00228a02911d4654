"""The analytic answer for a block2dim or block3dim point: jagged blocks over a process grid,
each band a chain of strips planned and predicted by the point's own model (docs/whatif.md,
"Blocks").

**Layout** (:mod:`ppe.whatif.blocks`): the members in chain order fill the process grid
row-major. Along the first split axis they form groups (bands in 2-D, slabs in 3-D) of
consecutive members; each group splits along the next axis the same way; the members of an
innermost group are a chain along the last split axis.

**Sizes.** Along the last split axis, a band's members are strips of the band's face: the
model (SOR, Jacobi2D) with ``n`` = the face (the elements of one layer of the band), their
linear times ``a * width + b`` (``core.linear_host_models``: compute, and the halo exchanges
with the members beside them over their links) and the point's strategy
(``scheduler.schedule_rows``, every member at least one layer): time-balanced widths, as
block1dim balances rows. Along an outer axis, each group is one host of a chain of groups:
its time per layer is its members' combined speed (``1 / sum(1 / a_j)`` of their times per
layer, a stochastic value the strategy reads as it reads a strip host's), its fixed time
their exchanges with the neighbouring groups (each member's share of the layer, in
proportion to its mean speed, over the link to the member facing it; speed-weighted
mean), and ``schedule_rows`` gives the groups' sizes. A group of one member is exactly the
strip host block1dim makes of it, so a P x 1 grid plans block1dim's rows. The sizes are
chosen twice, the second time with each rank's exchanges across the outer axes as the first
layout has them, and the layout with the smaller predicted mean is kept (:meth:`_Layout.run`).

**Times.** A member's time is its band's prediction (``core.predict`` over the band's
chain: compute and the exchanges along the last axis, with its load) plus its exchanges
across the outer axes: one per block it touches there, of the face they share, over the
link between the two members, at the time the model gives an exchange of that face
(:class:`_Halos`). The makespan is the max of the members' times, independent except the
members on one recorded trace (:func:`ppe.whatif.iidmax.independent_classes`), through
:class:`~ppe.whatif.iidmax.IidMax`; identical bands are planned once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

import scheduler
from ppe import core, pipeline
from ppe.core import StochasticValue
from ppe.core.stochastic import Point, Samples
from ppe.pipeline import HostForecasts, PlanOptions
from ppe.whatif.application import App
from ppe.whatif.blocks import Block, adjacent, face_overlaps, grid_text, process_grid
from ppe.whatif.iidmax import IidMax, independent_classes, shifted
from ppe.whatif.machine import Link, LoadKey, Loads, Machine, effective_link
from ppe.whatif.options import Options
from ppe.whatif.report import NodesetResult, nodeset_result
from ppe.whatif.spec import DISTRIBUTION_TYPES

__all__ = ["BlockRound", "block_breakdown", "block_notes", "evaluate_blocks"]

#: Face sizes (elements) at which the model's exchange time is probed; a third checks it is
#: affine in the face (latency + bytes / bandwidth in the built-in models).
_PROBE_FACE = 1000.0


@dataclass(frozen=True)
class _Rank:
    index: int  # chain position = rank
    segment: int
    slot: int
    name: str


@dataclass(frozen=True)
class BlockClass:
    """Members with the same block size, prediction and exchanges."""

    segment: int
    elements: int
    count: int
    time: StochasticValue
    comm: float
    load: LoadKey


@dataclass(frozen=True)
class BlockRound:
    makespan: StochasticValue
    engine: str
    classes: tuple[BlockClass, ...]
    floored: tuple[str, ...]
    rows: tuple[int, ...]  # every member's elements, in chain order
    grid: tuple[int, ...]
    blocks: tuple[Block, ...]
    #: nodesets with a node between two links of different latencies in its band
    mixed_latency: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Leaf:
    block: Block
    time: StochasticValue
    comm: float


class _Halos:
    """The model's time, over the whole run, of a member's exchanges with one neighbour over
    a link when they share a face of ``n`` elements: ``b`` of a chain of two hosts joined by
    the link (``core.linear_host_models``), probed at two faces and checked at a third, so a
    face of any size costs what the model says without evaluating it again."""

    def __init__(self, model: core.CompiledModel, params: Callable[[float], dict[str, float]]):
        self.model = model
        self.params = params
        self.lines: dict[Link, tuple[float, float]] = {}

    def time(self, n: float, link: Link) -> float:
        if link not in self.lines:
            self.lines[link] = self._line(link)
        intercept, slope = self.lines[link]
        return intercept + slope * n

    def _b(self, n: float, link: Link) -> float:
        pair = [
            core.HostInputs(
                name="x", benchmark=1.0, cpu=Point(1.0), bw_next=Point(link.bandwidth),
                latency=link.latency,
            ),
            core.HostInputs(
                name="y", benchmark=1.0, cpu=Point(1.0), bw_prev=Point(link.bandwidth),
                latency=link.latency,
            ),
        ]  # fmt: skip
        return float(core.linear_host_models(self.model, self.params(n), pair)[0][1].mean())

    def _line(self, link: Link) -> tuple[float, float]:
        b1, b2, b4 = (self._b(k * _PROBE_FACE, link) for k in (1, 2, 4))
        slope = (b2 - b1) / _PROBE_FACE
        intercept = b1 - slope * _PROBE_FACE
        expected = intercept + 4 * _PROBE_FACE * slope
        if abs(b4 - expected) > 1e-9 * max(abs(b4), abs(expected), 1e-300):
            raise ValueError(
                "the model's exchange time is not affine in the face it sends (n); "
                "block distributions need latency + bytes / bandwidth per message"
            )
        return intercept, slope


class _Layout:
    """One round of one point: sizes, predictions and exchanges at one horizon."""

    def __init__(
        self, m: Machine, app: App, loads: Loads, horizon: float | None, opts: Options
    ) -> None:
        assert app.fixed is not None  # the spec's checks: built-in models only
        self.m, self.app, self.loads, self.horizon, self.opts = m, app, loads, horizon, opts
        self.model = app.fixed
        spec = m.spec
        self.ds = spec.dataset(spec.primary.dataset)
        self.dims = DISTRIBUTION_TYPES[spec.primary.type]
        index = {id(s): i for i, s in enumerate(m.slots)}
        self.ranks = [
            _Rank(r, k, index[id(slot)], m.node_name(k, member))
            for r, (k, member, slot) in enumerate(m.chain())
        ]
        grid = process_grid(len(self.ranks), self.ds.size, self.dims)
        if grid is None:  # the spec's checks refuse it first
            raise ValueError(f"no process grid of {len(self.ranks)} nodes fits {self.ds.size}")
        self.grid = grid
        self.halos = _Halos(self.model, self.params)
        self.links: dict[tuple[int, int], Link] = {}
        self.floored: set[str] = set()
        self.mixed_latency: set[str] = set()
        self.engine = "auto"
        # identical groups and bands (the same nodesets and loads, the same sizes) plan once
        self.sizes: dict[tuple[object, ...], list[int]] = {}
        # each rank's exchanges across the outer axes on the first layout (second pass)
        self.outer: list[float] | None = None
        self.bands: dict[
            tuple[object, ...], tuple[list[int], list[StochasticValue], list[float]]
        ] = {}

    # -- inputs

    def params(self, n: float) -> dict[str, float]:
        return {**self.app.params, "n": float(n)}

    def link(self, a: _Rank, b: _Rank) -> Link:
        key = (min(a.segment, b.segment), max(a.segment, b.segment))
        if key not in self.links:
            seg_a, seg_b = self.m.segments[key[0]], self.m.segments[key[1]]
            found = self.m.spec.link_between(seg_a.nodeset.name, seg_b.nodeset.name)
            if found is None:  # the spec's checks ask for every link the grid can use
                raise ValueError(
                    f"no linkset joins {seg_a.nodeset.name!r} and {seg_b.nodeset.name!r}"
                )
            self.links[key] = effective_link(found, seg_a.nodeset, seg_b.nodeset)
        return self.links[key]

    def cpu(self, r: _Rank) -> StochasticValue:
        raw = self.loads.value(self.m.slots[r.slot].load, self.horizon)
        f = pipeline.floor_availability({r.name: HostForecasts(cpu=raw)})[r.name]
        if f.floored:
            self.floored.add(r.name)
        return f.cpu

    def around(self, ranks: Sequence[_Rank], i: int) -> tuple[Link | None, Link | None]:
        """The links to rank i's neighbours in the chain ``ranks``."""
        prev = self.link(ranks[i - 1], ranks[i]) if i > 0 else None
        nxt = self.link(ranks[i], ranks[i + 1]) if i + 1 < len(ranks) else None
        return prev, nxt

    def chain(
        self, ranks: Sequence[_Rank], extra: Sequence[object] | None = None
    ) -> tuple[list[core.HostInputs], list[int]]:
        """``ranks`` as a chain of hosts, one per kind: ranks with the same nodeset, load,
        links to their neighbours (and ``extra``, e.g. their sizes) get the same inputs, so
        one representative stands for them, as slots do for strips; the chain's ends stay
        its ends (only they lack a neighbour). Returns the representatives' inputs and each
        rank's representative."""
        index: dict[tuple[object, ...], int] = {}
        out: list[core.HostInputs] = []
        of: list[int] = []
        for i, r in enumerate(ranks):
            prev, nxt = self.around(ranks, i)
            key = (r.segment, self.m.slots[r.slot].load, prev, nxt, extra[i] if extra else None)
            if key not in index:
                index[key] = len(out)
                if prev is not None and nxt is not None and prev.latency != nxt.latency:
                    self.mixed_latency.add(self.m.segments[r.segment].nodeset.name)
                out.append(
                    core.HostInputs(
                        name=r.name,
                        benchmark=self.m.segments[r.segment].benchmark,
                        cpu=self.cpu(r),
                        bw_next=Point(nxt.bandwidth) if nxt is not None else None,
                        bw_prev=Point(prev.bandwidth) if prev is not None else None,
                        latency=max((x.latency for x in (prev, nxt) if x is not None), default=0.0),
                    )
                )
            of.append(index[key])
        return out, of

    def linear(
        self, n: float, inputs: list[core.HostInputs]
    ) -> tuple[list[tuple[StochasticValue, StochasticValue]], list[float | None]]:
        """Each host's ``(a, b)`` at face ``n``, and its dedicated ``a`` for ``static``."""
        o = self.opts
        ab = core.linear_host_models(
            self.model, self.params(n), inputs, engine=o.engine, samples=o.samples, seed=o.seed
        )
        dedicated: list[float | None] = [None] * len(ab)
        if o.strategy == "static":
            idle = [replace(x, cpu=Point(1.0)) for x in inputs]
            dedicated = [
                float(a.mean())
                for a, _ in core.linear_host_models(self.model, self.params(n), idle)
            ]
        return ab, dedicated

    def schedule(self, hosts: list[scheduler.StochasticHost], total: int) -> list[int]:
        o = self.opts
        rows = scheduler.schedule_rows(
            hosts,
            total,
            o.strategy,
            k=o.k,
            quantile=o.quantile,
            samples=PlanOptions().schedule_samples,
            seed=o.seed,
        )
        return [rows[h.name] for h in hosts]

    def signature(self, ranks: Sequence[_Rank]) -> tuple[object, ...]:
        """What a run of ranks' plan depends on: their nodesets and loads (links follow)."""
        outer = self.outer
        return tuple(
            (r.segment, self.m.slots[r.slot].load, outer[r.index] if outer else 0.0) for r in ranks
        )

    # -- sizes

    def split(self, ranks: Sequence[_Rank], box: Block, axis: int) -> list[_Leaf]:
        """The blocks of ``ranks`` inside ``box``, from split axis ``axis`` inward."""
        if axis == self.dims - 1:
            return self.band(ranks, box, axis)
        size = len(ranks) // self.grid[axis]
        groups = [ranks[g * size : (g + 1) * size] for g in range(self.grid[axis])]
        out: list[_Leaf] = []
        start = box.lo[axis]
        for g, h in zip(groups, self.heights(groups, box, axis), strict=True):
            out.extend(self.split(g, box.cut(axis, start, h), axis + 1))
            start += h
        return out

    def heights(self, groups: list[Sequence[_Rank]], box: Block, axis: int) -> list[int]:
        """The groups' sizes along ``axis``: one strip host per group (see the module)."""
        extent = box.extents[axis]
        layer = box.elements // extent
        key = ("heights", tuple(self.signature(g) for g in groups), layer, extent)
        if key not in self.sizes:
            every = [r for g in groups for r in g]
            inputs, of = self.chain(every)
            ab, dedicated = self.linear(layer, inputs)
            hosts, start = [], 0
            for gi, g in enumerate(groups):
                mine = [of[i] for i in range(start, start + len(g))]
                start += len(g)
                if len(g) == 1:  # a strip host of the chain of groups, as block1dim's
                    a, b = ab[mine[0]]
                    ded = dedicated[mine[0]]
                else:
                    a, b = self.combined(groups, gi, [ab[i][0] for i in mine], layer)
                    ded = None
                    if dedicated[0] is not None:
                        ded = 1.0 / sum(1.0 / float(dedicated[i] or 0.0) for i in mine)
                hosts.append(scheduler.StochasticHost(f"g{gi}", a, b, 1, None, ded))
            self.sizes[key] = self.schedule(hosts, extent)
        return self.sizes[key]

    def combined(
        self, groups: list[Sequence[_Rank]], gi: int, a: list[StochasticValue], layer: int
    ) -> tuple[StochasticValue, StochasticValue]:
        """A group of several members as one host: time per layer at their combined speed,
        and its exchanges with the groups beside it (each member's share of the layer, in
        proportion to its mean speed, to the member facing it), speed-weighted."""
        group = groups[gi]
        per_layer = _combined(a, PlanOptions().schedule_samples, self.opts.seed)
        speeds = [1.0 / x.mean() for x in a]
        total = sum(speeds)
        beside = [groups[j] for j in (gi - 1, gi + 1) if 0 <= j < len(groups)]
        fixed = 0.0
        for j, (r, s) in enumerate(zip(group, speeds, strict=True)):
            if self.outer is not None:  # measured on the first layout
                fixed += s * self.outer[r.index]
                continue
            share = layer * s / total
            fixed += s * sum(self.halos.time(share, self.link(r, other[j])) for other in beside)
        return per_layer, Point(fixed / total)

    def band(self, ranks: Sequence[_Rank], box: Block, axis: int) -> list[_Leaf]:
        """An innermost group: a chain of strips of its face along ``axis``."""
        extent = box.extents[axis]
        face = box.elements // extent
        key = ("band", self.signature(ranks), face, extent)
        if key not in self.bands:
            inputs, of = self.chain(ranks)
            ab, dedicated = self.linear(face, inputs)
            layer_bytes = self.ds.bytesperunit * face
            outer = self.outer or [0.0] * len(self.ranks)
            hosts = [
                scheduler.StochasticHost(
                    r.name,
                    ab[k][0],
                    shifted(ab[k][1], outer[r.index]),
                    1,
                    self._max_width(r, layer_bytes),
                    dedicated[k],
                )
                for r, k in zip(ranks, of, strict=True)
            ]
            widths = self.schedule(hosts, extent)
            sized, kind = self.chain(ranks, widths)
            rep_widths = [widths[kind.index(k)] for k in range(len(sized))]
            o = self.opts
            pred = core.predict(
                self.model, self.params(face), sized, rep_widths,
                engine=o.engine, samples=o.samples, seed=o.seed,
            )  # fmt: skip
            self.engine = pred.engine
            times = [pred.per_host[k] for k in kind]
            comm = [float(ab[k][1].mean()) for k in of]
            self.bands[key] = (widths, times, comm)
        widths, times, comm = self.bands[key]
        out, start = [], box.lo[axis]
        for w, t, c in zip(widths, times, comm, strict=True):
            out.append(_Leaf(box.cut(axis, start, w), t, c))
            start += w
        return out

    def _max_width(self, r: _Rank, layer_bytes: float) -> int | None:
        grain = self.m.segments[r.segment].nodeset.grainsize
        return None if grain is None else int(grain // layer_bytes)

    # -- exchanges across the outer axes

    def across(self, leaves: Sequence[_Leaf]) -> list[float]:
        """Each rank's exchanges with the blocks it touches across the outer split axes."""
        extra = [0.0] * len(leaves)
        for adj in adjacent(self.grid):
            if adj.innermost:
                continue
            shared = face_overlaps(
                [leaves[i].block for i in adj.a], [leaves[j].block for j in adj.b], adj.axis
            )
            for i, j in zip(*shared.nonzero(), strict=True):
                ra, rb = self.ranks[adj.a[i]], self.ranks[adj.b[j]]
                t = self.halos.time(float(shared[i, j]), self.link(ra, rb))
                extra[ra.index] += t
                extra[rb.index] += t
        return extra

    def run(self) -> BlockRound:
        """Size, predict, and size again with each rank's exchanges across the outer axes as
        the first layout has them: a band's widths then balance those too (a rank whose
        block touches many small ones pays a latency for each) and a group's fixed time is
        its members' own. The layout with the smaller predicted mean is kept (groups of one
        member are strip hosts either way: a P x 1 grid has one layout)."""
        first, extra = self.layout()
        if not any(extra):
            return first
        self.outer = extra
        self.sizes.clear()
        self.bands.clear()
        second, _ = self.layout()
        return second if second.makespan.mean() < first.makespan.mean() else first

    def layout(self) -> tuple[BlockRound, list[float]]:
        whole = Block(tuple(0 for _ in self.ds.size), tuple(self.ds.size))
        leaves = self.split(self.ranks, whole, 0)
        extra = self.across(leaves)
        counts: Counter[tuple[object, ...]] = Counter()
        first: dict[tuple[object, ...], tuple[_Leaf, float, _Rank]] = {}
        for r, leaf, c in zip(self.ranks, leaves, extra, strict=True):
            key = (id(leaf.time), c, r.segment, leaf.block.elements, self.m.slots[r.slot].load)
            counts[key] += 1
            first.setdefault(key, (leaf, c, r))
        classes = tuple(
            BlockClass(
                r.segment,
                leaf.block.elements,
                counts[key],
                shifted(leaf.time, c),
                leaf.comm + c,
                self.m.slots[r.slot].load,
            )
            for key, (leaf, c, r) in first.items()
        )
        found = BlockRound(
            _makespan(classes),
            self.engine,
            classes,
            tuple(sorted(self.floored)),
            tuple(leaf.block.elements for leaf in leaves),
            self.grid,
            tuple(leaf.block for leaf in leaves),
            tuple(sorted(self.mixed_latency)),
        )
        return found, extra


def _combined(a: Sequence[StochasticValue], samples: int, seed: int) -> StochasticValue:
    """``1 / sum_j 1 / a_j`` over independent members (their combined speed, as time per
    layer): exact for numbers, else from independent draws of each member's ``a``
    (members sharing one value object are still independent copies of it)."""
    if all(x.kind == "point" for x in a):
        return Point(1.0 / sum(1.0 / x.mean() for x in a))
    rng = np.random.default_rng(seed)
    speed = np.zeros(samples)
    for x in a:
        speed += 1.0 / np.asarray(x.rvs(samples, rng), dtype=np.float64)
    return Samples(1.0 / speed, seed)


def _makespan(classes: Sequence[BlockClass]) -> StochasticValue:
    """The max of the members' times: a number when every time is one, else the max of
    independent copies (one per recorded trace for the members sharing it)."""
    if all(c.time.kind == "point" for c in classes):
        return Point(max(c.time.mean() for c in classes))
    values, counts = independent_classes(
        [c.load for c in classes], [c.count for c in classes], [c.time for c in classes]
    )
    return IidMax(values, counts)


def evaluate_blocks(
    m: Machine, app: App, loads: Loads, opts: Options
) -> tuple[BlockRound, pipeline.Settled[BlockRound]]:
    """A block point through the horizon loop (``PlanOptions.settle``), as the strips'."""
    keys = {s.load for s in m.slots}

    def step(h: float | None) -> tuple[float, BlockRound]:
        r = _Layout(m, app, loads, h, opts).run()
        return pipeline.run_length(r.makespan), r

    settled = opts.plan_options(loads.static(keys)).settle(step)
    return settled.value, settled


def block_breakdown(m: Machine, r: BlockRound) -> tuple[NodesetResult, ...]:
    """Per nodeset: elements per member, and mean compute / communication / waiting."""
    span = r.makespan.mean()
    parts: dict[int, list[tuple[int, int, float, float]]] = defaultdict(list)
    for c in r.classes:
        parts[c.segment].append((c.count, c.elements, c.time.mean(), c.comm))
    return tuple(
        nodeset_result(seg.nodeset.name, seg.benchmark, parts[k], span)
        for k, seg in enumerate(m.segments)
    )


def block_notes(r: BlockRound) -> list[str]:
    """What the report says about the layout."""
    ranks = len(r.rows)
    text = grid_text(r.grid)
    notes = [
        f"process grid {text} over {ranks} nodes (chain order, row-major): jagged blocks, "
        f"{min(r.rows)}-{max(r.rows)} elements per node"
    ]
    if ranks > 1 and all(ranks % d for d in range(2, ranks)) and len(r.grid) > 1:
        notes.append(f"{ranks} nodes is a prime number: the process grid is {text}, strips")
    notes.extend(
        f"nodeset {name!r}: a node between links of different latencies in its band is "
        "planned with the larger there (the models take one latency per host); its exchanges "
        "across the other axes each pay their own link's"
        for name in r.mixed_latency
    )
    return notes
