"""Dependent draws: hosts whose slowdowns come together (a Gaussian copula over the marginals).

Each host's draws keep their own values (its marginal law is untouched); only *which* draw of
one host meets which draw of another changes: the draws of every host are put in the rank
order of correlated standard normals (Iman and Conover's rank reordering). With a correlation
matrix ``dependence`` from the forecaster (``forecaster.co_movement``), hosts of one group are
slow in the same draws, which is what decides a makespan (a max over hosts).

All hosts' draws must point the same way (larger = slower: times per row, times), so a
positive correlation means "slow together".
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

#: Tolerance for symmetry and the unit diagonal of a dependence matrix.
_TOL = 1e-6


def check_dependence(dependence: ArrayLike | None, n: int) -> FloatArray | None:
    """A valid ``n x n`` correlation matrix as floats, or None for independence.

    Raises ``ValueError`` naming what is wrong (shape, non-finite, asymmetric, diagonal not 1,
    entries outside [-1, 1], not positive semi-definite).
    """
    if dependence is None:
        return None
    c = np.asarray(dependence, dtype=np.float64)
    if c.shape != (n, n):
        raise ValueError(f"dependence must be {n} x {n} (one row per host), got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("dependence has non-finite entries")
    if not np.allclose(c, c.T, atol=_TOL):
        raise ValueError("dependence must be symmetric")
    if not np.allclose(np.diag(c), 1.0, atol=_TOL):
        raise ValueError("dependence must have 1 on its diagonal")
    if np.any(np.abs(c) > 1.0 + _TOL):
        raise ValueError("dependence entries must lie in [-1, 1]")
    if n and float(np.linalg.eigvalsh((c + c.T) / 2).min()) < -1e-8:
        raise ValueError("dependence must be positive semi-definite (a correlation matrix)")
    if np.allclose(c, np.eye(n), atol=_TOL):
        return None
    return c


def couple(draws: FloatArray, dependence: FloatArray | None, seed: int, stream: int) -> FloatArray:
    """``draws`` (hosts x samples) reordered per host so their ranks follow correlated normals.

    Deterministic in (``seed``, ``stream``): every allocation a strategy compares is judged on
    the same coupled draws (common random numbers). Rows that are constant are left alone.
    """
    if dependence is None or draws.shape[0] < 2:
        return draws
    n, size = draws.shape
    vals, vecs = np.linalg.eigh(dependence)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))  # root @ root.T == dependence
    rng = np.random.default_rng([seed, stream, 0x636F70])  # "cop"
    z = root @ rng.standard_normal((n, size))
    ranks = np.argsort(np.argsort(z, axis=1, kind="stable"), axis=1, kind="stable")
    out: FloatArray = np.take_along_axis(np.sort(draws, axis=1), ranks, axis=1)
    return out
