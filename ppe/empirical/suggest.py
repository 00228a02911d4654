"""Which runs to measure next: the points that most shrink the intervals at the target sizes.

The criterion is the variance of the fitted mean at the targets, each relative to
the predicted value there (so a small and a large target count alike), summed.
A run at point ``c`` adds ``w_c f_c f_c'`` to the information matrix ``X'WX``
(``f_c`` the term values, ``w_c = 1 / v_c`` its noise weight), so its effect on
every target follows from one rank-one (Sherman-Morrison) update; runs are
picked greedily, ``budget`` times, by reduction per predicted cost.  The terms
are those of the chosen model and of its admissible alternatives together, so a
run that tells the competing models apart also scores: the interval's
model-choice part shrinks with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .data import Measurements
from .errors import EmpiricalError
from .model import EmpiricalModel, param_columns, variance_shape
from .search import search
from .terms import Term, design

FloatArray = npt.NDArray[np.float64]
#: Ridge (relative to the information's diagonal) that keeps the union of terms invertible.
RIDGE = 1e-8


def default_candidates(data: Measurements) -> list[dict[str, float]]:
    """Per parameter: the measured values, their geometric midpoints and one step beyond."""
    axes = []
    for name in data.params:
        vals = np.unique(data.column(name))
        mids = np.sqrt(vals[1:] * vals[:-1])
        beyond = vals[-1] * vals[-1] / vals[-2]
        axes.append(np.unique(np.concatenate([vals, mids, [beyond]])))
    return [dict(zip(data.params, map(float, c), strict=True)) for c in itertools.product(*axes)]


def suggest_next(
    data: Measurements,
    budget: int,
    targets: Sequence[Mapping[str, float]],
    candidates: Sequence[Mapping[str, float]] | None = None,
    model: EmpiricalModel | None = None,
    by_cost: bool = True,
) -> list[dict[str, float]]:
    """The ``budget`` runs (points, possibly repeated) that most reduce the target intervals.

    With ``by_cost`` (the default, for time-like metrics) a run's reduction is divided
    by its predicted value, its cost: otherwise the answer is mostly "run the target".
    Candidates default to :func:`default_candidates`.
    """
    if budget < 1:
        raise EmpiricalError(f"budget must be at least 1 run, got {budget}")
    if not targets:
        raise EmpiricalError("name at least one target point")
    model = model or search(data)
    cands = list(candidates) if candidates is not None else default_candidates(data)
    if not cands:
        raise EmpiricalError("no candidate points")
    terms = _union_terms(model)
    info, scale = _information(data, model, terms)
    f_t = design(terms, model.columns(targets), len(targets)) / scale
    f_c = design(terms, model.columns(cands), len(cands)) / scale
    mean_t = np.abs(model.predict_arrays(targets, "mean")[0])
    mean_c = np.abs(model.predict_arrays(cands, "mean")[0])
    w_c = 1.0 / (mean_c**2 if model.noise == "relative" else np.ones_like(mean_c))
    cost = np.maximum(mean_c, 1e-12 * mean_c.max()) if by_cost else np.ones_like(mean_c)
    f_t = f_t / np.where(mean_t > 0, mean_t, 1.0)[:, None]
    cov = np.linalg.inv(info)
    picked: list[dict[str, float]] = []
    for _ in range(budget):
        a = f_c @ cov  # (C, k)
        cross = a @ f_t.T  # (C, T)
        lev = np.einsum("ck,ck->c", a, f_c)
        gain = w_c * np.sum(cross**2, axis=1) / (1.0 + w_c * lev)
        best = int(np.argmax(gain / cost))
        picked.append({k: float(v) for k, v in cands[best].items()})
        u = a[best]
        cov = cov - np.outer(u, u) * w_c[best] / (1.0 + w_c[best] * lev[best])
    return picked


def _union_terms(model: EmpiricalModel) -> list[Term]:
    terms = list(model.terms)
    for alt in model.alternatives:
        terms += [t for t in alt.terms if t not in terms]
    return terms


def _information(
    data: Measurements, model: EmpiricalModel, terms: Sequence[Term]
) -> tuple[FloatArray, FloatArray]:
    """``X'WX`` of the runs for column-scaled terms (plus a small ridge), and the scales."""
    x = design(terms, param_columns(data), data.n_points)
    w = data.counts / variance_shape(data, model.noise)
    scale = np.sqrt(np.sum(x * x * w[:, None], axis=0))
    xs = x / scale
    info = xs.T @ (xs * w[:, None])
    return info + RIDGE * np.eye(len(scale)), scale
