"""Stochastic values: Point, Normal, Mixture (Gaussian), Samples, and Numeric
(exact distributions computed by the numeric engine, see :mod:`ppe.core.numeric`),
all subclasses of :class:`StochasticValue`.

They look like ``scipy.stats`` frozen distributions (``mean()``, ``std()``,
``ppf(q)``, ``cdf(x)``, ``rvs(size, random_state)``, ``interval(confidence)``;
the :class:`Stochastic` protocol is the part other code may rely on) and add
``sample(n, rng)``, ``kind``, ``components`` and ``to_dict(confidence)`` (the
JSON shape of docs/architecture.md).

Arithmetic ``+ - * /`` works between values and with numbers; operands are
independent unless they share an input (``x - x`` is exactly 0; ``a/f + b/f``
keeps both terms' common dependence on ``f``).  Two engines:

* **analytic** (Point/Normal operands): exact sums, higher-order delta method for
  quotients while ``sigma/mu <= 0.1``, exact product moments, Clark's formulas for
  pairs and exact moments for the max of many independent normals - see
  :mod:`ppe.core.analytic`;
* **Monte Carlo** (anything with a Mixture or Samples, or where the analytic
  approximation would be poor): vectorised sampling with a fixed sample count and
  seed, both reported on the resulting :class:`Samples`.

The engine is chosen per operation by :func:`use_engine` (``"auto"`` by
default: analytic where it is good, Monte Carlo otherwise).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from . import lanes
from .analytic import HandOver, Lin, new_source_id
from .lanes import LaneCtx, Value
from .montecarlo import DEFAULT_SAMPLES, DEFAULT_SEED, Smp, Space
from .numeric import NumericLanes, NumResult, mixture_ppf

FloatArray = npt.NDArray[np.float64]
RandomState = np.random.Generator | int | None
Number = int | float

#: Engines of arithmetic on values (the numeric engine needs a model's floors: predictions only).
ARITHMETIC_ENGINES = ("auto", "analytic", "mc")


@runtime_checkable
class Stochastic(Protocol):
    """A scipy.stats-shaped distribution; ``scheduler.laws.Stochastic`` is the same protocol."""

    def mean(self) -> float: ...

    def std(self) -> float: ...

    def ppf(self, q: Any) -> Any: ...

    def rvs(self, size: Any = ..., random_state: Any = ...) -> Any: ...

    def interval(self, confidence: float) -> tuple[float, float]: ...


# ----------------------------------------------------------------- engine choice


@dataclass(frozen=True)
class EngineConfig:
    """Engine for public arithmetic: mode, Monte Carlo sample count and seed."""

    mode: str = "auto"
    samples: int = DEFAULT_SAMPLES
    seed: int = DEFAULT_SEED
    space: Space | None = None


_DEFAULT_ENGINE = EngineConfig()
_ENGINE: ContextVar[EngineConfig | None] = ContextVar("ppe_core_engine", default=None)


def current_engine() -> EngineConfig:
    """The engine settings in force (see :func:`use_engine`)."""
    return _ENGINE.get() or _DEFAULT_ENGINE


@contextmanager
def use_engine(
    mode: str = "auto", samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED
) -> Iterator[Space]:
    """Run arithmetic in ``mode`` (``auto``, ``analytic`` or ``mc``).

    Inside the block all Monte Carlo steps share one sample space (so repeated
    use of an input is consistent); the space is yielded.  ``analytic`` never
    hands over (it raises for inputs it cannot handle); ``mc`` samples always.
    """
    if mode not in ARITHMETIC_ENGINES:
        raise ValueError(f"unknown engine {mode!r}; expected one of {ARITHMETIC_ENGINES}")
    space = Space(samples, seed)
    token = _ENGINE.set(EngineConfig(mode, int(samples), int(seed), space))
    try:
        yield space
    finally:
        _ENGINE.reset(token)


# ------------------------------------------------------------------- base class


def _rng(random_state: RandomState) -> np.random.Generator:
    return np.random.default_rng(random_state)


def _check_confidence(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return c


class StochasticValue(ABC):
    """Base class of the core's own values; they satisfy :class:`Stochastic` and add arithmetic."""

    kind: ClassVar[str]
    analytic: ClassVar[bool] = False

    def __init__(self) -> None:
        self.uid = new_source_id()

    # --- distribution interface
    @abstractmethod
    def mean(self) -> float: ...

    @abstractmethod
    def std(self) -> float: ...

    @abstractmethod
    def cdf(self, x: Any) -> Any: ...

    @abstractmethod
    def ppf(self, q: Any) -> Any: ...

    @abstractmethod
    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray: ...

    @property
    @abstractmethod
    def components(self) -> list[tuple[float, float, float]]:
        """``[(weight, mean, std), ...]``."""

    @abstractmethod
    def _draw(self, space: Space) -> FloatArray:
        """This value's draws in a sample space (consistent with other uses)."""

    def _draw_into(self, space: Space, out: FloatArray) -> None:
        """Write this value's draws in ``space`` into ``out`` (avoids temporaries)."""
        out[:] = self._draw(space)

    def var(self) -> float:
        return self.std() ** 2

    def median(self) -> float:
        return float(self.ppf(0.5))

    def rvs(self, size: int | tuple[int, ...] = 1, random_state: RandomState = None) -> FloatArray:
        """Independent random draws, like ``scipy.stats`` ``rvs``."""
        shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
        n = int(np.prod(shape))
        return self._rvs(n, _rng(random_state)).reshape(shape)

    def sample(self, n: int, rng: RandomState = None) -> FloatArray:
        """``n`` independent draws."""
        return self._rvs(int(n), _rng(rng))

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """Central interval holding ``confidence`` of the probability."""
        c = _check_confidence(confidence)
        return float(self.ppf((1.0 - c) / 2.0)), float(self.ppf((1.0 + c) / 2.0))

    def to_dict(self, confidence: float = 0.95) -> dict[str, Any]:
        """docs/architecture.md's JSON shape of a stochastic value."""
        lo, hi = self.interval(confidence)
        return {
            "mean": float(self.mean()),
            "std": float(self.std()),
            "interval": [lo, hi],
            "confidence": float(confidence),
            "kind": self.kind,
            "components": [
                {"weight": float(w), "mean": float(m), "std": float(s)}
                for w, m, s in self.components
            ],
        }

    def _lane(self) -> Value:
        raise TypeError(f"{self.kind} values have no analytic form")

    # --- arithmetic
    def __add__(self, other: Any) -> StochasticValue:
        return _binop("+", self, other)

    def __radd__(self, other: Any) -> StochasticValue:
        return _binop("+", other, self)

    def __sub__(self, other: Any) -> StochasticValue:
        return _binop("-", self, other)

    def __rsub__(self, other: Any) -> StochasticValue:
        return _binop("-", other, self)

    def __mul__(self, other: Any) -> StochasticValue:
        return _binop("*", self, other)

    def __rmul__(self, other: Any) -> StochasticValue:
        return _binop("*", other, self)

    def __truediv__(self, other: Any) -> StochasticValue:
        return _binop("/", self, other)

    def __rtruediv__(self, other: Any) -> StochasticValue:
        return _binop("/", other, self)

    def __neg__(self) -> StochasticValue:
        return _binop("-", Point(0.0), self)

    def __pos__(self) -> StochasticValue:
        return self


