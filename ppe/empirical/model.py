"""A fitted empirical model: least-squares coefficients, prediction intervals, a JSON
form for storage and a PPE stochastic value at any point.

Noise.  Runs of a point scatter around its mean with variance ``sigma^2 * v_i``:
``noise="relative"`` (the default when every mean is > 0: timing noise grows with
the time) takes ``v_i = mean_i^2``, so ``sigma`` is a coefficient of variation;
``"absolute"`` takes ``v_i = 1``.  ``sigma^2`` is estimated from all repetitions
(their scatter around their own mean plus the means' misfit) over ``n_obs - k``
degrees of freedom.

Fit.  The point means are fitted with the weights of :func:`fit_weights`
(``n_i / mean_i`` for relative noise: between the efficient ``n_i / mean_i^2``
and plain least squares, which extrapolates better when small sizes bend the
curve), so the coefficients' covariance is the sandwich
``sigma^2 B B'`` with ``B = (X'WX)^-1 X'W diag(v_i / n_i)^(1/2)``; it is stored as
the triangular factor of ``B B'`` for the column-scaled design, so a stored model
evaluates the quadratic form as a sum of squares (no cancellation).

Intervals.  The variance of a new run at a point with term values ``f0`` is

* ``sigma^2 * f0' B B' f0``: the coefficients' uncertainty;
* ``sigma^2 * v0``: the run's own noise (``v0 = mean0^2`` for relative noise);
* the model error beyond the measured range (:meth:`EmpiricalModel.model_error`):
  the leave-one-out error the model made at its own edge points, compounded per
  step beyond the edge;
* the model choice: the mean square difference to the predictions of the
  alternatives the cross-validation could not rule out (:mod:`.search`).

The interval is ``mean +- t_{dof} * sqrt(sum)``.  Extrapolation widens it in
every part: ``f0`` grows with the powers and logs of the parameters faster than
the rows that pinned the coefficients, the relative noise grows with the
prediction, the edge error compounds per step, and models that agree on the
measured points part ways outside them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from ppe.core.stochastic import Mixture, Normal, StochasticValue

from .data import Measurements
from .errors import EmpiricalError, NonFiniteValueError, NonPositiveValueError, TooFewPointsError
from .terms import Term, design, formula

FloatArray = npt.NDArray[np.float64]
NOISE_MODELS = ("relative", "absolute")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class PointPrediction:
    """The prediction at one point: mean, the std of a new run (or of the mean) and its interval."""

    point: dict[str, float]
    mean: float
    std: float
    dof: int
    interval: tuple[float, float]
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point,
            "mean": self.mean,
            "std": self.std,
            "interval": list(self.interval),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class EdgeError:
    """How well the model extrapolated to its own extreme points in one parameter.

    ``low``/``high`` are the smallest and largest measured values, ``low_step`` and
    ``high_step`` the log2 distance to the next value inwards, ``low_error`` and
    ``high_error`` the root-mean-square leave-one-out error at the points on that
    edge (relative to the mean for relative noise, in measured units otherwise).
    """

    low: float
    low_step: float
    low_error: float
    high: float
    high_step: float
    high_error: float

    def steps(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Steps beyond the edges (0 inside) and the error per step that applies."""
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.log2(x / self.high) / self.high_step
            down = np.log2(self.low / x) / self.low_step
        up = np.where(x > self.high, up, 0.0)
        down = np.where(x < self.low, down, 0.0)
        err = np.where(up > 0, self.high_error, self.low_error)
        return np.maximum(up, down), err

    def to_list(self) -> list[float]:
        return [self.low, self.low_step, self.low_error, self.high, self.high_step, self.high_error]


@dataclass(frozen=True)
class Alternative:
    """Another model the cross-validation could not rule out (terms and coefficients)."""

    terms: tuple[Term, ...]
    coefficients: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"terms": [t.to_list() for t in self.terms], "coefficients": list(self.coefficients)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Alternative:
        return cls(
            tuple(Term.from_list(t) for t in data["terms"]),
            tuple(float(c) for c in data["coefficients"]),
        )


