"""Numeric engine: exact distributions of separable models, by quadrature.

Structural models are mostly built from one pattern: each host's time is a
constant plus terms that are each proportional, or inversely proportional, to
one floored input (``NumElts * Benchmark / FracAvailCPU``, ``n * Size /
BWAvail``), and the makespan is the max over hosts that share no input.  For
that pattern the distribution is known exactly, whatever the inputs' shapes
(normal with any spread, Gaussian mixtures):

* a term ``R / X'`` with ``X' = max(X, floor)`` has ``P(R/X' <= y) = 1 - F_X(R/y)``
  for ``R/y`` above the floor, 1 beyond (the floor puts an atom of mass
  ``F_X(floor)`` at ``R/floor``); ``L * X'`` likewise;
* moments of a term come from ``E[X']``, ``E[X'^2]``, ``E[1/X']``, ``E[1/X'^2]``
  (Simpson's rule in ``log x``, 513-1025 nodes, plus the floor's atom): exact to
  ~1e-12;
* a sum of independent terms keeps its widest term exact and discretises the
  others into 8-32 equal-probability nodes (conditional means; mean exact):
  ``F(t) = mean_k F_main(t - c - y_k)``, evaluated at any point;
* the max of independent values has CDF ``prod_i F_i``, evaluated exactly at any
  point; mean, std and quantiles come from it on a grid of ~900 points (uniform
  over the whole support, through the floors' atoms, plus points at evenly
  spaced probabilities of a first pass; ~500 when hosts are sums).

**Lane values.**  :class:`NumericLanes` is the engine's lane type for the grammar
evaluator (see :mod:`ppe.core.lanes`): ``m`` lanes, each the max (times a sign)
over a segment of *atoms*; an atom is ``c + sum_s (L_s X'_s + R_s / X'_s)`` over
the evaluation's sources ``X_s`` (one per distinct stochastic input).  Plain
values are one-atom segments.  Sums, differences and scalings of atoms, ``c / (L
X')``, ``c / (R / X')``, and the max (or min) of atoms that share no source are
exact.  Anything else - a product or quotient of two stochastic values, a max
over values sharing an input, a value both proportional and inversely
proportional to one input, arithmetic on a max other than a shift or scaling,
Samples inputs, mixture components of zero spread - raises
:class:`~ppe.core.analytic.HandOver`, and "auto" falls back to the analytic
engine (normal inputs) or Monte Carlo.

**Results** are :class:`NumResult` lanes, shown publicly as
:class:`~ppe.core.stochastic.Numeric` (kind ``"numeric"``): mean/std exact, cdf
exact at any point, ppf/interval from closed forms (one term) or the grid, and
``rvs``/Monte Carlo draws made exactly by drawing the inputs themselves.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from .analytic import HandOver
from .errors import StochasticError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Component sigmas the moment quadrature covers (tail mass beyond: < 1e-17).
Z_FULL = 8.5
#: Probability left out at each end of the ranges grids are laid over: quantile
#: bounds keep grids on the mass (a floor 30x below the bulk is not a range end
#: unless it holds more than this).
EPS_RANGE = 1e-12
#: Points of a max's grid: uniform over the support, then at evenly spaced
#: probabilities.
MAX_GRID_FULL = 512
MAX_GRID_BULK = 384
#: ... halved when hosts are sums of stochastic terms (each CDF value costs 8-32
#: evaluations there); mean, std and interval ends stay within ~1e-3.
MAX_GRID_SUMS = 256
#: A sum of several stochastic terms keeps its widest term exact and discretises
#: the others into at most this many equal-probability nodes (each the conditional
#: mean of its bin, from SUB_NODES quantiles per bin; the mean stays exact).
SUM_NODES = 32
SUB_NODES = 8
#: Bisection steps for a sum's quantiles (the bracket shrinks 2^-48-fold).
SUM_BISECT = 48
#: Simpson nodes (odd) of the moment quadrature, for normals and for mixtures.
QUAD_NODES = 513
QUAD_NODES_MIXTURE = 1025
#: Floor atoms lighter than this are ignored when placing grid points.
ATOM_MIN_MASS = 1e-14

_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


# ======================================================================= sources


def _components(value: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(weights, means, stds) of a normal or Gaussian-mixture input (cached on it)."""
    cached: tuple[FloatArray, FloatArray, FloatArray] | None = getattr(
        value, "_numeric_components", None
    )
    if cached is not None:
        return cached
    kind = getattr(value, "kind", None)
    if kind == "normal":
        out = np.ones(1), np.array([value.mean()]), np.array([value.std()])
    elif kind == "mixture":
        w = np.asarray(value.weights, dtype=np.float64)
        keep = w > 0
        m = np.asarray(value.means, dtype=np.float64)[keep]
        sd = np.asarray(value.stds, dtype=np.float64)[keep]
        if np.any(sd <= 0):
            raise HandOver("a mixture input has a component with zero spread")
        out = w[keep] / w[keep].sum(), m, sd
    else:
        raise HandOver(f"an input is a {kind} value")
    value._numeric_components = out
    return out


def mixture_ppf(w: FloatArray, m: FloatArray, s: FloatArray, u: FloatArray) -> FloatArray:
    """Quantiles of Gaussian mixtures, row by row: ``w, m, s`` are ``(n, K)``
    (padding has weight 0), ``u`` is ``(n, G)``; returns ``(n, G)``.

    The CDF is tabulated at 65 points spanning 9 sigma beyond the outer
    components; the cell holding each level brackets it, and safeguarded Newton
    steps (bisection whenever a step would leave the bracket) finish to machine
    precision - a few vectorised passes instead of a root search per level.
    """
    n, g = u.shape
    cells = 64
    live = w > 0
    lo = np.where(live, m - 9.0 * s, np.inf).min(axis=1)
    hi = np.where(live, m + 9.0 * s, -np.inf).max(axis=1)
    ww, mm, ss = w[:, None, :], m[:, None, :], s[:, None, :]

    def cdf(x: FloatArray) -> FloatArray:
        out: FloatArray = (ww * special.ndtr((x[..., None] - mm) / ss)).sum(axis=2)
        return out

    nodes = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, cells + 1)[None, :]
    table = np.maximum.accumulate(cdf(nodes), axis=1)
    offset = 2.0 * np.arange(n)[:, None]
    j = np.searchsorted((table + offset).ravel(), (u + offset).ravel()).reshape(n, g)
    j = np.clip(j - (cells + 1) * np.arange(n)[:, None], 1, cells)
    a = np.take_along_axis(nodes, j - 1, axis=1)
    b = np.take_along_axis(nodes, j, axis=1)
    fa = np.take_along_axis(table, j - 1, axis=1)
    fb = np.take_along_axis(table, j, axis=1)
    frac = np.divide(u - fa, fb - fa, out=np.full(u.shape, 0.5), where=fb > fa)
    x = a + np.clip(frac, 0.0, 1.0) * (b - a)
    for _ in range(8):
        z = (x[..., None] - mm) / ss
        f = (ww * special.ndtr(z)).sum(axis=2)
        d = (ww * np.exp(-0.5 * z * z) / (ss * _SQRT_2PI)).sum(axis=2)
        below = f < u
        a = np.where(below, x, a)
        b = np.where(below, b, x)
        step = np.divide(f - u, d, out=np.full(u.shape, np.inf), where=d > 0)
        nxt = x - step
        x = np.where((nxt >= a) & (nxt <= b), nxt, 0.5 * (a + b))
    x = np.where(u <= 0, -np.inf, np.where(u >= 1, np.inf, x))
    return np.where(np.isnan(u), np.nan, x)