# ------------------------------------------------------------------------ Point


class Point(StochasticValue):
    """A known value (no uncertainty)."""

    kind = "point"
    analytic = True

    def __init__(self, value: Number) -> None:
        super().__init__()
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"point value must be finite, got {value!r}")
        self.value = v

    def __repr__(self) -> str:
        return f"Point({self.value!r})"

    def mean(self) -> float:
        return self.value

    def std(self) -> float:
        return 0.0

    def cdf(self, x: Any) -> Any:
        return np.where(np.asarray(x, dtype=float) >= self.value, 1.0, 0.0)

    def ppf(self, q: Any) -> Any:
        qa = np.asarray(q, dtype=float)
        out = np.where((qa >= 0) & (qa <= 1), self.value, np.nan)
        return float(out) if out.ndim == 0 else out

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        return np.full(n, self.value)

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.value, 0.0)]

    def _draw(self, space: Space) -> FloatArray:
        return np.full(space.n, self.value)

    def _lane(self) -> Value:
        return np.array([self.value])


# ----------------------------------------------------------------------- Normal


class Normal(StochasticValue):
    """``N(mu, sigma)``.

    A normal computed by the analytic engine remembers which inputs it depends
    on (its canonical form), so later arithmetic keeps the dependence, and the
    third cumulant the engine tracked, which the max of many values uses.  Its
    own ``cdf``/``ppf`` are those of ``N(mu, sigma)``.
    """

    kind = "normal"
    analytic = True
    _lin: Lin | None

    def __init__(self, mu: Number, sigma: Number) -> None:
        super().__init__()
        m, s = float(mu), float(sigma)
        if not (math.isfinite(m) and math.isfinite(s)) or s < 0:
            raise ValueError(f"normal needs finite mu and sigma >= 0, got ({mu!r}, {sigma!r})")
        self.mu = m
        k = 1 if s > 0 else 0
        self._ids = np.array([self.uid] * k, dtype=np.int64)
        self._coefs = np.array([s] * k, dtype=np.float64)
        self._g = np.zeros(k)
        self.sigma = s
        self._lin = None

    @classmethod
    def _from_form(
        cls, mu: float, ids: npt.NDArray[np.int64], coefs: FloatArray, g: FloatArray
    ) -> Normal:
        """A derived normal on the given sources (non-zero coefficients) whose
        third cumulants per unit coefficient are ``g``."""
        out = cls.__new__(cls)
        StochasticValue.__init__(out)
        out.mu = float(mu)
        out._ids = np.array(ids, dtype=np.int64)
        out._coefs = np.array(coefs, dtype=np.float64)
        out._g = np.array(g, dtype=np.float64)
        out.sigma = float(np.sqrt(np.dot(out._coefs, out._coefs)))
        out._lin = None
        return out

    def __repr__(self) -> str:
        return f"Normal({self.mu!r}, {self.sigma!r})"

    def mean(self) -> float:
        return self.mu

    def std(self) -> float:
        return self.sigma

    def cdf(self, x: Any) -> Any:
        xa = np.asarray(x, dtype=float)
        if self.sigma == 0:
            out = np.where(xa >= self.mu, 1.0, 0.0)
        else:  # scipy.special directly: scipy.stats costs ~30 us a call
            out = special.ndtr((xa - self.mu) / self.sigma)
        return float(out) if out.ndim == 0 else out

    def pdf(self, x: Any) -> Any:
        return stats.norm.pdf(x, self.mu, self.sigma)

    def ppf(self, q: Any) -> Any:
        if self.sigma == 0:
            return Point(self.mu).ppf(q)
        qa = np.asarray(q, dtype=float)
        out = self.mu + self.sigma * special.ndtri(qa)
        out = np.where((qa < 0) | (qa > 1), np.nan, out)
        return float(out) if out.ndim == 0 else out

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        return self.mu + self.sigma * rng.standard_normal(n)

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.mu, self.sigma)]

    def _draw(self, space: Space) -> FloatArray:
        if self._ids.size == 0:
            return np.full(space.n, self.mu)
        if self._ids.size == 1:
            return self.mu + self._coefs[0] * space.z(int(self._ids[0]))
        return self.mu + self._coefs @ space.z_block(self._ids)

    def _draw_into(self, space: Space, out: FloatArray) -> None:
        if self._ids.size == 1:
            np.multiply(space.z(int(self._ids[0])), self._coefs[0], out=out)
            out += self.mu
        else:
            out[:] = self._draw(space)

    def _lane(self) -> Value:
        # One Lin per value, so its cached reciprocal (and the remainder source
        # it creates) is shared by every quotient by this value.
        if self._lin is None:
            self._lin = Lin(np.array([self.mu]), self._ids, self._coefs[None, :].copy(), self._g)
        return self._lin


