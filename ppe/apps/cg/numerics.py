"""Unpreconditioned conjugate gradient for the 2-D Poisson problem, on whole grids or row strips.

``A`` is the 5-point Laplacian ``4 u[i,j] - u[i±1,j] - u[i,j±1]`` on an ``n × n`` interior grid
with zero Dirichlet boundary, ``b = h² f`` with ``f(x, y) = sin(πx) sin(πy) + 1`` (smooth, not
an eigenvector, so CG has work to do). Vectors are stored like ppe-sor's grids: an ``(n + 2)``
-column array whose first and last columns are the boundary (always 0); a strip of interior
rows ``first + 1 .. first + rows`` has ``rows + 2`` rows, rows ``0`` and ``rows + 1`` being its
halos (a neighbour's edge row or the zero boundary).

The iteration is split so that every step is one local computation followed by communication
(ppe-cg's steps, ``ppe.apps.cg.steps``):

* :func:`matvec` — ``p = r + β p`` (halo rows too: from ``r``'s exchanged halos and ``p``'s own,
  exactly what the neighbour computes for them), ``q = A p`` and the local ``p·q``;
* :func:`update` — ``x += α p`` (halo rows too, so ``x``'s halos stay current with no exchange),
  ``r -= α q`` and the local ``r·r``; then ``r``'s edge rows go to the neighbours;
* :func:`true_residual` — ``b - A x`` and its local squared sum and largest magnitude.

Elementwise operations are exact IEEE operations, so a strip's rows equal the whole grid's bit
for bit up to the dot products, whose sums run in another order (and round differently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Grid = NDArray[np.float64]


@dataclass(frozen=True)
class Problem:
    """An ``n × n`` interior grid on the unit square."""

    n: int

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n (interior grid side) must be at least 1, got {self.n}")

    @property
    def h(self) -> float:
        return 1.0 / (self.n + 1)


@dataclass
class Strip:
    """One rank's rows of the CG vectors and the global scalars every rank holds alike."""

    first: int  # interior row index of the first row (also the global row of the upper halo)
    b: Grid
    x: Grid
    r: Grid
    p: Grid
    q: Grid
    rr: float = 0.0  # global r·r
    pq: float = 0.0  # global p·q of the last matvec
    beta: float = 0.0  # for the next direction (0 before the first: p = r)
    bb: float = 0.0  # global b·b, for the relative residual

    @property
    def rows(self) -> int:
        return int(self.x.shape[0] - 2)


def rhs_strip(problem: Problem, first: int, rows: int) -> Grid:
    """``h² f`` on interior rows ``first + 1 .. first + rows`` (halos and boundary 0)."""
    h, n = problem.h, problem.n
    b = np.zeros((rows + 2, n + 2))
    y = (np.arange(first + 1, first + rows + 1, dtype=np.float64) * h)[:, None]
    x = (np.arange(1, n + 1, dtype=np.float64) * h)[None, :]
    b[1:-1, 1:-1] = h * h * (np.sin(math.pi * x) * np.sin(math.pi * y) + 1.0)
    return b


def new_strip(problem: Problem, first: int, rows: int) -> Strip:
    """``x = 0``, so ``r = b``; ``p = 0`` and ``β = 0`` make the first direction ``r``. The
    caller sets ``rr`` and ``bb`` (global sums) and exchanges ``r``'s halos."""
    b = rhs_strip(problem, first, rows)
    zeros = np.zeros_like(b)
    return Strip(first, b, zeros.copy(), b.copy(), zeros.copy(), zeros)


def local_dot(a: Grid, c: Grid) -> float:
    """The interior rows' and columns' ``a·c`` (this strip's share of a global dot product)."""
    return float(np.einsum("ij,ij->", a[1:-1, 1:-1], c[1:-1, 1:-1]))


def apply_a(u: Grid, out: Grid) -> None:
    """``out``'s interior = ``A u`` (``u``'s halos must be current)."""
    o = out[1:-1, 1:-1]
    np.multiply(u[1:-1, 1:-1], 4.0, out=o)
    o -= u[:-2, 1:-1]
    o -= u[2:, 1:-1]
    o -= u[1:-1, :-2]
    o -= u[1:-1, 2:]


def matvec(s: Strip) -> float:
    """``p = r + β p`` on every row, ``q = A p``; returns the local ``p·q``."""
    np.multiply(s.p, s.beta, out=s.p)
    s.p += s.r
    apply_a(s.p, s.q)
    return local_dot(s.p, s.q)


def alpha(s: Strip) -> float:
    """``α = r·r / p·q`` (0 when ``p·q`` is 0: a signature run may update before any matvec)."""
    return s.rr / s.pq if s.pq != 0 else 0.0


def update(s: Strip, a: float) -> float:
    """``x += α p`` on every row, ``r -= α q`` on the interior rows; returns the local ``r·r``."""
    s.x += a * s.p
    s.r[1:-1] -= a * s.q[1:-1]
    return local_dot(s.r, s.r)


def next_beta(s: Strip, rr_new: float) -> None:
    """``β = r·r (new) / r·r (old)``, then the new ``r·r`` becomes the current one."""
    s.beta = rr_new / s.rr if s.rr != 0 else 0.0
    s.rr = rr_new


def true_residual(s: Strip) -> tuple[float, float]:
    """This strip's ``‖b - A x‖²`` and ``max |b - A x|`` (``x``'s halos must be current)."""
    ax = np.zeros_like(s.x)
    apply_a(s.x, ax)
    res = s.b[1:-1, 1:-1] - ax[1:-1, 1:-1]
    return float(np.einsum("ij,ij->", res, res)), float(np.abs(res).max(initial=0.0))


def relative(sq: float, bb: float) -> float:
    """``‖·‖₂ / ‖b‖₂`` from squared sums."""
    return math.sqrt(sq / bb) if bb > 0 else math.sqrt(sq)


@dataclass(frozen=True)
class Reference:
    """A single-process run: the solution, the relative true residual after it, and the
    relative recursive residual ``√(r·r) / ‖b‖`` after each iteration."""

    x: Grid  # (n + 2) x (n + 2), boundary included
    residual: float
    history: list[float]


def solve_reference(problem: Problem, iterations: int) -> Reference:
    """The same operations on the whole grid in one process (one strip with boundary halos)."""
    s = new_strip(problem, 0, problem.n)
    s.rr = s.bb = local_dot(s.r, s.r)
    history = []
    for _ in range(iterations):
        s.pq = matvec(s)
        next_beta(s, update(s, alpha(s)))
        history.append(relative(s.rr, s.bb))
    sq, _ = true_residual(s)
    return Reference(s.x, relative(sq, s.bb), history)
