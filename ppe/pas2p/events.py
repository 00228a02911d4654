"""The events PAS2P analyses, whatever file they came from, and the checks every trace must pass.

An event is one thing one rank did: a compute burst, a send, a receive or a collective, with
its peer, size, tag and wall-clock interval. ``where`` says where it was read (``FILE:LINE``,
or the OTF2 archive and event number) so that every error can point at it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["KINDS", "Event", "TraceError", "check_events", "by_rank"]

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


def check_events(events: Sequence[Event]) -> None:
    """Ranks 0..R-1 all present, known kinds, peers among them, clocks never going backwards."""
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
        if e.end < e.start:
            raise TraceError(f"{e.where}: rank {e.rank} {e.kind} ends before it starts")
        prev = last.get(e.rank)
        if prev is not None and e.start < prev.start:
            raise TraceError(
                f"{e.where}: rank {e.rank}'s clock goes backwards "
                f"({e.start!r} after {prev.start!r} at {prev.where})"
            )
        last[e.rank] = e


def _first(events: Sequence[Event], rank: int) -> str:
    return next(e.where for e in events if e.rank == rank)