# ---------------------------------------------------------------------- Mixture


class Mixture(StochasticValue):
    """Gaussian mixture ``sum_k w_k N(mu_k, sigma_k)`` (weights are normalised)."""

    kind = "mixture"

    def __init__(self, weights: npt.ArrayLike, means: npt.ArrayLike, stds: npt.ArrayLike) -> None:
        super().__init__()
        w = np.asarray(weights, dtype=np.float64).ravel()
        m = np.asarray(means, dtype=np.float64).ravel()
        s = np.asarray(stds, dtype=np.float64).ravel()
        if not (w.size == m.size == s.size) or w.size == 0:
            raise ValueError("mixture needs equally many (>= 1) weights, means and stds")
        if not (np.isfinite(w).all() and np.isfinite(m).all() and np.isfinite(s).all()):
            raise ValueError("mixture parameters must be finite")
        total = float(w.sum())
        if (w < 0).any() or total <= 0 or (s < 0).any():
            raise ValueError("mixture weights must be >= 0 (not all 0) and stds >= 0")
        self.weights = w / total
        self.means = m
        self.stds = s
        self._mean, self._std = _mixture_moments(self.weights, m, s)

    def __repr__(self) -> str:
        return f"Mixture({self.weights.tolist()}, {self.means.tolist()}, {self.stds.tolist()})"

    def mean(self) -> float:
        return self._mean

    def std(self) -> float:
        return self._std

    def cdf(self, x: Any) -> Any:
        xa = np.asarray(x, dtype=float)
        z = xa[..., None] - self.means
        safe = np.where(self.stds > 0, self.stds, 1.0)
        per = np.where(self.stds > 0, special.ndtr(z / safe), (z >= 0).astype(float))
        out = per @ self.weights
        return float(out) if out.ndim == 0 else out

    def pdf(self, x: Any) -> Any:
        xa = np.asarray(x, dtype=float)
        per = stats.norm.pdf(xa[..., None], self.means, np.where(self.stds > 0, self.stds, 1e-300))
        out = per @ self.weights
        return float(out) if out.ndim == 0 else out

    def ppf(self, q: Any) -> Any:
        """Inverse CDF (bisection, then Newton: exact to machine precision)."""
        qa = np.atleast_1d(np.asarray(q, dtype=float)).ravel()
        w, m = self.weights[None, :], self.means[None, :]
        if np.all(self.stds > 0) and qa.size <= 4 and self.weights.size <= 8:
            out = np.array([self._ppf_scalar(float(x)) for x in qa])
        elif np.all(self.stds > 0):
            out = mixture_ppf(w, m, self.stds[None, :], qa[None, :])[0]
        else:  # point components: bisection on the step CDF
            out = self._bisect(qa)
        out = np.where((qa < 0) | (qa > 1), np.nan, out)
        if np.ndim(q) == 0:
            return float(out[0])
        return out.reshape(np.shape(q))

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        c = _check_confidence(confidence)
        lo, hi = self.ppf(np.array([(1.0 - c) / 2.0, (1.0 + c) / 2.0]))
        return float(lo), float(hi)

    def _ppf_scalar(self, q: float) -> float:
        """One quantile in plain Python (an input's interval in a report: numpy's
        per-call overhead would cost 20x more): bisection to 1/512 of the span,
        then safeguarded Newton to machine precision."""
        if not 0.0 < q < 1.0:
            return -math.inf if q == 0.0 else math.inf if q == 1.0 else math.nan
        comps = [
            (float(w), float(m), float(s))
            for w, m, s in zip(self.weights, self.means, self.stds, strict=True)
            if w > 0
        ]

        def cdf_pdf(x: float) -> tuple[float, float]:
            f = d = 0.0
            for w, m, s in comps:
                z = (x - m) / s
                f += w * 0.5 * math.erfc(-z / math.sqrt(2.0))
                d += w * math.exp(-0.5 * z * z) / (s * math.sqrt(2.0 * math.pi))
            return f, d

        lo = min(m - 9.0 * s for _, m, s in comps)
        hi = max(m + 9.0 * s for _, m, s in comps)
        for _ in range(9):
            mid = 0.5 * (lo + hi)
            if cdf_pdf(mid)[0] < q:
                lo = mid
            else:
                hi = mid
        x = 0.5 * (lo + hi)
        for _ in range(8):
            f, d = cdf_pdf(x)
            if f < q:
                lo = x
            else:
                hi = x
            step = (f - q) / d if d > 0 else math.inf
            nxt = x - step
            x = nxt if lo <= nxt <= hi else 0.5 * (lo + hi)
            if abs(step) <= 1e-15 * max(abs(x), 1e-300):
                break
        return x

    def _bisect(self, qa: FloatArray) -> FloatArray:
        lo = np.full(qa.shape, float(np.min(self.means - 12 * self.stds)) - 1e-12)
        hi = np.full(qa.shape, float(np.max(self.means + 12 * self.stds)) + 1e-12)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            below = np.asarray(self.cdf(mid)) < qa
            lo = np.where(below, mid, lo)
            hi = np.where(below, hi, mid)
        out: FloatArray = np.where((qa > 0) & (qa < 1), 0.5 * (lo + hi), np.nan)
        return np.where(qa == 0, -np.inf, np.where(qa == 1, np.inf, out))

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        # component by inverse CDF of the weights: twice as fast as rng.choice(p=...)
        cuts = np.cumsum(self.weights)[:-1]
        k = np.searchsorted(cuts, rng.random(n) * self.weights.sum(), side="right")
        return self.means[k] + self.stds[k] * rng.standard_normal(n)

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [
            (float(w), float(m), float(s))
            for w, m, s in zip(self.weights, self.means, self.stds, strict=True)
        ]

    def _draw(self, space: Space) -> FloatArray:
        return space.leaf(self.uid, lambda rng, n: self._rvs(n, rng))


