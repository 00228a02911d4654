"""Phases, weights and the signature: the repeating stretches of the logical trace.

The logical trace is cut at the anchor rank's compute bursts (the lowest rank that has any;
every event of rank 0 when no rank computes): a *segment* runs from one anchor burst's logical
time up to the next's and holds every rank's events logically in between. Two segments are the
same phase when every rank did the same thing in them, in the same order (kind, peer relative
to the rank, bytes, a collective's communicator when it is not all ranks; tags left out, so a
code's two identical half-steps are one phase) and
their compute volumes (the segment's seconds of compute bursts, all ranks) are not parted by a
gap: sorted by volume, a segment more than ``tolerance`` (relative) above the previous one of
its pattern starts a new phase. Jitter spreads volumes without gaps and stays one phase; a
stretch doing twice the work is a phase of its own. A phase's weight is how many segments it has.

A segment's measured time is the anchor rank's wall time from its burst to the next segment's
(the first segment starts with the run, the last ends with it), so the segments' times add up
to the traced run exactly; the signature keeps the phases carrying at least ``keep`` of it, and
the prediction is the weighted sum of the kept phases' mean times (PAS2P's, with the phase times
measured on the traced machine; the signature-execution slice measures them elsewhere).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from ppe.pas2p.events import Event, communicator
from ppe.pas2p.logical import LogicalTrace

__all__ = ["Occurrence", "Phase", "Signature", "signature"]

#: kind, peer - rank, bytes, a collective's ranks when not all of them
Token = tuple[str, int | None, int, tuple[int, ...] | None]
Key = tuple[tuple[int, tuple[Token, ...]], ...]


@dataclass(frozen=True)
class Occurrence:
    """One segment: its phase, logical ticks [tick, tick_end), wall seconds from the run's start."""

    phase: int
    tick: int
    tick_end: int
    start: float
    end: float
    events: int
    spans: dict[int, tuple[float, float]]  # rank -> (first start, last end), seconds from run start
    step: int = -1  # the anchor rank's compute burst it starts at (0-based); -1: before the first

    @property
    def time(self) -> float:
        return self.end - self.start


