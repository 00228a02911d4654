"""A spec point as PPE's inputs: a chain of hosts with speeds, links and loads.

Each node of the distribution's nodesets becomes a host, in chain order (the nodesets in the
order the distribution lists them, the nodes of each in turn): the strips of rows the
scheduler places follow that chain, as in ``ppe.pipeline``.

* **Speed** (the models' ``Benchmark``): for a grammar model, seconds per unit of the dataset,
  ``(floatsperunit + operationsperunit) / floatspeed``, or the PMaC convolution of the
  nodeset's profile with the model's signature (``ppe.pmac.convolve``, full overlap, as the
  service does; the profile's curves for ``sharing`` copies when members share machines),
  or a registered host's benchmark. For a script, seconds per operation (the script scales it
  by each dataset's operations per unit).
* **Links**: between two nodes of a nodeset, the linkset ``across`` it; between the last node
  of one nodeset and the first of the next, the linkset ``updown`` between them. A ``bus``
  shares its ``number`` channels (default 1) among the nodeset's nodes; ``duplex = "half"``
  halves the bandwidth (an exchange sends and receives on the same link); a nodeset's own
  ``bandwidth`` (its interface) caps every link it is on. The pipeline has one latency per
  host: a node between two links with different latencies takes the larger (noted).
* **Load**: each node's CPU availability (``FracAvailCPU``), drawn independently per node:
  dedicated is 1, normal and mixture are the given distribution, traces are the forecaster's
  horizon forecast from the end of each recorded trace (files assigned round-robin), forecasts
  are the registered host's.
* **Memory**: a nodeset's ``grainsize`` bounds each node's rows (``max_rows``), as
  ``memory_bytes`` does in the service.

Interchangeable nodes (same nodeset, same links, same load) are grouped into :class:`Slot`\\ s:
4096 identical nodes are three slots (the two ends and the interior), which is what lets the
analytic engine answer in well under a second (:mod:`ppe.whatif.analytic`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from ppe.core.stochastic import Mixture, Normal, Point, StochasticValue
from ppe.pipeline import DEFAULT_LINK, HistoryForecasts, SeriesHistory
from ppe.pmac import convolve
from ppe.whatif.resolve import Resources
from ppe.whatif.spec import Dataset, Linkset, Nodeset, Spec

__all__ = ["Link", "Loads", "Machine", "Segment", "Slot", "build_machine"]

LoadKey = tuple[object, ...]


@dataclass(frozen=True)
class Link:
    """What one link delivers: bytes per second and seconds per message."""

    bandwidth: float
    latency: float


@dataclass(frozen=True)
class Segment:
    """The nodes of one nodeset in the chain."""

    nodeset: Nodeset
    start: int  # chain index of its first node
    benchmark: float
    max_rows: int | None
    inside: Link | None  # between two of its nodes
    after: Link | None  # to the first node of the next segment


@dataclass(frozen=True)
class Slot:
    """Interchangeable nodes of one segment: the same links and the same load."""

    segment: int
    members: tuple[int, ...]  # node indices within the nodeset
    load: LoadKey
    prev: Link | None
    next: Link | None

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def latency(self) -> float:
        return max((x.latency for x in (self.prev, self.next) if x is not None), default=0.0)


@dataclass(frozen=True)
class Machine:
    """The chain for one spec point: segments in order and their slots, chain order kept
    (every slot of a segment lies inside it; the chain's first and last nodes are slots of
    their own)."""

    spec: Spec
    segments: tuple[Segment, ...]
    slots: tuple[Slot, ...]
    total_rows: int
    notes: tuple[str, ...]

    @property
    def hosts(self) -> int:
        return sum(s.nodeset.number for s in self.segments)

    def node_name(self, segment: int, member: int) -> str:
        return f"{self.segments[segment].nodeset.name}[{member}]"

    def chain(self) -> Iterator[tuple[int, int, int]]:
        """(segment, member, slot index) for every node in chain order."""
        of: dict[tuple[int, int], int] = {}
        for i, slot in enumerate(self.slots):
            for m in slot.members:
                of[(slot.segment, m)] = i
        for k, seg in enumerate(self.segments):
            for m in range(seg.nodeset.number):
                yield k, m, of[(k, m)]


# ----------------------------------------------------------------------------- loads


class Loads:
    """Each load's CPU availability for a horizon, a fresh (independent) value per call.

    Traces are forecast at ``now`` from their samples strictly before it (default: just after
    the last sample of any trace)."""

    def __init__(self, resources: Resources, now: float | None = None) -> None:
        self.resources = resources
        self.history: HistoryForecasts | None = None
        if resources.traces:
            if now is None:
                now = max(float(t.timestamps.max()) for t in resources.traces.values()) + 1.0
            histories = {
                ref: _before(t.timestamps, t.availability, now)
                for ref, t in resources.traces.items()
            }
            self.history = HistoryForecasts(
                histories, now, bandwidth=DEFAULT_LINK.bandwidth, latency=DEFAULT_LINK.latency
            )

    def static(self, keys: set[LoadKey]) -> bool:
        """Whether these loads do not depend on the horizon (no traces, no forecasts)."""
        return all(k[0] in ("dedicated", "normal", "mixture") for k in keys)

    def deterministic(self, keys: set[LoadKey]) -> bool:
        return all(
            _variation(k) == 0 and (k[0] == "dedicated" or (k[0] == "normal" and k[2] == 0))
            for k in keys
        )

    def value(self, key: LoadKey, horizon: float | None) -> StochasticValue:
        return _varied(self._load(key, horizon), _variation(key))

    def _load(self, key: LoadKey, horizon: float | None) -> StochasticValue:
        kind = key[0]
        if kind == "dedicated":
            return Point(1.0)
        if kind == "normal":
            mean, std = cast(float, key[1]), cast(float, key[2])
            return Point(mean) if std == 0 else Normal(mean, std)
        if kind == "mixture":
            comps = np.array(key[1], dtype=np.float64)
            return Mixture(comps[:, 0], comps[:, 1], comps[:, 2])
        if kind == "trace":
            assert self.history is not None
            return _fresh(self.history(horizon)[str(key[1])].cpu)
        host = self.resources.hosts[str(key[1])]
        if host.cpu is None:
            raise ValueError(f"registered host {host.name!r} has no CPU forecasts")
        return _fresh(host.cpu(horizon))


def _variation(key: LoadKey) -> float:
    """The nodeset's run-to-run spread, which :func:`load_key` puts last."""
    return float(cast(float, key[-1]))


