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
block1dim balances rows, each at most what its ``grainsize`` holds. Along an outer axis,
each group is one host of a chain of groups: its time per layer is its members' combined
speed (:func:`harmonic` of their times per layer, a stochastic value the strategy reads as it
reads a strip host's) plus their exchanges inside the group that grow with its size, its
fixed time the rest of their exchanges (latencies, and the neighbouring groups': each
member's share of the layer, in proportion to its mean speed, over the link to the member
facing it), all speed-weighted (:meth:`_Layout.combined`), its most layers what its members'
memory holds together, and ``schedule_rows`` gives the groups' sizes. A group of one member
is exactly the strip host block1dim makes of it, so a P x 1 grid plans block1dim's rows. The
sizes are chosen twice, the second time with each rank's exchanges across the outer axes as
the first layout has them, and the layout with the smaller predicted mean is kept
(:meth:`_Layout.run`).

**Times.** A member's time is its band's prediction (``core.predict`` over the band's
chain: compute and the exchanges along the last axis, with its load) plus its exchanges
across the outer axes: one per block it touches there, of the face they share, over the
link between the two members, at the time the model gives an exchange of that face
(:class:`_Halos`). The makespan is the max of the members' times, independent except the
members on one recorded trace (:func:`ppe.whatif.iidmax.independent_classes`), through
:class:`~ppe.whatif.iidmax.IidMax`; identical bands are planned once.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import scheduler
from ppe import core, pipeline
from ppe.core import StochasticValue
from ppe.core.montecarlo import Space
from ppe.core.stochastic import Normal, Point, Samples
from ppe.pipeline import HostForecasts, PlanOptions
from ppe.whatif.application import App
from ppe.whatif.blocks import Block, adjacent, face_overlaps, grid_text, process_grid
from ppe.whatif.iidmax import IidMax, independent_classes, on_trace
from ppe.whatif.machine import Link, LoadKey, Loads, Machine, effective_link
from ppe.whatif.options import Options
from ppe.whatif.report import NodesetResult, nodeset_result
from ppe.whatif.spec import DISTRIBUTION_TYPES

__all__ = ["BlockRound", "block_breakdown", "block_notes", "evaluate_blocks"]

FloatArray = npt.NDArray[np.float64]

#: Face size (elements) at which the model's exchange time is probed, with twice it.
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
    #: nodesets with a node between two links of different latencies in its band
    mixed_latency: tuple[str, ...] = ()
    #: every member's exchanges over the whole run (seconds, chain order): what the
    #: simulated path charges it
    comm: tuple[float, ...] = ()


@dataclass(frozen=True)
class _Leaf:
    block: Block
    time: StochasticValue
    comm: float


def harmonic(times: Sequence[float]) -> float:
    """``1 / sum_j 1 / t_j``: the time per layer of members sharing it at their combined
    speed (each a fraction of the layer in proportion to its speed)."""
    return 1.0 / sum(1.0 / t for t in times)


class Shifted(StochasticValue):
    """``value + shift`` for a number ``shift``, exactly (the core's arithmetic would sample a
    numeric value): a block's time is its band's predicted time plus the deterministic time
    of its exchanges across the other axes."""

    kind = "numeric"

    def __init__(self, value: StochasticValue, shift: float) -> None:
        super().__init__()
        self.value = value
        self.shift = float(shift)

    def __repr__(self) -> str:
        return f"Shifted({self.value!r}, {self.shift:g})"

    def mean(self) -> float:
        return self.value.mean() + self.shift

    def std(self) -> float:
        return self.value.std()

    def var(self) -> float:
        return self.value.var()

    def cdf(self, x: Any) -> Any:
        return self.value.cdf(np.asarray(x, dtype=np.float64) - self.shift)

    def ppf(self, q: Any) -> Any:
        out = np.asarray(self.value.ppf(q), dtype=np.float64) + self.shift
        return float(out) if out.ndim == 0 else out

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        return np.asarray(self.value.sample(n, rng), dtype=np.float64) + self.shift

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(w, m + self.shift, s) for w, m, s in self.value.components]

    def _draw(self, space: Space) -> FloatArray:
        return np.asarray(self.value._draw(space), dtype=np.float64) + self.shift


