"""Analytic engine: normal approximations in canonical (linear) form.

A value is kept as ``mu + sum_s a_s W_s`` over independent, standardised
*sources* ``W_s`` (the "canonical form" of statistical static timing analysis).
Sources are global integer ids: an input ``Normal(mu, sigma)`` owns one normal
source, so values that share an input are correlated exactly and ``x - x == 0``.
Each source also has a third cumulant ``g_s`` (0 for normal inputs): the
non-linear steps below put their result's skewness on the fresh source they
create, so the third cumulant of any linear combination, ``sum a_s^3 g_s``, is
right for sums and scalings - including ``RComp + BComp`` sharing one input.

:class:`Lin` is that form for ``m`` lanes at once (one lane per host when the
grammar evaluator works over hosts): ``mu`` is ``(m,)``, ``A`` is ``(m, S)`` over
the source ids ``ids``, ``g`` is ``(S,)``.

Rules (each formula lives here and only here):

* sums and scalings: exact;
* reciprocal ``1/X`` (and so any quotient): delta method carried to higher order
  in ``c = sigma/mu``: ``E = (1 + c^2 + 3c^4 + 15c^6)/mu``,
  ``Var = (c^2 + 8c^4 + 69c^6 + 696c^8)/mu^2``, third cumulant
  ``(6c^4 + 116c^6 + 1872c^8)/mu^3``; the result keeps the statistical
  linearisation slope ``cov(1/X, X)/Var(X) = -(1 + 3c^2 + 15c^4)/mu^2`` on X's
  sources plus an independent remainder.  Valid while ``c <= DELTA_MAX_CV``
  (0.1): there mean and std are exact to <0.05 % and a normal summary puts the
  95 % interval ends within ~4 % of the true (right-skewed) ones.  Beyond it the
  "auto" engine hands over to Monte Carlo (:class:`HandOver`);
* product: exact mean, variance and third cumulant for jointly normal factors;
  hands over when the product's skewness exceeds ``MAX_SKEW`` (0.6, the
  skewness of ``1/X`` at ``c = 0.1``);
* max over *independent* lanes (no shared source): exact moments of the max of
  independent variables whose marginals are fitted on mean, std and skewness
  (shifted lognormal; normal when unskewed), from the product of their CDFs on a
  grid.  Pairwise Clark chaining would lose ~30 % of the std for 64 equal-mean
  hosts - a time-balanced schedule is exactly that case - and ignoring the
  hosts' skewness another ~20 %;
* max of two *correlated* normals: Clark (1961), exact in mean and variance;
* max over more than two correlated lanes: pairwise Clark, but the "auto"
  engine hands over to Monte Carlo instead.

Every non-linear result keeps ``cov(result, W_s)`` for each source (the
delta-method slopes; Stein's lemma's tightness weights for a max) and adds a
fresh independent source for the rest of its variance and skewness.  Public
results are reported as normals (mean and std from here); the skewness is used
internally where it matters most, in the max.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import integrate, special

from .errors import StochasticError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Largest sigma/mu of a divisor for which the auto engine stays analytic.
DELTA_MAX_CV = 0.1
#: Above this sigma/mu even a forced analytic quotient is refused (series diverges).
HARD_MAX_CV = 0.3
#: Largest skewness of a product the auto engine accepts as "normal enough".
MAX_SKEW = 0.6
#: Grid sizes (coarse search, fine Simpson grid) for the exact max of independent normals.
MAX_COARSE = 49
MAX_GRID = 129
#: Half-width of the integration range, in standard deviations.
MAX_SPAN_SIGMAS = 8.5
#: A lane narrower than this many fine-grid steps gets points of its own, every quarter sigma.
NARROW_STEPS = 4.0
LOCAL_Z = np.linspace(-MAX_SPAN_SIGMAS, MAX_SPAN_SIGMAS, 69)
#: Below this |skewness| a lane's marginal is taken as normal in the max.
SKEW_EPS = 0.01

_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


class HandOver(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a strict analytic operation whose approximation would be poor."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_id_lock = threading.Lock()
_next_id = 1


def new_source_id() -> int:
    """One fresh, globally unique id (every stochastic value takes one)."""
    global _next_id
    with _id_lock:
        out = _next_id
        _next_id += 1
    return out


def new_source_ids(k: int) -> IntArray:
    """Allocate ``k`` fresh, globally unique source ids (increasing)."""
    global _next_id
    with _id_lock:
        start = _next_id
        _next_id += k
    return np.arange(start, start + k, dtype=np.int64)


@dataclass(eq=False)
class Lin:
    """``m`` lanes of canonical normal forms ``mu + A @ Z[ids]``."""

    mu: FloatArray
    ids: IntArray
    A: FloatArray
    g: FloatArray
    base: Lin | None = None
    base_idx: IntArray | None = None
    cache: dict[str, Lin] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.mu.shape[0])

    def var(self) -> FloatArray:
        return np.einsum("ij,ij->i", self.A, self.A)

    def std(self) -> FloatArray:
        return np.sqrt(self.var())

    def kappa3(self) -> FloatArray:
        """Third cumulant of each lane."""
        cols = np.flatnonzero(self.g)
        if cols.size == 0:
            return np.zeros(self.m)
        a = self.A[:, cols]
        return (a * a * a) @ self.g[cols]

    def skew(self) -> FloatArray:
        sd3 = self.std() ** 3
        return np.divide(self.kappa3(), sd3, out=np.zeros(self.m), where=sd3 > 1e-300)


def lin_const(values: FloatArray) -> Lin:
    """Deterministic lanes as a :class:`Lin` with no sources."""
    v = np.asarray(values, dtype=np.float64)
    return Lin(v.copy(), np.zeros(0, dtype=np.int64), np.zeros((v.shape[0], 0)), np.zeros(0))


def take(x: Lin, idx: IntArray) -> Lin:
    """Lanes ``idx`` of ``x``; remembers the origin so reciprocals stay shared."""
    root = x.base if x.base is not None else x
    root_idx = x.base_idx[idx] if x.base_idx is not None else idx
    return Lin(x.mu[idx], x.ids, x.A[idx], x.g, base=root, base_idx=root_idx)


def _expand(x: Lin, ids: IntArray) -> FloatArray:
    if x.ids.size == ids.size:
        return x.A
    out = np.zeros((x.m, ids.size))
    if x.ids.size:
        out[:, np.searchsorted(ids, x.ids)] = x.A
    return out


def _union_g(parts: list[Lin], ids: IntArray) -> FloatArray:
    g = np.zeros(ids.size)
    for p in parts:
        if p.ids.size and np.any(p.g):
            g[np.searchsorted(ids, p.ids)] = p.g
    return g


def align(x: Lin, y: Lin) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
    """Common source ids, both coefficient matrices over them, and the ids' g."""
    if x.ids is y.ids or (x.ids.shape == y.ids.shape and np.array_equal(x.ids, y.ids)):
        return x.ids, x.A, y.A, x.g
    ids = np.union1d(x.ids, y.ids)
    return ids, _expand(x, ids), _expand(y, ids), _union_g([x, y], ids)


