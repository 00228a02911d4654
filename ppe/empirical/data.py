"""Measured runs as the fitting code sees them: distinct parameter points and their repetitions.

Repetitions of the same point are kept together: the search cross-validates by
point (a left-out point takes all its repetitions with it), the noise comes from
the spread of the repetitions, and the spread model fits their standard deviation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .errors import (
    EmpiricalError,
    NonFiniteValueError,
    NonPositiveValueError,
    SingleValueError,
    TooFewPointsError,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class Measurements:
    """Distinct points ``points[k]`` (one column per name in ``params``) with their repetitions.

    ``values[k]`` holds the measured values (for example times) of point ``k``;
    ``means``, ``stds`` (sample std, 0 for a single repetition) and ``counts`` summarise them.
    """

    params: tuple[str, ...]
    points: FloatArray
    values: tuple[FloatArray, ...]
    means: FloatArray
    stds: FloatArray
    counts: FloatArray

    @classmethod
    def from_arrays(cls, params: Sequence[str], x: npt.ArrayLike, y: npt.ArrayLike) -> Measurements:
        """A row of ``x`` (a value per parameter) and a ``y`` per run; equal rows are grouped."""
        names = tuple(str(p) for p in params)
        if not names:
            raise EmpiricalError("at least one parameter is needed")
        if len(set(names)) != len(names):
            raise EmpiricalError(f"parameter names repeat: {list(names)}")
        xa = np.asarray(x, dtype=np.float64)
        ya = np.asarray(y, dtype=np.float64).ravel()
        if xa.ndim == 1:
            xa = xa.reshape(-1, 1) if len(names) == 1 else xa.reshape(1, -1)
        if xa.ndim != 2 or xa.shape[1] != len(names) or xa.shape[0] != ya.size:
            raise EmpiricalError(
                f"expected {ya.size} points with {len(names)} values each, got shape {xa.shape}"
            )
        if ya.size == 0:
            raise TooFewPointsError("no runs given")
        for col, name in enumerate(names):
            if not np.isfinite(xa[:, col]).all():
                raise NonFiniteValueError(
                    f"parameter {name!r} has a NaN or infinite value", name=name
                )
        bad = np.flatnonzero(~np.isfinite(ya))
        if bad.size:
            raise NonFiniteValueError(f"run {int(bad[0])} has a NaN or infinite measured value")
        points, inverse = np.unique(xa, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        values = tuple(ya[inverse == k] for k in range(points.shape[0]))
        return cls(
            names,
            points,
            values,
            np.array([v.mean() for v in values]),
            np.array([v.std(ddof=1) if v.size > 1 else 0.0 for v in values]),
            np.array([float(v.size) for v in values]),
        )

    @classmethod
    def from_runs(
        cls, params: Sequence[str], runs: Iterable[tuple[Mapping[str, float], float]]
    ) -> Measurements:
        """From ``(point, value)`` pairs, ``point`` mapping every name in ``params`` to a number."""
        xs, ys = [], []
        for k, (point, value) in enumerate(runs):
            missing = [p for p in params if p not in point]
            if missing:
                raise EmpiricalError(f"run {k} lacks parameter {missing[0]!r}", name=missing[0])
            xs.append([float(point[p]) for p in params])
            ys.append(float(value))
        return cls.from_arrays(params, np.array(xs, dtype=np.float64).reshape(-1, len(params)), ys)

    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_obs(self) -> int:
        return int(self.counts.sum())

    def column(self, name: str) -> FloatArray:
        """The values of parameter ``name`` at each distinct point."""
        return self.points[:, self.index(name)]

    def index(self, name: str) -> int:
        if name not in self.params:
            raise EmpiricalError(
                f"unknown parameter {name!r}; known: {list(self.params)}", name=name
            )
        return self.params.index(name)

    def select(self, mask: npt.ArrayLike) -> Measurements:
        """The points where ``mask`` holds (repetitions follow their point)."""
        keep = np.flatnonzero(np.asarray(mask, dtype=bool))
        return Measurements(
            self.params,
            self.points[keep],
            tuple(self.values[k] for k in keep),
            self.means[keep],
            self.stds[keep],
            self.counts[keep],
        )

    def require_varying(self) -> None:
        """Every parameter must take at least two distinct values."""
        for name in self.params:
            if np.unique(self.column(name)).size < 2:
                raise SingleValueError(
                    f"parameter {name!r} takes a single value; its effect cannot be modelled",
                    name=name,
                )

    def require_positive(self, why: str) -> None:
        """Every parameter value must be > 0 (``why`` names what needs it)."""
        for name in self.params:
            col = self.column(name)
            if (col <= 0).any():
                raise NonPositiveValueError(
                    f"parameter {name!r} has the value {col[col <= 0].min():g}; "
                    f"{why} needs values > 0",
                    name=name,
                )
