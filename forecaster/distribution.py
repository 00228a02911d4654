"""Distribution of recent values: point, normal, or Gaussian mixture when the series switches modes.

BIC alone over-fits CPU traces: availability is clipped at 0.01 and 1, so saturated or idle
stretches form near-point masses that a narrow extra component "explains" for a large likelihood
gain, and BIC picks K = 3 or 4 on almost every trace, steady ones included. So the mixture BIC
chooses is then *consolidated* before we call a series multi-mode:

1. data are standardised and components may not be narrower than 1 % of the series' spread
   (``reg_covar``), so a clipped plateau cannot become an infinitely likely spike;
2. components lighter than ``min_weight`` (5 %) are folded into their nearest neighbour --
   a mode the host spends less than 5 % of its time in is an excursion, not a mode;
3. neighbouring components that are not clearly apart are merged by moment matching. "Apart"
   means both Ashman's D >= 2 (the usual bimodality threshold: the mixture of two normals has two
   peaks) and a relative gap ``|mu1 - mu2| / max(|mu1|, |mu2|) >= 0.25`` -- a 25 % difference in
   delivered speed; closer levels do not change a schedule enough to be worth two modes.

A series is multi-mode when two or more components survive; its distribution is then that
consolidated mixture, otherwise a normal with the sample mean and standard deviation (or a point
when the relative spread is below ``point_rtol``).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from threadpoolctl import ThreadpoolController

from forecaster.history import FloatArray

Kind = Literal["point", "normal", "mixture"]
Component = tuple[float, float, float]  # (weight, mean, std)


def clip(v: float, bounds: tuple[float, float] | None) -> float:
    """``v`` inside ``bounds`` (unchanged without them)."""
    if bounds is None:
        return v
    return min(max(v, bounds[0]), bounds[1])


@dataclass(frozen=True)
class Distribution:
    """A fitted distribution in docs/architecture.md's shape, plus how it was chosen.

    Plain data, not a ``Stochastic`` (``mean`` and ``std`` are fields, not methods): consumers
    build their own values from ``kind`` and ``components`` (``ppe.core.from_components``).
    """

    kind: Kind
    components: list[Component]
    mean: float
    std: float
    multimode: bool
    n: int
    bic: dict[int, float] = field(default_factory=dict)
    #: Horizon fits by analogues: how many analogues of the present had the whole horizon after
    #: them, and whether the fit fell back ("blend", "unconditional") for want of them.
    support: int | None = None
    fallback: str | None = None
    #: How many outcomes of other hosts a fallback borrowed (:mod:`forecaster.fleet`); None when
    #: it borrowed none.
    fleet: int | None = None

    @functools.cached_property
    def _arrays(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Weights, means and deviations as arrays, made once: quantile solves call ``cdf``
        dozens of times on mixtures of dozens of kernels."""
        w, mu, sd = (np.array(c, dtype=np.float64) for c in zip(*self.components, strict=True))
        return w, mu, np.maximum(sd, 1e-300)

    def cdf(self, x: float | FloatArray) -> FloatArray:
        xs = np.asarray(x, dtype=np.float64)
        if self.kind == "point":
            return (xs >= self.mean).astype(np.float64)
        w, mu, sd = self._arrays
        z = (xs[..., None] - mu) / sd
        out: FloatArray = ndtr(z) @ w
        return out

    def ppf(self, q: float) -> float:
        """Quantile; mixtures (analog horizon fits have dozens of kernels) by Brent's method."""
        if not 0.0 < q < 1.0:
            raise ValueError("q must be in (0, 1)")
        if self.kind == "point":
            return self.mean
        if self.kind == "normal":
            return float(norm.ppf(q, self.mean, self.std))
        lo = min(mu - 10 * sd for _, mu, sd in self.components)
        hi = max(mu + 10 * sd for _, mu, sd in self.components)
        scale = max(abs(lo), abs(hi), 1e-300)
        return float(brentq(lambda x: float(self.cdf(x)) - q, lo, hi, xtol=1e-13 * scale))

    def interval(
        self, confidence: float = 0.95, bounds: tuple[float, float] | None = None
    ) -> tuple[float, float]:
        """Central interval, like scipy's ``interval``; with ``bounds``, the shortest interval
        holding ``confidence`` of the value censored to them.

        A metric that cannot leave its range (availability in [0, 1]) piles the mass beyond a
        bound onto the bound itself: an idle host's next mean is often exactly 1. Once that
        atom holds more than the upper tail, a central interval ends at the bound and holds
        97.5 %, not 95 %; the shortest one moves its lower end up instead, and is what a
        client reading "95 %" expects. Far from the bounds it is the central interval of a
        symmetric distribution.
        """
        if self.kind == "point":
            at = clip(self.mean, bounds)
            return (at, at)
        if not 0.0 < confidence < 1.0:
            raise ValueError("confidence must be in (0, 1)")
        key = (confidence, bounds)
        known = self._intervals.get(key)
        if known is None:
            if bounds is None:
                tail = (1.0 - confidence) / 2.0
                known = (self.ppf(tail), self.ppf(1.0 - tail))
            else:
                known = _shortest_censored(self, confidence, bounds)
            self._intervals[key] = known
        return known

    @functools.cached_property
    def _intervals(self) -> dict[tuple[float, tuple[float, float] | None], tuple[float, float]]:
        """Intervals solved so far, by confidence and bounds: a warm forecast (the distribution
        from the fit cache) asks for the same one again, and solving it was 80 % of its cost."""
        return {}

    @functools.cached_property
    def _censored_tables(self) -> dict[tuple[float, float], _CensoredTable | None]:
        """Censored CDF tables by bounds: intervals at several confidences share one."""
        return {}

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "components": [{"weight": w, "mean": m, "std": s} for w, m, s in self.components],
        }


