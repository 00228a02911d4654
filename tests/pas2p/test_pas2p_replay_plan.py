"""The replay plan: each kept phase's typical occurrence as per-rank actions, with the messages
crossing the window's edges posted before it or received after it."""

from __future__ import annotations

import math

from ppe.pas2p import Event, logical_trace, signature
from ppe.pas2p.replay_plan import communicators, replay_plan
from tests.pas2p.conftest import bsp, ev

B = 64  # bytes of every message


def halo_trace() -> list[Event]:
    """ppe-sor's shape on 2 ranks, 3 steps. Rank 0 computes, receives rank 1's edge (tag 10+k)
    and sends its own (tag 20+k); rank 1 receives rank 0's previous edge first (from step 1 on),
    then computes and sends. Both end with a collective (rank 0 records 8 bytes, rank 1 none).

    Logical times worked by hand: r0 compute 1, r1 compute 1, r1 send(10) 2, r0 recv(10) 3,
    r0 send(20) 4, r1 recv(20) 5, r0 compute 5, r1 compute 6, r1 send(11) 7, r0 recv(11) 8,
    r0 send(21) 9, r0 compute 10, r1 recv(21) 10, r1 compute 11, r1 send(12) 12,
    r0 recv(12) 13, r0 send(22) 14, r1 recv(22) 15, collective 16. Rank 0's bursts cut at
    1, 5, 10: step 0 = [1, 5), step 1 = [5, 10), step 2 = [10, 17).
    """
    c0 = (0.5, 0.25, 0.125)  # rank 0's bursts
    c1 = (0.375, 0.75, 0.625)  # rank 1's
    r0: list[Event] = []
    r1: list[Event] = []
    for k in range(3):
        t = 2.0 * k
        r0 += [
            ev(0, "compute", t, t + c0[k]),
            ev(0, "recv", t + 1.0, t + 1.1, peer=1, tag=10 + k, nbytes=B),
            ev(0, "send", t + 1.2, t + 1.3, peer=1, tag=20 + k, nbytes=B),
        ]
        if k:
            r1.append(ev(1, "recv", t, t + 0.05, peer=0, tag=20 + k - 1, nbytes=B))
        r1 += [
            ev(1, "compute", t + 0.1, t + 0.1 + c1[k]),
            ev(1, "send", t + 0.9, t + 1.0, peer=0, tag=10 + k, nbytes=B),
        ]
    r1.append(ev(1, "recv", 5.5, 5.6, peer=0, tag=22, nbytes=B))
    r0.append(Event(0, "collective", None, 8, None, 5.7, 5.8, "r0 coll"))
    r1.append(Event(1, "collective", None, 0, None, 5.7, 5.8, "r1 coll"))
    return r0 + r1


def test_each_kept_phase_replays_its_window_with_the_crossing_messages() -> None:
    trace = logical_trace(halo_trace())
    sig = signature(trace, keep=1.0, tolerance=0.5)
    assert [(p.id, p.steps) for p in sig.phases] == [(0, [0]), (1, [1]), (2, [2])]
    plan = {p.id: p for p in replay_plan(sig, trace)}
    assert sorted(plan) == sorted(sig.kept) == [0, 1, 2]

    first = plan[0]  # everything it sends is received inside but rank 0's tag-20 edge
    assert (first.step, first.weight) == (0, 1)
    assert first.actions == [
        [("compute", 0.5), ("recv", 1, B, 10), ("send", 1, B, 20)],
        [("compute", 0.375), ("send", 0, B, 10)],
    ]
    assert first.before == [[], []]
    assert first.after == [[], [("recv", 0, B, 20)]]

    middle = plan[1]  # rank 1 starts by receiving step 0's edge: in flight when it starts
    assert middle.actions == [
        [("compute", 0.25), ("recv", 1, B, 11), ("send", 1, B, 21)],
        [("recv", 0, B, 20), ("compute", 0.75), ("send", 0, B, 11)],
    ]
    assert middle.before == [[("send", 1, B, 20)], []]
    assert middle.after == [[], [("recv", 0, B, 21)]]
    assert middle.for_rank(1) == (
        [],
        [("recv", 0, B, 20), ("compute", 0.75), ("send", 0, B, 11)],
        [("recv", 0, B, 21)],
    )

    last = plan[2]  # one allreduce size for both ranks: the largest recorded
    assert last.actions == [
        [("compute", 0.125), ("recv", 1, B, 12), ("send", 1, B, 22), ("collective", 8)],
        [
            ("recv", 0, B, 21),
            ("compute", 0.625),
            ("send", 0, B, 12),
            ("recv", 0, B, 22),
            ("collective", 8),
        ],
    ]
    assert last.before == [[("send", 1, B, 21)], []]
    assert last.after == [[], []]