#: Moments of floored inputs by content (floor, weights, means, stds).
_MOMENT_CACHE: OrderedDict[tuple[Any, ...], FloatArray] = OrderedDict()
_MOMENT_CACHE_SIZE = 4096
_moment_lock = threading.Lock()


@dataclass(eq=False)
class Sources:
    """The distinct stochastic inputs of one evaluation, each floored.

    ``values[s]`` is the input object (a Normal or Mixture: draws come from it,
    so Monte Carlo on these values stays aligned with the inputs); ``w, m, sd``
    its Gaussian components, padded to ``(S, K)`` with weight 0.
    """

    values: list[Any]
    floor: FloatArray
    w: FloatArray
    m: FloatArray
    sd: FloatArray
    _moments: FloatArray | None = None
    _tables: dict[int, tuple[FloatArray, FloatArray]] = field(default_factory=dict)

    @classmethod
    def build(cls, values: Sequence[Any], floors: Sequence[float]) -> Sources:
        comps = [_components(v) for v in values]
        k = max((c[0].size for c in comps), default=1)
        n = len(comps)
        w, m, sd = np.zeros((n, k)), np.zeros((n, k)), np.ones((n, k))
        for i, (cw, cm, cs) in enumerate(comps):
            w[i, : cw.size], m[i, : cw.size], sd[i, : cw.size] = cw, cm, cs
        return cls(list(values), np.asarray(floors, dtype=np.float64), w, m, sd)

    @property
    def S(self) -> int:  # noqa: N802 - the number of sources
        return len(self.values)

    # --- the (unfloored) input distributions, rows = source indices
    def cdf(self, si: IntArray, x: FloatArray) -> FloatArray:
        """``F_X(x)`` for sources ``si`` (n,) at ``x`` (n, G) (in place, few passes:
        a 64-host max evaluates this a hundred thousand times)."""
        out: FloatArray = np.subtract(x, self.m[si, :1])
        out /= self.sd[si, :1]
        special.ndtr(out, out=out)
        if self.w.shape[1] == 1:
            return out
        out *= self.w[si, :1]
        for k in range(1, self.w.shape[1]):  # padding components cost nothing
            rows = np.flatnonzero(self.w[si, k] > 0)
            if rows.size == 0:
                break
            r = si[rows]
            z = np.subtract(x[rows], self.m[r, k][:, None])
            z /= self.sd[r, k][:, None]
            special.ndtr(z, out=z)
            z *= self.w[r, k][:, None]
            out[rows] += z
        return out

    def ppf(self, si: IntArray, u: FloatArray) -> FloatArray:
        """Quantiles ``Q_X(u)`` for sources ``si`` (n,) at levels ``u`` (n, G)."""
        out: FloatArray = self.m[si, :1] + self.sd[si, :1] * special.ndtri(u)
        if self.w.shape[1] > 1:
            mixed = np.flatnonzero(self.w[si, 1] > 0)
            if mixed.size:
                rows = si[mixed]
                out[mixed] = mixture_ppf(self.w[rows], self.m[rows], self.sd[rows], u[mixed])
        return out

    def ppf_fast(self, si: IntArray, u: FloatArray) -> FloatArray:
        """Quantiles from a 513-point tabulation of each mixture's CDF (normals:
        exact): for discretising a term into bins, where ~1e-5 of the spread is
        plenty and a root search per level would cost more than the prediction."""
        out: FloatArray = self.m[si, :1] + self.sd[si, :1] * special.ndtri(u)
        if self.w.shape[1] == 1:
            return out
        for i in np.flatnonzero(self.w[si, 1] > 0).tolist():
            x, f = self._table(int(si[i]))
            out[i] = np.interp(u[i], f, x)
        return out

    def _table(self, s: int) -> tuple[FloatArray, FloatArray]:
        hit = self._tables.get(s)
        if hit is None:
            lo, hi = self.bounds(np.array([s]), Z_FULL)
            x = np.linspace(lo[0], hi[0], 513)
            hit = (x, np.maximum.accumulate(self.cdf(np.array([s]), x[None, :])[0]))
            self._tables[s] = hit
        return hit

    def bounds(self, si: IntArray, z: float) -> tuple[FloatArray, FloatArray]:
        """Range of each source holding all but ``~Phi(-z)`` of its mass (unfloored)."""
        live = self.w[si] > 0
        lo = np.where(live, self.m[si] - z * self.sd[si], np.inf).min(axis=1)
        hi = np.where(live, self.m[si] + z * self.sd[si], -np.inf).max(axis=1)
        return lo, hi

    def floor_mass(self, si: IntArray) -> FloatArray:
        """``P(X <= floor)``: the atom the floor puts at ``floor``."""
        return self.cdf(si, self.floor[si][:, None])[:, 0]

    # --- moments of the floored inputs
    def moments(self) -> FloatArray:
        """``(S, 4)``: ``E[X'], E[X'^2], E[1/X'], E[1/X'^2]`` of ``X' = max(X, floor)``.

        Cached on each input object and, by content, across objects (the service
        rebuilds equal forecasts per request)."""
        if self._moments is None:
            out = np.empty((self.S, 4))
            missing: list[int] = []
            keys: dict[int, tuple[Any, ...]] = {}
            for s, v in enumerate(self.values):
                floor = float(self.floor[s])
                per_object: dict[float, FloatArray] | None = getattr(v, "_numeric_moments", None)
                hit = per_object.get(floor) if per_object is not None else None
                if hit is None:
                    live = self.w[s] > 0
                    key = (
                        floor,
                        self.w[s][live].tobytes(),
                        self.m[s][live].tobytes(),
                        self.sd[s][live].tobytes(),
                    )
                    keys[s] = key
                    with _moment_lock:
                        hit = _MOMENT_CACHE.get(key)
                        if hit is not None:
                            _MOMENT_CACHE.move_to_end(key)
                if hit is None:
                    missing.append(s)
                else:
                    out[s] = hit
            if missing:
                idx = np.array(missing, dtype=np.int64)
                out[idx] = self._quadrature(idx)
                with _moment_lock:
                    for s in missing:
                        _MOMENT_CACHE[keys[s]] = out[s].copy()
                    while len(_MOMENT_CACHE) > _MOMENT_CACHE_SIZE:
                        _MOMENT_CACHE.popitem(last=False)
            for s in keys:
                v = self.values[s]
                if getattr(v, "_numeric_moments", None) is None:
                    v._numeric_moments = {}
                v._numeric_moments[float(self.floor[s])] = out[s].copy()
            self._moments = out
        return self._moments

    def _quadrature(self, si: IntArray) -> FloatArray:
        """Moments by Simpson's rule in ``y = log x`` over the sources' supports
        above their floors, plus the floor's atom."""
        f = self.floor[si]
        if np.any(f <= 0):
            raise HandOver("an input without a positive floor")
        nodes = QUAD_NODES if self.w.shape[1] == 1 else QUAD_NODES_MIXTURE
        lo, hi = self.bounds(si, Z_FULL)
        a = np.log(np.maximum(lo, f))
        b = np.log(np.maximum(hi, np.maximum(lo, f)))
        frac = np.linspace(0.0, 1.0, nodes)
        y = a[:, None] + (b - a)[:, None] * frac[None, :]
        x = np.exp(y)
        dens = np.zeros_like(x)
        for k in range(self.w.shape[1]):
            sd = self.sd[si, k][:, None]
            z = (x - self.m[si, k][:, None]) / sd
            dens += self.w[si, k][:, None] * np.exp(-0.5 * z * z) / (sd * _SQRT_2PI)
        simpson = np.ones(nodes)
        simpson[1:-1:2], simpson[2:-1:2] = 4.0, 2.0
        weights = (b - a)[:, None] / (3.0 * (nodes - 1)) * simpson[None, :] * dens * x
        atom = self.floor_mass(si)
        out = np.empty((si.size, 4))
        for j, power in enumerate((1.0, 2.0, -1.0, -2.0)):
            out[:, j] = atom * f**power + (weights * x**power).sum(axis=1)
        return out

    # --- draws of the floored inputs
    def draw(self, cols: IntArray, space: Any) -> FloatArray:
        """``(len(cols), n)`` floored draws in a Monte Carlo space (aligned with
        every other use of the same inputs there)."""
        out = np.empty((cols.size, space.n))
        for i, s in enumerate(cols.tolist()):
            self.values[s]._draw_into(space, out[i])
        np.maximum(out, self.floor[cols][:, None], out=out)
        return out

    def rvs(self, cols: IntArray, n: int, rng: np.random.Generator) -> FloatArray:
        """``(len(cols), n)`` independent floored draws."""
        out = np.empty((cols.size, n))
        for i, s in enumerate(cols.tolist()):
            out[i] = self.values[s]._rvs(n, rng)
        np.maximum(out, self.floor[cols][:, None], out=out)
        return out