# ---------------------------------------------------------------------- Samples


class Samples(StochasticValue):
    """An empirical distribution: Monte Carlo results or user-supplied draws.

    ``n`` and ``seed`` say how it was made.  Samples from the same sample space
    are aligned (element ``i`` of each is the same joint draw).
    """

    kind = "samples"

    def __init__(
        self,
        array: Iterable[float] | FloatArray,
        seed: int | None = None,
        *,
        space: Space | None = None,
    ) -> None:
        super().__init__()
        arr = np.asarray(array, dtype=np.float64).ravel()
        if arr.size < 2 or not np.all(np.isfinite(arr)):
            raise ValueError("samples need at least 2 finite values")
        if space is not None and arr.size != space.n:
            raise ValueError("samples do not match their space's sample count")
        self.array = arr
        self.seed = seed
        self.space = space
        self._sorted: FloatArray | None = None

    @property
    def n(self) -> int:
        return int(self.array.size)

    def __repr__(self) -> str:
        return (
            f"Samples(n={self.n}, seed={self.seed}, mean={self.mean():.6g}, std={self.std():.6g})"
        )

    def _sorted_array(self) -> FloatArray:
        if self._sorted is None:
            self._sorted = np.sort(self.array)
        return self._sorted

    def mean(self) -> float:
        return float(self.array.mean())

    def std(self) -> float:
        return float(self.array.std())

    def cdf(self, x: Any) -> Any:
        out = np.searchsorted(self._sorted_array(), np.asarray(x, dtype=float), side="right")
        res = out / self.n
        return float(res) if np.ndim(res) == 0 else res

    def ppf(self, q: Any) -> Any:
        out = np.quantile(self._sorted_array(), q)
        return float(out) if np.ndim(out) == 0 else out

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        return rng.choice(self.array, size=n, replace=True)

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.mean(), self.std())]

    def _draw(self, space: Space) -> FloatArray:
        if self.space is space:
            return self.array
        return space.leaf(self.uid, lambda rng, n: space.adopt(self.array))

    def to_dict(self, confidence: float = 0.95) -> dict[str, Any]:
        out = super().to_dict(confidence)
        out["samples"] = self.n
        out["seed"] = self.seed
        return out


