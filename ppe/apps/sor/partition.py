"""Strips of interior rows in chain order, and the row moves that turn one split into another.

A split is the number of interior rows per rank, in rank (chain) order; rank ``r`` holds the
contiguous interior rows starting at ``firsts(split)[r]`` (0-based interior row index, which is
also the global row of its upper halo).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ppe.apps.sor.numerics import Grid


@dataclass(frozen=True)
class Transfer:
    """Rows ``start .. start + count - 1`` (interior index) go from rank ``src`` to ``dst``."""

    src: int
    dst: int
    start: int
    count: int


def check_split(split: Sequence[int], n: int) -> None:
    """Every rank holds at least one row and the split covers the grid exactly."""
    if any(r < 1 for r in split):
        raise ValueError(f"every rank needs at least one row, got {list(split)}")
    if sum(split) != n:
        raise ValueError(f"the strips hold {sum(split)} rows but the grid has {n}")


def block_split(n: int, ranks: int) -> list[int]:
    """Equal strips (the first ``n % ranks`` one row taller): the ``block`` strategy."""
    if ranks < 1 or n < ranks:
        raise ValueError(f"cannot split {n} rows over {ranks} ranks with a row each")
    base, extra = divmod(n, ranks)
    return [base + (1 if r < extra else 0) for r in range(ranks)]


def firsts(split: Sequence[int]) -> list[int]:
    return [0, *accumulate(split)][:-1]


def transfers(old: Sequence[int], new: Sequence[int]) -> list[Transfer]:
    """The moves from split ``old`` to ``new``: each rank gets its new rows from whoever held
    them. When no boundary moves by more than a neighbour's strip, every move is between chain
    neighbours."""
    if len(old) != len(new) or sum(old) != sum(new):
        raise ValueError(f"splits {list(old)} and {list(new)} do not cover the same grid")
    out = []
    for src, (s0, s_rows) in enumerate(zip(firsts(old), old, strict=True)):
        for dst, (d0, d_rows) in enumerate(zip(firsts(new), new, strict=True)):
            lo, hi = max(s0, d0), min(s0 + s_rows, d0 + d_rows)
            if src != dst and hi > lo:
                out.append(Transfer(src, dst, lo, hi - lo))
    return out


def assemble(base: Grid, first: int, pieces: Sequence[tuple[int, Grid]]) -> Grid:
    """Fill the interior rows of ``base`` (a strip for interior rows from ``first``, whose halo
    rows facing the boundary are right: ``numerics.initial_strip``) from ``(start, interior
    rows)`` pieces that together cover it; inner halos wait for the next exchange."""
    u = base
    rows = u.shape[0] - 2
    covered = 0
    for start, block in pieces:
        lo, hi = max(start, first), min(start + block.shape[0], first + rows)
        if hi > lo:
            u[1 + lo - first : 1 + hi - first] = block[lo - start : hi - start]
            covered += hi - lo
    if covered != rows:
        raise ValueError(f"pieces cover {covered} of the strip's {rows} rows")
    return u
