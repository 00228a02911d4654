"""Monte Carlo strategies: minimise the expected (or a quantile of the) makespan directly.

Expected makespan (:func:`minimise_expected`): on jointly sampled draws ``(a_ps, b_ps)`` the
sample mean of ``max_p (a_ps rows_p + b_ps)`` is convex and piecewise linear in the (continuous)
rows, so its minimum over ``sum rows = R`` and the row bounds is an LP. Rather than the LP
itself (HiGHS took 0.4-5 s for 8 hosts and 1000-4000 draws), the max is smoothed into
``tau * log sum_p exp(t_p / tau)`` (within ``tau log P`` of it) and minimised by an active-set
Newton method while ``tau`` shrinks to 5e-4 of the makespan: the same optimum (1e-5 relative on
the replay's problems) in milliseconds. A host given no rows takes no time (its ``b`` drops out),
which is not convex: hosts left with few rows are tried without, and the best on the draws is
kept, as is the mean-balanced schedule if it were better. Last, the model's blind spot: it
lets a host make up a stall later, but iterations synchronise, so a host kept on a partial
share against a stall holds up every iteration while it stalls. :func:`_stall_aware` cuts such
hosts to a share that keeps pace through the stall when a synchronised reading of the draws
(:func:`_sync_makespan`) says the run is better for it.

Quantiles of the makespan (``minimise(..., "quantile")``): starting from the
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
from scheduler.problem import SEARCH_STREAM, VALIDATION_STREAM, Problem

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
            d = (
                np.partition(new[: BATCHES * size].reshape(BATCHES, size), kth, axis=1)[:, kth]
                - np.partition(old[: BATCHES * size].reshape(BATCHES, size), kth, axis=1)[:, kth]
            )
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


# --- expected makespan: smoothed max, active-set Newton ------------------------------------

TAUS = (0.05, 0.01, 0.002, 0.0005)  # smoothing, relative to the makespan; the last one is ~exact
NEWTON_STEPS = 40
MAX_CELLS = 64000  # hosts x draws: larger problems use a prefix of the draws (cost ~ P^2 N)
DROP_TRIES = 3


def _capped_draws(problem: Problem, stream: int) -> tuple[FloatArray, FloatArray]:
    """The problem's draws of a and b, cut to at most ``MAX_CELLS`` hosts x draws."""
    a_s, b_s = problem.sample_ab(stream)
    draws = max(200, min(a_s.shape[1], MAX_CELLS // max(a_s.shape[0], 1)))
    return a_s[:, :draws], (b_s[:, :draws] if b_s.shape[1] > 1 else b_s)


def _row_bounds(problem: Problem) -> tuple[FloatArray, FloatArray]:
    return problem.lo, np.minimum(problem.hi, problem.total_rows)


def minimise_expected(problem: Problem) -> IntArray:
    """Integer rows minimising the sample mean of the makespan (exactly, up to rounding)."""
    a_s, b_s = _capped_draws(problem, SEARCH_STREAM)
    n = a_s.shape[0]
    start = problem.balanced(*problem.shifted(0.0), "mean")
    best, best_m = start, _mean_makespan(a_s, b_s, start)
    lo, hi = _row_bounds(problem)
    tried: set[tuple[int, ...]] = set()
    dropped = np.zeros(n, dtype=bool)
    for _ in range(DROP_TRIES + 1):
        rows = _solve(a_s, b_s, lo, np.where(dropped, 0.0, hi), problem.total_rows, start)
        if rows is None:
            break
        m = _mean_makespan(a_s, b_s, rows)
        if m < best_m:
            best, best_m = rows, m
        # a host with few rows still pays its fixed time b: try the schedule without it
        small = [
            int(p)
            for p in np.argsort(rows, kind="stable")
            if 0 < rows[p] and lo[p] == 0 and not dropped[p]
        ]
        if not small or rows[small[0]] * float(np.mean(a_s[small[0]])) > 2 * _fixed(b_s, small[0]):
            break
        dropped[small[0]] = True
        key = tuple(np.flatnonzero(dropped).tolist())
        if key in tried:
            break
        tried.add(key)
    held_out = _capped_draws(problem, VALIDATION_STREAM)
    return _stall_aware(problem, start, _validated(problem, start, best, held_out), held_out)


SHRINK = (0.0, 0.25, 0.5, 0.75, 1.0)


def _validated(
    problem: Problem, start: IntArray, best: IntArray, held_out: tuple[FloatArray, FloatArray]
) -> IntArray:
    """The point on the segment mean-balanced -> optimum that does best on *fresh* draws.

    The optimum on the draws also fits their noise (on 8 identical low-variance hosts it moved
    rows by +-1 and came out a hair worse than plain balancing on new draws). Held-out draws
    choose how far to trust it, and it must beat balancing there by more than their noise
    (a paired test, as in the search below); with real risk (a host that may stall) it does.
    """
    if np.array_equal(start, best):
        return best
    a_v, b_v = held_out
    lo, hi = _row_bounds(problem)
    base = _times(a_v, b_v, start).max(axis=0)
    out, out_m = start, float(base.mean())
    for lam in SHRINK[1:]:
        cand = (
            best if lam == 1 else _round(start + lam * (best - start), lo, hi, problem.total_rows)
        )
        m = _times(a_v, b_v, cand).max(axis=0)
        if float(m.mean()) < out_m and Goal("mean", 0.5).better(m, base):
            out, out_m = cand, float(m.mean())
    return out


FALL = 2.0  # a draw at least this many times slower than the host's median is a stall
HEDGE = 0.5  # a host cut below this share of its balanced rows is being hedged against one


def _stall_aware(
    problem: Problem,
    start: IntArray,
    rows: IntArray,
    held_out: tuple[FloatArray, FloatArray] | None = None,
) -> IntArray:
    """``rows``, or the same schedule with its partly hedged hosts cut to a share that keeps
    pace through a stall, if the mean makespan under synchronisation (:func:`_sync_makespan`,
    on the held-out draws ``held_out``, drawn here if not given) is lower by more than its
    Monte Carlo noise.

    The solver's model lets a host make up a stall later: its time is its rows over what it
    delivers across the run, so a host at risk gets rows in proportion to its risk. But
    iterations synchronise: while a host stalls every iteration waits for it, whatever its
    share, unless that share is small enough to keep pace even at the stall's depth. A
    partial share then buys little and risks the whole run. The rows a hedged host gives up
    go to the others in proportion to theirs. A host's stall depth is its slowest held-out
    draw (a quantile instead lost most of the gain: the analogue inputs' deepest draws are
    the runs that stalled at the 1 % floor). Replay: ppe/replay/README.md, fourth pass.
    """
    a_v, b_v = held_out or _capped_draws(problem, VALIDATION_STREAM)
    med, deep = np.median(a_v, axis=1), a_v.max(axis=1)  # deep: the slowest draw
    m0 = _typical_length(rows, med, b_v)
    if not m0 > 0:
        return rows
    keep = np.maximum(_pacing_rows(m0, deep), problem.lo)
    hedged = (rows > keep) & (rows < HEDGE * start) & (deep >= FALL * med)
    rest = ~hedged & (rows > 0)
    if not hedged.any() or not rest.any():
        return rows
    cut = np.where(hedged, keep, rows).astype(np.float64)
    cut[rest] += (problem.total_rows - cut.sum()) * cut[rest] / cut[rest].sum()
    _, hi = _row_bounds(problem)
    cut_rows = _round(
        cut, np.where(rest, problem.lo, cut), np.where(rest, hi, cut), problem.total_rows
    )
    if int(cut_rows.sum()) != problem.total_rows:
        return rows
    before = _sync_makespan(a_v, b_v, rows, med, deep)
    after = _sync_makespan(a_v, b_v, cut_rows, med, deep)
    return cut_rows if Goal("mean", 0.5).better(after, before) else rows


def _typical_length(rows: IntArray, med: FloatArray, b_s: FloatArray) -> float:
    """The run's length with every host at its median speed (its slowest host's time)."""
    return float(np.max(np.where(rows > 0, rows * med + b_s.mean(axis=1), 0.0)))


def _pacing_rows(length: float, deep: FloatArray) -> IntArray:
    """The most rows a host can take and still finish every iteration in time at its deepest
    stall, in a run of ``length``."""
    out: IntArray = np.floor(length / deep).astype(np.int64)
    return out


def _sync_makespan(
    a_s: FloatArray, b_s: FloatArray, rows: IntArray, med: FloatArray, deep: FloatArray
) -> FloatArray:
    """Makespan per draw when a stalling host holds back every iteration.

    A draw at least ``FALL`` times slower than the host's median is read as a stall at the
    host's deepest slowdown, lasting ``m0 * (slowdown - 1)`` of a run of typical length
    ``m0``. While it lasts, a host with more rows than keep pace (:func:`_pacing_rows`) holds
    every iteration back: the run loses the share ``1 - pacing / rows`` of that time, nearly
    all of it for any share well above pacing. Never less than the solver's own makespan.
    """
    times = _times(a_s, b_s, rows).max(axis=0)
    m0 = _typical_length(rows, med, b_s)
    if not m0 > 0:
        return times
    with np.errstate(divide="ignore", invalid="ignore"):
        behind = np.where(rows > 0, np.clip(1.0 - _pacing_rows(m0, deep) / rows, 0.0, 1.0), 0.0)
    slow = a_s / med[:, None]
    delay = np.where(slow >= FALL, m0 * (slow - 1.0) * behind[:, None], 0.0).max(axis=0)
    out: FloatArray = np.maximum(times, m0 + delay)
    return out


def _fixed(b_s: FloatArray, p: int) -> float:
    return float(np.mean(b_s[p]))


def _mean_makespan(a_s: FloatArray, b_s: FloatArray, rows: IntArray) -> float:
    return float(_times(a_s, b_s, rows).max(axis=0).mean())


def _solve(
    a_s: FloatArray, b_s: FloatArray, lo: FloatArray, hi: FloatArray, total: int, start: IntArray
) -> IntArray | None:
    """Continuous minimiser over hosts with ``hi > 0``, rounded to integers; None if none."""
    use = np.flatnonzero(hi > 0)
    if use.size == 0 or lo[use].sum() > total or hi[use].sum() < total:
        return None
    a, b = a_s[use], b_s[use]
    r = np.clip(start[use].astype(np.float64), lo[use], hi[use])
    r = _feasible(r, lo[use], hi[use], float(total))
    scale = float((a * r[:, None] + b).max(axis=0).mean())
    if not scale > 0:
        return None
    for tau in TAUS:
        r = _newton(a / scale, b / scale, lo[use], hi[use], r, tau)
    out = np.zeros(a_s.shape[0], dtype=np.int64)
    out[use] = _round(r, lo[use], hi[use], total)
    return out


def _feasible(r: FloatArray, lo: FloatArray, hi: FloatArray, total: float) -> FloatArray:
    """Shift ``r`` within its bounds until it sums to ``total`` (bisection on the shift)."""
    a, b = -total - float(np.abs(r).max()), total + float(np.abs(r).max())
    for _ in range(100):
        mid = (a + b) / 2
        if np.clip(r + mid, lo, hi).sum() < total:
            a = mid
        else:
            b = mid
    out: FloatArray = np.clip(r + b, lo, hi)
    return out


def _smooth(
    r: FloatArray, a: FloatArray, b: FloatArray, tau: float, hessian: bool
) -> tuple[float, FloatArray, FloatArray | None]:
    """Mean over draws of ``tau * logsumexp(t / tau)``, its gradient and Hessian in ``r``."""
    t = a * r[:, None]
    t += b
    top = t.max(axis=0)
    e = np.exp((t - top) / tau)
    z = e.sum(axis=0)
    f = float(np.mean(top + tau * np.log(z)))
    e /= z  # softmax weights
    pa = e * a
    draws = a.shape[1]
    g: FloatArray = pa.sum(axis=1) / draws
    if not hessian:
        return f, g, None
    h: FloatArray = (np.diag((pa * a).sum(axis=1)) - pa @ pa.T) / (draws * tau)
    return f, g, h


def _newton(
    a: FloatArray, b: FloatArray, lo: FloatArray, hi: FloatArray, r: FloatArray, tau: float
) -> FloatArray:
    """Active-set Newton on the smoothed objective with ``sum r`` fixed and ``lo <= r <= hi``."""
    eps = 1e-9 * max(1.0, float(r.sum()))
    fixed = (r <= lo + eps) | (r >= hi - eps)
    for _ in range(NEWTON_STEPS):
        f, g, h = _smooth(r, a, b, tau, True)
        assert h is not None
        free = np.flatnonzero(~fixed)
        d_free = (
            _direction(g[free], h[np.ix_(free, free)]) if free.size > 1 else np.zeros(free.size)
        )
        slope = float(g[free] @ d_free)
        if not slope < -1e-12 * abs(f):
            # optimal on the free set: free a bound host whose multiplier says it should move
            nu = float(g[free].mean()) if free.size else 0.0
            release = np.flatnonzero(
                fixed
                & (
                    ((r <= lo + eps) & (g < nu) & (hi > lo + eps))
                    | ((r >= hi - eps) & (g > nu) & (r > lo + eps))
                )
            )
            if release.size == 0:
                break
            fixed[release[np.argmax(np.abs(g[release] - nu))]] = False
            continue
        d = np.zeros_like(r)
        d[free] = d_free
        with np.errstate(divide="ignore", invalid="ignore"):
            room = np.where(d < 0, (lo - r) / d, np.where(d > 0, (hi - r) / d, np.inf))
        longest = float(room.min())
        step = min(1.0, longest)
        while step > 1e-12:
            trial = np.clip(r + step * d, lo, hi)
            if _smooth(trial, a, b, tau, False)[0] <= f + 1e-4 * step * slope:
                break
            step /= 2
        else:
            break
        r = trial
        if step == longest:
            fixed |= (r <= lo + eps) | (r >= hi - eps)
    return r


def _direction(g: FloatArray, h: FloatArray) -> FloatArray:
    """Newton direction with ``sum d = 0`` (KKT system); projected gradient if not descent."""
    k = g.size
    kkt = np.zeros((k + 1, k + 1))
    kkt[:k, :k] = h + np.eye(k) * (1e-10 * max(float(np.trace(h)) / k, 1e-300))
    kkt[:k, k] = 1.0
    kkt[k, :k] = 1.0
    try:
        d: FloatArray = np.asarray(
            np.linalg.solve(kkt, np.concatenate((-g, [0.0])))[:k], dtype=np.float64
        )
    except np.linalg.LinAlgError:
        d = -(g - g.mean())
    if not float(g @ d) < 0:
        d = -(g - g.mean())
    return d


def _round(r: FloatArray, lo: FloatArray, hi: FloatArray, total: int) -> IntArray:
    """Integers summing to ``total``: floors, then the largest remainders (within bounds)."""
    out = np.clip(np.floor(r + 1e-9), lo, hi).astype(np.int64)
    left = total - int(out.sum())
    order = np.argsort(-(r - out), kind="stable")
    while left != 0:
        moved = False
        for p in order:
            if left > 0 and out[p] < hi[p]:
                out[p] += 1
                left -= 1
                moved = True
            elif left < 0 and out[p] > lo[p]:
                out[p] -= 1
                left += 1
                moved = True
            if left == 0:
                break
        if not moved:
            break
    return out


# --- the search (quantile of the makespan) ---------------------------------------------------


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


def _descend(
    problem: Problem, a_s: FloatArray, b_s: FloatArray, rows: IntArray, goal: Goal, max_evals: int
) -> IntArray:
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


def _receivers(
    crit: FloatArray,
    rows: IntArray,
    hi: FloatArray,
    step: int,
    a_mean: FloatArray,
    b_mean: FloatArray,
) -> list[int]:
    after = a_mean * (rows + step) + b_mean
    order = np.lexsort((after, crit))
    ok = [int(p) for p in order if rows[p] + step <= hi[p]]
    return ok[:RECEIVERS]


def _try_move(
    t: FloatArray,
    a_s: FloatArray,
    b_s: FloatArray,
    rows: IntArray,
    d: int,
    q: int,
    step: int,
    goal: Goal,
    m: FloatArray,
) -> FloatArray | None:
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