# ---------------------------------------------------------------------- Numeric


class Numeric(StochasticValue):
    """A distribution computed exactly by the numeric engine (kind ``"numeric"``).

    Not a sample and not a parametric fit: ``mean``/``std`` are exact (quadrature),
    ``cdf`` is exact at any point, ``ppf``/``interval`` are exact for a value of one
    input (e.g. ``a = c / FracAvailCPU``) and read off a ~1 500-point tabulation
    of the exact CDF otherwise (a max over hosts).  ``rvs`` draws the underlying
    inputs and combines them, so draws are exact too; under Monte Carlo
    arithmetic the value stays aligned with its inputs.  ``components`` is the
    one-normal summary ``[(1, mean, std)]`` (like Samples): the shape is in the
    interval and the cdf, not in the components.  See :mod:`ppe.core.numeric`.
    """

    kind = "numeric"

    def __init__(self, result: NumResult, lane: int) -> None:
        super().__init__()
        self._result = result
        self._index = int(lane)

    def __repr__(self) -> str:
        return f"Numeric(mean={self.mean():.6g}, std={self.std():.6g})"

    def mean(self) -> float:
        return self._result.mean(self._index)

    def std(self) -> float:
        return math.sqrt(self._result.var(self._index))

    def var(self) -> float:
        return self._result.var(self._index)

    def cdf(self, x: Any) -> Any:
        return self._result.cdf(self._index, x)

    def ppf(self, q: Any) -> Any:
        return self._result.ppf(self._index, q)

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        c = _check_confidence(confidence)
        lo_q, hi_q = (1.0 - c) / 2.0, (1.0 + c) / 2.0
        if self._result.single[self._index]:  # computed for every host at once
            lo, hi = self._result.quantiles_all((lo_q, hi_q))[self._index]
            return float(lo), float(hi)
        return float(self.ppf(lo_q)), float(self.ppf(hi_q))

    def _rvs(self, n: int, rng: np.random.Generator) -> FloatArray:
        return self._result.rvs(self._index, n, rng)

    @property
    def components(self) -> list[tuple[float, float, float]]:
        return [(1.0, self.mean(), self.std())]

    def _draw(self, space: Space) -> FloatArray:
        return self._result.draw(self._index, space)


