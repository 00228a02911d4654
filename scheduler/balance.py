"""Time balancing (AppLeS/PPE): give each host rows so that every used host finishes together.

Host p's predicted time is linear in its rows, ``T_p = A_p * rows_p + B_p``; a host with no rows is
not used and takes no time. Without bounds, setting every ``T_p = T`` with ``sum rows_p = R`` gives
docs/architecture.md's closed form (``level_formula``). Row bounds and dropped hosts turn this into
water-filling: the balanced level T solves ``sum_p clip((T - B_p) / A_p, min_p, max_p) = R``, a
nondecreasing piecewise-linear function of T. A host whose unbounded share would be negative sits at
its lower bound (0: dropped), exactly the design's "drop and re-solve", done in one pass. On the
segment where the level falls, the closed form applies to the hosts strictly between their bounds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduler.errors import Infeasible, check_bounds, check_names

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class LinearHost:
    """A host whose time for ``rows`` rows is ``a * rows + b`` (a > 0; b fixed cost)."""

    name: str
    a: float
    b: float
    min_rows: int = 0
    max_rows: int | None = None

    def __post_init__(self) -> None:
        check_bounds(self.name, self.min_rows, self.max_rows)
        if not (math.isfinite(self.a) and self.a > 0):
            raise ValueError(f"host {self.name!r}: a (time per row) must be > 0, got {self.a}")
        if not math.isfinite(self.b):
            raise ValueError(f"host {self.name!r}: b (fixed time) must be finite, got {self.b}")


@dataclass(frozen=True)
class Allocation:
    """Integer rows per host (input order), each host's time, and the balanced level.

    ``level`` is the continuous balanced time T before rounding; ``makespan`` is the largest
    ``times`` entry after rounding. Unused hosts have 0 rows and time 0.
    """

    rows: dict[str, int]
    times: dict[str, float]
    makespan: float
    level: float

    @property
    def used(self) -> list[str]:
        return [name for name, r in self.rows.items() if r > 0]


def balance(hosts: Sequence[LinearHost], total_rows: int) -> Allocation:
    """Balanced integer rows summing exactly to ``total_rows``; raises ``Infeasible``."""
    check_names([h.name for h in hosts])
    a = np.array([h.a for h in hosts], dtype=np.float64)
    b = np.array([h.b for h in hosts], dtype=np.float64)
    lo, hi = bounds_arrays([(h.min_rows, h.max_rows) for h in hosts])
    rows = balance_rows(a, b, lo, hi, total_rows)
    times = host_times(a, b, rows)
    level = level_time(a, b, lo, hi, total_rows) if len(hosts) else 0.0
    return Allocation(
        rows={h.name: int(r) for h, r in zip(hosts, rows, strict=True)},
        times={h.name: float(t) for h, t in zip(hosts, times, strict=True)},
        makespan=float(times.max()) if len(hosts) else 0.0,
        level=float(level),
    )


def bounds_arrays(bounds: Sequence[tuple[int, int | None]]) -> tuple[FloatArray, FloatArray]:
    """(min_rows, max_rows) pairs as float arrays; no upper bound becomes +inf."""
    lo = np.array([float(mn) for mn, _ in bounds], dtype=np.float64)
    hi = np.array([math.inf if mx is None else float(mx) for _, mx in bounds], dtype=np.float64)
    return lo, hi


def host_times(a: FloatArray, b: FloatArray, rows: IntArray) -> FloatArray:
    """``T_p = a_p * rows_p + b_p`` for used hosts, 0 for hosts given no rows."""
    return np.where(rows > 0, a * rows + b, 0.0)


def check_feasible(lo: FloatArray, hi: FloatArray, total_rows: int) -> None:
    """Raise ``Infeasible`` (saying which bound fails) unless some rows fit the bounds."""
    if isinstance(total_rows, bool) or not isinstance(total_rows, int | np.integer):
        raise ValueError(f"total_rows must be an integer, got {total_rows!r}")
    if total_rows < 0:
        raise ValueError(f"total_rows must be >= 0, got {total_rows}")
    if lo.size == 0 and total_rows > 0:
        raise Infeasible(f"no hosts to take {total_rows} rows")
    if lo.sum() > total_rows:
        raise Infeasible(
            f"no feasible schedule: the hosts' min_rows sum to {int(lo.sum())} > {total_rows} rows"
        )
    if hi.sum() < total_rows:
        raise Infeasible(
            f"no feasible schedule: the hosts' max_rows sum to {int(hi.sum())} < {total_rows} rows"
            " (not enough memory for the grid)"
        )


def check_linear(a: FloatArray, b: FloatArray, names: Sequence[str], what: str) -> None:
    """Balancing needs a positive, finite time per row and a finite fixed time on every host."""
    for name, ai, bi in zip(names, a, b, strict=True):
        if not (math.isfinite(ai) and ai > 0):
            raise ValueError(f"{what}: host {name!r} has time per row {ai}; it must be > 0")
        if not math.isfinite(bi):
            raise ValueError(f"{what}: host {name!r} has fixed time {bi}; it must be finite")


def level_formula(total: float, a: FloatArray, b: FloatArray) -> float:
    """The closed form (docs/architecture.md): ``T = (R + sum B/A) / sum 1/A`` over the hosts
    that share R."""
    return float((total + np.sum(b / a)) / np.sum(1.0 / a))


def rows_at(
    level: FloatArray | float, a: FloatArray, b: FloatArray, lo: FloatArray, hi: FloatArray
) -> FloatArray:
    """Continuous rows each host takes to finish at ``level``, clipped to its bounds."""
    return np.clip((np.asarray(level)[..., None] - b) / a, lo, hi)


def level_time(
    a: FloatArray, b: FloatArray, lo: FloatArray, hi: FloatArray, total_rows: int
) -> float:
    """The balanced level T: ``sum clip((T - b) / a, lo, hi) = total_rows`` (water-filling)."""
    check_feasible(lo, hi, total_rows)
    starts = b + a * lo  # from here up, a host takes rows above its lower bound
    ends = b + a * hi  # from here up, a host is full (inf: never)
    knots = np.unique(np.concatenate([starts, ends[np.isfinite(ends)]]))
    filled = rows_at(knots, a, b, lo, hi).sum(axis=1)
    # First knot reaching the total; the tolerance keeps rounding noise in ``filled`` from
    # landing on a flat segment, where no host is active.
    j = int(np.searchsorted(filled, total_rows - 1e-9 * max(1.0, total_rows), side="left"))
    if j == 0:
        return float(knots[0])  # every host at its lower bound already gives total_rows
    probe = knots[j - 1] + (knots[j] - knots[j - 1]) / 2 if j < knots.size else knots[-1] + 1.0
    active = (starts < probe) & (probe < ends)
    if not active.any():
        return float(knots[min(j, knots.size - 1)])
    fixed = float(np.where(probe >= ends, hi, lo)[~active].sum())
    return level_formula(total_rows - fixed, a[active], b[active])


def balance_rows(
    a: FloatArray, b: FloatArray, lo: FloatArray, hi: FloatArray, total_rows: int
) -> IntArray:
    """Integer rows summing to ``total_rows`` that minimise the largest ``a*rows + b``.

    Floors of the continuous solution all finish by the level T; the leftover rows (fewer than
    the number of hosts) go one at a time to the host that would then finish earliest. Every
    row left over would end after T anyway, so this greedy order makes the largest time grow
    least: the result is the integer optimum.
    """
    if a.size == 0:
        check_feasible(lo, hi, total_rows)
        return np.zeros(0, dtype=np.int64)
    level = level_time(a, b, lo, hi, total_rows)
    rows = np.clip(np.floor(rows_at(level, a, b, lo, hi)), lo, hi).astype(np.int64)
    _settle(rows, a, b, lo, hi, total_rows)
    return rows


def _settle(
    rows: IntArray, a: FloatArray, b: FloatArray, lo: FloatArray, hi: FloatArray, total_rows: int
) -> None:
    """Add (or, after rounding noise, remove) rows greedily until they sum to ``total_rows``."""
    missing = total_rows - int(rows.sum())
    if missing > 0:
        heap = [(a[p] * (rows[p] + 1) + b[p], p) for p in range(rows.size) if rows[p] < hi[p]]
        heapq.heapify(heap)
        for _ in range(missing):
            _, p = heapq.heappop(heap)
            rows[p] += 1
            if rows[p] < hi[p]:
                heapq.heappush(heap, (a[p] * (rows[p] + 1) + b[p], p))
    elif missing < 0:
        heap = [(-(a[p] * rows[p] + b[p]), p) for p in range(rows.size) if rows[p] > lo[p]]
        heapq.heapify(heap)
        for _ in range(-missing):
            _, p = heapq.heappop(heap)
            rows[p] -= 1
            if rows[p] > lo[p]:
                heapq.heappush(heap, (-(a[p] * rows[p] + b[p]), p))