#: Lower-tail shares tried by :func:`_shortest_censored`: the spare probability in 200 steps,
#: the central split among them.
_SPLITS = 200
#: Points of the censored CDF's table: evenly over the range, and around every component
#: (in its own standard deviations), so that a narrow mode is resolved however wide the range.
_CDF_GRID = 129
_AROUND = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])


@dataclass(frozen=True, eq=False)
class _CensoredTable:
    """The CDF of a distribution censored to a range, tabulated where its mass is: ``xs``
    from the range's low end to its high end (that end twice, the table's last step being the
    atom above the range) and ``table`` the CDF there. ``low_atom``/``high_atom``: whether that
    range's edge is a bound with mass on it, the only case where an interval may end at an
    edge by choice."""

    xs: FloatArray
    table: FloatArray
    low_atom: bool
    high_atom: bool


def _censored_table(dist: Distribution, bounds: tuple[float, float]) -> _CensoredTable | None:
    """:class:`_CensoredTable` of ``dist`` censored to ``bounds`` (either may be infinite); None
    when everything lies beyond one bound."""
    if not bounds[0] < bounds[1]:
        raise ValueError("bounds must be increasing")
    _, mu, sd = dist._arrays
    lo = max(bounds[0], float(np.min(mu - 10 * sd)))
    hi = min(bounds[1], float(np.max(mu + 10 * sd)))
    if not lo < hi:
        return None
    around = (mu[:, None] + sd[:, None] * _AROUND).ravel()
    grid = np.unique(np.clip(np.concatenate((np.linspace(lo, hi, _CDF_GRID), around)), lo, hi))
    cdf = dist.cdf(grid)
    return _CensoredTable(
        xs=np.append(grid, hi),
        table=np.append(cdf, 1.0),
        low_atom=lo == bounds[0] and cdf[0] > 0.0,
        high_atom=hi == bounds[1] and cdf[-1] < 1.0,
    )