# ------------------------------------------------------------ conversions & ops


def as_stochastic(x: Any) -> StochasticValue:
    """Numbers become points; scipy frozen normals become :class:`Normal`."""
    if isinstance(x, StochasticValue):
        return x
    if isinstance(x, bool):
        raise TypeError("a boolean is not a stochastic value")
    if isinstance(x, int | float | np.integer | np.floating):
        return Point(float(x))
    dist = getattr(x, "dist", None)
    if dist is not None and getattr(dist, "name", None) == "norm":
        return Normal(float(x.mean()), float(x.std()))
    raise TypeError(f"cannot use {type(x).__name__} as a stochastic value")


def from_components(kind: str, components: Sequence[Any]) -> StochasticValue:
    """Model input from a forecaster distribution.

    ``components`` is a list of ``(weight, mean, std)`` (tuples or dicts with
    those keys).  ``point`` -> :class:`Point` at the mean, ``normal`` ->
    :class:`Normal` (moment-matched if several components), ``mixture`` ->
    :class:`Mixture` (a single component is still a one-hump mixture).
    """
    if not components:
        raise ValueError("a distribution needs at least one component")
    rows = np.array([_component(c) for c in components], dtype=np.float64)
    w, m, s = rows[:, 0], rows[:, 1], rows[:, 2]
    if kind == "mixture":
        return Mixture(w, m, s)
    if kind not in ("point", "normal"):
        raise ValueError(f"unknown distribution kind {kind!r}; expected point, normal or mixture")
    if not np.isfinite(rows).all() or (w < 0).any() or (s < 0).any() or not w.sum() > 0:
        raise ValueError("components need finite values, weights >= 0 (not all 0), stds >= 0")
    mean, std = _mixture_moments(w / w.sum(), m, s)
    return Point(mean) if kind == "point" else Normal(mean, std)


def _mixture_moments(w: FloatArray, m: FloatArray, s: FloatArray) -> tuple[float, float]:
    """Mean and std of a Gaussian mixture with normalised weights ``w``."""
    mean = float(np.dot(w, m))
    second = float(np.dot(w, s * s + m * m))
    return mean, math.sqrt(max(second - mean * mean, 0.0))


