"""Monte Carlo strategies: minimise the expected (or a quantile of the) makespan directly.

The makespan ``max_p (a_p rows_p + b_p)`` is sampled jointly over all hosts. Starting from the
best of several balanced solutions (mean, and mean + k std for a few k), a local search moves
blocks of rows from the hosts that most often decide the makespan to those that seldom do, keeping
a move only when the objective drops on the *same* draws (common random numbers) by more than the
Monte Carlo noise of that difference (a paired test), and halves the block when no move helps.
The noise test keeps the search from fitting its own draws: the result is never worse, on those
draws, than the mean-balanced start, and moves that only fit noise are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduler.laws import quantiles
from scheduler.problem import SEARCH_STREAM, Problem

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

START_KS = (0.0, 0.5, 1.0, 2.0, 3.0)
MAX_EVALS = 300
DONORS = 3
RECEIVERS = 4
Z = 2.0  # a move must beat the objective by Z standard errors of the paired difference
BATCHES = 16  # batches for the standard error of a quantile difference


@dataclass(frozen=True)
class Goal:
    """The objective on makespan draws: their mean, or their empirical q-quantile."""

    kind: str  # "mean" or "quantile"
    q: float

    def value(self, m: FloatArray) -> float:
        if self.kind == "mean":
            return float(m.mean())
        kth = self._kth(m.size)
        return float(np.partition(m, kth)[kth])

    def better(self, new: FloatArray, old: FloatArray) -> bool:
        """True when ``new`` beats ``old`` (same draws) by more than Monte Carlo noise."""
        if self.kind == "mean":
            d = new - old
        else:
            if self.value(new) >= self.value(old):
                return False
            size = new.size // BATCHES
            if size < 20:
                return True
            kth = self._kth(size)
            d = (np.partition(new[: BATCHES * size].reshape(BATCHES, size), kth, axis=1)[:, kth]
                 - np.partition(old[: BATCHES * size].reshape(BATCHES, size), kth, axis=1)[:, kth])
        mean = float(d.mean())
        return mean < 0 and mean < -Z * float(d.std(ddof=1)) / math.sqrt(d.size)

    def _kth(self, size: int) -> int:
        return min(size - 1, max(0, math.ceil(self.q * size) - 1))


def minimise(problem: Problem, objective: str, max_evals: int = MAX_EVALS) -> IntArray:
    """Rows minimising ``objective`` ("mean" or "quantile") of the sampled makespan."""
    a_s, b_s = problem.sample_ab(SEARCH_STREAM)
    goal = Goal(objective, problem.quantile)
    starts = _starts(problem, objective)
    rows, m = starts[0], _times(a_s, b_s, starts[0]).max(axis=0)  # the mean-balanced start
    for other in starts[1:]:
        m_other = _times(a_s, b_s, other).max(axis=0)
        if goal.better(m_other, m):
            rows, m = other, m_other
    return _descend(problem, a_s, b_s, rows.copy(), goal, max_evals)


def _starts(problem: Problem, objective: str) -> list[IntArray]:
    ks = [0.0, *sorted({*START_KS, problem.k} - {0.0})]
    starts = [problem.balanced(*problem.shifted(k), f"start k={k}") for k in ks]
    if objective == "quantile":
        a, b = quantiles(problem.a, problem.quantile), quantiles(problem.b, problem.quantile)
        if np.all(a > 0):
            starts.append(problem.balanced(a, b, "start quantile"))
    return starts


def _times(a_s: FloatArray, b_s: FloatArray, rows: IntArray) -> FloatArray:
    t = np.multiply(a_s, rows[:, None])
    t += b_s
    t[rows == 0] = 0.0
    return t


def _descend(problem: Problem, a_s: FloatArray, b_s: FloatArray, rows: IntArray,
             goal: Goal, max_evals: int) -> IntArray:
    t = _times(a_s, b_s, rows)
    m = t.max(axis=0)
    used = max(1, int(np.count_nonzero(rows)))
    step = max(1, round(0.1 * problem.total_rows / used))
    a_mean = np.array([law.mean for law in problem.a])
    b_mean = np.array([law.mean for law in problem.b])
    evals = 0
    while evals < max_evals:
        crit = _criticality(t, m, a_s, goal)
        moved = False
        for d in _donors(crit, rows, problem.lo, step):
            for q in _receivers(crit, rows, problem.hi, step, a_mean, b_mean):
                if q == d or evals >= max_evals:
                    continue
                evals += 1
                trial = _try_move(t, a_s, b_s, rows, d, q, step, goal, m)
                if trial is not None:
                    m = trial
                    moved = True
                    break
            if moved:
                break
        if not moved:
            if step == 1:
                break
            step = max(1, step // 2)
    return rows


def _criticality(t: FloatArray, m: FloatArray, a_s: FloatArray, goal: Goal) -> FloatArray:
    """Per host: how much one more row raises the objective (its a, where it is the argmax)."""
    cols = np.arange(m.size)
    if goal.kind == "quantile":
        order = np.argsort(m)
        centre = int(goal.q * m.size)
        half = max(10, m.size // 50)
        cols = order[max(0, centre - half) : centre + half + 1]
    arg = t[:, cols].argmax(axis=0)
    a_at = a_s[arg, cols]
    return np.bincount(arg, weights=a_at, minlength=t.shape[0]) / cols.size


def _donors(crit: FloatArray, rows: IntArray, lo: FloatArray, step: int) -> list[int]:
    order = np.argsort(-crit, kind="stable")
    ok = [int(p) for p in order if crit[p] > 0 and rows[p] - step >= lo[p]]
    return ok[:DONORS]


def _receivers(crit: FloatArray, rows: IntArray, hi: FloatArray, step: int,
               a_mean: FloatArray, b_mean: FloatArray) -> list[int]:
    after = a_mean * (rows + step) + b_mean
    order = np.lexsort((after, crit))
    ok = [int(p) for p in order if rows[p] + step <= hi[p]]
    return ok[:RECEIVERS]


def _try_move(t: FloatArray, a_s: FloatArray, b_s: FloatArray, rows: IntArray, d: int,
              q: int, step: int, goal: Goal, m: FloatArray) -> FloatArray | None:
    """Move ``step`` rows d -> q in place if that beats the objective; else leave all as is."""
    old_d, old_q = t[d].copy(), t[q].copy()
    rd, rq = rows[d] - step, rows[q] + step
    t[d] = a_s[d] * rd + b_s[d] if rd > 0 else 0.0
    t[q] = a_s[q] * rq + b_s[q]
    new = t.max(axis=0)
    if goal.better(new, m):
        rows[d], rows[q] = rd, rq
        return new
    t[d], t[q] = old_d, old_q
    return None