def shifted(value: StochasticValue, shift: float) -> StochasticValue:
    """``value + shift``: a point or a normal stays one (exact), anything else is
    :class:`Shifted`."""
    if shift == 0:
        return value
    if value.kind == "point":
        return Point(value.mean() + shift)
    if value.kind == "normal" and len(value.components) == 1:
        return Normal(value.mean() + shift, value.std())
    return Shifted(value, shift)


class _Halos:
    """The model's time, over the whole run, of a member's exchanges with one neighbour over
    a link when they share a face of ``n`` elements: ``b`` of a chain of two hosts joined by
    the link (``core.linear_host_models``), a line in ``n`` (latency + bytes / bandwidth per
    message in the built-in models, the only ones blocks evaluate) probed at two faces, so a
    face of any size costs what the model says without evaluating it again."""

    def __init__(
        self, model: core.CompiledModel, params: Callable[[float], dict[str, float]]
    ) -> None:
        self.model = model
        self.params = params
        self.lines: dict[Link, tuple[float, float]] = {}

    def time(self, n: float, link: Link) -> float:
        intercept, slope = self.line(link)
        return intercept + slope * n

    def line(self, link: Link) -> tuple[float, float]:
        """``(intercept, slope)``: the time of an exchange of a face of ``n`` elements is
        ``intercept + slope * n``."""
        if link not in self.lines:
            b1, b2 = (self._b(k * _PROBE_FACE, link) for k in (1, 2))
            slope = (b2 - b1) / _PROBE_FACE
            self.lines[link] = (b1 - slope * _PROBE_FACE, slope)
        return self.lines[link]

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
        self.ranks = [
            _Rank(r, k, slot, m.node_name(k, member))
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
        # each rank's exchanges across each outer split axis on the first layout (second
        # pass): outer[axis][rank]
        self.outer: list[list[float]] | None = None
        self.bands: dict[
            tuple[object, ...], tuple[list[int], list[StochasticValue], list[float]]
        ] = {}
        # a group's combined speed by its members' values and loads: groups made of the
        # same chain representatives draw once (the draws are seeded alike, so this is the
        # value each would draw; 4096 nodes on 64 x 64 blocks drew 33 M samples without it)
        self.speeds: dict[tuple[object, ...], tuple[list[StochasticValue], StochasticValue]] = {}
        self.faces: dict[tuple[object, ...], list[list[tuple[int, float]]]] = {}

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

    def load(self, r: _Rank) -> LoadKey:
        return self.m.slots[r.slot].load

    def cpu(self, r: _Rank) -> StochasticValue:
        raw = self.loads.value(self.load(r), self.horizon)
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
            key = (r.segment, self.load(r), prev, nxt, extra[i] if extra is not None else None)
            if key not in index:
                index[key] = len(out)
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
    ) -> tuple[list[tuple[StochasticValue, StochasticValue]], list[float] | None]:
        """Each host's ``(a, b)`` at face ``n``, and its dedicated ``a`` for ``static``."""
        o = self.opts
        ab = core.linear_host_models(
            self.model, self.params(n), inputs, engine=o.engine, samples=o.samples, seed=o.seed
        )
        return ab, o.dedicated(self.model, self.params(n), inputs)

    def schedule(self, hosts: list[scheduler.StochasticHost], total: int, what: str) -> list[int]:
        try:
            rows = self.opts.schedule(hosts, total)
        except scheduler.Infeasible as exc:
            raise scheduler.Infeasible(
                f"sizing the {what} of the {grid_text(self.grid)} process grid: {exc}"
            ) from exc
        return [rows[h.name] for h in hosts]

    def signature(self, ranks: Sequence[_Rank]) -> tuple[object, ...]:
        """What a run of ranks' plan depends on: their nodesets and loads (links follow)."""
        return tuple((r.segment, self.load(r), self.outer_total(r)) for r in ranks)

    def outer_total(self, r: _Rank, upto: int | None = None) -> float:
        """Rank r's exchanges across the outer split axes up to ``upto`` (default: all) on
        the first layout; 0 on the first pass."""
        if self.outer is None:
            return 0.0
        last = len(self.outer) if upto is None else upto + 1
        return sum(per[r.index] for per in self.outer[:last])

    # -- memory

    def capacity(self, ranks: Sequence[_Rank], layer: int, what: str) -> int | None:
        """The most layers of ``layer`` elements ``ranks`` hold together (their grainsizes;
        None when one has no bound)."""
        grains = [self.m.segments[r.segment].nodeset.grainsize for r in ranks]
        if any(g is None for g in grains):
            return None
        layer_bytes = self.ds.bytesperunit * layer
        total = sum(g for g in grains if g is not None)
        cap = int(total // layer_bytes)
        if cap < 1:
            names = ", ".join(dict.fromkeys(self.m.segments[r.segment].nodeset.name for r in ranks))
            raise ValueError(
                f"the {what} of nodes of {names} in the {grid_text(self.grid)} process grid "
                f"holds {total:g} bytes (grainsize), less than one layer of it "
                f"({layer} elements, {layer_bytes:g} bytes)"
            )
        return cap

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
        key = ("heights", tuple(self.signature(g) for g in groups), box.extents, axis)
        if key not in self.sizes:
            what = "slabs" if self.dims == 3 and axis == 0 else "bands"
            every = [r for g in groups for r in g]
            inputs, of = self.chain(every)
            ab, dedicated = self.linear(layer, inputs)
            hosts, start = [], 0
            for gi, g in enumerate(groups):
                mine = of[start : start + len(g)]
                start += len(g)
                cap = self.capacity(g, layer, what[:-1])
                if len(g) == 1:  # a strip host of the chain of groups, as block1dim's
                    a, b = ab[mine[0]]
                    ded = dedicated[mine[0]] if dedicated is not None else None
                else:
                    a, b = self.combined(groups, gi, [ab[i][0] for i in mine], box, axis)
                    ded = harmonic([dedicated[i] for i in mine]) if dedicated is not None else None
                hosts.append(scheduler.StochasticHost(f"g{gi}", a, b, 1, cap, ded))
            self.sizes[key] = self.schedule(hosts, extent, what)
        return self.sizes[key]

    def combined(
        self,
        groups: list[Sequence[_Rank]],
        gi: int,
        a: list[StochasticValue],
        box: Block,
        axis: int,
    ) -> tuple[StochasticValue, StochasticValue]:
        """A group of several members as one host of a chain of groups along ``axis``.

        Balanced, member j (speed ``s_j = 1 / a_j`` per layer, ``S`` their sum) finishes a
        group of ``h`` layers at ``T = a_j f_j h + c_j + d_j h``, its share ``f_j`` of each
        layer, ``c_j + d_j h`` its exchanges (``d_j``: per layer, across the axes inside the
        group, whose faces grow with the group; ``c_j``: their latencies and the exchanges
        with the groups beside it). With ``sum f_j = 1``:
        ``T = h (1 + sum s_j d_j) / S + sum s_j c_j / S``: time per layer the combined speed
        plus the speed-weighted in-group exchanges per layer, fixed time the speed-weighted
        rest (mean speeds for the weights)."""
        group = groups[gi]
        speeds = [1.0 / x.mean() for x in a]
        total = sum(speeds)
        per_layer = self.combined_speed(a, [self.load(r) for r in group])
        beside = [groups[j] for j in (gi - 1, gi + 1) if 0 <= j < len(groups)]
        layer = box.elements // box.extents[axis]
        growing = fixed = 0.0
        inside = self.inside(speeds, box, axis)
        for j, (r, s) in enumerate(zip(group, speeds, strict=True)):
            if self.outer is not None:  # measured on the first layout
                fixed += s * self.outer_total(r, axis)
            else:
                share = layer * s / total
                fixed += s * sum(self.halos.time(share, self.link(r, o[j])) for o in beside)
            for other, face in inside[j]:
                intercept, slope = self.halos.line(self.link(r, group[other]))
                fixed += s * intercept
                growing += s * slope * face
        return shifted(per_layer, growing / total), Point(fixed / total)

    def combined_speed(self, a: list[StochasticValue], loads: list[LoadKey]) -> StochasticValue:
        """:func:`_combined` of the members, once per composition (the values are held with
        the result, so their ids stay theirs while the key lives)."""
        key = (tuple(map(id, a)), tuple(loads))
        if key not in self.speeds:
            value = _combined(a, loads, PlanOptions().schedule_samples, self.opts.seed)
            self.speeds[key] = (a, value)
        return self.speeds[key][1]

    def inside(
        self, speeds: Sequence[float], box: Block, axis: int
    ) -> list[list[tuple[int, float]]]:
        """Each member of a group along ``axis`` (members in row-major order over the split
        axes after it): its neighbours in the group (the members beside it across each
        inner axis, the one facing it across an outer one) and the face it shares with each
        per layer along ``axis``, every inner axis split in proportion to mean speed."""
        key = (tuple(speeds), box.extents, axis)
        if key in self.faces:
            return self.faces[key]
        sub = self.grid[axis + 1 :]
        inner = list(range(axis + 1, self.dims))
        extents = _speed_extents(speeds, sub, [box.extents[k] for k in inner])
        strides = [math.prod(sub[t + 1 :]) for t in range(len(sub))]
        out: list[list[tuple[int, float]]] = []
        for j, ext in enumerate(extents):
            full = list(map(float, box.extents))
            full[axis] = 1.0
            for k, e in zip(inner, ext, strict=True):
                full[k] = e
            idx = [j // stride % size for stride, size in zip(strides, sub, strict=True)]
            mine: list[tuple[int, float]] = []
            for t, k in enumerate(inner):
                face = math.prod(full[:k] + full[k + 1 :])
                mine.extend(
                    (j + step * strides[t], face) for step in (-1, 1) if 0 <= idx[t] + step < sub[t]
                )
            out.append(mine)
        self.faces[key] = out
        return out

    def band(self, ranks: Sequence[_Rank], box: Block, axis: int) -> list[_Leaf]:
        """An innermost group: a chain of strips of its face along ``axis``."""
        extent = box.extents[axis]
        face = box.elements // extent
        key = ("band", self.signature(ranks), face, extent)
        if key not in self.bands:
            inputs, of = self.chain(ranks)
            self.note_mixed_latency(ranks)
            ab, dedicated = self.linear(face, inputs)
            hosts = [
                scheduler.StochasticHost(
                    r.name,
                    ab[k][0],
                    shifted(ab[k][1], self.outer_total(r)),
                    1,
                    self.capacity([r], face, "block"),
                    dedicated[k] if dedicated is not None else None,
                )
                for r, k in zip(ranks, of, strict=True)
            ]
            widths = self.schedule(hosts, extent, "blocks of a band")
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

    def note_mixed_latency(self, ranks: Sequence[_Rank]) -> None:
        """A band's member between two links of different latencies (the models take one
        latency per host: the larger)."""
        for i, r in enumerate(ranks):
            prev, nxt = self.around(ranks, i)
            if prev is not None and nxt is not None and prev.latency != nxt.latency:
                self.mixed_latency.add(self.m.segments[r.segment].nodeset.name)

    # -- exchanges across the outer axes

    def across(self, leaves: Sequence[_Leaf]) -> list[list[float]]:
        """Each rank's exchanges with the blocks it touches across each outer split axis
        (``[axis][rank]``)."""
        extra = [[0.0] * len(leaves) for _ in range(self.dims - 1)]
        for adj in adjacent(self.grid):
            if adj.innermost:
                continue
            shared = face_overlaps(
                [leaves[i].block for i in adj.a], [leaves[j].block for j in adj.b], adj.axis
            )
            for i, j, elements in shared:
                ra, rb = self.ranks[adj.a[i]], self.ranks[adj.b[j]]
                t = self.halos.time(float(elements), self.link(ra, rb))
                extra[adj.axis][ra.index] += t
                extra[adj.axis][rb.index] += t
        return extra

    def run(self) -> BlockRound:
        """Size, predict, and size again with each rank's exchanges across the outer axes as
        the first layout has them: a band's widths then balance those too (a rank whose
        block touches many small ones pays a latency for each) and a group's fixed time is
        its members' own. The layout with the smaller predicted mean is kept (the horizon
        loop reads the median of the one kept). When every group is one member (a P x 1
        grid) they are strip hosts either way: one layout."""
        first, extra = self.layout()
        if math.prod(self.grid[1:]) == 1 or not any(map(any, extra)):
            return first
        self.outer = extra
        self.sizes.clear()
        self.bands.clear()
        second, _ = self.layout()
        return second if second.makespan.mean() < first.makespan.mean() else first

    def layout(self) -> tuple[BlockRound, list[list[float]]]:
        whole = Block(tuple(0 for _ in self.ds.size), tuple(self.ds.size))
        leaves = self.split(self.ranks, whole, 0)
        per_axis = self.across(leaves)
        extra = [sum(x) for x in zip(*per_axis, strict=True)] if per_axis else [0.0] * len(leaves)
        comm = [leaf.comm + c for leaf, c in zip(leaves, extra, strict=True)]
        counts: Counter[tuple[object, ...]] = Counter()
        first: dict[tuple[object, ...], tuple[_Leaf, float, _Rank, float]] = {}
        for r, leaf, c, total in zip(self.ranks, leaves, extra, comm, strict=True):
            key = (id(leaf.time), c, r.segment, leaf.block.elements, self.load(r))
            counts[key] += 1
            first.setdefault(key, (leaf, c, r, total))
        classes = tuple(
            BlockClass(
                r.segment,
                leaf.block.elements,
                counts[key],
                shifted(leaf.time, c),
                total,
                self.load(r),
            )
            for key, (leaf, c, r, total) in first.items()
        )
        found = BlockRound(
            _makespan(classes),
            self.engine,
            classes,
            tuple(sorted(self.floored)),
            tuple(leaf.block.elements for leaf in leaves),
            self.grid,
            tuple(sorted(self.mixed_latency)),
            tuple(comm),
        )
        return found, per_axis


def _speed_extents(
    speeds: Sequence[float], sub: Sequence[int], sizes: Sequence[int]
) -> list[list[float]]:
    """Each member's extent along each of the axes ``sub`` splits (``sizes``: the group's
    extents there), every level split in proportion to its parts' combined speed."""
    if not sub:
        return [[] for _ in speeds]
    n = len(speeds) // sub[0]
    total = sum(speeds)
    out: list[list[float]] = []
    for g in range(sub[0]):
        part = speeds[g * n : (g + 1) * n]
        extent = sizes[0] * sum(part) / total
        out.extend([extent, *rest] for rest in _speed_extents(part, sub[1:], sizes[1:]))
    return out


def _combined(
    a: Sequence[StochasticValue], keys: Sequence[LoadKey], samples: int, seed: int
) -> StochasticValue:
    """:func:`harmonic` of the members' times per layer (their combined speed): exact for
    numbers, else from draws of each member's ``a``, independent except that the members
    on one recorded trace (``keys``) move together: one quantile draw per trace."""
    if all(x.kind == "point" for x in a):
        return Point(harmonic([x.mean() for x in a]))
    rng = np.random.default_rng(seed)
    quantiles: dict[LoadKey, FloatArray] = {}
    drawn: dict[tuple[LoadKey, int], FloatArray] = {}
    speed = np.zeros(samples)
    for x, key in zip(a, keys, strict=True):
        if not on_trace(key):  # independent: a fresh draw (fast for every kind)
            speed += 1.0 / np.asarray(x.rvs(samples, rng), dtype=np.float64)
            continue
        if key not in quantiles:
            quantiles[key] = np.clip(rng.random(samples), 1e-12, 1.0 - 1e-12)
        if (key, id(x)) not in drawn:  # members sharing a representative: one ppf
            drawn[(key, id(x))] = 1.0 / np.asarray(x.ppf(quantiles[key]), dtype=np.float64)
        speed += drawn[(key, id(x))]
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
    if sum(g > 1 for g in r.grid) == 1:
        why = "a prime number" if all(ranks % d for d in range(2, math.isqrt(ranks) + 1)) else ""
        notes.append(
            f"the process grid is {text}: one axis split, strips"
            + (f" ({ranks} nodes is {why})" if why else "")
        )
    notes.extend(
        f"nodeset {name!r}: a node between links of different latencies in its band is "
        "planned with the larger there (the models take one latency per host); its exchanges "
        "across the other axes each pay their own link's"
        for name in r.mixed_latency
    )
    return notes
