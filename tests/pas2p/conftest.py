"""Hand-made traces for the PAS2P tests: events with wall times laid out by hand."""

from __future__ import annotations

from collections.abc import Sequence

from ppe.pas2p import Event

DATA = __import__("pathlib").Path(__file__).parent / "data"


def ev(
    rank: int,
    kind: str,
    start: float,
    end: float | None = None,
    peer: int | None = None,
    tag: int | None = None,
    nbytes: int = 0,
    members: tuple[int, ...] | None = None,
) -> Event:
    return Event(
        rank,
        kind,
        peer,
        nbytes,
        tag,
        start,
        start if end is None else end,
        f"r{rank}@{start}",
        members,
    )


def bsp(computes: Sequence[float], collective_every: int = 0, nbytes: int = 800) -> list[Event]:
    """Two ranks; step i: both compute ``computes[i]`` s, then swap a message (tag 1 then 2);
    every ``collective_every`` steps a collective follows. Wall times follow the work."""
    per: dict[int, list[Event]] = {0: [], 1: []}
    t = 0.0
    for i, c in enumerate(computes):
        for r in (0, 1):
            per[r].append(ev(r, "compute", t, t + c))
        t += c
        per[0].append(ev(0, "send", t, t + 1e-4, peer=1, tag=1, nbytes=nbytes))
        per[1].append(ev(1, "recv", t, t + 1e-4, peer=0, tag=1, nbytes=nbytes))
        t += 1e-4
        per[1].append(ev(1, "send", t, t + 1e-4, peer=0, tag=2, nbytes=nbytes))
        per[0].append(ev(0, "recv", t, t + 1e-4, peer=1, tag=2, nbytes=nbytes))
        t += 1e-4
        if collective_every and (i + 1) % collective_every == 0:
            for r in (0, 1):
                per[r].append(ev(r, "collective", t, t + 5e-4))
            t += 5e-4
    return per[0] + per[1]
