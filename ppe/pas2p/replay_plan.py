"""What a generic replayer does to reproduce each kept phase: per rank, the ordered actions of
the phase's typical occurrence (the one a signature run executes, ``Phase.typical_step``).

A program that cannot run one of its steps alone (an OTF2-traced one) is replayed instead:
compute bursts become busy work of the recorded seconds, messages are sent and received with
the recorded peers, sizes and tags, collectives synchronise their communicator's ranks (all
ranks, or the members the trace gave them: each such set is one communicator, the k-th
collective on it one call of its ranks, as ``logical_trace`` matched them). An occurrence is a
window of logical time, so some of its receives match sends from before it (messages in flight
when it starts) and some of its sends are received after it. Replayed alone, the first would
wait forever and the second would be left unreceived; so each rank also gets ``before`` (the
sends it posts before the window starts, standing for the ones in flight) and ``after`` (the
receives it completes once the window is over, untimed). A receive is always logically after
its send, so a window's receives need only sends from inside it or from ``before``, and the
replay cannot deadlock where the traced run did not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppe.pas2p.events import communicator
from ppe.pas2p.logical import LogicalTrace
from ppe.pas2p.phases import Occurrence, Phase, Signature

__all__ = ["Action", "PhaseReplay", "communicators", "replay_plan"]

#: ("compute", seconds) | ("send", peer, bytes, tag) | ("recv", peer, bytes, tag) |
#: ("collective", bytes) over all ranks | ("collective", bytes, ranks) over those (sorted)
Action = (
    tuple[str, float]
    | tuple[str, int, int, int]
    | tuple[str, int]
    | tuple[str, int, tuple[int, ...]]
)


@dataclass(frozen=True)
class PhaseReplay:
    """One kept phase as the ranks replay it (lists indexed by rank)."""

    id: int
    step: int  # the typical occurrence's (-1: the set-up before the anchor's first burst)
    weight: int
    actions: list[list[Action]]
    before: list[list[Action]]  # sends standing for the messages in flight at the start
    after: list[list[Action]]  # receives of the messages sent in the window, received later

    def for_rank(self, rank: int) -> tuple[list[Action], list[Action], list[Action]]:
        return self.before[rank], self.actions[rank], self.after[rank]


def replay_plan(sig: Signature, trace: LogicalTrace) -> list[PhaseReplay]:
    """Each kept phase, in signature order, as per-rank actions from its typical occurrence."""
    return [_phase(sig.phases[pid], _typical(sig, sig.phases[pid]), trace) for pid in sig.kept]


def communicators(plans: list[PhaseReplay]) -> list[tuple[int, ...]]:
    """The sub-communicators the plans' collectives run on (their sorted ranks), each once and
    in one order, so that every rank can create them together before replaying."""
    found = {
        a[2]
        for p in plans
        for per_rank in p.actions
        for a in per_rank
        if a[0] == "collective" and len(a) == 3
    }
    return sorted(found)


def _typical(sig: Signature, phase: Phase) -> Occurrence:
    step = phase.typical_step
    for occ in sig.occurrences:
        if occ.phase == phase.id and occ.step == step:
            return occ
    raise ValueError(f"phase {phase.id}: no occurrence at step {step}")  # cannot happen


def _phase(phase: Phase, occ: Occurrence, trace: LogicalTrace) -> PhaseReplay:
    events = trace.events
    size = len(trace.ranks)
    inside = [[i for i in idx if occ.tick <= trace.time[i] < occ.tick_end] for idx in trace.ranks]
    members = {i for idx in inside for i in idx}
    recv_of = {s: r for r, s in trace.send_of.items()}
    # the k-th collective on a communicator shares one logical time on all its ranks, so they
    # all hold it here or none does; an allreduce needs one size: the largest any recorded
    coll_bytes: dict[tuple[tuple[int, ...] | None, int], int] = {}
    for idx in inside:
        seen: dict[tuple[int, ...] | None, int] = {}
        for i in idx:
            if events[i].kind == "collective":
                comm = communicator(events[i], size)
                k = seen[comm] = seen.get(comm, -1) + 1
                coll_bytes[(comm, k)] = max(coll_bytes.get((comm, k), 0), events[i].nbytes)
    actions: list[list[Action]] = [[] for _ in range(size)]
    before: list[list[Action]] = [[] for _ in range(size)]
    after: list[list[Action]] = [[] for _ in range(size)]
    for r, idx in enumerate(inside):
        done: dict[tuple[int, ...] | None, int] = {}
        for i in idx:
            e = events[i]
            if e.kind == "compute":
                actions[r].append(("compute", e.duration))
            elif e.kind == "collective":
                comm = communicator(e, size)
                k = done[comm] = done.get(comm, -1) + 1
                nbytes = coll_bytes[(comm, k)]
                actions[r].append(
                    ("collective", nbytes) if comm is None else ("collective", nbytes, comm)
                )
            else:
                peer = _int(e.peer)
                tag = e.tag if e.tag is not None else 0
                actions[r].append((e.kind, peer, e.nbytes, tag))
                if e.kind == "recv" and trace.send_of[i] not in members:
                    before[peer].append(("send", r, e.nbytes, tag))
                elif e.kind == "send" and recv_of[i] not in members:
                    after[peer].append(("recv", r, e.nbytes, tag))
    return PhaseReplay(phase.id, occ.step, phase.weight, actions, before, after)


def _int(peer: int | None) -> int:
    assert peer is not None  # check_events made sure
    return peer
