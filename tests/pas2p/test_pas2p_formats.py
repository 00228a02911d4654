"""Reading traces: ppe-sor's JSON lines (plain and gzipped), OTF2 archives, and bad input."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ppe.pas2p import TraceError, logical_trace, read_otf2, read_sor, read_traces


def _line(**kw: object) -> str:
    item = {"rank": 0, "kind": "compute", "peer": None, "bytes": 0, "tag": None}
    item.update({"start": 1.0, "end": 2.0})
    item.update(kw)
    return json.dumps(item) + "\n"


def test_sor_files_merge_ranks_in_program_order(tmp_path: Path) -> None:
    (tmp_path / "t.1").write_text(
        _line(rank=1, kind="recv", peer=0, bytes=8, tag=3, start=1.0, end=1.5)
    )
    with gzip.open(tmp_path / "t.0.gz", "wt") as f:
        f.write(_line())
        f.write("\n")  # blank lines are skipped
        f.write(_line(kind="send", peer=1, bytes=8, tag=3, start=2.0, end=2.1))
    events = read_sor([tmp_path / "t.1", tmp_path / "t.0.gz"])
    assert [(e.rank, e.kind) for e in events] == [(0, "compute"), (0, "send"), (1, "recv")]
    assert events[1].where == f"{tmp_path / 't.0.gz'}:3"
    assert logical_trace(events).time == [1, 2, 3]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json\n", r"t\.0:2: not JSON"),
        ("[1, 2]\n", r"t\.0:2: expected a JSON object, got list"),
        (json.dumps({"rank": 0, "kind": "compute", "start": 1}) + "\n", r"t\.0:2: missing end"),
        (_line(kind="sleep"), r"t\.0:2: unknown kind 'sleep'"),
        (_line(rank="0"), r"t\.0:2: rank must be an integer"),
        (_line(start=float("nan")), r"t\.0:2: start must be a finite number"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "t.0").write_text(_line() + line)
    with pytest.raises(TraceError, match=message):
        read_sor([tmp_path / "t.0"])


def test_receive_without_send_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "t.0").write_text(_line())
    (tmp_path / "t.1").write_text(_line(rank=1) + _line(rank=1, kind="recv", peer=0, tag=9))
    with pytest.raises(TraceError, match=r"t\.1:2: rank 1 receives from rank 0 \(tag 9\)"):
        logical_trace(read_sor([tmp_path / "t.0", tmp_path / "t.1"]))


def test_a_rank_in_two_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.0").write_text(_line())
    (tmp_path / "b.0").write_text(_line(start=3.0, end=4.0))
    with pytest.raises(TraceError, match=r"rank 0 is in both .*a\.0 and .*b\.0"):
        read_sor([tmp_path / "a.0", tmp_path / "b.0"])


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="unknown trace format 'vtf'"):
        read_traces([tmp_path / "x"], "vtf")
    with pytest.raises(TraceError, match=r"x\.0: cannot read"):
        read_traces([tmp_path / "x.0"], "sor")


@dataclass
class _Archive:
    """An OTF2 archive being written: its definitions, one location per rank, the world
    communicator and the regions these tests enter."""

    trace: Any
    defs: Any
    locs: list[Any]
    world: Any
    regions: dict[str, Any]
    op: Any  # otf2.enums.CollectiveOp

    def writers(self) -> list[Any]:
        return [self.trace.event_writer_from_location(loc) for loc in self.locs]

    def group(self, name: str, members: list[Any], kind: str = "COMM_GROUP") -> Any:
        from otf2.enums import GroupType, Paradigm

        return self.defs.group(
            name, group_type=getattr(GroupType, kind), paradigm=Paradigm.MPI, members=members
        )


@contextmanager
def _archive(path: Path, ranks: int) -> Iterator[_Archive]:
    """``ranks`` ranks of one MPI program in milliseconds, written when the block ends."""
    otf2 = pytest.importorskip(
        "otf2", reason="the otf2 package (PPE's otf2 extra) is not installed"
    )
    from otf2.enums import CollectiveOp, RegionRole

    with otf2.writer.open(str(path), timer_resolution=1000) as trace:
        d = trace.definitions
        node = d.system_tree_node("node")
        locs = [
            d.location("main", group=d.location_group(f"rank {r}", system_tree_parent=node))
            for r in range(ranks)
        ]
        a = _Archive(trace, d, locs, None, {}, CollectiveOp)
        a.group("locations", locs, "COMM_LOCATIONS")
        a.world = d.comm("MPI_COMM_WORLD", group=a.group("world", locs))
        a.regions = {
            "main": d.region("main"),
            "send": d.region("MPI_Send", region_role=RegionRole.POINT2POINT),
            "recv": d.region("MPI_Recv", region_role=RegionRole.POINT2POINT),
            "allreduce": d.region("MPI_Allreduce", region_role=RegionRole.COLL_ALL2ALL),
        }
        yield a


def _write_otf2(path: Path) -> None:
    with _archive(path, 2) as a:
        comm, CollectiveOp = a.world, a.op
        main, send, recv, allreduce = (a.regions[k] for k in ("main", "send", "recv", "allreduce"))
        w0, w1 = a.writers()
        w0.enter(0, main)
        w1.enter(0, main)
        w0.enter(100, send)
        w0.mpi_send(101, 1, comm, 3, 800)
        w0.leave(102, send)
        w1.enter(50, recv)
        w1.mpi_recv(110, 0, comm, 3, 800)
        w1.leave(111, recv)
        w1.enter(300, send)
        w1.mpi_send(301, 0, comm, 4, 16)
        w1.leave(302, send)
        w0.enter(300, recv)
        w0.mpi_recv(350, 1, comm, 4, 16)
        w0.leave(351, recv)
        for w in (w0, w1):
            w.enter(400, allreduce)
            w.mpi_collective_begin(400)
            w.mpi_collective_end(450, CollectiveOp.ALLREDUCE, comm, 0, 8, 8)
            w.leave(450, allreduce)
            w.leave(500, main)


def test_otf2_round_trip(tmp_path: Path) -> None:
    _write_otf2(tmp_path / "arch")
    events = read_otf2(tmp_path / "arch")  # the folder: its one .otf2 anchor file is found
    got = [
        (e.rank, e.kind, e.peer, e.nbytes, e.tag, round(e.start, 6), round(e.end, 6))
        for e in events
    ]
    assert got == [
        (0, "compute", None, 0, None, 0.0, 0.1),
        (0, "send", 1, 800, 3, 0.1, 0.102),
        (0, "compute", None, 0, None, 0.102, 0.3),
        (0, "recv", 1, 16, 4, 0.3, 0.351),
        (0, "compute", None, 0, None, 0.351, 0.4),
        (0, "collective", None, 8, None, 0.4, 0.45),
        (1, "compute", None, 0, None, 0.0, 0.05),
        (1, "recv", 0, 800, 3, 0.05, 0.111),
        (1, "compute", None, 0, None, 0.111, 0.3),
        (1, "send", 0, 16, 4, 0.3, 0.302),
        (1, "compute", None, 0, None, 0.302, 0.4),
        (1, "collective", None, 8, None, 0.4, 0.45),
    ]
    # r0: 1 2 | r1: 1, recv 3, 4, send 5 | r0: 3, recv 6, 7 | collective max(7, 6) + 1 = 8
    assert logical_trace(events).time == [1, 2, 3, 6, 7, 8, 1, 3, 4, 5, 6, 8]
    assert read_traces([tmp_path / "arch" / "traces.otf2"], "otf2") == events


def test_otf2_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ppe.cli import main

    _write_otf2(tmp_path / "arch")
    anchor = str(tmp_path / "arch" / "traces.otf2")
    assert main(["pas2p", "analyze", anchor, "--format", "otf2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["traced_s"] == pytest.approx(0.45)
    assert report["predicted_s"] == pytest.approx(0.45)  # every phase kept
    assert sum(p["weight"] for p in report["phases"]) == 3  # 3 bursts on the anchor rank 0
    assert main(["pas2p", "analyze", anchor, anchor, "--format", "otf2"]) == 2
    assert "one archive" in capsys.readouterr().err


def test_not_an_otf2_archive(tmp_path: Path) -> None:
    pytest.importorskip("otf2", reason="the otf2 package (PPE's otf2 extra) is not installed")
    bogus = tmp_path / "traces.otf2"
    bogus.write_text("not an archive\n")
    with pytest.raises(TraceError, match=r"traces\.otf2: not an OTF2 archive"):
        read_otf2(bogus)
    with pytest.raises(TraceError, match="no such OTF2 anchor file"):
        read_otf2(tmp_path / "missing.otf2")


def _write_otf2_sub(path: Path) -> None:
    """Three ranks. Ranks 0 and 2 allreduce 16 bytes on a sub-communicator whose group lists
    rank 2 first (so its rank 0 is world rank 2), then rank 0 sends 800 bytes to its
    sub-rank 0 (world 2); rank 1 computes meanwhile; all allreduce 8 bytes on the world."""
    with _archive(path, 3) as a:
        comm, CollectiveOp = a.world, a.op
        sub = a.defs.comm("pair comm", group=a.group("pair", [2, 0]), parent=comm)
        main, send, recv, allreduce = (a.regions[k] for k in ("main", "send", "recv", "allreduce"))
        w0, w1, w2 = a.writers()
        for w in (w0, w1, w2):
            w.enter(0, main)
        for w in (w0, w2):
            w.enter(100, allreduce)
            w.mpi_collective_begin(100)
            w.mpi_collective_end(150, CollectiveOp.ALLREDUCE, sub, 0, 16, 16)
            w.leave(150, allreduce)
        w0.enter(200, send)
        w0.mpi_send(201, 0, sub, 5, 800)  # sub-rank 0: world rank 2
        w0.leave(202, send)
        w2.enter(200, recv)
        w2.mpi_recv(209, 1, sub, 5, 800)  # from sub-rank 1: world rank 0
        w2.leave(210, recv)
        for w in (w0, w1, w2):
            w.enter(300, allreduce)
            w.mpi_collective_begin(300)
            w.mpi_collective_end(350, CollectiveOp.ALLREDUCE, comm, 0, 8, 8)
            w.leave(350, allreduce)
            w.leave(400, main)


def test_otf2_sub_communicator_collective_round_trip(tmp_path: Path) -> None:
    _write_otf2_sub(tmp_path / "arch")
    events = read_otf2(tmp_path / "arch")
    got = [
        (e.rank, e.kind, e.peer, e.nbytes, e.members, round(e.start, 6), round(e.end, 6))
        for e in events
    ]
    assert got == [
        (0, "compute", None, 0, None, 0.0, 0.1),
        (0, "collective", None, 16, (0, 2), 0.1, 0.15),
        (0, "compute", None, 0, None, 0.15, 0.2),
        (0, "send", 2, 800, None, 0.2, 0.202),
        (0, "compute", None, 0, None, 0.202, 0.3),
        (0, "collective", None, 8, None, 0.3, 0.35),
        (1, "compute", None, 0, None, 0.0, 0.3),
        (1, "collective", None, 8, None, 0.3, 0.35),
        (2, "compute", None, 0, None, 0.0, 0.1),
        (2, "collective", None, 16, (0, 2), 0.1, 0.15),
        (2, "compute", None, 0, None, 0.15, 0.2),
        (2, "recv", 0, 800, None, 0.2, 0.21),
        (2, "compute", None, 0, None, 0.21, 0.3),
        (2, "collective", None, 8, None, 0.3, 0.35),
    ]
    # r0: 1, pair 2, 3, send 4, 5 | r1: 1 | r2: 1, pair 2, 3, recv 5, 6 | world 1 + 6 = 7
    assert logical_trace(events).time == [1, 2, 3, 4, 5, 7, 1, 7, 1, 2, 3, 5, 6, 7]


def test_sor_lines_carry_a_collectives_members(tmp_path: Path) -> None:
    (tmp_path / "t.0").write_text(
        _line(kind="collective", members=[2, 0], start=1.0, end=1.5)
        + _line(kind="collective", start=2.0, end=2.5)
    )
    (tmp_path / "t.1").write_text(_line(rank=1, kind="collective", start=2.0, end=2.5))
    (tmp_path / "t.2").write_text(
        _line(rank=2, kind="collective", members=[0, 2], start=1.0, end=1.5)
        + _line(rank=2, kind="collective", members=None, start=2.0, end=2.5)
    )
    events = read_sor([tmp_path / f"t.{r}" for r in range(3)])
    assert [e.members for e in events] == [(0, 2), None, None, (0, 2), None]
    assert logical_trace(events).time == [1, 2, 2, 1, 2]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"kind": "collective", "members": 2}, r"t\.0:1: members must be a list of integer"),
        ({"kind": "collective", "members": [0, "1"]}, "members must be a list of integer ranks"),
        ({"kind": "collective", "members": [0, True]}, "members must be a list of integer ranks"),
        ({"kind": "compute", "members": [0]}, r"t\.0:1: members are for collectives only"),
    ],
)
def test_bad_members_name_file_and_line(
    tmp_path: Path, item: dict[str, object], message: str
) -> None:
    (tmp_path / "t.0").write_text(_line(**item))
    with pytest.raises(TraceError, match=message):
        read_sor([tmp_path / "t.0"])


def test_otf2_sub_communicator_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The analysis JSON keeps its shape (the sub-communicator shows in the pattern only), so
    the service's schema and the execution plan take it as they take older ones."""
    from ppe.cli import main
    from ppe.pas2p.execution import execution_plan
    from ppe.service.schemas_phase_signatures import AnalysisIn

    _write_otf2_sub(tmp_path / "arch")
    anchor = str(tmp_path / "arch" / "traces.otf2")
    assert main(["pas2p", "analyze", anchor, "--format", "otf2", "--json", "--keep", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ranks"] == 3
    assert report["traced_s"] == pytest.approx(0.35)
    patterns = [p["pattern"] for p in report["phases"]]
    assert sum(p.count("collective[0,2]") for p in patterns) == 2  # ranks 0 and 2, once
    AnalysisIn.model_validate(report)
    assert sorted(p.id for p in execution_plan(report).phases) == sorted(report["signature"])


def test_otf2_comm_self_collective_is_each_ranks_own(tmp_path: Path) -> None:
    """A COMM_SELF group lists no members: each rank's collective on it is over itself."""
    with _archive(tmp_path / "arch", 2) as a:
        comm, CollectiveOp = a.world, a.op
        self_comm = a.defs.comm("MPI_COMM_SELF", group=a.group("self", [], "COMM_SELF"))
        for r, w in enumerate(a.writers()):
            w.mpi_collective_begin(10 * r)  # rank 1 comes later to its own
            w.mpi_collective_end(10 * r + 5, CollectiveOp.BARRIER, self_comm, 0, 0, 0)
            w.mpi_collective_begin(30)
            w.mpi_collective_end(40, CollectiveOp.BARRIER, comm, 0, 0, 0)
    events = read_otf2(tmp_path / "arch")
    assert [(e.rank, e.kind, e.members) for e in events] == [
        (0, "collective", (0,)),
        (0, "compute", None),
        (0, "collective", None),
        (1, "collective", (1,)),
        (1, "compute", None),
        (1, "collective", None),
    ]
    assert logical_trace(events).time == [1, 2, 3, 1, 2, 3]


def test_otf2_threads_of_a_rank_are_its_events(tmp_path: Path) -> None:
    """Rank 0 receives on its main thread while a second thread sends (MPI_THREAD_MULTIPLE):
    both are rank 0's, in the order of their MPI records (the receive, entered first, completes
    after the send it answers), and the rank's time is counted once."""
    with _archive(tmp_path / "arch", 2) as a:
        comm = a.world
        main, send, recv = (a.regions[k] for k in ("main", "send", "recv"))
        helper = a.defs.location("thread 1", group=a.locs[0].group)
        w0, w1 = a.writers()
        t0 = a.trace.event_writer_from_location(helper)
        w0.enter(0, main)
        w1.enter(0, main)
        w1.enter(50, recv)
        w0.enter(90, recv)  # main thread: waits for the answer
        t0.enter(100, send)  # second thread: sends the question
        t0.mpi_send(200, 1, comm, 3, 800)
        t0.leave(202, send)
        w1.mpi_recv(210, 0, comm, 3, 800)
        w1.leave(211, recv)
        w1.enter(230, send)
        w1.mpi_send(231, 0, comm, 4, 16)
        w1.leave(232, send)
        w0.mpi_recv(260, 1, comm, 4, 16)
        w0.leave(261, recv)
        w0.leave(500, main)
        w1.leave(500, main)
    events = read_otf2(tmp_path / "arch")
    got = [(e.rank, e.kind, e.peer, round(e.start, 6), round(e.end, 6)) for e in events]
    assert got == [
        (0, "compute", None, 0.0, 0.1),
        (0, "send", 1, 0.1, 0.202),
        (0, "recv", 1, 0.202, 0.261),  # entered at 0.09, counted from the send's end
        (1, "compute", None, 0.0, 0.05),
        (1, "recv", 0, 0.05, 0.211),
        (1, "compute", None, 0.211, 0.23),
        (1, "send", 0, 0.23, 0.232),
    ]
    # r0: 1, send 2 | r1: 1, recv 3, 4, send 5 | r0: recv 6
    assert logical_trace(events).time == [1, 2, 6, 1, 3, 4, 5]
