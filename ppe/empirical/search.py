"""Model search over the performance-model normal form ``c0 + sum_k c_k prod x^i log2(x)^j``.

Candidates.  One parameter: every ``x^i log2(x)^j`` of the exponent sets
(:data:`~.terms.POLY_EXPONENTS` x :data:`~.terms.LOG_EXPONENTS`), in sums of 0 to
``max_terms`` terms.  Several parameters: each parameter's factors are first
ranked on the "lines" of points where the other parameters are fixed, the best
``per_param`` of each are kept, and the term pool is those factors alone plus
their products across parameters (a parameter with two distinct values only
gets ``x``: any other factor spans the same columns).  All sums of up to
``max_terms`` pool terms are tried (a beam over the best smaller sums when that
would be too many).

Choice.  Each hypothesis is fitted with the weights of :func:`~.model.fit_weights`
and scored by its leave-one-point-out error relative to the measured mean
(absolute error over the mean magnitude for absolute noise); the score is the
mean of those errors.  Admissible hypotheses are those within one standard error
of the best score (the "one-standard-error rule") or under the noise floor that
the repetitions imply (:func:`noise_floors`); among them the fewest terms win,
and the best-scoring of those is chosen.  The other admissible ones with as few
terms are kept as alternatives: the spread of their predictions is part of the
interval (see :mod:`.model`).  Sums have at most :func:`max_size` terms.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from .crossval import loo_residuals
from .data import Measurements
from .errors import TooFewPointsError
from .model import Alternative, EmpiricalModel, default_noise, fit_terms, fit_weights, param_columns
from .terms import LOG_EXPONENTS, POLY_EXPONENTS, Factor, Term, single_factors

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Above this many hypotheses of one size, extend only the best smaller ones (a beam).
EXHAUSTIVE_LIMIT = 20_000
BEAM = 60
#: Scored hypotheses kept per size (for alternatives and diagnostics).
KEEP = 50
#: Admissible alternatives kept with a model (their spread widens its intervals).
ALTERNATIVES = 8
#: Standard errors of a noise-only score that a true model may still exceed (its floor).
FLOOR_SE = 3.0
#: Scores closer than this (relative error units) are equal: noiseless fits differ by rounding.
SCORE_ATOL = 1e-9


@dataclass(frozen=True)
class SearchConfig:
    """What the search may use (defaults: the issue's exponent sets, up to three terms)."""

    poly: tuple[Fraction, ...] = POLY_EXPONENTS
    logs: tuple[int, ...] = LOG_EXPONENTS
    max_terms: int = 3
    per_param: int = 5
    noise: str | None = None


@dataclass(frozen=True)
class Scored:
    """A hypothesis: its terms, cross-validated score, the score's standard error, and
    the score it would have as the true model (:func:`noise_floors`)."""

    terms: tuple[Term, ...]
    score: float
    se: float
    floor: float = 0.0


@dataclass(frozen=True)
class SearchResult:
    """The chosen model and every scored hypothesis, best score first."""

    model: EmpiricalModel
    ranked: tuple[Scored, ...]


def search(data: Measurements, config: SearchConfig = SearchConfig()) -> EmpiricalModel:
    """The normal-form model chosen by cross-validation (see the module docstring)."""
    return search_all(data, config).model


def search_all(
    data: Measurements, config: SearchConfig = SearchConfig(), noise_std: FloatArray | None = None
) -> SearchResult:
    """The chosen model and the scored hypotheses.

    ``noise_std`` (per point, relative for relative noise) overrides :func:`mean_noise`.
    """
    data.require_varying()
    data.require_positive("the normal form's logs and fractional powers")
    if data.n_points < 3:
        raise TooFewPointsError(
            f"{data.n_points} distinct points: the search needs at least 3 "
            "(two coefficients and one point to validate them)"
        )
    noise = config.noise or default_noise(data)
    weights = fit_weights(data, noise)
    pool = term_pool(data, config, weights, noise)
    sigma = mean_noise(data, noise) if noise_std is None else noise_std
    size = max_size(data.n_points, config.max_terms)
    ranked = score_sums(data, pool, weights, noise, size, sigma)
    chosen, *others = choose(ranked)
    alternatives = []
    for alt in others[:ALTERNATIVES]:
        fitted = fit_terms(data, alt.terms, noise=noise)
        alternatives.append(Alternative(fitted.terms, fitted.coefficients))
    model = fit_terms(
        data,
        chosen.terms,
        kind="search",
        noise=noise,
        cv_error=chosen.score,
        alternatives=tuple(alternatives),
    )
    return SearchResult(model, tuple(ranked))


def max_size(n_points: int, max_terms: int) -> int:
    """Sums of at most this many terms.

    A term costs about two degrees of freedom (its exponents are chosen from the
    data, then its coefficient is fitted): 5 points allow one term, 6 or 7 two,
    8 or more three.
    """
    return max(1, min(max_terms, (n_points - 2) // 2))


def relative_losses(loo: FloatArray, y: FloatArray, noise: str) -> FloatArray:
    denom = np.abs(y) if noise == "relative" else np.full_like(y, np.mean(np.abs(y)) or 1.0)
    return np.asarray(np.abs(loo) / denom, dtype=np.float64)


def mean_noise(data: Measurements, noise: str) -> FloatArray:
    """Each point mean's noise std (relative to the mean for relative noise), from the repetitions.

    The repetitions' scatter is pooled over the points (relative to each mean for
    relative noise); zero when no point is repeated.
    """
    reps = data.counts - 1.0
    if reps.sum() < 2:
        return np.zeros(data.n_points)
    if noise == "relative":
        rel = data.stds / np.abs(data.means)
    else:
        rel = data.stds / (np.mean(np.abs(data.means)) or 1.0)
    sigma = math.sqrt(float(np.sum(reps * rel**2) / reps.sum()))
    return np.asarray(sigma / np.sqrt(data.counts), dtype=np.float64)


def noise_floors(noise: FloatArray, y: FloatArray, mode: str) -> FloatArray:
    """The score each hypothesis would reach if it were the true model (one per row of ``noise``).

    ``noise`` holds each leave-one-out residual's std from noise alone
    (:func:`~.crossval.loo_residuals`); a residual's mean absolute value is
    ``sqrt(2/pi)`` times its std, and :data:`FLOOR_SE` standard errors of a mean of
    ``m`` half-normal values are added.
    """
    m = y.size
    typical = math.sqrt(2.0 / math.pi) * relative_losses(noise, y, mode).mean(axis=1)
    return np.asarray(
        typical * (1.0 + FLOOR_SE * math.sqrt(math.pi / 2.0 - 1.0) / math.sqrt(m)), dtype=np.float64
    )


def score_sums(
    data: Measurements,
    pool: Sequence[Term],
    weights: FloatArray,
    noise: str,
    max_terms: int,
    noise_std: FloatArray,
) -> list[Scored]:
    """Sums of up to ``max_terms`` pool terms, scored (the best :data:`KEEP` per size)."""
    columns = np.column_stack([t.evaluate(param_columns(data)) for t in pool])
    m = data.n_points
    unit = np.abs(data.means) if noise == "relative" else np.ones(m) * np.mean(np.abs(data.means))
    var = (noise_std * unit) ** 2
    out: list[Scored] = []
    beam = np.zeros((1, 0), dtype=np.intp)
    for size in range(0, max_terms + 1):
        if size == 0:
            hyps = beam
        elif math.comb(len(pool), size) <= EXHAUSTIVE_LIMIT:
            hyps = np.array(list(itertools.combinations(range(len(pool)), size)), dtype=np.intp)
        else:
            hyps = extend(beam, len(pool))
        if hyps.size == 0 and size > 0:
            break
        loo, loo_noise = loo_residuals(columns, data.means, weights, hyps, var)
        losses = relative_losses(loo, data.means, noise)
        floors = noise_floors(loo_noise, data.means, noise)
        score = losses.mean(axis=1)
        se = losses.std(axis=1, ddof=1) / math.sqrt(m)
        order = np.argsort(score, kind="stable")
        order = order[np.isfinite(score[order])]
        out += [
            Scored(tuple(pool[k] for k in hyps[j]), float(score[j]), float(se[j]), float(floors[j]))
            for j in order[:KEEP]
        ]
        beam = hyps[order[:BEAM]]
    out.sort(key=lambda s: s.score)
    return out


def extend(beam: IntArray, pool_size: int) -> IntArray:
    """Every hypothesis of ``beam`` with one more pool term (deduplicated, sorted indices)."""
    rows = {tuple(sorted((*h, k))) for h in beam.tolist() for k in range(pool_size) if k not in h}
    return np.array(sorted(rows), dtype=np.intp).reshape(len(rows), beam.shape[1] + 1)


def choose(ranked: Sequence[Scored]) -> list[Scored]:
    """The admissible hypotheses, chosen one first.

    Admissible: within one standard error of the best score, or no worse than the
    noise alone would make it (its own floor).  Among those the fewest terms win;
    the best-scoring is chosen, the others are the alternatives the data cannot
    rule out.
    """
    if not ranked:
        raise TooFewPointsError("no hypothesis could be validated on these points")
    best = ranked[0]
    limit = best.score + best.se + SCORE_ATOL
    fits = [s for s in ranked if s.score <= max(limit, s.floor + SCORE_ATOL)]
    fewest = min(len(s.terms) for s in fits)
    return sorted((s for s in fits if len(s.terms) == fewest), key=lambda s: s.score)


# ---------------------------------------------------------------- the term pool


def term_pool(
    data: Measurements, config: SearchConfig, weights: FloatArray, noise: str
) -> list[Term]:
    """One parameter: all its factors.  Several: the best factors per parameter and products."""
    if len(data.params) == 1:
        return [Term.of(f) for f in single_factors(data.params[0], config.poly, config.logs)]
    best = {p: ranked_factors(data, p, config, weights, noise) for p in data.params}
    pool = [Term.of(f) for p in data.params for f in best[p]]
    for r in range(2, len(data.params) + 1):
        for group in itertools.combinations(data.params, r):
            keep = max(1, config.per_param if r == 2 else 2)
            for combo in itertools.product(*(best[p][:keep] for p in group)):
                pool.append(Term.of(*combo))
    return pool


def ranked_factors(
    data: Measurements, param: str, config: SearchConfig, weights: FloatArray, noise: str
) -> list[Factor]:
    """The ``per_param`` factors of ``param`` that explain it best where the others are fixed.

    On each "line" (points where the other parameters are fixed) every one-term
    and two-term sum of ``param``'s factors is scored; scores are averaged over
    lines.  The list starts with the best single factors and is filled with the
    factors of the best two-term sums (a kernel like ``n^3 + n`` is not explained
    by either term alone).
    """
    col = data.index(param)
    x = data.points[:, col]
    if np.unique(x).size < 3:
        return [Factor(param, Fraction(1))]
    factors = single_factors(param, config.poly, config.logs)
    others = np.delete(data.points, col, axis=1)
    _, line_of = np.unique(others, axis=0, return_inverse=True)
    line_of = line_of.ravel()
    lines = [np.flatnonzero(line_of == k) for k in range(int(line_of.max()) + 1)]
    lines = [idx for idx in lines if np.unique(x[idx]).size >= 3] or [np.arange(data.n_points)]
    columns = np.column_stack([f.evaluate(x) for f in factors])
    pairs_ok = all(idx.size >= 5 for idx in lines)
    sizes = (1, 2) if pairs_ok else (1,)
    totals = []
    for size in sizes:
        hyps = np.array(list(itertools.combinations(range(len(factors)), size)), dtype=np.intp)
        total = np.zeros(len(hyps))
        for idx in lines:
            loo, _ = loo_residuals(columns[idx], data.means[idx], weights[idx], hyps)
            total += relative_losses(loo, data.means[idx], noise).mean(axis=1)
        totals.append((hyps, total))
    chosen: list[int] = []
    singles_hyps, singles = totals[0]
    for k in np.argsort(singles, kind="stable")[: (config.per_param + 1) // 2]:
        if np.isfinite(singles[k]):
            chosen.append(int(singles_hyps[k, 0]))
    ordered = [totals[1]] if len(totals) > 1 else []
    ordered.append(totals[0])
    for hyps, total in ordered:
        for k in np.argsort(total, kind="stable"):
            if len(chosen) >= config.per_param or not np.isfinite(total[k]):
                break
            chosen += [int(j) for j in hyps[k] if int(j) not in chosen]
    return [factors[k] for k in chosen[: config.per_param]] or [Factor(param, Fraction(1))]