def test_sends_and_receives_balance_per_pair_and_tag_in_every_replay() -> None:
    """Replayed alone, every message a window's ranks receive is sent in it or before it, and
    every one they send is received in it or after it: nothing waits forever."""
    trace = logical_trace(halo_trace())
    for p in replay_plan(signature(trace, keep=1.0), trace):
        sent: list[tuple[object, ...]] = []
        got: list[tuple[object, ...]] = []
        for r in range(2):
            before, actions, after = p.for_rank(r)
            for a in before + actions + after:
                if a[0] == "send":
                    sent.append((r, *a[1:]))
                elif a[0] == "recv":
                    got.append((a[1], r, *a[2:]))
        assert sorted(sent) == sorted(got)


def test_the_typical_occurrence_is_replayed_not_the_first() -> None:
    """Steady steps with jitter: the replay carries the median-time occurrence's bursts."""
    computes = [0.004, 0.001, 0.0012, 0.0011, 0.0013, 0.00105, 0.00115]
    trace = logical_trace(bsp(computes, nbytes=800))
    sig = signature(trace, keep=1.0, tolerance=math.inf)
    plans = {p.id: p for p in replay_plan(sig, trace)}
    for phase in sig.phases:
        plan = plans[phase.id]
        assert plan.step == phase.typical_step
        assert plan.weight == phase.weight
        burst = plan.actions[0][0]
        assert burst[0] == "compute" and math.isclose(burst[1], computes[plan.step])
    steady = max(sig.phases, key=lambda p: p.weight)
    assert steady.weight > 1 and plans[steady.id].step != steady.steps[0]


def test_only_kept_phases_in_signature_order() -> None:
    trace = logical_trace(bsp([0.001] * 6 + [0.0001], collective_every=3))
    sig = signature(trace, keep=0.5)
    assert [p.id for p in replay_plan(sig, trace)] == sig.kept
    assert len(sig.kept) < len(sig.phases)


def test_collectives_take_their_size_per_communicator() -> None:
    """Three ranks, one burst each, then collectives on three communicators interleaved:
    ranks 0 and 2 twice on theirs (16 and 64 bytes on rank 0, 32 and 8 on rank 2), ranks 0
    and 1 once (100 and 50), then all ranks (8, none, 4). Each call gets the largest size its
    own ranks recorded for it; taking the k-th collective of every rank would mix them."""
    pair02, pair01 = (0, 2), (0, 1)
    events = [
        ev(0, "compute", 0.0, 1.0),
        ev(0, "collective", 1.0, 1.1, nbytes=16, members=pair02),
        ev(0, "collective", 1.1, 1.2, nbytes=100, members=pair01),
        ev(0, "collective", 1.2, 1.3, nbytes=64, members=pair02),
        ev(0, "collective", 1.3, 1.4, nbytes=8),
        ev(1, "compute", 0.0, 1.0),
        ev(1, "collective", 1.1, 1.2, nbytes=50, members=pair01),
        ev(1, "collective", 1.3, 1.4),
        ev(2, "compute", 0.0, 1.0),
        ev(2, "collective", 1.0, 1.1, nbytes=32, members=pair02),
        ev(2, "collective", 1.2, 1.3, nbytes=8, members=pair02),
        ev(2, "collective", 1.3, 1.4, nbytes=4),
    ]
    trace = logical_trace(events)
    sig = signature(trace, keep=1.0)
    [plan] = replay_plan(sig, trace)
    assert plan.actions == [
        [
            ("compute", 1.0),
            ("collective", 32, pair02),
            ("collective", 100, pair01),
            ("collective", 64, pair02),
            ("collective", 8),
        ],
        [("compute", 1.0), ("collective", 100, pair01), ("collective", 8)],
        [
            ("compute", 1.0),
            ("collective", 32, pair02),
            ("collective", 64, pair02),
            ("collective", 8),
        ],
    ]
    assert plan.before == plan.after == [[], [], []]
    assert communicators([plan]) == [pair01, pair02]


def test_no_sub_communicators_without_members() -> None:
    trace = logical_trace(halo_trace())
    assert communicators(replay_plan(signature(trace, keep=1.0), trace)) == []
