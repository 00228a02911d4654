"""ppe.apps.sor's pure parts: strips with halos compute what the whole grid computes."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.apps.sor.numerics import (
    COLOURS,
    Problem,
    exact,
    half_sweep,
    initial_grid,
    initial_strip,
    residual_norm,
    residual_sq,
    solve_reference,
)
from ppe.apps.sor.partition import (
    assemble,
    block_split,
    check_split,
    firsts,
    transfers,
)


def strips_of(grid: np.ndarray, split: list[int]) -> list[np.ndarray]:
    return [grid[f : f + r + 2].copy() for f, r in zip(firsts(split), split, strict=True)]


def exchange(strips: list[np.ndarray]) -> None:
    """What the MPI runner's Sendrecv pair does: edge rows into the neighbours' halos."""
    for up, down in zip(strips, strips[1:], strict=False):
        down[0] = up[-2]
        up[-1] = down[1]


def glue(strips: list[np.ndarray], grid: np.ndarray) -> np.ndarray:
    out = grid.copy()
    out[1:-1] = np.concatenate([s[1:-1] for s in strips])
    return out


@pytest.mark.parametrize(("n", "split"), [(9, [4, 5]), (10, [3, 3, 4]), (12, [1, 6, 5]), (7, [7])])
def test_strip_sweeps_equal_the_whole_grid_sweeps_bit_for_bit(n: int, split: list[int]) -> None:
    problem = Problem(n, omega=1.7)
    whole = initial_grid(problem)
    strips = [initial_strip(problem, f, r) for f, r in zip(firsts(split), split, strict=True)]
    assert np.array_equal(glue(strips, whole), whole)
    for _ in range(5):
        for colour in COLOURS:
            half_sweep(whole, 0, colour, problem)
            for s, f in zip(strips, firsts(split), strict=True):
                half_sweep(s, f, colour, problem)
            exchange(strips)
    assert not np.array_equal(whole, initial_grid(problem))
    assert np.array_equal(glue(strips, whole), whole)
    summed = sum(residual_sq(s, problem) for s in strips)
    assert summed == pytest.approx(residual_sq(whole, problem), rel=1e-12)


def test_half_sweep_touches_only_its_colour() -> None:
    problem = Problem(8)
    u = initial_grid(problem)
    u[1:-1, 1:-1] = 1.0
    before = u.copy()
    half_sweep(u, 0, 0, problem)
    g, j = np.indices(u.shape)
    changed = u != before
    assert changed.any()
    assert not changed[(g + j) % 2 == 1].any()


def test_reference_converges_to_the_exact_solution() -> None:
    problem = Problem(16, omega=1.7)
    first = solve_reference(problem, 1)
    done = solve_reference(problem, 400)
    assert done.residual < first.residual * 1e-6
    assert np.allclose(done.grid, exact(problem, 0, 18), atol=1e-9)
    assert residual_norm(residual_sq(exact(problem, 0, 18), problem), problem) < 1e-9


def test_reference_stops_early_at_the_tolerance() -> None:
    problem = Problem(16, omega=1.7)
    run = solve_reference(problem, 10_000, tolerance=1e-3, residual_every=5)
    assert run.iterations < 10_000 and run.iterations % 5 == 0
    assert run.residual < 1e-3
    assert solve_reference(problem, run.iterations - 5).residual >= 1e-3


def test_bad_problems_are_refused() -> None:
    with pytest.raises(ValueError, match="omega"):
        Problem(4, omega=2.0)
    with pytest.raises(ValueError, match="n "):
        Problem(0)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ([5, 5], [8, 2]),
        ([5, 5], [1, 9]),
        ([3, 3, 4], [1, 1, 8]),
        ([1, 1, 8], [8, 1, 1]),
        ([4, 6], [4, 6]),
    ],
)
def test_migration_preserves_the_grid(old: list[int], new: list[int]) -> None:
    n = sum(old)
    problem = Problem(n)
    grid = initial_grid(problem)
    grid[1:-1, 1:-1] = np.random.default_rng(1).random((n, n))
    old_strips = strips_of(grid, old)
    moves = transfers(old, new)
    new_strips = []
    for rank, (f, r) in enumerate(zip(firsts(new), new, strict=True)):
        own = (firsts(old)[rank], old_strips[rank][1:-1])
        got = [(t.start, grid[1 + t.start : 1 + t.start + t.count]) for t in moves if t.dst == rank]
        for t in moves:  # what the sender cuts out of its own strip is what arrives
            if t.dst == rank:
                s0 = firsts(old)[t.src]
                sent = old_strips[t.src][1 + t.start - s0 : 1 + t.start - s0 + t.count]
                assert np.array_equal(sent, grid[1 + t.start : 1 + t.start + t.count])
        base = initial_strip(problem, f, r)
        new_strips.append(assemble(base, f, [own, *got]))
    exchange(new_strips)
    # every row of every strip, halos (boundary rows included) too, is the grid's
    assert all(
        np.array_equal(s, grid[f : f + r + 2])
        for s, f, r in zip(new_strips, firsts(new), new, strict=True)
    )
    if len(old) == 2:  # one boundary: exactly the rows it crosses move
        assert sum(t.count for t in moves) == abs(old[0] - new[0])


def test_neighbour_moves_for_small_shifts() -> None:
    moves = transfers([4, 4, 4], [5, 4, 3])
    assert all(abs(t.src - t.dst) == 1 for t in moves)
    assert {(t.src, t.dst, t.start, t.count) for t in moves} == {(1, 0, 4, 1), (2, 1, 8, 1)}


def test_splits_are_checked() -> None:
    assert block_split(10, 3) == [4, 3, 3]
    check_split([4, 3, 3], 10)
    with pytest.raises(ValueError, match="at least one row"):
        check_split([10, 0], 10)
    with pytest.raises(ValueError, match="grid has 10"):
        check_split([4, 4], 10)
    with pytest.raises(ValueError, match="cannot split"):
        block_split(2, 3)
    with pytest.raises(ValueError, match="same grid"):
        transfers([2, 2], [3, 2])
    with pytest.raises(ValueError, match="cover 2 of"):
        assemble(np.zeros((5, 6)), 0, [(0, np.zeros((2, 6)))])