def concat(parts: list[Lin]) -> Lin:
    """Stack lanes of several values."""
    ids = parts[0].ids
    g = parts[0].g
    if any(not np.array_equal(p.ids, ids) for p in parts[1:]):
        ids = np.unique(np.concatenate([p.ids for p in parts]))
        g = _union_g(parts, ids)
    return Lin(
        np.concatenate([p.mu for p in parts]),
        ids,
        np.vstack([_expand(p, ids) for p in parts]),
        g,
    )


def with_residual(
    mu: FloatArray,
    ids: IntArray,
    A: FloatArray,
    g: FloatArray,
    resid_var: FloatArray,
    resid_k3: FloatArray | None = None,
) -> Lin:
    """Append one fresh independent source per lane carrying ``resid_var`` and the
    third cumulant ``resid_k3`` the kept terms do not explain."""
    resid = np.sqrt(np.maximum(resid_var, 0.0))
    lanes = np.flatnonzero(resid > 0)
    if lanes.size == 0:
        return Lin(mu, ids, A, g)
    new = new_source_ids(lanes.size)
    extra = np.zeros((mu.shape[0], lanes.size))
    extra[lanes, np.arange(lanes.size)] = resid[lanes]
    new_g = np.zeros(lanes.size)
    if resid_k3 is not None:
        r3 = resid[lanes] ** 3
        new_g = np.divide(resid_k3[lanes], r3, out=new_g, where=r3 > 1e-300)
        new_g[~np.isfinite(new_g)] = 0.0
    return Lin(mu, np.concatenate([ids, new]), np.hstack([A, extra]), np.concatenate([g, new_g]))


# --------------------------------------------------------------------------- linear


def add(x: Lin, y: Lin) -> Lin:
    ids, ax, ay, g = align(x, y)
    return Lin(x.mu + y.mu, ids, ax + ay, g)