@dataclass
class Phase:
    id: int
    key: Key
    events: int  # events per occurrence, all ranks
    volume: list[float]  # mean compute seconds per rank in the key's order
    times: list[float] = field(default_factory=list)
    first: int = 0  # index of the first occurrence
    first_tick: int = 0
    first_time: float = 0.0
    first_step: int = -1  # the anchor burst its first occurrence starts at (-1: the set-up)
    steps: list[int] = field(default_factory=list)  # each occurrence's step, as ``times``

    @property
    def typical_step(self) -> int:
        """The step of the occurrence whose time is the median's (the earlier of two), the one a
        signature run executes: the first occurrence is often a cold start."""
        order = sorted(range(len(self.times)), key=lambda i: (self.times[i], i))
        return self.steps[order[(len(order) - 1) // 2]]

    @property
    def weight(self) -> int:
        return len(self.times)

    @property
    def mean(self) -> float:
        return math.fsum(self.times) / len(self.times)

    @property
    def sd(self) -> float:
        if len(self.times) < 2:
            return 0.0
        m = self.mean
        return math.sqrt(math.fsum((t - m) ** 2 for t in self.times) / (len(self.times) - 1))

    @property
    def total(self) -> float:
        return math.fsum(self.times)

    def pattern(self) -> str:
        """Short description: each rank's events, e.g. ``r0: compute recv(+1,2416B)``; a
        collective on a sub-communicator names its ranks: ``collective[0,2]``."""
        parts = []
        for rank, tokens in self.key:
            words = [_word(token) for token in tokens]
            parts.append(f"r{rank}: " + " ".join(words))
        return "; ".join(parts)


def _word(token: Token) -> str:
    kind, peer, nbytes, comm = token
    if peer is not None:
        return f"{kind}({peer:+d},{nbytes}B)"
    return kind if comm is None else f"{kind}[{','.join(map(str, comm))}]"


@dataclass(frozen=True)
class Signature:
    phases: list[Phase]  # by id (order of first appearance)
    kept: list[int]  # ids of the signature's phases, most time first
    occurrences: list[Occurrence]
    keep: float
    tolerance: float
    anchor_rank: int
    total: float  # traced run: last end - first start, seconds
    ranks: int

    @property
    def predicted(self) -> float:
        return math.fsum(self.phases[i].weight * self.phases[i].mean for i in self.kept)

    @property
    def error(self) -> float:
        """(predicted - traced) / traced."""
        return (self.predicted - self.total) / self.total if self.total > 0 else 0.0

    @property
    def kept_share(self) -> float:
        return (
            math.fsum(self.phases[i].total for i in self.kept) / self.total if self.total else 1.0
        )

    def share(self, phase: Phase) -> float:
        return phase.total / self.total if self.total > 0 else 0.0


def signature(trace: LogicalTrace, keep: float = 0.99, tolerance: float = 0.5) -> Signature:
    """Cut the logical trace into segments, group them into phases, keep the heaviest ones."""
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], not {keep}")
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, not {tolerance}")
    events = trace.events
    t0 = min(e.start for e in events)
    t1 = max(e.end for e in events)
    anchor_rank, anchors = _anchors(trace)
    ticks = [trace.time[i] for i in anchors]
    bounds = [t0] + [events[i].start for i in anchors] + [t1]
    # segment j (0 = before the first anchor, may be empty) holds ticks [ticks[j-1], ticks[j])
    members: list[list[int]] = [[] for _ in range(len(anchors) + 1)]
    for r_idx in trace.ranks:
        for i in r_idx:
            members[bisect_right(ticks, trace.time[i])].append(i)
    size = len(trace.ranks)
    shapes = [_shape(events, idx, size) if idx else None for idx in members]
    label = _cluster(shapes, tolerance)
    phases: list[Phase] = []
    phase_of: dict[int, Phase] = {}
    occurrences: list[Occurrence] = []
    for j, idx in enumerate(members):
        shape = shapes[j]
        if shape is None:
            continue
        key, volume = shape
        # the first occurrence starts with the run even when nothing precedes the first anchor
        start = bounds[j] - t0 if occurrences else 0.0
        end = bounds[j + 1] - t0
        tick_lo = ticks[j - 1] if j else min(trace.time[i] for i in idx)
        tick_hi = ticks[j] if j < len(ticks) else trace.length + 1
        phase = phase_of.get(label[j])
        if phase is None:
            phase = Phase(len(phases), key, len(idx), [0.0] * len(volume), [], len(occurrences))
            phase.first_tick, phase.first_time, phase.first_step = tick_lo, start, j - 1
            phases.append(phase)
            phase_of[label[j]] = phase
        n = phase.weight
        phase.volume = [(m * n + v) / (n + 1) for m, v in zip(phase.volume, volume, strict=True)]
        phase.times.append(end - start)
        phase.steps.append(j - 1)
        spans: dict[int, tuple[float, float]] = {}
        for i in idx:
            e = events[i]
            lo, hi = spans.get(e.rank, (math.inf, -math.inf))
            spans[e.rank] = (min(lo, e.start - t0), max(hi, e.end - t0))
        occurrences.append(
            Occurrence(phase.id, tick_lo, tick_hi, start, end, len(idx), spans, j - 1)
        )
    total = t1 - t0
    order = sorted(phases, key=lambda p: (-p.total, p.id))
    kept: list[int] = []
    covered = 0.0
    for p in order:
        if total > 0 and covered >= keep * total:
            break
        kept.append(p.id)
        covered += p.total
    return Signature(
        phases, kept, occurrences, keep, tolerance, anchor_rank, total, len(trace.ranks)
    )


def _anchors(trace: LogicalTrace) -> tuple[int, list[int]]:
    """The anchor rank and its cutting events (its compute bursts, else all its events)."""
    for r, idx in enumerate(trace.ranks):
        bursts = [i for i in idx if trace.events[i].kind == "compute"]
        if bursts:
            return r, bursts
    return 0, list(trace.ranks[0])


def _shape(events: Sequence[Event], idx: list[int], size: int) -> tuple[Key, list[float]]:
    """A segment's pattern (per rank, program order) and compute seconds per rank."""
    per: dict[int, list[Token]] = {}
    volume: dict[int, float] = {}
    for i in sorted(idx):  # program order within each rank
        e = events[i]
        peer = None if e.peer is None else e.peer - e.rank
        per.setdefault(e.rank, []).append((e.kind, peer, e.nbytes, communicator(e, size)))
        if e.kind == "compute":
            volume[e.rank] = volume.get(e.rank, 0.0) + e.duration
    key = tuple((r, tuple(per[r])) for r in sorted(per))
    return key, [volume.get(r, 0.0) for r, _ in key]


def _cluster(shapes: Sequence[tuple[Key, list[float]] | None], tolerance: float) -> list[int]:
    """A label per segment: same pattern, and compute volumes (the segment's total) not parted
    by a gap wider than ``tolerance`` (relative) that no other segment of the pattern fills."""
    groups: dict[Key, list[int]] = {}
    for j, shape in enumerate(shapes):
        if shape is not None:
            groups.setdefault(shape[0], []).append(j)
    label = [-1] * len(shapes)
    next_label = 0
    for js in groups.values():
        vols = {j: math.fsum(shapes[j][1]) for j in js}  # type: ignore[index]
        prev: float | None = None
        for j in sorted(js, key=lambda j: vols[j]):
            v = vols[j]
            if prev is not None and v - prev > tolerance * prev + 1e-9:
                next_label += 1
            label[j] = next_label
            prev = v
        next_label += 1
    return label
