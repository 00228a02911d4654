"""The events PAS2P analyses, whatever file they came from, and the checks every trace must pass.

An event is one thing one rank did: a compute burst, a send, a receive or a collective, with
its peer, size, tag and wall-clock interval. ``where`` says where it was read (``FILE:LINE``,
or the OTF2 archive and event number) so that every error can point at it. A collective's
``members`` are the world ranks of its communicator (None: all ranks), because a collective on
a sub-communicator synchronises only those ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["KINDS", "Event", "TraceError", "by_rank", "check_events", "communicator"]

KINDS = ("compute", "send", "recv", "collective")


class TraceError(ValueError):
    """A trace that cannot be analysed; the message names the file, line, rank or event."""


@dataclass(frozen=True, slots=True)
class Event:
    rank: int
    kind: str
    peer: int | None
    nbytes: int
    tag: int | None
    start: float
    end: float
    where: str = ""
    members: tuple[int, ...] | None = None  # a collective's world ranks; None: all of them

    @property
    def duration(self) -> float:
        return self.end - self.start


def by_rank(events: Sequence[Event]) -> list[list[int]]:
    """Each rank's event indices in program order (the order they were given in)."""
    ranks = 1 + max((e.rank for e in events), default=-1)
    out: list[list[int]] = [[] for _ in range(ranks)]
    for i, e in enumerate(events):
        out[e.rank].append(i)
    return out


def communicator(e: Event, size: int) -> tuple[int, ...] | None:
    """A collective's members, sorted, or None when they are all ``size`` ranks: one name per
    rank set, so that a trace listing every rank and one leaving them out agree."""
    if e.members is None:
        return None
    members = tuple(sorted(e.members))
    return None if members == tuple(range(size)) else members


def check_events(events: Sequence[Event]) -> None:
    """Ranks 0..R-1 all present, known kinds, peers among them, collectives' members distinct
    ranks that include their own, clocks never going backwards."""
    if not events:
        raise TraceError("the trace holds no events")
    present = sorted({e.rank for e in events})
    if present[0] < 0:
        raise TraceError(f"{_first(events, present[0])}: negative rank {present[0]}")
    missing = sorted(set(range(present[-1] + 1)) - set(present))
    if missing:
        held = ", ".join(map(str, present))
        raise TraceError(f"rank {missing[0]} is missing: the traces hold ranks {held}")
    size = present[-1] + 1
    last: dict[int, Event] = {}
    for e in events:
        if e.kind not in KINDS:
            raise TraceError(f"{e.where}: rank {e.rank}: unknown kind {e.kind!r}")
        if e.kind in ("send", "recv") and (e.peer is None or not 0 <= e.peer < size):
            raise TraceError(
                f"{e.where}: rank {e.rank} {e.kind} names peer {e.peer}, "
                f"not a rank of 0..{size - 1}"
            )
        if e.members is not None:
            _check_members(e, size)
        if e.end < e.start:
            raise TraceError(f"{e.where}: rank {e.rank} {e.kind} ends before it starts")
        prev = last.get(e.rank)
        if prev is not None and e.start < prev.start:
            raise TraceError(
                f"{e.where}: rank {e.rank}'s clock goes backwards "
                f"({e.start!r} after {prev.start!r} at {prev.where})"
            )
        last[e.rank] = e


def _check_members(e: Event, size: int) -> None:
    assert e.members is not None
    if e.kind != "collective":
        raise TraceError(f"{e.where}: rank {e.rank} {e.kind} names members: only collectives do")
    bad = [m for m in e.members if not 0 <= m < size]
    if bad:
        raise TraceError(
            f"{e.where}: rank {e.rank} collective names member {bad[0]}, "
            f"not a rank of 0..{size - 1}"
        )
    if len(set(e.members)) != len(e.members):
        twice = next(m for m in e.members if e.members.count(m) > 1)
        raise TraceError(f"{e.where}: rank {e.rank} collective names member {twice} twice")
    if not e.members:
        raise TraceError(f"{e.where}: rank {e.rank} collective names no members")
    if e.rank not in e.members:
        held = ", ".join(map(str, sorted(e.members)))
        raise TraceError(
            f"{e.where}: rank {e.rank} collective is over ranks {held}, which leave it out"
        )


def _first(events: Sequence[Event], rank: int) -> str:
    return next(e.where for e in events if e.rank == rank)
