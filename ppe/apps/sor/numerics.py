"""Red-black SOR for the Poisson problem on the unit square, on whole grids or row strips.

The problem is fixed so that a result can be checked: ``-Δu = -4`` with ``u = x² + y²`` on
the boundary. The 5-point stencil is exact for quadratics, so the discrete solution is
``x² + y²`` at the grid points and the iteration converges to it.

An ``n × n`` interior grid is stored with its boundary ring as an ``(n + 2) × (n + 2)`` array;
global row ``g`` is grid row ``g`` (0 and ``n + 1`` are boundary rows). A strip holding
interior rows ``first + 1 .. first + rows`` is an array of ``rows + 2`` rows: local row ``k``
is global row ``first + k``, so rows ``0`` and ``rows + 1`` are its halo rows (a neighbour's
edge row or the boundary). Point ``(g, j)`` is red when ``g + j`` is even (colour 0), black
otherwise (colour 1). A half-sweep of one colour reads only the other colour, so a strip with
current halos computes exactly, bit for bit, what the whole grid computes for its rows.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Grid = NDArray[np.float64]

RED, BLACK = 0, 1
COLOURS = (RED, BLACK)
#: The right-hand side f of -Δu = f (constant: ``x² + y²`` has Laplacian 4).
RHS = -4.0


@dataclass(frozen=True)
class Problem:
    """An ``n × n`` interior grid on the unit square and the relaxation factor."""

    n: int
    omega: float = 1.9

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n (interior grid side) must be at least 1, got {self.n}")
        if not 0.0 < self.omega < 2.0:
            raise ValueError(f"omega must be in (0, 2) for SOR to converge, got {self.omega}")

    @property
    def h(self) -> float:
        return 1.0 / (self.n + 1)

    @property
    def h2f(self) -> float:
        """``h² f``: the right-hand side term of the update, the same at every point."""
        return self.h * self.h * RHS


def exact(problem: Problem, first: int, rows: int) -> Grid:
    """``x² + y²`` on global rows ``first .. first + rows - 1`` (all columns, boundary too)."""
    coords = np.arange(problem.n + 2, dtype=np.float64) * problem.h
    y = coords[first : first + rows]
    return y[:, None] ** 2 + coords[None, :] ** 2


def initial_strip(problem: Problem, first: int, rows: int) -> Grid:
    """A strip (halos included) at the start: zero inside, the exact values on the boundary."""
    u = exact(problem, first, rows + 2)
    inner_lo, inner_hi = max(1, first), min(problem.n + 1, first + rows + 2)
    u[inner_lo - first : inner_hi - first, 1:-1] = 0.0
    return u


def initial_grid(problem: Problem) -> Grid:
    return initial_strip(problem, 0, problem.n)


def half_sweep(u: Grid, first: int, colour: int, problem: Problem) -> None:
    """Relax the points of one colour in a strip's interior rows, in place.

    ``first`` is the global row of ``u[0]``. Rows of equal parity share the columns of a
    colour, so each parity is one strided slice (two NumPy expressions per half-sweep).
    """
    rows, n = u.shape[0] - 2, u.shape[1] - 2
    omega, h2f = problem.omega, problem.h2f
    for k0 in (1, 2):
        m = len(range(k0, rows + 1, 2))
        if m == 0:
            continue
        j0 = 1 if (first + k0 + 1) % 2 == colour else 2
        c = len(range(j0, n + 1, 2))
        if c == 0:
            continue
        rs, cs = slice(k0, k0 + 2 * m - 1, 2), slice(j0, j0 + 2 * c - 1, 2)
        centre = u[rs, cs]
        around = (
            u[k0 - 1 : k0 + 2 * m - 2 : 2, cs]
            + u[k0 + 1 : k0 + 2 * m : 2, cs]
            + u[rs, j0 - 1 : j0 + 2 * c - 2 : 2]
            + u[rs, j0 + 1 : j0 + 2 * c : 2]
        )
        centre += omega * ((around + h2f) * 0.25 - centre)


def residual_sq(u: Grid, problem: Problem) -> float:
    """Sum of squared scaled residuals ``h²f - (4u - Σ neighbours)`` over a strip's interior
    rows (its halos must be current)."""
    c = u[1:-1, 1:-1]
    r = problem.h2f - (4.0 * c - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:])
    return float(np.dot(r.ravel(), r.ravel()))


def residual_norm(total_sq: float, problem: Problem) -> float:
    """The discrete L2 norm of ``f + Δu`` from the strips' summed squares (``h·sqrt(Σ r²)``
    with ``r`` the unscaled residual)."""
    return math.sqrt(total_sq) / problem.h


def checksum(grid: Grid) -> str:
    """A digest of the exact bits of a grid: equal digests mean identical results."""
    return hashlib.sha256(np.ascontiguousarray(grid).tobytes()).hexdigest()[:16]


@dataclass(frozen=True)
class Solution:
    grid: Grid
    iterations: int
    residual: float


def solve_reference(
    problem: Problem,
    iterations: int,
    tolerance: float | None = None,
    residual_every: int = 10,
) -> Solution:
    """The single-process run: the same half-sweeps on the whole grid, the same early stop."""
    u = initial_grid(problem)
    done = 0
    for done in range(1, iterations + 1):
        for colour in COLOURS:
            half_sweep(u, 0, colour, problem)
        if tolerance is not None and done % residual_every == 0:
            if residual_norm(residual_sq(u, problem), problem) < tolerance:
                break
    return Solution(u, done, residual_norm(residual_sq(u, problem), problem))