def _component(c: Any) -> tuple[float, float, float]:
    if isinstance(c, dict):
        return float(c["weight"]), float(c["mean"]), float(c["std"])
    w, m, s = c
    return float(w), float(m), float(s)


def from_lane(v: Value) -> StochasticValue:
    """Lane 0 of a lane value as a public value."""
    return from_lanes(v, 1)[0]


def from_lanes(v: Value, limit: int | None = None) -> list[StochasticValue]:
    """Every lane (or the first ``limit``) of a lane value as public values:
    points, normals (dependence on inputs kept), numeric values (exact, drawn
    from their inputs) or samples (aligned)."""
    count = lanes.nlanes(v) if limit is None else limit
    if isinstance(v, NumericLanes):
        res = NumResult(v)
        return [Point(res.det_value(k)) if res.is_det(k) else Numeric(res, k) for k in range(count)]
    if isinstance(v, Smp):
        return [Samples(np.array(v.x[k]), seed=v.space.seed, space=v.space) for k in range(count)]
    if isinstance(v, Lin):
        out: list[StochasticValue] = []
        for k in range(count):
            row = v.A[k]
            nz = np.flatnonzero(row)
            if nz.size == 0:
                out.append(Point(float(v.mu[k])))
            else:
                out.append(Normal._from_form(float(v.mu[k]), v.ids[nz], row[nz], v.g[nz]))
        return out
    arr = np.asarray(v, dtype=np.float64)
    return [Point(float(arr[k])) for k in range(count)]


def to_samples_lane(x: StochasticValue, space: Space) -> Smp:
    return Smp(x._draw(space)[None, :], space)


def _pick_space(values: Sequence[StochasticValue], cfg: EngineConfig) -> Space:
    for v in values:
        if isinstance(v, Samples) and v.space is not None:
            return v.space
    return cfg.space if cfg.space is not None else Space(cfg.samples, cfg.seed)


def _all_analytic(values: Sequence[StochasticValue]) -> bool:
    return all(v.analytic for v in values)


def _binop(op: str, a: Any, b: Any) -> StochasticValue:
    x, y = as_stochastic(a), as_stochastic(b)
    cfg = current_engine()
    if cfg.mode != "mc" and _all_analytic([x, y]):
        try:
            ctx = LaneCtx(strict=cfg.mode == "auto")
            return from_lane(lanes.binary(op, x._lane(), y._lane(), ctx))
        except HandOver:
            pass
    elif cfg.mode == "analytic":
        raise TypeError("the analytic engine handles points and normals only")
    space = _pick_space([x, y], cfg)
    out = lanes.binary(
        op, to_samples_lane(x, space), to_samples_lane(y, space), LaneCtx(False, space)
    )
    return from_lane(out)


def _reduce(op: str, values: Iterable[Any]) -> StochasticValue:
    vals = [as_stochastic(v) for v in values]
    if not vals:
        if op == "sum":
            return Point(0.0)
        raise ValueError("max of no values")
    cfg = current_engine()
    starts = np.array([0])
    if cfg.mode != "mc" and _all_analytic(vals):
        try:
            ctx = LaneCtx(strict=cfg.mode == "auto")
            stacked = lanes.concat_lanes([v._lane() for v in vals])
            return from_lane(lanes.reduce(op, stacked, starts, ctx))
        except HandOver:
            pass
    elif cfg.mode == "analytic":
        raise TypeError("the analytic engine handles points and normals only")
    space = _pick_space(vals, cfg)
    stacked = lanes.concat_lanes([to_samples_lane(v, space) for v in vals])
    return from_lane(lanes.reduce(op, stacked, starts, LaneCtx(False, space)))


def ssum(values: Iterable[Any]) -> StochasticValue:
    """Sum of many values (exact for normals and points)."""
    return _reduce("sum", values)


def smax(values: Iterable[Any]) -> StochasticValue:
    """Max of many values (Clark for pairs, exact for independent normals)."""
    return _reduce("max", values)


def smin(values: Iterable[Any]) -> StochasticValue:
    """Min of many values (``-max(-x)``)."""
    return _reduce("min", values)