def _shortest_censored(
    dist: Distribution, confidence: float, bounds: tuple[float, float]
) -> tuple[float, float]:
    """The shortest ``[Q(a), Q(a + confidence)]`` of ``dist`` censored to ``bounds``.

    The lower-tail share ``a`` is chosen from the CDF tabulated where the mass is (one table
    per bounds, whatever the confidence); the ends of that split and of the central one are
    then solved exactly and the shorter kept (the central on ties), so the answer is never
    wider than the central interval.
    """
    tables = dist._censored_tables
    if bounds not in tables:
        tables[bounds] = _censored_table(dist, bounds)
    t = tables[bounds]
    if t is None:  # everything lies beyond one bound
        at = clip(dist.mean, bounds)
        return (at, at)
    spare = 1.0 - confidence
    a = spare * np.arange(_SPLITS + 1) / _SPLITS
    widths = np.interp(a + confidence, t.table, t.xs) - np.interp(a, t.table, t.xs)
    if not t.low_atom:
        widths[0] = np.inf
    if not t.high_atom:
        widths[-1] = np.inf
    central = _SPLITS // 2
    best = int(np.argmin(widths))
    c_lo, c_hi = (_censored_ppf(dist, float(q), t.xs, t.table) for q in (spare / 2, 1 - spare / 2))
    if best == central:
        return (c_lo, c_hi)
    b_lo, b_hi = (
        _censored_ppf(dist, float(q), t.xs, t.table) for q in (a[best], a[best] + confidence)
    )
    if b_hi - b_lo < (c_hi - c_lo) - 1e-12 * (t.xs[-1] - t.xs[0]):
        return (b_lo, b_hi)
    return (c_lo, c_hi)


def _censored_ppf(dist: Distribution, q: float, xs: FloatArray, table: FloatArray) -> float:
    """Smallest x in the range with censored CDF >= q, solved inside the table's cell."""
    if q <= table[0]:
        return float(xs[0])
    if q >= table[-2]:  # the CDF at the range's end: beyond is the atom there
        return float(xs[-1])
    if dist.kind == "normal":
        return dist.ppf(q)
    i = int(np.searchsorted(table, q, side="left"))
    left, right = float(xs[i - 1]), float(xs[i])
    # The table and a single evaluation may round apart at a cell's ends.
    if float(dist.cdf(left)) >= q:
        return left
    if float(dist.cdf(right)) <= q:
        return right
    return float(brentq(lambda x: float(dist.cdf(x)) - q, left, right, xtol=1e-12))


@dataclass(frozen=True)
class FitOptions:
    """Knobs of :func:`fit_distribution`; defaults and their reasons are in the module docstring."""

    max_components: int = 4
    min_weight: float = 0.05
    min_ashman_d: float = 2.0
    min_relative_gap: float = 0.25
    point_rtol: float = 1e-3
    reg_covar: float = 1e-4
    #: mixtures are fitted on at most this many evenly spaced values (mean and std use all).
    max_fit_samples: int = 2000
    seed: int = 0


DEFAULT_FIT = FitOptions()


def fit_distribution(
    values: Sequence[float] | FloatArray, options: FitOptions | None = None
) -> Distribution:
    """Fit recent values as a point, a normal, or (multi-mode) a Gaussian mixture."""
    opts = options or DEFAULT_FIT
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        raise ValueError("no finite values to fit")
    mean = float(x.mean())
    std = float(x.std())
    if n < 2 or std <= opts.point_rtol * max(abs(mean), 1e-12):
        return Distribution("point", [(1.0, mean, 0.0)], mean, 0.0, False, n)
    bic, best = _bic_fits(x, mean, std, opts)
    comps = consolidate(best, opts)
    if len(comps) < 2:
        return Distribution("normal", [(1.0, mean, std)], mean, std, False, n, bic)
    return Distribution("mixture", comps, mean, std, True, n, bic)


@functools.cache
def _threadpools() -> ThreadpoolController:
    """Found once: scanning the loaded BLAS/OpenMP libraries costs more than a small fit."""
    return ThreadpoolController()


