"""Reading traces into :class:`Event` lists: ppe-sor's JSON lines and OTF2 archives.

The only I/O of ppe.pas2p. ppe-sor writes one file per rank (``FILE.<rank>``, see
ppe/apps/trace.py): one JSON object a line with rank, kind, peer, bytes, tag, start, end
(unix seconds), and for a collective on a sub-communicator its ``members`` (world ranks; absent
or null: all ranks). Files may be gzipped (``.gz``). OTF2 archives (Score-P's format) are read
with the ``otf2`` package: MPI point-to-point events become sends and receives (the enclosing
MPI region, when there is one, gives their interval), collective begin/end pairs become
collectives with their communicator's ranks, and the time between a location's communication
events becomes compute bursts.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from ppe.pas2p.events import KINDS, Event, TraceError

__all__ = ["FORMATS", "read_otf2", "read_sor", "read_traces"]

FORMATS = ("sor", "otf2")


def read_traces(paths: Sequence[str | Path], fmt: str = "sor") -> list[Event]:
    """All the given files' events, rank by rank, each rank's in program order."""
    if fmt == "sor":
        return read_sor(paths)
    if fmt == "otf2":
        if len(paths) != 1:
            raise TraceError(
                f"an OTF2 trace is one archive (its .otf2 anchor file), not {len(paths)}"
            )
        return read_otf2(paths[0])
    raise TraceError(f"unknown trace format {fmt!r}: expected one of {', '.join(FORMATS)}")


def read_sor(paths: Sequence[str | Path]) -> list[Event]:
    if not paths:
        raise TraceError("no trace files given")
    events: list[Event] = []
    owner: dict[int, str] = {}  # rank -> the file that holds it
    for path in paths:
        with _open(Path(path)) as f:
            found = parse_sor_lines(f, str(path))
        for rank in sorted({e.rank for e in found}):
            if owner.setdefault(rank, str(path)) != str(path):
                raise TraceError(f"rank {rank} is in both {owner[rank]} and {path}")
        events.extend(found)
    events.sort(key=lambda e: e.rank)  # stable: program order kept within each rank
    return events


def _open(path: Path) -> IO[str]:
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rt", encoding="utf-8")
        return path.open(encoding="utf-8")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None


def parse_sor_lines(lines: Iterable[str], name: str) -> list[Event]:
    """One ppe-sor trace file's events; a bad line is an error naming ``name:line``."""
    out: list[Event] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{n}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg})") from None
        except UnicodeDecodeError:
            raise TraceError(f"{where}: not text") from None
        if not isinstance(item, dict):
            raise TraceError(f"{where}: expected a JSON object, got {type(item).__name__}")
        out.append(_sor_event(item, where))
    return out


def _sor_event(item: dict[str, Any], where: str) -> Event:
    missing = [k for k in ("rank", "kind", "start", "end") if k not in item]
    if missing:
        raise TraceError(f"{where}: missing {', '.join(missing)}")
    kind = item["kind"]
    if kind not in KINDS:
        raise TraceError(f"{where}: unknown kind {kind!r} (expected {', '.join(KINDS)})")
    rank = _int(item, "rank", where)
    peer = None if item.get("peer") is None else _int(item, "peer", where)
    tag = None if item.get("tag") is None else _int(item, "tag", where)
    nbytes = 0 if item.get("bytes") is None else _int(item, "bytes", where)
    start, end = (_float(item, k, where) for k in ("start", "end"))
    members = _members(item, kind, where)
    return Event(rank, kind, peer, nbytes, tag, start, end, where, members)


def _members(item: dict[str, Any], kind: str, where: str) -> tuple[int, ...] | None:
    """A collective's optional ``members``: a list of world ranks, sorted here (their order
    means nothing); the checks that they are distinct ranks including the event's own are
    ``check_events``'s."""
    v = item.get("members")
    if v is None:
        return None
    if kind != "collective":
        raise TraceError(f"{where}: members are for collectives only, not {kind}")
    if not isinstance(v, list) or any(isinstance(m, bool) or not isinstance(m, int) for m in v):
        raise TraceError(f"{where}: members must be a list of integer ranks, got {v!r}")
    return tuple(sorted(v))