def sub(x: Lin, y: Lin) -> Lin:
    ids, ax, ay, g = align(x, y)
    return Lin(x.mu - y.mu, ids, ax - ay, g)


def neg(x: Lin) -> Lin:
    return Lin(-x.mu, x.ids, -x.A, x.g)


def scale(x: Lin, c: FloatArray) -> Lin:
    return Lin(x.mu * c, x.ids, x.A * c[:, None], x.g)


def shift(x: Lin, c: FloatArray) -> Lin:
    return Lin(x.mu + c, x.ids, x.A, x.g)


# ------------------------------------------------------------------ reciprocal


def recip_moments(
    mu: FloatArray, sigma: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Mean, variance, third cumulant and regression slope on X of ``1/X`` for
    ``X ~ N(mu, sigma)``: the asymptotic series in ``c = sigma/mu`` (higher-order
    delta method).  Slope = ``cov(1/X, X) / Var(X)``."""
    inv = 1.0 / mu
    c2 = (sigma * inv) ** 2
    mean = inv * (1.0 + c2 * (1.0 + c2 * (3.0 + 15.0 * c2)))
    var = inv**2 * c2 * (1.0 + c2 * (8.0 + c2 * (69.0 + 696.0 * c2)))
    k3 = inv**3 * c2**2 * (6.0 + c2 * (116.0 + 1872.0 * c2))
    slope = -(inv**2) * (1.0 + c2 * (3.0 + 15.0 * c2))
    return mean, var, k3, slope


def recip(x: Lin, strict: bool) -> Lin:
    """``1 / x`` lane-wise; cached on the value's origin so that every quotient by
    the same input shares one remainder source (RComp and BComp stay fully
    correlated, as they are under Monte Carlo)."""
    if x.base is not None and x.base_idx is not None:
        return take(recip(x.base, strict), x.base_idx)
    key = "recip-strict" if strict else "recip"
    cached = x.cache.get(key)
    if cached is not None:
        return cached
    sigma = x.std()
    if np.any(x.mu == 0):
        raise StochasticError("division by a value whose mean is zero")
    cv = sigma / np.abs(x.mu)
    worst = float(cv.max()) if cv.size else 0.0
    if strict and worst > DELTA_MAX_CV:
        raise HandOver(
            f"divisor with sigma/mu = {worst:.3g} > {DELTA_MAX_CV} (delta method too coarse)"
        )
    if worst > HARD_MAX_CV:
        raise StochasticError(
            f"analytic engine cannot divide by a normal with sigma/mu = {worst:.3g} "
            f"(> {HARD_MAX_CV}); use the Monte Carlo engine"
        )
    mean, var, k3, slope = recip_moments(x.mu, sigma)
    coef = x.A * slope[:, None]
    out = with_residual(mean, x.ids, coef, x.g, var - slope**2 * sigma**2, k3)
    x.cache[key] = out
    return out


# --------------------------------------------------------------------- product


def mul(x: Lin, y: Lin, strict: bool) -> Lin:
    """``x * y`` lane-wise: exact mean, variance and third cumulant when the
    factors are jointly normal (their own skewness passes through the slopes)."""
    ids, ax, ay, g = align(x, y)
    vx = np.einsum("ij,ij->i", ax, ax)
    vy = np.einsum("ij,ij->i", ay, ay)
    cxy = np.einsum("ij,ij->i", ax, ay)
    mx, my = x.mu, y.mu
    k3 = 6.0 * (mx * cxy + my * vx) * (mx * vy + my * cxy) + 6.0 * vx * vy * cxy + 2.0 * cxy**3
    var = mx**2 * vy + my**2 * vx + 2.0 * mx * my * cxy + vx * vy + cxy**2
    if strict:
        skew = np.divide(np.abs(k3), var**1.5, out=np.zeros_like(var), where=var > 0)
        worst = float(skew.max()) if skew.size else 0.0
        if worst > MAX_SKEW:
            raise HandOver(f"product with skewness {worst:.3g} > {MAX_SKEW}")
    coef = ax * my[:, None] + ay * mx[:, None]
    return with_residual(mx * my + cxy, ids, coef, g, vx * vy + cxy**2, k3)


# ------------------------------------------------------------------------ max


def clark_moments(
    mx: FloatArray, vx: FloatArray, my: FloatArray, vy: FloatArray, cxy: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Clark's mean, variance and tightness ``T = P(X > Y)`` of ``max(X, Y)``.

    Written around the midpoint of the two means so the variance does not cancel
    catastrophically; pairs with ``Var(X - Y) = 0`` take the larger mean.
    """
    a = np.sqrt(np.maximum(vx + vy - 2.0 * cxy, 0.0))
    size = np.abs(mx) + np.abs(my) + np.sqrt(vx) + np.sqrt(vy)
    degenerate = a <= 1e-12 * np.maximum(size, 1e-300)
    safe_a = np.where(degenerate, 1.0, a)
    d = mx - my
    alpha = d / safe_a
    t = np.where(degenerate, (d >= 0).astype(np.float64), special.ndtr(alpha))
    phi = np.where(degenerate, 0.0, np.exp(-0.5 * alpha**2) / _SQRT_2PI)
    a = np.where(degenerate, 0.0, a)
    mean = my + d * t + a * phi
    var = 0.25 * d**2 + vx * t + vy * (1.0 - t) - (d * (t - 0.5) + a * phi) ** 2
    var = np.where(degenerate, np.where(d >= 0, vx, vy), np.maximum(var, 0.0))
    return mean, var, t


def max2(x: Lin, y: Lin) -> Lin:
    """Lane-wise ``max(x, y)`` by Clark's formulas (exact first two moments)."""
    ids, ax, ay, g = align(x, y)
    vx = np.einsum("ij,ij->i", ax, ax)
    vy = np.einsum("ij,ij->i", ay, ay)
    cxy = np.einsum("ij,ij->i", ax, ay)
    mean, var, t = clark_moments(x.mu, vx, y.mu, vy, cxy)
    coef = ax * t[:, None] + ay * (1.0 - t)[:, None]
    return with_residual(mean, ids, coef, g, var - np.einsum("ij,ij->i", coef, coef))


def independent_lanes(x: Lin) -> bool:
    """True when no source is shared by two lanes (lanes mutually independent)."""
    if x.ids.size == 0 or x.m < 2:
        return True
    return bool(np.all(np.count_nonzero(x.A, axis=0) <= 1))


def marginal_cdf_pdf(
    t: FloatArray, mu: FloatArray, sd: FloatArray, skew: FloatArray, pdf: bool = True
) -> tuple[FloatArray, FloatArray | None]:
    """CDF (and density) on ``t`` of lanes fitted on (mean, std, skewness):
    normal when ``|skew| < SKEW_EPS``, else a shifted (mirrored for negative
    skew) lognormal.  Shapes: lanes ``(k, 1)``, ``t`` ``(G,)`` -> ``(k, G)``."""
    k = mu.shape[0]
    cdf = np.empty((k, t.shape[0]))
    dens = np.empty((k, t.shape[0])) if pdf else None
    skewed = np.abs(skew[:, 0]) >= SKEW_EPS
    plain = np.flatnonzero(~skewed)
    if plain.size:
        z = (t[None, :] - mu[plain]) / sd[plain]
        cdf[plain] = special.ndtr(z)
        if dens is not None:
            dens[plain] = np.exp(-0.5 * z**2) / (_SQRT_2PI * sd[plain])
    lanes = np.flatnonzero(skewed)
    if lanes.size == 0:
        return cdf, dens
    gam = np.abs(skew[lanes])
    root = np.cbrt(0.5 * gam + np.sqrt(0.25 * gam**2 + 1.0))
    u = root - 1.0 / root  # solves u^3 + 3u = gam
    s = np.sqrt(np.log1p(u**2))
    sign = np.sign(skew[lanes])
    edge = mu[lanes] - sign * sd[lanes] / u  # the lognormal's threshold
    m = np.log(sd[lanes] / u) - 0.5 * s**2
    y = sign * (t[None, :] - edge)
    pos = y > 0
    ly = np.log(np.where(pos, y, 1.0))
    w = (ly - m) / s
    inner = np.where(pos, special.ndtr(w), 0.0)
    cdf[lanes] = np.where(sign > 0, inner, 1.0 - inner)
    if dens is not None:
        dens[lanes] = np.where(pos, np.exp(-0.5 * w**2 - ly) / (_SQRT_2PI * s), 0.0)
    return cdf, dens


def max_independent(x: Lin) -> Lin:
    """Moments of the max of independent lanes, as one lane.

    With fitted marginals ``F_i``: ``F = prod_i F_i``, ``E[(Y-a)^k] =
    k int_a^b (t-a)^(k-1) (1 - F) dt`` for k = 1, 2, 3 (``a``, ``b``: where F leaves
    0 and reaches 1, found on a coarse grid; Simpson's rule on a fine one), and
    tightness ``T_i = P(lane i is the max) = int f_i prod_{j != i} F_j``, which
    weights the lanes' coefficients.  Deterministic lanes are a point mass at
    their largest value.
    """
    mu = x.mu
    sd = x.std()
    sk = x.skew()
    # spreads below 1e-12 of the problem's scale are points (and avoid underflow)
    stoch = sd > 1e-12 * max(float(np.max(np.abs(mu))), float(np.max(sd)))
    if not np.any(stoch):
        return _lane_of(x, int(np.argmax(mu)))
    widen = MAX_SPAN_SIGMAS + 4.0 * np.abs(sk)
    upper = float(np.max((mu + widen * sd)[stoch]))
    lower = float(np.max((mu - widen * sd)[stoch]))
    det_top = float(np.max(mu[~stoch])) if np.any(~stoch) else -np.inf
    if det_top >= upper:
        return _lane_of(x, int(np.flatnonzero(~stoch)[np.argmax(mu[~stoch])]))
    lower = max(lower, det_top)
    rel = np.flatnonzero(stoch & (mu + widen * sd > lower))
    m_r, s_r, k_r = mu[rel, None], sd[rel, None], sk[rel, None]
    coarse = np.linspace(lower, upper, MAX_COARSE)
    f_coarse = marginal_cdf_pdf(coarse, m_r, s_r, k_r, pdf=False)[0].prod(axis=0)
    lo_i = 0 if det_top > -np.inf else max(int(np.searchsorted(f_coarse, 1e-300, "right")) - 1, 0)
    hi_i = min(int(np.searchsorted(f_coarse, 1.0 - 1e-16)) + 1, MAX_COARSE - 1)
    a, b = float(coarse[lo_i]), float(coarse[hi_i])
    t = _fine_grid(a, b, m_r[:, 0], s_r[:, 0])
    cdf, pdf = marginal_cdf_pdf(t, m_r, s_r, k_r)
    assert pdf is not None
    f = cdf.prod(axis=0)
    tail = 1.0 - f
    dt = t - a
    m1 = float(integrate.simpson(tail, x=t))
    m2 = 2.0 * float(integrate.simpson(dt * tail, x=t))
    m3 = 3.0 * float(integrate.simpson(dt**2 * tail, x=t))
    var = max(m2 - m1**2, 0.0)
    k3 = m3 - 3.0 * m1 * m2 + 2.0 * m1**3
    others = np.divide(f[None, :], cdf, out=np.zeros_like(cdf), where=cdf > 0)
    tight = integrate.simpson(pdf * others, x=t, axis=1)
    coef = (tight[:, None] * x.A[rel]).sum(axis=0)[None, :]
    kept_k3 = float((coef[0] * coef[0] * coef[0]) @ x.g) if x.ids.size else 0.0
    resid = var - float(np.dot(coef[0], coef[0]))
    return with_residual(
        np.array([a + m1]), x.ids, coef, x.g, np.array([resid]), np.array([k3 - kept_k3])
    )


def _fine_grid(a: float, b: float, mu: FloatArray, sd: FloatArray) -> FloatArray:
    """Uniform on [a, b], plus points every quarter sigma around each lane narrower than a few
    grid steps: a sharp lane (a host that is nearly certain) would otherwise fall between the
    points and Simpson's rule would miss most of its spread (13 % of the std, seen)."""
    t = np.linspace(a, b, MAX_GRID)
    narrow = sd < NARROW_STEPS * (b - a) / (MAX_GRID - 1)
    if not np.any(narrow):
        return t
    local = (mu[narrow, None] + sd[narrow, None] * LOCAL_Z[None, :]).ravel()
    out: FloatArray = np.unique(np.concatenate([t, local[(local > a) & (local < b)]]))
    return out


def _lane_of(x: Lin, i: int) -> Lin:
    return Lin(x.mu[i : i + 1].copy(), x.ids, x.A[i : i + 1].copy(), x.g)


def max_chain(x: Lin) -> Lin:
    """Max of all lanes by pairwise Clark (used for correlated lanes)."""
    acc = _lane_of(x, 0)
    for i in range(1, x.m):
        acc = max2(acc, _lane_of(x, i))
    return acc


def max_lanes(x: Lin, strict: bool) -> Lin:
    """Max over all lanes of ``x`` as one lane, choosing the method described above."""
    if x.m == 1:
        return _lane_of(x, 0)
    if x.m == 2 and not independent_lanes(x):
        return max2(_lane_of(x, 0), _lane_of(x, 1))
    if independent_lanes(x):
        return max_independent(x)
    if strict:
        raise HandOver(f"max over {x.m} correlated normals (pairwise Clark is inaccurate)")
    return max_chain(x)