@dataclass(frozen=True, eq=False)
class EmpiricalModel:
    """``c0 + sum_k c_k * term_k`` with what its intervals need.  See the module docstring."""

    kind: str
    params: tuple[str, ...]
    terms: tuple[Term, ...]
    coefficients: tuple[float, ...]
    noise: str
    sigma2: float
    dof: int
    scale: tuple[float, ...]
    cov_factor: tuple[tuple[float, ...], ...]
    residual_norm: float
    n_points: int
    n_obs: int
    ranges: dict[str, tuple[float, float]]
    cv_error: float | None = None
    edges: dict[str, EdgeError] = field(default_factory=dict)
    alternatives: tuple[Alternative, ...] = ()
    _cov: FloatArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cov", np.array(self.cov_factor, dtype=np.float64))

    # ------------------------------------------------------------ describing

    @property
    def formula(self) -> str:
        return formula(self.coefficients, self.terms)

    def __str__(self) -> str:
        return self.formula

    # ------------------------------------------------------------ predicting

    def columns(self, points: Sequence[Mapping[str, float]]) -> dict[str, FloatArray]:
        """Each parameter's values at ``points``, checked (present, finite, > 0 where needed)."""
        cols: dict[str, FloatArray] = {}
        for name in self.params:
            try:
                col = np.array([float(p[name]) for p in points], dtype=np.float64)
            except KeyError:
                raise EmpiricalError(f"the point lacks parameter {name!r}", name=name) from None
            if not np.isfinite(col).all():
                raise NonFiniteValueError(f"parameter {name!r} is NaN or infinite", name=name)
            terms = [*self.terms, *(t for a in self.alternatives for t in a.terms)]
            if (col <= 0).any() and any(t.needs_positive for t in terms if name in t.params):
                raise NonPositiveValueError(
                    f"parameter {name!r} must be > 0 for this model's terms", name=name
                )
            cols[name] = col
        return cols

    def predict_arrays(
        self, points: Sequence[Mapping[str, float]], what: str = "run"
    ) -> tuple[FloatArray, FloatArray]:
        """Means and standard deviations at many points (``what``: ``run`` or ``mean``)."""
        if what not in ("run", "mean"):
            raise ValueError(f"what must be 'run' or 'mean', got {what!r}")
        cols = self.columns(points)
        x = design(self.terms, cols, len(points))
        mean = x @ np.array(self.coefficients)
        lev = np.sum(((x / np.array(self.scale)) @ self._cov.T) ** 2, axis=1)
        var = self.sigma2 * lev + self.model_error(cols, mean) ** 2
        for alt in self.alternatives:
            other = design(alt.terms, cols, len(points)) @ np.array(alt.coefficients)
            var = var + (other - mean) ** 2 / (len(self.alternatives) + 1)
        if what == "run":
            var = var + self.sigma2 * (mean**2 if self.noise == "relative" else 1.0)
        std = np.sqrt(var) if self.dof > 0 else np.full_like(mean, np.inf)
        return mean, std

    def model_error(self, cols: Mapping[str, FloatArray], mean: FloatArray) -> FloatArray:
        """Std of the model's own error outside the measured range (0 inside).

        Each step beyond an edge (a step: the log2 spacing of the last two measured
        values there) compounds the error the model made when its edge point was
        left out: ``(1 + e)^steps - 1`` relative to the prediction (relative noise),
        ``e * steps`` (absolute noise); parameters add in quadrature.
        """
        total = np.zeros_like(mean)
        for name, edge in self.edges.items():
            steps, err = edge.steps(cols[name])
            if self.noise == "relative":
                total += (((1.0 + err) ** steps - 1.0) * np.abs(mean)) ** 2
            else:
                total += (err * steps) ** 2
        return np.sqrt(total)

    def predict(
        self, point: Mapping[str, float], confidence: float = 0.95, what: str = "run"
    ) -> PointPrediction:
        """Mean and ``confidence`` interval of a new run (``what="run"``) or of the mean."""
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
        mean, std = self.predict_arrays([point], what)
        m, s = float(mean[0]), float(std[0])
        half = s * self.t_quantile(confidence) if math.isfinite(s) else math.inf
        return PointPrediction(
            {k: float(point[k]) for k in self.params},
            m,
            s,
            self.dof,
            (m - half, m + half),
            confidence,
        )

    def t_quantile(self, confidence: float) -> float:
        return float(stats.t.ppf(0.5 + confidence / 2.0, self.dof)) if self.dof > 0 else math.inf

    def to_stochastic(
        self, point: Mapping[str, float], shape: str = "normal", confidence: float = 0.95
    ) -> StochasticValue:
        """The run time at ``point`` as a PPE value.

        The prediction is Student-t with ``dof`` degrees of freedom.  ``shape="normal"``
        gives the normal whose central ``confidence`` interval is the t interval (the
        analytic engine keeps it exact and fast); ``shape="t"`` gives the t itself as a
        scale mixture of normals (16 Gauss-Laguerre nodes over its chi-square mixing law).
        """
        if self.dof <= 0:
            raise TooFewPointsError("the fit has no residual degrees of freedom: no interval")
        pred = self.predict(point, confidence)
        if shape == "normal":
            z = float(stats.norm.ppf(0.5 + confidence / 2.0))
            return Normal(pred.mean, pred.std * self.t_quantile(confidence) / z)
        if shape == "t":
            w, scales = t_mixture(self.dof)
            return Mixture(w, np.full_like(w, pred.mean), pred.std * scales)
        raise ValueError(f"shape must be 'normal' or 't', got {shape!r}")

    # ------------------------------------------------------------ storage

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "type": self.kind,
            "formula": self.formula,
            "params": list(self.params),
            "terms": [t.to_list() for t in self.terms],
            "coefficients": list(self.coefficients),
            "noise": self.noise,
            "sigma2": self.sigma2,
            "dof": self.dof,
            "scale": list(self.scale),
            "cov_factor": [list(r) for r in self.cov_factor],
            "residual_norm": self.residual_norm,
            "n_points": self.n_points,
            "n_obs": self.n_obs,
            "ranges": {k: list(v) for k, v in self.ranges.items()},
            "cv_error": self.cv_error,
            "edges": {k: e.to_list() for k, e in self.edges.items()},
            "alternatives": [a.to_dict() for a in self.alternatives],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EmpiricalModel:
        if data.get("version") != FORMAT_VERSION:
            raise EmpiricalError(f"unknown empirical model format version {data.get('version')!r}")
        try:
            model = cls(
                kind=str(data["type"]),
                params=tuple(str(p) for p in data["params"]),
                terms=tuple(Term.from_list(t) for t in data["terms"]),
                coefficients=tuple(float(c) for c in data["coefficients"]),
                noise=str(data["noise"]),
                sigma2=float(data["sigma2"]),
                dof=int(data["dof"]),
                scale=tuple(float(s) for s in data["scale"]),
                cov_factor=tuple(tuple(float(v) for v in r) for r in data["cov_factor"]),
                residual_norm=float(data["residual_norm"]),
                n_points=int(data["n_points"]),
                n_obs=int(data["n_obs"]),
                ranges={str(k): (float(v[0]), float(v[1])) for k, v in data["ranges"].items()},
                cv_error=None if data.get("cv_error") is None else float(data["cv_error"]),
                edges={str(k): EdgeError(*(float(v) for v in e)) for k, e in data["edges"].items()},
                alternatives=tuple(Alternative.from_dict(a) for a in data["alternatives"]),
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise EmpiricalError(f"malformed stored empirical model: {exc}") from None
        k = len(model.terms) + 1
        if len(model.coefficients) != k or len(model.scale) != k or model._cov.shape != (k, k):
            raise EmpiricalError("malformed stored empirical model: sizes disagree")
        return model


def t_mixture(dof: int, nodes: int = 16) -> tuple[FloatArray, FloatArray]:
    """Weights and scale multipliers of normals whose mixture is Student-t with ``dof``.

    ``t = Z * sqrt(dof / W)`` with ``W ~ chi2(dof)``; generalised Gauss-Laguerre
    quadrature integrates over ``W = 2u``.
    """
    u, w = special.roots_genlaguerre(nodes, dof / 2.0 - 1.0)
    return w / w.sum(), np.sqrt(dof / (2.0 * u))


def variance_shape(data: Measurements, noise: str) -> FloatArray:
    """``v_i`` of the module docstring at each measured point."""
    if noise == "relative":
        if (data.means <= 0).any():
            raise EmpiricalError("relative noise needs every point's mean to be > 0")
        return np.asarray(data.means**2, dtype=np.float64)
    if noise == "absolute":
        return np.ones(data.n_points)
    raise EmpiricalError(f"unknown noise model {noise!r}; expected one of {NOISE_MODELS}")


def default_noise(data: Measurements) -> str:
    return "relative" if (data.means > 0).all() else "absolute"


def param_columns(data: Measurements) -> dict[str, FloatArray]:
    return {p: data.points[:, k] for k, p in enumerate(data.params)}


def fit_weights(data: Measurements, noise: str) -> FloatArray:
    """Least-squares weights of the point means (see the module docstring).

    Relative noise would make ``n_i / mean_i^2`` the efficient weights, but they
    let the small sizes, where constant overheads and caches bend the curve,
    pull the exponents; ``n_i / mean_i`` keeps every point in play while leaning
    towards the large sizes that an extrapolation continues from.
    """
    if noise == "relative":
        return np.asarray(data.counts / np.abs(data.means), dtype=np.float64)
    return np.asarray(data.counts, dtype=np.float64)


def fit_terms(
    data: Measurements,
    terms: Sequence[Term],
    kind: str = "search",
    noise: str | None = None,
    cv_error: float | None = None,
    alternatives: tuple[Alternative, ...] = (),
) -> EmpiricalModel:
    """Least-squares coefficients of ``c0 + sum c_k term_k`` and everything the intervals need."""
    k = len(terms) + 1
    if data.n_points < k:
        raise TooFewPointsError(
            f"{data.n_points} distinct points cannot fix {k} coefficients; measure at least {k}"
        )
    if any(t.needs_positive for t in terms):
        data.require_positive("a log, fractional power or inverse term")
    noise = noise or default_noise(data)
    v = variance_shape(data, noise)
    w = fit_weights(data, noise)
    x = design(terms, param_columns(data), data.n_points)
    sw = np.sqrt(w)
    xw = x * sw[:, None]
    scale = np.linalg.norm(xw, axis=0)
    if not (np.isfinite(scale).all() and (scale > 0).all()):
        raise EmpiricalError("a term is zero or not finite at every measured point")
    q, r = np.linalg.qr(xw / scale)
    if np.abs(np.diag(r)).min() < 1e-12 * np.abs(np.diag(r)).max():
        raise EmpiricalError(
            "the terms are linearly dependent at the measured points; measure more distinct values"
        )
    coef = np.linalg.solve(r, q.T @ (data.means * sw)) / scale
    fitted = x @ coef
    within = (data.counts - 1.0) * data.stds**2
    ss = float(np.sum((data.counts * (data.means - fitted) ** 2 + within) / v))
    raw = float(np.sqrt(np.sum(data.counts * (data.means - fitted) ** 2 + within)))
    dof = data.n_obs - k
    # Coefficients (scaled) are R^-1 Q' sqrt(w) mean; each mean has variance sigma^2 v_i / n_i.
    b = np.linalg.solve(r, q.T * np.sqrt(w * v / data.counts))
    cov_factor = np.linalg.qr(b.T, mode="r")
    lev = np.sum(q * q, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = (data.means - fitted) / (1.0 - lev)
    loo = np.where(lev < 1.0 - 1e-9, loo, np.nan)
    unit = np.abs(data.means) if noise == "relative" else np.ones(data.n_points)
    return EmpiricalModel(
        kind=kind,
        params=data.params,
        terms=tuple(terms),
        coefficients=tuple(float(c) for c in coef),
        noise=noise,
        sigma2=ss / dof if dof > 0 else 0.0,
        dof=dof,
        scale=tuple(float(s) for s in scale),
        cov_factor=tuple(tuple(float(v) for v in row) for row in cov_factor),
        residual_norm=raw,
        n_points=data.n_points,
        n_obs=data.n_obs,
        ranges={p: (float(c.min()), float(c.max())) for p, c in param_columns(data).items()},
        cv_error=cv_error,
        edges=edge_errors(data, loo / unit),
        alternatives=alternatives,
    )


def edge_errors(data: Measurements, loo: FloatArray) -> dict[str, EdgeError]:
    """Per parameter, the leave-one-out error at its smallest and largest values."""
    out = {}
    for name in data.params:
        col = data.column(name)
        values = np.unique(col)
        if values.size < 2:
            continue

        lo, hi = float(values[0]), float(values[-1])
        low_step = float(np.log2(values[1] / lo)) if lo > 0 else 1.0
        high_step = float(np.log2(hi / values[-2])) if values[-2] > 0 else 1.0
        out[name] = EdgeError(
            lo, low_step, _rms(loo[col == lo]), hi, high_step, _rms(loo[col == hi])
        )
    return out


def _rms(errors: FloatArray) -> float:
    e = errors[np.isfinite(errors)]
    return float(np.sqrt(np.mean(e**2))) if e.size else 0.0
