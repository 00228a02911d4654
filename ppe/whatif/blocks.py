"""The geometry of block2dim and block3dim distributions: the process grid, which ranks may
be neighbours, and the faces neighbouring blocks share (docs/whatif.md, "Blocks").

Pure integer geometry, no model and no scheduler: :mod:`ppe.whatif.blockeval` decides the
blocks' sizes and times, and the spec's checks use the same neighbour ranges to ask for the
links the blocks will use.

**Ranks.** The distribution's members in chain order fill the process grid row-major: rank r
has coordinates ``unravel(r, grid)``, so the last split axis varies fastest. Grouping follows
the same order: along the first split axis the ranks form ``grid[0]`` *groups* of
``prod(grid[1:])`` consecutive ranks (bands in 2-D, slabs in 3-D), each group splits along
the next axis the same way, and the ranks of one innermost group form a chain along the last
split axis (a band's members, left to right).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = ["Adjacent", "Block", "adjacent", "face_overlaps", "grid_text", "process_grid"]

IntArray = npt.NDArray[np.int64]


def grid_text(grid: Sequence[int]) -> str:
    """``2 x 3`` (the report's and the notes' spelling)."""
    return " x ".join(str(g) for g in grid)


def _factorisations(p: int, k: int) -> list[tuple[int, ...]]:
    """Every ordered ``(g_0, ..., g_{k-1})`` with product ``p``."""
    if k == 1:
        return [(p,)]
    out: list[tuple[int, ...]] = []
    for g in range(1, p + 1):
        if p % g == 0:
            out.extend((g, *rest) for rest in _factorisations(p // g, k - 1))
    return out


def _surface(grid: Sequence[int], size: Sequence[int]) -> Fraction:
    """A rank's halo surface in elements: the faces perpendicular to each split axis of an
    evenly divided block (exact, so ties are ties)."""
    ext = [
        Fraction(n, g) for n, g in zip(size, [*grid, *[1] * (len(size) - len(grid))], strict=True)
    ]
    total = Fraction(0)
    for k in range(len(grid)):
        face = Fraction(1)
        for i, e in enumerate(ext):
            if i != k:
                face *= e
        total += face
    return total


def process_grid(ranks: int, size: Sequence[int], dims: int) -> tuple[int, ...] | None:
    """The process grid of ``ranks`` over the first ``dims`` axes of a dataset of ``size``:
    the ``g_0 x ... x g_{dims-1} = ranks`` that minimises a rank's halo surface (for 2-D,
    ``n0/g0 + n1/g1``), ties to the squarer grid (the smaller ratio of the largest count to
    the smallest), then to more groups along the first axes. Only grids that give every rank
    at least one element per axis (``g_k <= size[k]``) count; None when there is none."""
    best: tuple[int, ...] | None = None
    best_key: tuple[Fraction, Fraction, tuple[int, ...]] | None = None
    for grid in _factorisations(ranks, dims):
        if any(g > n for g, n in zip(grid, size, strict=False)):
            continue
        key = (_surface(grid, size), Fraction(max(grid), min(grid)), tuple(-g for g in grid))
        if best_key is None or key < best_key:
            best, best_key = grid, key
    return best


@dataclass(frozen=True)
class Block:
    """The elements one rank holds: ``[lo[i], hi[i])`` along every axis of the dataset."""

    lo: tuple[int, ...]
    hi: tuple[int, ...]

    @property
    def extents(self) -> tuple[int, ...]:
        return tuple(h - lo for lo, h in zip(self.lo, self.hi, strict=True))

    @property
    def elements(self) -> int:
        return math.prod(self.extents)

    def cut(self, axis: int, start: int, length: int) -> Block:
        """This box restricted to ``[start, start + length)`` along ``axis``."""
        lo, hi = list(self.lo), list(self.hi)
        lo[axis], hi[axis] = start, start + length
        return Block(tuple(lo), tuple(hi))


@dataclass(frozen=True)
class Adjacent:
    """Two runs of ranks whose blocks may touch across ``axis``: consecutive groups of one
    parent (their blocks meet on the plane between them), or two consecutive ranks of an
    innermost chain (``innermost``)."""

    axis: int
    a: range
    b: range
    innermost: bool


def adjacent(grid: Sequence[int]) -> list[Adjacent]:
    """Every pair of rank runs that may hold neighbouring blocks, for any sizes the balancing
    picks (a jagged partition: which ranks of two consecutive groups touch depends on the
    sizes; these ranges are where to look)."""
    out: list[Adjacent] = []
    total = math.prod(grid)
    for axis in range(len(grid)):
        child = math.prod(grid[axis + 1 :])
        parent = child * grid[axis]
        last = axis == len(grid) - 1
        for start in range(0, total, parent):
            for g in range(grid[axis] - 1):
                a = range(start + g * child, start + (g + 1) * child)
                b = range(start + (g + 1) * child, start + (g + 2) * child)
                out.append(Adjacent(axis, a, b, last))
    return out


def face_overlaps(blocks_a: Sequence[Block], blocks_b: Sequence[Block], axis: int) -> IntArray:
    """Elements of the face each block of ``blocks_a`` shares with each of ``blocks_b``
    across ``axis`` (a matrix; 0 where they do not touch). The two runs lie on either side
    of one plane, so only the other axes' overlaps count."""
    lo_a = np.array([b.lo for b in blocks_a], dtype=np.int64)
    hi_a = np.array([b.hi for b in blocks_a], dtype=np.int64)
    lo_b = np.array([b.lo for b in blocks_b], dtype=np.int64)
    hi_b = np.array([b.hi for b in blocks_b], dtype=np.int64)
    inter = np.minimum(hi_a[:, None, :], hi_b[None, :, :]) - np.maximum(
        lo_a[:, None, :], lo_b[None, :, :]
    )
    inter = np.clip(inter, 0, None)
    inter[:, :, axis] = 1
    return np.asarray(np.prod(inter, axis=2), dtype=np.int64)