def _varied(v: StochasticValue, variation: float) -> StochasticValue:
    """The availability ``v`` with a node's run-to-run spread folded in: a dedicated time
    factor of relative spread ``variation`` divides the availability, so each component's
    spread grows to sqrt(sd^2 + (mean * variation)^2) (first order; the simulated path draws
    the factor itself, lognormal)."""
    if variation == 0:
        return v
    comps = np.array(v.components, dtype=np.float64).reshape(-1, 3)
    sd = np.hypot(comps[:, 2], comps[:, 1] * variation)
    if len(comps) == 1:
        return Normal(float(comps[0, 1]), float(sd[0]))
    return Mixture(comps[:, 0], comps[:, 1], sd)


def _before(timestamps: np.ndarray, values: np.ndarray, now: float) -> SeriesHistory:
    """A trace's samples strictly before ``now``: the planner never sees the future."""
    keep = timestamps < now
    if not keep.any():
        raise ValueError(f"a load trace has no samples before {now:g} s to forecast from")
    return SeriesHistory(timestamps[keep], values[keep])


def _fresh(v: StochasticValue) -> StochasticValue:
    """An independent value with the same distribution (the engines treat one object used by
    two hosts as one shared draw)."""
    if v.kind == "point":
        return Point(v.mean())
    if v.kind == "normal" and len(v.components) == 1:
        return Normal(v.mean(), v.std())
    comps = np.array(v.components, dtype=np.float64)
    return Mixture(comps[:, 0], comps[:, 1], comps[:, 2])


def load_key(ns: Nodeset, member: int) -> LoadKey:
    """What a node's availability depends on: its load, then its run-to-run spread last."""
    return (*_load_key(ns, member), ns.variation)


def _load_key(ns: Nodeset, member: int) -> LoadKey:
    load = ns.load
    if load.kind == "dedicated":
        return ("dedicated",)
    if load.kind == "normal":
        return ("normal", load.mean, load.std)
    if load.kind == "mixture":
        return ("mixture", load.components)
    if load.kind == "traces":
        return ("trace", load.files[member % len(load.files)])
    return ("host", ns.host)


# ---------------------------------------------------------------------------- speeds


def _signature_params(
    machine_spec: Spec, params_declared: Mapping[str, object], nodes: int
) -> dict[str, float]:
    """A signature's parameters for this run: ``n`` (elements per row), ``rows`` (an even
    share: a host's working set before the scheduler decides), ``Size``, and the execution's
    params the signature declares."""
    ds = machine_spec.dataset(machine_spec.primary.dataset)
    values = {
        "n": float(ds.units_per_row),
        "rows": float(math.ceil(ds.rows / max(nodes, 1))),
        "Size": ds.bytesperunit,
        **machine_spec.execution.params,
    }
    return {k: v for k, v in values.items() if k in params_declared}


