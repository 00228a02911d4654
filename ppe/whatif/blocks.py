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

__all__ = ["Adjacent", "Block", "adjacent", "face_overlaps", "grid_text", "process_grid"]


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
    """The halo surface, in elements, of an inner rank of an evenly divided grid (the rank
    that exchanges most): across each split axis, one face when the axis has two groups
    (every rank has one neighbour there), two when it has more; none across an unsplit
    axis (no neighbour). Exact, so ties are ties."""
    full = [*grid, *[1] * (len(size) - len(grid))]
    ext = [Fraction(n, g) for n, g in zip(size, full, strict=True)]
    total = Fraction(0)
    for k, g in enumerate(grid):
        if g == 1:
            continue
        face = Fraction(1)
        for i, e in enumerate(ext):
            if i != k:
                face *= e
        total += min(g - 1, 2) * face
    return total


def process_grid(ranks: int, size: Sequence[int], dims: int) -> tuple[int, ...] | None:
    """The process grid of ``ranks`` over the first ``dims`` axes of a dataset of ``size``:
    the ``g_0 x ... x g_{dims-1} = ranks`` that minimises an inner rank's halo surface
    (:func:`_surface`; for 2-D with both axes split in three or more,
    ``2 n1/g1 + 2 n0/g0``), ties to the squarer grid (the smaller ratio of the largest count
    to the smallest), then to more groups along the first axes. Only grids that give every
    rank at least one element per axis (``g_k <= size[k]``) count; None when there is none.
    A prime number of ranks splits one axis: the one whose faces are smaller (``P x 1`` when
    ``n0 >= n1``, else ``1 x P``)."""
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


def face_overlaps(
    blocks_a: Sequence[Block], blocks_b: Sequence[Block], axis: int
) -> list[tuple[int, int, int]]:
    """``(i, j, elements)`` for every block ``i`` of ``blocks_a`` that shares a face with
    block ``j`` of ``blocks_b`` across ``axis``, of that many elements. The two runs lie on
    either side of one plane and each tiles it, so only the other axes' overlaps count:
    a sorted-interval merge, one axis at a time (blocks with the same interval along an axis,
    such as the members of one band, are merged as one there and then split)."""
    out: list[tuple[int, int, int]] = []
    if blocks_a and blocks_b:
        free = [k for k in range(len(blocks_a[0].lo)) if k != axis]
        _merge(blocks_a, blocks_b, range(len(blocks_a)), range(len(blocks_b)), free, 1, out)
    return out


def _runs(
    blocks: Sequence[Block], which: Sequence[int], axis: int
) -> list[tuple[int, int, list[int]]]:
    """``which``'s blocks grouped by their interval along ``axis``, in order."""
    by: dict[tuple[int, int], list[int]] = {}
    for i in which:
        by.setdefault((blocks[i].lo[axis], blocks[i].hi[axis]), []).append(i)
    return [(lo, hi, idx) for (lo, hi), idx in sorted(by.items())]


def _merge(
    blocks_a: Sequence[Block],
    blocks_b: Sequence[Block],
    which_a: Sequence[int],
    which_b: Sequence[int],
    axes: Sequence[int],
    area: int,
    out: list[tuple[int, int, int]],
) -> None:
    if not axes:
        out.extend((i, j, area) for i in which_a for j in which_b)
        return
    ra, rb = _runs(blocks_a, which_a, axes[0]), _runs(blocks_b, which_b, axes[0])
    p = q = 0
    while p < len(ra) and q < len(rb):
        lo, hi = max(ra[p][0], rb[q][0]), min(ra[p][1], rb[q][1])
        if hi > lo:
            _merge(blocks_a, blocks_b, ra[p][2], rb[q][2], axes[1:], area * (hi - lo), out)
        if ra[p][1] <= rb[q][1]:
            p += 1
        else:
            q += 1
