"""The logical trace (PAS2P after Lamport): every event gets a logical time from causality alone,
so that the order no longer depends on the machine's speed or clocks.

Rules: an event comes one tick after the previous event of its rank; a receive also comes one
tick after its matching send; collectives are matched per communicator (its set of ranks; all
ranks unless the event names its members): the k-th collective on a communicator happens at
one logical time on each of its ranks, one tick after the latest of their predecessors (it
synchronises those ranks and no others). Sends and receives are matched as MPI's
non-overtaking rule pairs them: the k-th send from s to d with tag t goes with the k-th
receive at d from s with tag t. Logical times start at 1.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ppe.pas2p.events import Event, TraceError, by_rank, check_events, communicator

__all__ = ["LogicalTrace", "logical_trace", "match_collectives", "match_messages"]

#: A communicator as its sorted world ranks.
Ranks = tuple[int, ...]


@dataclass(frozen=True)
class LogicalTrace:
    """The events, each one's logical time, and which send each receive matched."""

    events: Sequence[Event]
    time: list[int]
    ranks: list[list[int]]  # each rank's event indices, program order
    send_of: dict[int, int]  # receive index -> send index

    @property
    def length(self) -> int:
        return max(self.time, default=0)

    def merged(self) -> list[int]:
        """All ranks' events as one logical trace: by logical time, rank, program order."""
        return sorted(range(len(self.events)), key=lambda i: (self.time[i], self.events[i].rank, i))


def match_messages(events: Sequence[Event]) -> dict[int, int]:
    """Receive index -> send index by (source, destination, tag, order); leftovers are errors."""
    sends: dict[tuple[int, int, int | None], list[int]] = defaultdict(list)
    recvs: dict[tuple[int, int, int | None], list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.kind == "send":
            sends[(e.rank, _peer(e), e.tag)].append(i)
        elif e.kind == "recv":
            recvs[(_peer(e), e.rank, e.tag)].append(i)
    out: dict[int, int] = {}
    for key in sorted(set(sends) | set(recvs), key=str):
        s, r = sends.get(key, []), recvs.get(key, [])
        for si, ri in zip(s, r, strict=False):
            out[ri] = si
        src, dst, tag = key
        if len(r) > len(s):
            e = events[r[len(s)]]
            raise TraceError(
                f"{e.where}: rank {dst} receives from rank {src} (tag {tag}) with no matching send "
                f"(receive #{len(s) + 1}; rank {src} sends {len(s)} such messages)"
            )
        if len(s) > len(r):
            e = events[s[len(r)]]
            raise TraceError(
                f"{e.where}: rank {src} sends to rank {dst} (tag {tag}) with no matching receive "
                f"(send #{len(r) + 1}; rank {dst} receives {len(r)} such messages)"
            )
    return out


def match_collectives(
    events: Sequence[Event], ranks: list[list[int]]
) -> dict[Ranks, list[list[int]]]:
    """Per communicator (its sorted ranks), each of its ranks' collectives on it in program
    order, indexed as the communicator's ranks: the k-th of each list are one collective.
    Ranks that disagree on how many a communicator had are an error."""
    size = len(ranks)
    every = tuple(range(size))
    found: dict[Ranks, dict[int, list[int]]] = {}
    for r, idx in enumerate(ranks):
        for i in idx:
            if events[i].kind == "collective":
                comm = communicator(events[i], size) or every
                found.setdefault(comm, {q: [] for q in comm})[r].append(i)
    out: dict[Ranks, list[list[int]]] = {}
    for comm, per in sorted(found.items()):
        if len({len(c) for c in per.values()}) > 1:
            held = ", ".join(f"rank {q}: {len(c)}" for q, c in per.items())
            fewest = min(len(c) for c in per.values())
            most = max(comm, key=lambda q: len(per[q]))
            extra = events[per[most][fewest]]
            which = "the ranks" if comm == every else f"ranks {_names(comm)}"
            raise TraceError(
                f"{which} hold different numbers of collectives"
                + ("" if comm == every else " on their communicator")
                + f" ({held}): {extra.where}: rank {most}'s collective #{fewest + 1} "
                "has no partner"
            )
        out[comm] = [per[q] for q in comm]
    return out


def logical_trace(events: Sequence[Event]) -> LogicalTrace:
    """Check the events, match the messages and give every event its logical time."""
    check_events(events)
    send_of = match_messages(events)
    ranks = by_rank(events)
    colls = match_collectives(events, ranks)
    comm_of = {i: comm for comm, per in colls.items() for mine in per for i in mine}
    time = [0] * len(events)  # 0 = not yet assigned
    clock = [0] * len(ranks)
    pos = [0] * len(ranks)
    ncoll: list[dict[Ranks, int]] = [defaultdict(int) for _ in ranks]  # done per communicator
    arrived: dict[tuple[Ranks, int], int] = defaultdict(int)  # (comm, k) -> ranks waiting at it
    waiting = [False] * len(ranks)
    left = len(events)
    while left:
        progressed = False
        for r, idx in enumerate(ranks):
            while pos[r] < len(idx):
                i = idx[pos[r]]
                e = events[i]
                if time[i] == 0:
                    if e.kind == "recv":
                        s = send_of[i]
                        if time[s] == 0:
                            break
                        time[i] = max(clock[r], time[s]) + 1
                    elif e.kind == "collective":
                        # every rank of the communicator waits here, at its k-th on it (a
                        # rank stops at its first unassigned event), so their clocks are
                        # their predecessors' times
                        comm = comm_of[i]
                        k = ncoll[r][comm]
                        if not waiting[r]:
                            waiting[r] = True
                            arrived[(comm, k)] += 1
                            progressed = True
                        if arrived[(comm, k)] < len(comm):
                            break
                        t = 1 + max(clock[q] for q in comm)
                        for mine in colls[comm]:
                            time[mine[k]] = t
                        del arrived[(comm, k)]
                    else:
                        time[i] = clock[r] + 1
                if e.kind == "collective":
                    ncoll[r][comm_of[i]] += 1
                    waiting[r] = False
                clock[r] = time[i]
                pos[r] += 1
                left -= 1
                progressed = True
        if left and not progressed:
            raise TraceError(
                "no logical order exists (the messages wait in a circle): "
                + _stuck(events, ranks, pos, send_of)
            )
    return LogicalTrace(events, time, ranks, send_of)


def _stuck(
    events: Sequence[Event], ranks: list[list[int]], pos: list[int], send_of: dict[int, int]
) -> str:
    parts = []
    for r, idx in enumerate(ranks):
        if pos[r] < len(idx):
            e = events[idx[pos[r]]]
            what = f"receive from rank {e.peer}" if e.kind == "recv" else e.kind
            if e.kind == "collective":
                comm = communicator(e, len(ranks))
                what += " over all ranks" if comm is None else f" over ranks {_names(comm)}"
            parts.append(f"rank {r} waits at {e.where} ({what})")
    return "; ".join(parts)


def _names(comm: Ranks) -> str:
    return ",".join(map(str, comm))


def _peer(e: Event) -> int:
    assert e.peer is not None  # check_events made sure
    return e.peer