def node_speed(
    spec: Spec, ns: Nodeset, resources: Resources, nodes: int
) -> tuple[float, list[str]]:
    """Seconds per unit of the primary dataset on one node of ``ns`` (for a script: per
    operation), and notes on what it rests on."""
    ds = spec.dataset(spec.primary.dataset)
    per_op = spec.execution.script is not None
    if ns.floatspeed is not None:
        return (1.0 if per_op else ds.work) / ns.floatspeed, []
    profile = resources.profiles.get(ns.profile) if ns.profile is not None else None
    if ns.host is not None:
        host = resources.hosts[ns.host]
        if host.benchmark is not None and not per_op:
            return host.benchmark, [
                f"nodeset {ns.name!r}: the benchmark of registered host {ns.host!r}"
            ]
        profile = host.profile
    if profile is None or resources.signature is None:
        raise ValueError(
            f"nodeset {ns.name!r} has no speed: no floatspeed, benchmark or profile with a "
            "signature"
        )
    sig = resources.signature
    conv = convolve(
        sig, profile, _signature_params(spec, sig.parameters, nodes), ranks_per_host=ns.sharing
    )
    notes = [
        f"nodeset {ns.name!r}: {conv.per_unit.mean():.4g} ± {conv.per_unit.std():.2g} s per "
        f"{sig.unit} from profile {profile.host!r} convolved with signature {sig.name!r}",
        *(f"nodeset {ns.name!r}: {n}" for n in conv.notes),
    ]
    per_unit = conv.per_unit.mean()
    if per_op:
        per_unit /= ds.work
    return per_unit, notes


# ----------------------------------------------------------------------------- links


def effective_link(ls: Linkset, a: Nodeset, b: Nodeset) -> Link:
    """The bandwidth one exchange gets on ``ls`` between nodes of ``a`` and ``b``."""
    bw = ls.bandwidth
    if ls.topology == "bus":
        bw *= min(1.0, (ls.number or 1) / max(a.number, 1))
    if ls.duplex == "half":
        bw /= 2.0
    for ns in (a, b):
        if ns.bandwidth is not None:
            bw = min(bw, ns.bandwidth)
    return Link(bw, ls.latency)


def _links(spec: Spec, names: tuple[str, ...]) -> tuple[list[Link | None], list[Link | None]]:
    inside: list[Link | None] = []
    after: list[Link | None] = []
    for k, name in enumerate(names):
        ns = spec.nodeset(name)
        ls = spec.link_between(name, name)
        inside.append(effective_link(ls, ns, ns) if ls is not None else None)
        if k + 1 < len(names):
            nxt = spec.nodeset(names[k + 1])
            up = spec.link_between(name, nxt.name)
            after.append(effective_link(up, ns, nxt) if up is not None else None)
        else:
            after.append(None)
    return inside, after


# ----------------------------------------------------------------------------- build


def build_machine(spec: Spec, resources: Resources) -> Machine:
    """The chain of hosts for one spec point (the spec was checked: names resolve)."""
    dist = spec.primary
    ds: Dataset = spec.dataset(dist.dataset)
    nodes = sum(spec.nodeset(n).number for n in dist.nodesets)
    inside, after = _links(spec, dist.nodesets)
    segments: list[Segment] = []
    notes: list[str] = []
    start = 0
    notes.extend(resources.notes)
    for k, name in enumerate(dist.nodesets):
        ns = _bound(spec.nodeset(name), resources)
        bench, why = node_speed(spec, ns, resources, nodes)
        notes.extend(why)
        max_rows = int(ns.grainsize // ds.row_bytes) if ns.grainsize is not None else None
        segments.append(Segment(ns, start, bench, max_rows, inside[k], after[k]))
        start += ns.number
    slots = _slots(segments)
    if dist.type == "block1dim":  # blocks note their own (ppe.whatif.blockeval)
        notes.extend(_latency_notes(slots, segments))
    if spec.execution.script is None and any(s.nodeset.ports > 1 for s in segments):
        notes.append("ports: only scripts overlap messages; the grammar models send one at a time")
    return Machine(spec, tuple(segments), tuple(slots), ds.rows, tuple(dict.fromkeys(notes)))


def _bound(ns: Nodeset, resources: Resources) -> Nodeset:
    """The nodeset with the files its ``dir`` load picked (resolve read and chose them)."""
    load = ns.load
    if load.kind != "traces" or load.dir is None:
        return ns
    return replace(ns, load=replace(load, files=resources.trace_files(load, ns.index)))


def _slots(segments: list[Segment]) -> list[Slot]:
    out: list[Slot] = []
    for k, seg in enumerate(segments):
        m = seg.nodeset.number
        groups: dict[tuple[Link | None, Link | None, LoadKey], list[int]] = {}
        for i in range(m):
            prev = seg.inside if i > 0 else (segments[k - 1].after if k > 0 else None)
            nxt = seg.inside if i < m - 1 else seg.after
            groups.setdefault((prev, nxt, load_key(seg.nodeset, i)), []).append(i)
        for (prev, nxt, load), members in groups.items():
            out.append(Slot(k, tuple(members), load, prev, nxt))
    return out


def _latency_notes(slots: list[Slot], segments: list[Segment]) -> list[str]:
    out = []
    for s in slots:
        if s.prev is not None and s.next is not None and s.prev.latency != s.next.latency:
            out.append(
                f"nodeset {segments[s.segment].nodeset.name!r}: a node between links of latency "
                f"{s.prev.latency:g} s and {s.next.latency:g} s is planned with the larger "
                "(the models take one latency per host)"
            )
    return out