# ================================================================ one-input terms


def _coef(L: FloatArray, R: FloatArray) -> tuple[BoolArray, FloatArray]:
    """(reciprocal?, coefficient) of terms ``L X'`` (R == 0) or ``R / X'``."""
    rec = R != 0
    return rec, np.where(rec, R, L)


def term_cdf(src: Sources, si: IntArray, L: FloatArray, R: FloatArray, y: FloatArray) -> FloatArray:
    """``P(term <= y)`` for terms ``L X'`` or ``R / X'`` (rows), ``y`` (n, G).

    With ``x`` the input value at which the term equals ``y``: ``R / X' <= y`` is
    ``X' >= R / y`` for ``R > 0`` (and impossible for ``y <= 0``), ``L X' <= y``
    is ``X' <= y / L`` for ``L > 0``; the signs flip the inequalities.  ``X' >=
    x`` has probability 1 for ``x <= floor`` (the floor's atom), else ``1 -
    F_X(x)``; ``X' <= x`` has ``F_X(x)`` for ``x >= floor``, else 0.
    """
    rec, a = _coef(L, R)
    out = np.empty(y.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for recip, positive in ((True, True), (True, False), (False, True), (False, False)):
            sel = (rec == recip) & ((a > 0) == positive)
            if not sel.any():
                continue
            rows = np.flatnonzero(sel)
            whole = rows.size == y.shape[0]
            ar, yr, sr = a[rows, None], (y if whole else y[rows]), si[rows]
            f = src.floor[sr][:, None]
            x = np.divide(ar, yr) if recip else np.divide(yr, ar)
            val = src.cdf(sr, x)
            if recip == positive:  # R > 0 or L < 0: the term falls as X' grows
                np.subtract(1.0, val, out=val)
                val[x <= f] = 1.0
                if recip:
                    val[yr <= 0] = 0.0  # R / X' > 0
            else:  # R < 0 or L > 0: the term grows with X'
                val[x < f] = 0.0
                if recip:
                    val[yr >= 0] = 1.0  # R / X' < 0
            if whole:
                out = val
            else:
                out[rows] = val
    return np.clip(out, 0.0, 1.0, out=out)


def term_ppf(
    src: Sources, si: IntArray, L: FloatArray, R: FloatArray, u: FloatArray, fast: bool = False
) -> FloatArray:
    """Quantiles of terms ``L X'`` or ``R / X'`` at levels ``u`` (n, G): the
    monotone map of the input's quantile (exact; ``fast``: tabulated inputs)."""
    rec, a = _coef(L, R)
    increasing = ((~rec) & (a > 0)) | (rec & (a < 0))
    level = np.where(increasing[:, None], u, 1.0 - u)
    q = src.ppf_fast(si, level) if fast else src.ppf(si, level)
    x = np.maximum(q, src.floor[si][:, None])
    with np.errstate(divide="ignore", over="ignore"):
        out: FloatArray = np.where(rec[:, None], a[:, None] / x, a[:, None] * x)
    return out


def term_bounds(
    src: Sources, si: IntArray, L: FloatArray, R: FloatArray, eps: float = EPS_RANGE
) -> tuple[FloatArray, FloatArray]:
    """The ``eps`` and ``1 - eps`` quantiles of each term (exact; a floor atom
    holding more than ``eps`` is inside)."""
    u = np.broadcast_to(np.array([[eps, 1.0 - eps]]), (si.size, 2))
    q = term_ppf(src, si, L, R, u)
    return q[:, 0], q[:, 1]


def term_moments(
    src: Sources, si: IntArray, L: FloatArray, R: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of terms ``L X' + R / X'`` (both may be non-zero)."""
    mom = src.moments()[si]
    e1, e2, r1, r2 = mom[..., 0], mom[..., 1], mom[..., 2], mom[..., 3]
    mean = L * e1 + R * r1
    var = L * L * (e2 - e1 * e1) + R * R * (r2 - r1 * r1) + 2.0 * L * R * (1.0 - e1 * r1)
    return mean, np.maximum(var, 0.0)


# ========================================================================= atoms


@dataclass(eq=False)
class Atoms:
    """``n`` atoms ``c + sum_s (L_s X'_s + R_s / X'_s)`` with their terms listed:
    ``tsi, tL, tR`` are ``(n, T)`` (padding has both coefficients 0)."""

    src: Sources
    c: FloatArray
    L: FloatArray
    R: FloatArray
    tsi: IntArray = field(init=False)
    tL: FloatArray = field(init=False)
    tR: FloatArray = field(init=False)
    nterms: IntArray = field(init=False)
    _parts: tuple[IntArray, FloatArray] | None = None
    _ranges: tuple[FloatArray, FloatArray] | None = None

    def __post_init__(self) -> None:
        lin, rec = self.L != 0, self.R != 0
        if np.any(lin & rec):
            raise HandOver("a value both proportional and inversely proportional to one input")
        nz = lin | rec
        self.nterms = nz.sum(axis=1).astype(np.int64)
        n, t = self.c.size, max(int(self.nterms.max(initial=0)), 1)
        rows, cols = np.nonzero(nz)
        starts = np.cumsum(self.nterms) - self.nterms
        pos = np.arange(rows.size) - starts[rows]
        self.tsi = np.zeros((n, t), dtype=np.int64)
        self.tL, self.tR = np.zeros((n, t)), np.zeros((n, t))
        self.tsi[rows, pos] = cols
        self.tL[rows, pos] = self.L[rows, cols]
        self.tR[rows, pos] = self.R[rows, cols]

    # --- moments
    def moments(self, idx: IntArray) -> tuple[FloatArray, FloatArray]:
        """Exact mean and variance of atoms ``idx`` (independent terms)."""
        mom = self.src.moments()
        e1, e2, r1, r2 = mom[:, 0], mom[:, 1], mom[:, 2], mom[:, 3]
        L, R = self.L[idx], self.R[idx]
        mean = self.c[idx] + L @ e1 + R @ r1
        var = (L * L) @ (e2 - e1 * e1) + (R * R) @ (r2 - r1 * r1) + (2.0 * L * R) @ (1.0 - e1 * r1)
        return mean, np.maximum(var, 0.0)

    # --- supports
    def term_ranges(self) -> tuple[FloatArray, FloatArray]:
        """``(n, T)`` quantile bounds of every term (0 for padding), computed once."""
        if self._ranges is None:
            tsi, tL, tR = self.tsi, self.tL, self.tR
            live = (tL != 0) | (tR != 0)
            lo, hi = term_bounds(self.src, tsi[live], tL[live], tR[live])
            lo_t, hi_t = np.zeros(tsi.shape), np.zeros(tsi.shape)
            lo_t[live], hi_t[live] = lo, hi
            self._ranges = (lo_t, hi_t)
        return self._ranges

    def bounds(self, idx: IntArray) -> tuple[FloatArray, FloatArray]:
        """Range of atoms ``idx`` holding all but ~``EPS_RANGE`` per term."""
        lo_t, hi_t = self.term_ranges()
        c = self.c[idx]
        return c + lo_t[idx].sum(axis=1), c + hi_t[idx].sum(axis=1)

    def jumps(self, idx: IntArray) -> tuple[FloatArray, FloatArray]:
        """Locations and masses of the floor atoms of one-term atoms ``idx``."""
        one = idx[self.nterms[idx] == 1]
        if one.size == 0:
            return np.zeros(0), np.zeros(0)
        si, L, R = self.tsi[one, 0], self.tL[one, 0], self.tR[one, 0]
        f = self.src.floor[si]
        loc = self.c[one] + np.where(R != 0, R / f, L * f)
        return loc, self.src.floor_mass(si)

    # --- distribution functions
    def cdf(self, idx: IntArray, t: FloatArray) -> FloatArray:
        """``P(atom <= t)`` for atoms ``idx`` (k,) at ``t`` (k, G)."""
        out = np.empty(t.shape)
        nt = self.nterms[idx]
        det = np.flatnonzero(nt == 0)
        if det.size:
            out[det] = (t[det] >= self.c[idx[det], None]).astype(np.float64)
        one = np.flatnonzero(nt == 1)
        if one.size:
            a = idx[one]
            y = t[one] - self.c[a][:, None]
            out[one] = term_cdf(self.src, self.tsi[a, 0], self.tL[a, 0], self.tR[a, 0], y)
        many = np.flatnonzero(nt > 1)
        if many.size:
            out[many] = self._sum_cdf(idx[many], t[many])
        return out

    def ppf(self, idx: IntArray, u: FloatArray) -> FloatArray:
        """Quantiles of atoms ``idx`` (k,) at levels ``u`` (k, G)."""
        out = np.empty(u.shape)
        nt = self.nterms[idx]
        det = np.flatnonzero(nt == 0)
        if det.size:
            out[det] = self.c[idx[det], None] + 0.0 * u[det]
        one = np.flatnonzero(nt == 1)
        if one.size:
            a = idx[one]
            q = term_ppf(self.src, self.tsi[a, 0], self.tL[a, 0], self.tR[a, 0], u[one])
            out[one] = self.c[a][:, None] + q
        many = np.flatnonzero(nt > 1)
        if many.size:
            out[many] = self._sum_ppf(idx[many], u[many])
        return out

    def _sum_parts(self, idx: IntArray) -> tuple[IntArray, FloatArray]:
        """For multi-term atoms: the slot of the term kept exact (the widest) and
        the other terms' sum as equal-probability nodes (all atoms at first use)."""
        if self._parts is None:
            self._parts = self._discretise(np.flatnonzero(self.nterms > 1))
        main, nodes = self._parts
        return main[idx], nodes[idx]

    def _discretise(self, multi: IntArray) -> tuple[IntArray, FloatArray]:
        """Keep the widest term (by its 10-90 % range) exact; discretise the others
        into equal-probability nodes at their bins' conditional means (shifted so
        the others' sum keeps its exact mean).  Nodes: 8 when the others are
        narrow next to the exact term's narrowest hump, up to ``SUM_NODES``."""
        n, t = self.tsi.shape
        main = np.zeros(n, dtype=np.int64)
        tsi, tL, tR = self.tsi[multi], self.tL[multi], self.tR[multi]
        k = multi.size
        live = (tL != 0) | (tR != 0)
        mean, _ = term_moments(self.src, tsi, tL, tR)
        deciles = term_ppf(
            self.src,
            tsi.ravel(),
            tL.ravel(),
            tR.ravel(),
            np.broadcast_to([0.1, 0.9], (tsi.size, 2)),
            fast=True,
        )
        spread = np.where(live, np.abs(deciles[:, 1] - deciles[:, 0]).reshape(k, t), -1.0)
        main_m = np.argmax(spread, axis=1)
        is_main = np.arange(t)[None, :] == main_m[:, None]
        other_spread = np.sqrt(np.where(live & ~is_main, spread**2, 0.0).sum(axis=1))
        ratio = float(np.max(other_spread / self._local_scale(multi, main_m)))
        kn = 8 if ratio <= 0.3 else 16 if ratio <= 1.0 else SUM_NODES
        levels = (np.arange(kn * SUB_NODES) + 0.5) / (kn * SUB_NODES)
        acc = np.zeros((k, kn))
        for j in range(t):
            other = live[:, j] & ~is_main[:, j]
            if not other.any():
                continue
            rows = np.flatnonzero(other)
            nodes = np.zeros((k, kn))
            u = np.broadcast_to(levels, (rows.size, levels.size))
            q = term_ppf(self.src, tsi[rows, j], tL[rows, j], tR[rows, j], u, fast=True)
            nodes[rows] = q.reshape(rows.size, kn, SUB_NODES).mean(axis=2)
            # the sum of two discretised terms, re-binned to kn nodes
            pair = np.sort((acc[:, :, None] + nodes[:, None, :]).reshape(k, kn * kn), axis=1)
            acc = pair.reshape(k, kn, kn).mean(axis=2)
        # the others' sum keeps its exact mean (the nodes lose only the spread
        # inside their bins: negligible next to the exact term's narrowest hump,
        # which is what sets the node count)
        want_mean = np.where(live & ~is_main, mean, 0.0).sum(axis=1)
        acc += (want_mean - acc.mean(axis=1))[:, None]
        main[multi] = main_m
        out = np.zeros((n, kn))
        out[multi] = acc
        return main, out

    def _local_scale(self, idx: IntArray, slot: IntArray) -> FloatArray:
        """The narrowest hump of a term: the smallest of its components' spreads
        mapped through the term (``|L| s`` or ``|R| s / m^2``)."""
        si = self.tsi[idx, slot]
        L, R = self.tL[idx, slot], self.tR[idx, slot]
        w, m, sd = self.src.w[si], self.src.m[si], self.src.sd[si]
        m_safe = np.maximum(np.abs(m), self.src.floor[si][:, None])
        width = np.where(
            (R != 0)[:, None], np.abs(R)[:, None] * sd / m_safe**2, np.abs(L)[:, None] * sd
        )
        out: FloatArray = np.maximum(np.where(w > 0, width, np.inf).min(axis=1), 1e-300)
        return out

    def _sum_cdf(self, idx: IntArray, t: FloatArray) -> FloatArray:
        """``P(c + main + others <= t)`` = mean over the others' nodes of the main
        term's exact CDF."""
        main, nodes = self._sum_parts(idx)
        k, g = t.shape
        kn = nodes.shape[1]
        si, L, R = self.tsi[idx, main], self.tL[idx, main], self.tR[idx, main]
        out = np.empty((k, g))
        step = max(1, (1 << 16) // max(g * kn, 1))  # chunks that stay in cache
        for r0 in range(0, k, step):
            r = slice(r0, r0 + step)
            y = t[r, :, None] - self.c[idx[r]][:, None, None] - nodes[r, None, :]
            f = term_cdf(self.src, si[r], L[r], R[r], y.reshape(y.shape[0], -1))
            out[r] = f.reshape(y.shape[0], g, kn).mean(axis=2)
        return out

    def _sum_ppf(self, idx: IntArray, u: FloatArray) -> FloatArray:
        """Quantiles of sums by bisection on their CDF (the bracket shrinks
        2^-48-fold from the sum's range)."""
        lo_b, hi_b = self.bounds(idx)
        lo = np.broadcast_to(lo_b[:, None], u.shape).copy()
        hi = np.broadcast_to(hi_b[:, None], u.shape).copy()
        for _ in range(SUM_BISECT):
            mid = 0.5 * (lo + hi)
            below = self._sum_cdf(idx, mid) < u
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        return hi

    # --- draws
    def values(self, idx: IntArray, x: FloatArray, cols: IntArray) -> FloatArray:
        """Atoms ``idx`` for floored input draws ``x`` ``(len(cols), n)``."""
        L, R = self.L[idx][:, cols], self.R[idx][:, cols]
        out: FloatArray = self.c[idx][:, None] + L @ x + R @ (1.0 / x)
        return out

    def columns(self, idx: IntArray) -> IntArray:
        """Sources the atoms ``idx`` depend on."""
        used = np.any((self.L[idx] != 0) | (self.R[idx] != 0), axis=0)
        return np.flatnonzero(used).astype(np.int64)


# ============================================================== grid (for a max)


@dataclass(frozen=True, eq=False)
class Grid:
    """A CDF given at increasing points ``t`` (piecewise linear between them,
    ``F[0] == 0``, ``F[-1] == 1``): the max's tabulation."""

    t: FloatArray
    F: FloatArray

    def mean_var(self) -> tuple[float, float]:
        """Moments of the piecewise-uniform density (exact for the tabulation)."""
        dF = np.diff(self.F)
        a, b = self.t[:-1], self.t[1:]
        mean = float(np.dot(dF, 0.5 * (a + b)))
        a, b = a - mean, b - mean
        var = float(np.dot(dF, (a * a + a * b + b * b) / 3.0))
        return mean, max(var, 0.0)

    def cdf(self, x: FloatArray) -> FloatArray:
        out: FloatArray = np.interp(x, self.t, self.F, left=0.0, right=1.0)
        return out

    def ppf(self, q: FloatArray) -> FloatArray:
        qa = np.asarray(q, dtype=np.float64)
        j = np.clip(np.searchsorted(self.F, qa, side="left"), 1, self.F.size - 1)
        f0, f1 = self.F[j - 1], self.F[j]
        frac = np.divide(qa - f0, f1 - f0, out=np.ones_like(qa), where=f1 > f0)
        out: FloatArray = self.t[j - 1] + np.clip(frac, 0.0, 1.0) * (self.t[j] - self.t[j - 1])
        out = np.where(qa <= 0, self.t[0], out)
        return np.where((qa < 0) | (qa > 1) | np.isnan(qa), np.nan, out)

    def reflected(self) -> Grid:
        """The grid of ``-X``."""
        return Grid(-self.t[::-1].copy(), 1.0 - self.F[::-1])


def max_grid(atoms: Atoms, idx: IntArray) -> Grid:
    """Tabulated CDF of the max of independent atoms ``idx``: ``prod_i F_i``,
    exact at every grid point.  The grid is uniform over the support, runs
    through every atom (the floors' point masses), and is then refined with
    points at evenly spaced probabilities, so no cell holds more than ~0.2 % of
    the mass even when a floor stretches the support a hundredfold."""
    lo, hi = atoms.bounds(idx)
    lower, upper = float(lo.max()), float(hi.max())
    scale = max(abs(lower), abs(upper), 1e-300)
    if upper - lower <= 1e-12 * scale:
        return Grid(np.array([upper - 1e-12 * scale, upper]), np.array([0.0, 1.0]))
    act = idx[hi > lower]
    delta = 1e-12 * scale  # a jump is drawn from t - delta to t
    loc, mass = atoms.jumps(act)
    det = act[atoms.nterms[act] == 0]
    marks = np.concatenate([loc[mass > ATOM_MIN_MASS], atoms.c[det]])
    marks = marks[(marks > lower + 2 * delta) & (marks <= upper)]
    sums = bool(np.any(atoms.nterms[act] > 1))
    full, bulk = (MAX_GRID_SUMS, MAX_GRID_SUMS) if sums else (MAX_GRID_FULL, MAX_GRID_BULK)
    t = np.unique(np.concatenate([np.linspace(lower, upper, full), marks, marks - delta]))
    cdf = _max_cdf(atoms, act, t)
    # refine: points where the coarse CDF reaches evenly spaced levels
    levels = np.linspace(0.0, 1.0, bulk + 2)[1:-1]
    extra = Grid(t, cdf).ppf(levels)
    extra = np.setdiff1d(extra[(extra > lower) & (extra < upper)], t)
    if extra.size:
        t = np.concatenate([t, extra])
        cdf = np.concatenate([cdf, _max_cdf(atoms, act, extra)])
        order = np.argsort(t, kind="stable")
        t, cdf = t[order], cdf[order]
    cdf = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0))
    t = np.concatenate([[lower - delta], t])
    cdf = np.concatenate([[0.0], cdf])
    cdf[-1] = 1.0
    return Grid(t, cdf)


def _max_cdf(atoms: Atoms, act: IntArray, t: FloatArray) -> FloatArray:
    out: FloatArray = atoms.cdf(act, np.broadcast_to(t, (act.size, t.size))).prod(axis=0)
    return out


# =================================================================== lane values


@dataclass(eq=False)
class NumericLanes:
    """``m`` lanes; lane ``j`` is ``sign[j] * max(atoms seg[j]..seg[j+1]-1)``.

    Atoms are rows of ``c + L @ X' + R @ (1/X')`` over the sources ``src``;
    ``seg is None`` means one atom per lane (sign +1): the common, plain case.
    """

    c: FloatArray
    L: FloatArray
    R: FloatArray
    src: Sources
    seg: IntArray | None = None
    sign: FloatArray | None = None

    @property
    def m(self) -> int:
        return int(self.c.shape[0]) if self.seg is None else int(self.seg.shape[0] - 1)

    @property
    def plain(self) -> bool:
        return self.seg is None

    def sizes(self) -> IntArray:
        assert self.seg is not None
        return np.diff(self.seg)

    def segmented(self) -> NumericLanes:
        """The same lanes with explicit one-atom segments."""
        if self.seg is not None:
            return self
        n = self.c.shape[0]
        return NumericLanes(self.c, self.L, self.R, self.src, np.arange(n + 1), np.ones(n))

    def means(self) -> FloatArray:
        """Exact lane means (plain lanes; a max's mean needs its grid)."""
        if not self.plain:
            return np.array([NumResult(self).mean(j) for j in range(self.m)])
        mom = self.src.moments()
        out: FloatArray = self.c + self.L @ mom[:, 0] + self.R @ mom[:, 2]
        return out


Value = NumericLanes | FloatArray


def bank(values: Sequence[Any], floors: FloatArray, src: Sources, cols: Sequence[int]) -> Value:
    """Lanes for inputs ``values`` (None -> 1.0): points floored, stochastic inputs
    as ``X'`` on their source column ``cols[k]`` (-1 for points/None)."""
    n = len(values)
    c = np.ones(n)
    L = np.zeros((n, src.S))
    for k, v in enumerate(values):
        if v is None:
            continue
        if cols[k] < 0:
            c[k] = max(float(v.mean()), float(floors[k]))
        else:
            c[k] = 0.0
            L[k, cols[k]] = 1.0
    return _norm(NumericLanes(c, L, np.zeros((n, src.S)), src))


def _norm(x: NumericLanes) -> Value:
    """Deterministic results become plain arrays."""
    if x.L.any() or x.R.any():
        return x
    if x.seg is None:
        return x.c
    assert x.sign is not None
    return x.sign * np.maximum.reduceat(x.c, x.seg[:-1])


def _lift(v: FloatArray, like: NumericLanes) -> NumericLanes:
    """Deterministic lanes as plain atoms over ``like``'s sources."""
    n = v.shape[0]
    z = np.zeros((n, like.src.S))
    return NumericLanes(np.asarray(v, dtype=np.float64), z, z.copy(), like.src)


def _per_atom(x: NumericLanes, v: FloatArray) -> FloatArray:
    """A per-lane array repeated for every atom of the lane."""
    return v if x.seg is None else np.repeat(v, x.sizes())


def _scale(x: NumericLanes, v: FloatArray) -> NumericLanes:
    """``x * v`` for deterministic lanes ``v`` (a max flips to a min for v < 0)."""
    if x.seg is None:
        return NumericLanes(x.c * v, x.L * v[:, None], x.R * v[:, None], x.src)
    assert x.sign is not None
    a = _per_atom(x, np.abs(v))
    sign = np.where(v < 0, -x.sign, x.sign)  # v == 0 zeroes the atoms: the max is 0
    return NumericLanes(x.c * a, x.L * a[:, None], x.R * a[:, None], x.src, x.seg, sign)


def _shift(x: NumericLanes, v: FloatArray) -> NumericLanes:
    """``x + v`` for deterministic lanes ``v``."""
    if x.seg is None:
        return NumericLanes(x.c + v, x.L, x.R, x.src)
    assert x.sign is not None
    return NumericLanes(x.c + _per_atom(x, x.sign * v), x.L, x.R, x.src, x.seg, x.sign)


def negate(x: NumericLanes) -> Value:
    if x.seg is None:
        return NumericLanes(-x.c, -x.L, -x.R, x.src)
    assert x.sign is not None
    return NumericLanes(x.c, x.L, x.R, x.src, x.seg, -x.sign)


def _check_divisor(d: FloatArray) -> None:
    if not d.all():
        raise StochasticError("division by zero")


def binary(op: str, x: Value, y: Value) -> Value:
    """``x op y`` lane-wise (at least one of them a :class:`NumericLanes`)."""
    if isinstance(x, NumericLanes) and isinstance(y, NumericLanes):
        return _norm(_both(op, x, y))
    if isinstance(x, NumericLanes):
        d = np.asarray(y, dtype=np.float64)
        if op == "+":
            return _norm(_shift(x, d))
        if op == "-":
            return _norm(_shift(x, -d))
        if op == "*":
            return _norm(_scale(x, d))
        _check_divisor(d)
        return _norm(_scale(x, 1.0 / d))
    assert isinstance(y, NumericLanes)
    d = np.asarray(x, dtype=np.float64)
    if op == "+":
        return _norm(_shift(y, d))
    if op == "-":
        neg = negate(y)
        assert isinstance(neg, NumericLanes)
        return _norm(_shift(neg, d))
    if op == "*":
        return _norm(_scale(y, d))
    return _norm(_divide(d, y))


def _both(op: str, x: NumericLanes, y: NumericLanes) -> NumericLanes:
    if not (x.plain and y.plain):
        raise HandOver("arithmetic between a max and another stochastic value")
    if op == "+":
        return NumericLanes(x.c + y.c, x.L + y.L, x.R + y.R, x.src)
    if op == "-":
        return NumericLanes(x.c - y.c, x.L - y.L, x.R - y.R, x.src)
    xs = np.any(x.L != 0, axis=1) | np.any(x.R != 0, axis=1)
    ys = np.any(y.L != 0, axis=1) | np.any(y.R != 0, axis=1)
    if op == "*":
        if np.any(xs & ys):
            raise HandOver("a product of two stochastic values")
        # lane by lane one factor is deterministic
        return NumericLanes(
            x.c * y.c,
            x.L * y.c[:, None] + y.L * x.c[:, None],
            x.R * y.c[:, None] + y.R * x.c[:, None],
            x.src,
        )
    if np.any(ys & xs):
        raise HandOver("a quotient of two stochastic values")
    det_y = ~ys
    if np.any(det_y):
        _check_divisor(y.c[det_y])
    # lanes with a deterministic divisor scale x; the others are x.c / y
    scaled = _scale(x, np.where(det_y, 1.0 / np.where(det_y, y.c, 1.0), 0.0))
    inv = _divide(np.where(det_y, 0.0, x.c), y, allow=ys)
    return NumericLanes(scaled.c + inv.c, scaled.L + inv.L, scaled.R + inv.R, x.src)


def _divide(d: FloatArray, y: NumericLanes, allow: BoolArray | None = None) -> NumericLanes:
    """``d / y`` lane-wise: exact when each stochastic lane of ``y`` is a single
    term ``L X'`` or ``R / X'``; lanes outside ``allow`` give 0."""
    if not y.plain:
        raise HandOver("a quotient by a max")
    m = y.m
    use = np.ones(m, dtype=bool) if allow is None else allow
    lin, rec = y.L != 0, y.R != 0
    terms = lin.sum(axis=1) + rec.sum(axis=1)
    stoch = use & (terms > 0)
    if np.any(stoch & ((terms > 1) | (y.c != 0))):
        raise HandOver("a quotient by a sum of stochastic terms")
    plain = use & (terms == 0)
    if np.any(plain):
        _check_divisor(y.c[plain])
    c = np.where(plain, d / np.where(plain, y.c, 1.0), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        new_r = np.where(lin & stoch[:, None], d[:, None] / np.where(lin, y.L, 1.0), 0.0)
        new_l = np.where(rec & stoch[:, None], d[:, None] / np.where(rec, y.R, 1.0), 0.0)
    return NumericLanes(c, new_l, new_r, y.src)


def take(x: NumericLanes, idx: IntArray) -> NumericLanes:
    if x.seg is None:
        return NumericLanes(x.c[idx], x.L[idx], x.R[idx], x.src)
    assert x.sign is not None
    sizes = x.sizes()[idx]
    starts = x.seg[:-1][idx]
    total = int(sizes.sum())
    first = np.cumsum(sizes) - sizes
    atom = np.repeat(starts, sizes) + (np.arange(total) - np.repeat(first, sizes))
    seg = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return NumericLanes(x.c[atom], x.L[atom], x.R[atom], x.src, seg, x.sign[idx])


def concat(values: Sequence[Value]) -> NumericLanes:
    like = next(v for v in values if isinstance(v, NumericLanes))
    parts = [v if isinstance(v, NumericLanes) else _lift(np.asarray(v), like) for v in values]
    c = np.concatenate([p.c for p in parts])
    L = np.vstack([p.L for p in parts])
    R = np.vstack([p.R for p in parts])
    if all(p.plain for p in parts):
        return NumericLanes(c, L, R, like.src)
    segs = [p.segmented() for p in parts]
    offsets = np.cumsum([0] + [p.c.shape[0] for p in segs[:-1]])
    seg = np.concatenate(
        [s.seg[:-1] + o for s, o in zip(segs, offsets, strict=True) if s.seg is not None]
        + [np.array([c.shape[0]])]
    ).astype(np.int64)
    sign = np.concatenate([s.sign for s in segs if s.sign is not None])
    return NumericLanes(c, L, R, like.src, seg, sign)


def reduce(op: str, x: NumericLanes, starts: IntArray) -> Value:
    """Sum or max over contiguous lane groups beginning at ``starts``."""
    if op == "sum":
        if not x.plain:
            raise HandOver("a sum over max values")
        return _norm(
            NumericLanes(
                np.add.reduceat(x.c, starts),
                np.add.reduceat(x.L, starts, axis=0),
                np.add.reduceat(x.R, starts, axis=0),
                x.src,
            )
        )
    ends = np.append(starts[1:], x.m)
    if np.all(ends - starts == 1):
        return take(x, starts)
    s = x.segmented()
    assert s.seg is not None and s.sign is not None
    group = np.repeat(np.arange(starts.size), ends - starts)
    single = (ends - starts == 1)[group]
    if np.any((s.sign < 0) & ~single):
        raise HandOver("a max over values that include a min")
    seg = np.append(s.seg[starts], s.seg[-1]).astype(np.int64)
    sign = np.where(ends - starts == 1, s.sign[starts], 1.0)
    uses = ((s.L != 0) | (s.R != 0)).astype(np.int64)
    if uses.shape[1] and np.any(np.add.reduceat(uses, seg[:-1], axis=0) > 1):
        raise HandOver("a max over values that share an input")
    return _norm(NumericLanes(s.c, s.L, s.R, s.src, seg, sign))


# ======================================================================= results


class NumResult:
    """Distributions of the lanes of a :class:`NumericLanes`, computed lazily and shared:
    plain lanes' moments and quantiles are computed for all lanes at once (a
    64-host prediction reports 64 intervals), a max lane's grid on first use."""

    def __init__(self, x: NumericLanes) -> None:
        s = x.segmented()
        assert s.seg is not None and s.sign is not None
        self.atoms = Atoms(x.src, s.c, s.L, s.R)
        self.seg = s.seg
        self.sign = s.sign
        self.single = np.diff(self.seg) == 1
        stoch_atoms = (self.atoms.nterms > 0).astype(np.int64)
        self.det = np.add.reduceat(stoch_atoms, self.seg[:-1]) == 0
        self._moments: tuple[FloatArray, FloatArray] | None = None
        self._grids: dict[int, Grid] = {}
        self._quantiles: dict[tuple[float, ...], FloatArray] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # Results travel between processes (what-if sweeps spread over workers): the lock
        # stays behind, the caches computed so far go along.
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def m(self) -> int:
        return int(self.seg.shape[0] - 1)

    def atom_range(self, j: int) -> IntArray:
        return np.arange(self.seg[j], self.seg[j + 1], dtype=np.int64)

    def is_det(self, j: int) -> bool:
        return bool(self.det[j])

    def det_value(self, j: int) -> float:
        """The value of a deterministic lane."""
        return float(self.sign[j] * self.atoms.c[self.atom_range(j)].max())

    def grid(self, j: int) -> Grid:
        with self._lock:
            g = self._grids.get(j)
            if g is None:
                g = max_grid(self.atoms, self.atom_range(j))
                if self.sign[j] < 0:
                    g = g.reflected()
                self._grids[j] = g
            return g

    def _plain_moments(self) -> tuple[FloatArray, FloatArray]:
        if self._moments is None:
            first = self.seg[:-1]
            mean, var = self.atoms.moments(first)
            self._moments = (self.sign * mean, var)
        return self._moments

    def mean(self, j: int) -> float:
        if self.single[j]:
            return float(self._plain_moments()[0][j])
        return self.grid(j).mean_var()[0]

    def var(self, j: int) -> float:
        if self.single[j]:
            return float(self._plain_moments()[1][j])
        return self.grid(j).mean_var()[1]

    def cdf(self, j: int, x: Any) -> Any:
        xa = np.asarray(x, dtype=np.float64)
        flat = xa.reshape(1, -1)
        idx = self.atom_range(j)
        if self.sign[j] > 0:
            out = self.atoms.cdf(idx, np.broadcast_to(flat, (idx.size, flat.shape[1])))
            res = out.prod(axis=0)
        else:
            res = self.grid(j).cdf(flat[0])
        res = res.reshape(xa.shape)
        return float(res) if res.ndim == 0 else res

    def ppf(self, j: int, q: Any) -> Any:
        qa = np.asarray(q, dtype=np.float64)
        if self.single[j]:
            flat = qa.reshape(1, -1)
            if self.sign[j] > 0:
                res = self.atoms.ppf(self.atom_range(j), flat)[0]
            else:
                res = -self.atoms.ppf(self.atom_range(j), 1.0 - flat)[0]
            res = np.where((flat[0] < 0) | (flat[0] > 1), np.nan, res)
        else:
            res = self.grid(j).ppf(qa.ravel())
        res = np.asarray(res).reshape(qa.shape)
        return float(res) if res.ndim == 0 else res

    def quantiles_all(self, levels: tuple[float, ...]) -> FloatArray:
        """``(m, len(levels))`` quantiles of every one-atom lane (others: nan), all
        lanes and levels in one vectorised pass, cached per set of levels."""
        with self._lock:
            hit = self._quantiles.get(levels)
        if hit is not None:
            return hit
        q = np.asarray(levels, dtype=np.float64)[None, :]
        out = np.full((self.m, q.shape[1]), np.nan)
        lanes = np.flatnonzero(self.single)
        if lanes.size:
            atoms = self.seg[lanes]
            pos = self.sign[lanes] > 0
            level = np.where(pos[:, None], q, 1.0 - q)
            out[lanes] = self.sign[lanes, None] * self.atoms.ppf(atoms, level)
        with self._lock:
            self._quantiles[levels] = out
        return out

    def _values(self, j: int, x: FloatArray, cols: IntArray) -> FloatArray:
        idx = self.atom_range(j)
        vals = self.atoms.values(idx, x, cols)
        out: FloatArray = self.sign[j] * vals.max(axis=0)
        return out

    def rvs(self, j: int, n: int, rng: np.random.Generator) -> FloatArray:
        """Exact independent draws: the inputs are drawn, then combined."""
        a = int(self.seg[j])
        if self.single[j] and self.atoms.nterms[a] == 1:  # the common case, kept cheap
            si = int(self.atoms.tsi[a, 0])
            x = self.atoms.src.rvs(np.array([si]), n, rng)[0]
            L, R = float(self.atoms.tL[a, 0]), float(self.atoms.tR[a, 0])
            out: FloatArray = (R / x) if R != 0 else (L * x)
            out += self.atoms.c[a]
            return self.sign[j] * out if self.sign[j] < 0 else out
        cols = self.atoms.columns(self.atom_range(j))
        x = self.atoms.src.rvs(cols, n, rng)
        return self._values(j, x, cols)

    def draw(self, j: int, space: Any) -> FloatArray:
        """Draws in a Monte Carlo space, aligned with the inputs' own draws there."""
        cols = self.atoms.columns(self.atom_range(j))
        x = self.atoms.src.draw(cols, space)
        return self._values(j, x, cols)
