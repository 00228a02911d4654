"""An optional per-rank event log (JSON lines): what each rank computed and exchanged, when.

One file per rank: ``PATH`` with ``{rank}`` replaced, or ``PATH.<rank>`` when it has none.
Each line: ``{"rank", "kind" (compute|send|recv|collective), "peer", "bytes", "tag", "start",
"end"}`` with unix times in seconds.
"""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import IO


def trace_path(path: str, rank: int) -> str:
    return path.replace("{rank}", str(rank)) if "{rank}" in path else f"{path}.{rank}"


class Tracer:
    """Writes events when given a path; otherwise every call is a no-op."""

    def __init__(self, path: str | None, rank: int) -> None:
        self.rank = rank
        self._out: IO[str] | None = None
        if path is not None:
            self._out = open(trace_path(path, rank), "w", encoding="utf-8")  # noqa: SIM115

    @property
    def on(self) -> bool:
        return self._out is not None

    def event(
        self,
        kind: str,
        start: float,
        end: float,
        peer: int | None = None,
        nbytes: int = 0,
        tag: int | None = None,
    ) -> None:
        if self._out is None:
            return
        item = {
            "rank": self.rank,
            "kind": kind,
            "peer": peer,
            "bytes": nbytes,
            "tag": tag,
            "start": start,
            "end": end,
        }
        self._out.write(json.dumps(item) + "\n")

    def halo_swap(
        self,
        times: tuple[float, float, float],
        up: int,
        down: int,
        nbytes: int,
        tags: tuple[int, int],
        none: int,
    ) -> None:
        """A halo exchange's two Sendrecv calls: the edge row up (``tags[0]``) while the one
        from below arrives, over ``times[0:2]``; then down (``tags[1]``) while the one from
        above arrives. ``none`` (MPI's ``PROC_NULL``) for a neighbour the strip lacks."""
        if self._out is None:
            return
        t0, t1, t2 = times
        for (a, b), dest, src, tag in (
            ((t0, t1), up, down, tags[0]),
            ((t1, t2), down, up, tags[1]),
        ):
            if dest != none:
                self.event("send", a, b, dest, nbytes, tag)
            if src != none:
                self.event("recv", a, b, src, nbytes, tag)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> Tracer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def now() -> float:
    """The clock of trace events and per-rank timings (wall time: comparable across ranks)."""
    return time.time()
