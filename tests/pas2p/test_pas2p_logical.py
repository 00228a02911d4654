"""The logical clock and the send/receive matching, on traces worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ppe.pas2p import TraceError, logical_trace, match_messages
from tests.pas2p.conftest import ev


def test_two_rank_clock_by_hand() -> None:
    # r0: compute(1) send->1(2)            recv<-1(6) collective(7)
    # r1:               recv<-0(3) compute(4) send->0(5) collective(7)
    events = [
        ev(0, "compute", 0.0, 1.0),
        ev(0, "send", 1.0, 1.1, peer=1, tag=1),
        ev(0, "recv", 1.1, 3.0, peer=1, tag=2),
        ev(0, "collective", 3.0, 3.5),
        ev(1, "recv", 0.0, 1.1, peer=0, tag=1),
        ev(1, "compute", 1.1, 2.9),
        ev(1, "send", 2.9, 3.0, peer=0, tag=2),
        ev(1, "collective", 3.0, 3.5),
    ]
    lt = logical_trace(events)
    assert lt.time == [1, 2, 6, 7, 3, 4, 5, 7]
    assert lt.send_of == {2: 6, 4: 1}
    assert [events[i].kind for i in lt.merged()][:3] == ["compute", "send", "recv"]


def test_three_rank_ring_by_hand() -> None:
    # each rank computes, sends to the next, receives from the previous; rank 0 computes twice
    events = [
        ev(0, "compute", 0, 1),
        ev(0, "compute", 1, 2),
        ev(0, "send", 2, 2, peer=1, tag=0),
        ev(0, "recv", 2, 4, peer=2, tag=0),
        ev(1, "compute", 0, 1),
        ev(1, "recv", 1, 2, peer=0, tag=0),
        ev(1, "send", 2, 2, peer=2, tag=0),
        ev(2, "compute", 0, 1),
        ev(2, "recv", 1, 3, peer=1, tag=0),
        ev(2, "send", 3, 3, peer=0, tag=0),
    ]
    # r0: 1 2 3(send) | r1: 1, recv max(1,3)+1=4, send 5 | r2: 1, recv 6, send 7 | r0 recv 8
    assert logical_trace(events).time == [1, 2, 3, 8, 1, 4, 5, 1, 6, 7]


def test_matching_by_tag_and_order_out_of_order() -> None:
    events = [
        ev(0, "send", 0.0, peer=1, tag=5),  # 0
        ev(0, "send", 0.1, peer=1, tag=7),  # 1
        ev(0, "send", 0.2, peer=1, tag=5),  # 2
        ev(1, "recv", 0.0, 0.3, peer=0, tag=7),  # 3: the tag-7 send, posted second
        ev(1, "recv", 0.3, peer=0, tag=5),  # 4: first tag-5 send
        ev(1, "recv", 0.4, peer=0, tag=5),  # 5: second tag-5 send
    ]
    assert match_messages(events) == {3: 1, 4: 0, 5: 2}
    assert logical_trace(events).time == [1, 2, 3, 3, 4, 5]


def test_receive_without_send_names_the_event() -> None:
    events = [ev(0, "compute", 0, 1), ev(1, "recv", 0, 1, peer=0, tag=3)]
    with pytest.raises(TraceError, match=r"r1@0: rank 1 receives from rank 0 \(tag 3\) with no"):
        logical_trace(events)


def test_send_without_receive_names_the_event() -> None:
    events = [ev(0, "send", 0, 1, peer=1, tag=3), ev(1, "compute", 0, 1)]
    with pytest.raises(TraceError, match=r"r0@0: rank 0 sends to rank 1 \(tag 3\) with no"):
        logical_trace(events)


def test_circular_wait_is_an_error_naming_both_ranks() -> None:
    events = [
        ev(0, "recv", 0, peer=1, tag=0),
        ev(0, "send", 1, peer=1, tag=0),
        ev(1, "recv", 0, peer=0, tag=0),
        ev(1, "send", 1, peer=0, tag=0),
    ]
    with pytest.raises(TraceError, match="no logical order.*rank 0 waits at r0@0.*rank 1 waits"):
        logical_trace(events)


def test_collective_after_receive_blocks_until_the_send() -> None:
    # r1's collective must wait for r0 to reach its collective after the send
    events = [
        ev(0, "compute", 0, 1),
        ev(0, "compute", 1, 2),
        ev(0, "send", 2, peer=1, tag=0),
        ev(0, "collective", 3, 4),
        ev(1, "recv", 0, 2, peer=0, tag=0),
        ev(1, "collective", 3, 4),
    ]
    assert logical_trace(events).time == [1, 2, 3, 5, 4, 5]


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([ev(0, "compute", 0, 1), ev(2, "compute", 0, 1)], "rank 1 is missing"),
        ([ev(0, "compute", 1, 2), ev(0, "compute", 0.5, 2)], "clock goes backwards"),
        ([ev(0, "compute", 2, 1)], "ends before it starts"),
        ([ev(0, "send", 0, 1, peer=4, tag=0)], "names peer 4"),
        ([ev(0, "collective", 0, 1), ev(1, "compute", 0, 1)], "different numbers of collectives"),
        ([], "no events"),
    ],
)
def test_bad_traces_are_refused(events: list, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        logical_trace(events)


A, B, C = (0, 1), (2, 3), (1, 2)  # three communicators of four ranks


def test_interleaved_collectives_of_several_communicators_by_hand() -> None:
    # r0: compute 1, A#0 max(1, 0)+1 = 2, A#1 waits for r1
    # r1: A#0 2, C#0 max(2, 0)+1 = 3 (r2 waits there), A#1 max(r0 2, r1 3)+1 = 4
    # r2: C#0 3, B#0 max(3, r3 2)+1 = 4
    # r3: compute 1, compute 2, B#0 4
    events = [
        ev(0, "compute", 0, 1),
        ev(0, "collective", 1, 2, members=A),
        ev(0, "collective", 2, 3, members=A),
        ev(1, "collective", 1, 2, members=A),
        ev(1, "collective", 2, 2.5, members=C),
        ev(1, "collective", 2.5, 3, members=A),
        ev(2, "collective", 0, 2.5, members=C),
        ev(2, "collective", 2.5, 3, members=B),
        ev(3, "compute", 0, 1),
        ev(3, "compute", 1, 2),
        ev(3, "collective", 2, 3, members=B),
    ]
    assert logical_trace(events).time == [1, 2, 4, 2, 3, 4, 3, 4, 1, 2, 4]
    # with every collective over all ranks the counts would not even agree
    whole = [replace(e, members=None) for e in events]
    with pytest.raises(TraceError, match="different numbers of collectives"):
        logical_trace(whole)


def test_a_sub_communicator_collective_does_not_wait_for_the_others() -> None:
    # r2 computes long before anything; ranks 0 and 1's collective needs nothing from it,
    # and the world collective after it waits for everyone
    events = [
        ev(0, "collective", 0, 1, members=(1, 0)),  # order of members means nothing
        ev(0, "collective", 5, 6),
        ev(1, "collective", 0, 1, members=(0, 1)),
        ev(1, "collective", 5, 6, members=(0, 1, 2)),  # all ranks, spelt out
        ev(2, "compute", 0, 1),
        ev(2, "compute", 1, 2),
        ev(2, "compute", 2, 5),
        ev(2, "collective", 5, 6),
    ]
    assert logical_trace(events).time == [1, 4, 1, 4, 1, 2, 3, 4]


def test_collectives_crossing_communicators_in_a_circle_have_no_order() -> None:
    # r0 waits at {0,1} for r1, r1 at {1,2} for r2, r2 at {0,2} for r0
    events = [
        ev(0, "collective", 0, members=(0, 1)),
        ev(0, "collective", 1, members=(0, 2)),
        ev(1, "collective", 0, members=(1, 2)),
        ev(1, "collective", 1, members=(0, 1)),
        ev(2, "collective", 0, members=(0, 2)),
        ev(2, "collective", 1, members=(1, 2)),
    ]
    with pytest.raises(
        TraceError,
        match=r"no logical order.*rank 0 waits at r0@0 \(collective over ranks 0,1\); "
        r"rank 1 waits at r1@0 \(collective over ranks 1,2\); "
        r"rank 2 waits at r2@0 \(collective over ranks 0,2\)",
    ):
        logical_trace(events)


def test_ranks_disagreeing_on_a_communicators_collectives_are_refused() -> None:
    events = [
        ev(0, "collective", 0, 1, members=(0, 2)),
        ev(0, "collective", 1, 2, members=(0, 2)),
        ev(1, "compute", 0, 1),
        ev(2, "collective", 0, 1, members=(0, 2)),
    ]
    with pytest.raises(
        TraceError,
        match=r"^ranks 0,2 hold different numbers of collectives on their communicator "
        r"\(rank 0: 2, rank 2: 1\): r0@1: rank 0's collective #2 has no partner$",
    ):
        logical_trace(events)


@pytest.mark.parametrize(
    ("members", "kind", "message"),
    [
        ((0, 3), "collective", r"r0@0: rank 0 collective names member 3, not a rank of 0\.\.1"),
        ((0, -1), "collective", "names member -1, not a rank"),
        ((0, 1, 0), "collective", "names member 0 twice"),
        ((1,), "collective", r"r0@0: rank 0 collective is over ranks 1, which leave it out"),
        ((), "collective", "rank 0 collective names no members"),
        ((0, 1), "compute", "rank 0 compute names members: only collectives do"),
    ],
)
def test_bad_members_are_refused(members: tuple[int, ...], kind: str, message: str) -> None:
    events = [ev(0, kind, 0, 1, members=members), ev(1, "compute", 0, 1)]
    with pytest.raises(TraceError, match=message):
        logical_trace(events)