def _bic_fits(
    x: FloatArray, mean: float, std: float, opts: FitOptions
) -> tuple[dict[int, float], list[Component]]:
    """GaussianMixture, K = 1..max, on standardised data: BIC per K and the best K's components."""
    if x.size > opts.max_fit_samples:
        x = x[np.linspace(0, x.size - 1, opts.max_fit_samples).round().astype(np.intp)]
    z = ((x - mean) / std)[:, None]
    max_k = max(1, min(opts.max_components, np.unique(x).size, x.size // 10 or 1))
    bic: dict[int, float] = {}
    best: list[Component] = [(1.0, mean, std)]
    best_bic = math.inf
    for k in range(1, max_k + 1):
        gm = GaussianMixture(k, reg_covar=opts.reg_covar, random_state=opts.seed)
        # One thread: on a 1-D problem of 2000 points, OpenMP/BLAS threads cost far more than
        # they save (about 20x slower on a busy 2-core host).
        with warnings.catch_warnings(), _threadpools().limit(limits=1):
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm.fit(z)
        # BIC of the data in original units (the standardisation Jacobian is the same for every K).
        bic[k] = float(gm.bic(z)) + 2.0 * x.size * math.log(std)
        if bic[k] < best_bic:
            best_bic = bic[k]
            best = [
                (float(w), mean + std * float(m[0]), std * math.sqrt(float(c.ravel()[0])))
                for w, m, c in zip(gm.weights_, gm.means_, gm.covariances_, strict=True)
            ]
    return bic, best


def _merge(a: Component, b: Component) -> Component:
    """Moment-matched merge of two components (keeps total weight, mean and variance)."""
    w = a[0] + b[0]
    mu = (a[0] * a[1] + b[0] * b[1]) / w
    second = (a[0] * (a[2] ** 2 + a[1] ** 2) + b[0] * (b[2] ** 2 + b[1] ** 2)) / w
    return (w, mu, math.sqrt(max(second - mu * mu, 0.0)))


def _ashman_d(a: Component, b: Component) -> float:
    spread = math.sqrt((a[2] ** 2 + b[2] ** 2) / 2.0)
    return math.inf if spread == 0 else abs(a[1] - b[1]) / spread


def _relative_gap(a: Component, b: Component) -> float:
    scale = max(abs(a[1]), abs(b[1]))
    return math.inf if scale == 0 else abs(a[1] - b[1]) / scale


def consolidate(components: Sequence[Component], opts: FitOptions | None = None) -> list[Component]:
    """Fold light components into neighbours and merge modes that are not clearly apart."""
    o = opts or DEFAULT_FIT
    comps = sorted(components, key=lambda c: c[1])
    while len(comps) > 1:
        light = min(range(len(comps)), key=lambda i: comps[i][0])
        if comps[light][0] < o.min_weight:
            j = _nearest(comps, light)
            merged = _merge(comps[light], comps[j])
            comps = [c for i, c in enumerate(comps) if i not in (light, j)] + [merged]
            comps.sort(key=lambda c: c[1])
            continue
        pairs = [
            (i, _ashman_d(comps[i], comps[i + 1]))
            for i in range(len(comps) - 1)
            if _ashman_d(comps[i], comps[i + 1]) < o.min_ashman_d
            or _relative_gap(comps[i], comps[i + 1]) < o.min_relative_gap
        ]
        if not pairs:
            break
        i = min(pairs, key=lambda p: p[1])[0]
        comps = [*comps[:i], _merge(comps[i], comps[i + 1]), *comps[i + 2 :]]
    return comps


def _nearest(comps: Sequence[Component], i: int) -> int:
    others = [j for j in range(len(comps)) if j != i]
    return min(others, key=lambda j: abs(comps[j][1] - comps[i][1]))


def mixed(a: Distribution, b: Distribution, weight: float = 0.5) -> Distribution:
    """``weight`` of ``a`` and the rest of ``b`` as one mixture (``a``'s quality labels kept)."""
    comps = [(weight * w, m, s) for w, m, s in a.components] + [
        ((1 - weight) * w, m, s) for w, m, s in b.components
    ]
    mean = weight * a.mean + (1 - weight) * b.mean
    var = sum(w * (s * s + (m - mean) ** 2) for w, m, s in comps)
    return Distribution(
        "mixture",
        comps,
        mean,
        float(np.sqrt(var)),
        False,
        a.n,
        support=a.support,
        fallback=a.fallback,
        fleet=a.fleet,
    )