def _int(item: dict[str, Any], key: str, where: str) -> int:
    v = item[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise TraceError(f"{where}: {key} must be an integer, got {v!r}")
    return v


def _float(item: dict[str, Any], key: str, where: str) -> float:
    v = item[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise TraceError(f"{where}: {key} must be a finite number, got {v!r}")
    return float(v)


def read_otf2(path: str | Path) -> list[Event]:
    """An OTF2 archive's MPI events, one rank per location group (all its threads)."""
    try:
        import otf2
    except ImportError:
        raise TraceError(
            "reading OTF2 needs the otf2 package (pip install otf2; PPE's 'otf2' extra)"
        ) from None
    anchor = Path(path)
    if anchor.is_dir():
        found = sorted(anchor.glob("*.otf2"))
        if len(found) != 1:
            raise TraceError(f"{anchor}: expected one .otf2 anchor file inside, found {len(found)}")
        anchor = found[0]
    if not anchor.is_file():
        raise TraceError(f"{anchor}: no such OTF2 anchor file")
    try:
        reader = otf2.reader.Reader(str(anchor))
    except Exception as exc:  # the C library's errors carry no common type
        raise TraceError(f"{anchor}: not an OTF2 archive ({exc})") from None
    try:
        return _otf2_events(reader, str(anchor))
    finally:
        reader.close()


def _otf2_events(reader: Any, name: str) -> list[Event]:
    """Every location of a location group is one of its rank's threads and their MPI events
    are the rank's (:func:`_with_bursts`). Enter/leave and collective begin/end pair up per
    location, since threads of a rank may be in MPI calls at once."""
    import otf2

    ev = otf2.events
    resolution = float(reader.timer_resolution)
    offset = reader.definitions.clock_properties.global_offset or 0
    groups = list(reader.definitions.location_groups)
    group_rank = {g: r for r, g in enumerate(groups)}
    size = len(groups)

    def seconds(t: int) -> float:
        return (t - offset) / resolution

    def rank_of(loc: Any) -> int:
        """A location's rank: its location group's."""
        return group_rank[loc.group]

    def world(comm: Any, peer: int, where: str) -> int:
        try:
            return rank_of(comm.location(peer))
        except Exception:
            raise TraceError(f"{where}: peer {peer} is not a rank of {comm.name}") from None

    spans: dict[Any, tuple[int, ...] | None] = {}  # communicator -> its world ranks

    def members_of(comm: Any, rank: int, where: str) -> tuple[int, ...] | None:
        """A collective's world ranks, sorted; None when its communicator spans all ranks."""
        if comm in spans:
            return spans[comm]
        group = getattr(comm, "group", None)
        if group is None:
            raise TraceError(
                f"{where}: a collective on {comm.name}, an inter-communicator; "
                "only collectives within one group of ranks are supported"
            )
        if group.group_type == otf2.GroupType.COMM_SELF:  # each rank's own: not cached
            return None if size == 1 else (rank,)
        try:
            ranks = tuple(sorted(rank_of(loc) for loc in group.members))
        except Exception:
            raise TraceError(
                f"{where}: {comm.name}'s group holds a location that is no rank"
            ) from None
        spans[comm] = None if ranks == tuple(range(size)) else ranks
        return spans[comm]

    per: dict[int, list[tuple[Any, Event]]] = {r: [] for r in range(size)}  # (thread, event)
    first: dict[int, float] = {}  # a rank's first event: a compute burst may run from it
    region_start: dict[Any, float] = {}  # per location (thread)
    open_in_region: dict[Any, list[int]] = {}  # the thread's events in its open MPI call
    coll_start: dict[Any, float] = {}
    for n, (loc, event) in enumerate(reader.events, 1):
        if loc.group not in group_rank:
            continue
        rank = rank_of(loc)
        where = f"{name}: event {n} (rank {rank})"
        t = seconds(event.time)
        out = per[rank]
        first.setdefault(rank, t)
        found: Event | None = None
        if isinstance(event, ev.Enter):
            if _is_mpi(event.region):
                region_start[loc] = t
                open_in_region[loc] = []
        elif isinstance(event, ev.Leave):
            if _is_mpi(event.region):
                for k in open_in_region.pop(loc, []):
                    per[rank][k] = (loc, replace(per[rank][k][1], end=t))
                region_start.pop(loc, None)
        elif isinstance(event, ev.MpiSend | ev.MpiIsend | ev.MpiRecv | ev.MpiIrecv):
            send = isinstance(event, ev.MpiSend | ev.MpiIsend)
            peer = world(event.communicator, event.receiver if send else event.sender, where)
            found = Event(
                rank,
                "send" if send else "recv",
                peer,
                int(event.msg_length),
                int(event.msg_tag),
                region_start.get(loc, t),
                t,
                where,
            )
        elif isinstance(event, ev.MpiCollectiveBegin):
            coll_start[loc] = t
        elif isinstance(event, ev.MpiCollectiveEnd):
            members = members_of(event.communicator, rank, where)
            start = region_start.get(loc, coll_start.pop(loc, t))
            found = Event(
                rank, "collective", None, int(event.size_sent), None, start, t, where, members
            )
        if found is not None:
            out.append((loc, found))
            if loc in open_in_region:
                open_in_region[loc].append(len(out) - 1)
    return [e for r in range(size) for e in _with_bursts(per[r], first.get(r))]


def _with_bursts(comms: list[tuple[Any, Event]], since: float | None) -> list[Event]:
    """A rank's communication events, in the order of their MPI records (a receive completes
    after its send was issued, so causality holds across the rank's threads), with the
    compute bursts between them: from the rank's first event, every stretch in which no
    thread of the rank was communicating. The rank's time is counted once: a call that began
    while another thread's call was under way starts when that one ended. One thread's own
    events (the two of a Sendrecv) keep their region's interval, unless another thread's call
    was recorded between them: then the later one starts where the rank's busy time ended,
    since a rank's events must not start earlier than the one before."""
    out: list[Event] = []
    busy_until, busy_thread = since, None
    for thread, e in comms:
        if busy_until is not None and e.start < busy_until and thread is not busy_thread:
            e = replace(e, start=busy_until, end=max(e.end, busy_until))
        if busy_until is not None and e.start > busy_until:
            out.append(Event(e.rank, "compute", None, 0, None, busy_until, e.start, e.where))
        out.append(e)
        if busy_until is None or e.end >= busy_until:
            busy_until, busy_thread = e.end, thread
    return out


def _is_mpi(region: Any) -> bool:
    name = str(getattr(region, "name", "") or "")
    return name.startswith("MPI_")
