"""Prophecy's curve fitting (Taylor et al.): 12 graph types over one parameter, plus "unknown".

The types are the polynomials of order 1..6 in the parameter ``x``
(``a0 + a1 x + ... + ad x^d``: linear, quadratic, cubic, 4th-, 5th-, 6th-order)
and the same polynomials in ``1/x`` (inverse linear ``a0 + a1/x`` ... inverse
6th-order), fitted by ordinary least squares over every repetition; "unknown"
(the 13th choice) fits them all and keeps the one with the least norm of
residuals.  That choice favours the highest order that the points allow, which
is why :mod:`.search` is the default elsewhere; this module reproduces Prophecy
faithfully for comparison.

The result is an :class:`~.model.EmpiricalModel` with absolute noise (plain least
squares), so it prints, stores and predicts like any other model.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .data import Measurements
from .errors import EmpiricalError, SingleValueError, TooFewPointsError
from .model import EmpiricalModel, fit_terms
from .terms import Factor, Term

#: Graph type name -> signed order (negative: polynomial in 1/x).
GRAPH_TYPES: dict[str, int] = {
    "linear": 1,
    "quadratic": 2,
    "cubic": 3,
    "poly4": 4,
    "poly5": 5,
    "poly6": 6,
    "inverse_linear": -1,
    "inverse_quadratic": -2,
    "inverse_cubic": -3,
    "inverse_poly4": -4,
    "inverse_poly5": -5,
    "inverse_poly6": -6,
}
UNKNOWN = "unknown"
#: All 13 choices Prophecy offers.
PROPHECY_TYPES: tuple[str, ...] = (*GRAPH_TYPES, UNKNOWN)


def graph_terms(kind: str, param: str) -> tuple[Term, ...]:
    """The non-constant terms of a graph type: ``x, ..., x^d`` or ``x^-1, ..., x^-d``."""
    if kind not in GRAPH_TYPES:
        raise EmpiricalError(f"unknown graph type {kind!r}; expected one of {list(PROPHECY_TYPES)}")
    order = GRAPH_TYPES[kind]
    sign = 1 if order > 0 else -1
    return tuple(Term.of(Factor(param, Fraction(sign * k))) for k in range(1, abs(order) + 1))


def one_parameter(data: Measurements, param: str | None = None) -> Measurements:
    """The runs as a function of ``param`` alone; every other parameter must be held fixed."""
    if param is None:
        varying = [p for p in data.params if np.unique(data.column(p)).size > 1]
        if len(varying) > 1:
            raise EmpiricalError(
                f"Prophecy fits one parameter but {varying} all vary; "
                "name one and hold the others fixed"
            )
        param = varying[0] if varying else data.params[0]
    col = data.index(param)
    for other in data.params:
        if other != param and np.unique(data.column(other)).size > 1:
            raise EmpiricalError(
                f"parameter {other!r} varies; Prophecy fits {param!r} with the others held fixed",
                name=other,
            )
    if np.unique(data.points[:, col]).size < 2:
        raise SingleValueError(
            f"parameter {param!r} takes a single value; a curve needs at least two", name=param
        )
    return Measurements(
        (param,), data.points[:, [col]], data.values, data.means, data.stds, data.counts
    )


def fit_graph_type(data: Measurements, kind: str, param: str | None = None) -> EmpiricalModel:
    """Least-squares fit of one graph type (or ``"unknown"``) over one parameter."""
    one = one_parameter(data, param)
    if kind == UNKNOWN:
        return fit_unknown(one)
    terms = graph_terms(kind, one.params[0])
    model = fit_terms(one, terms, kind=kind, noise="absolute")
    return model


def residual_norms(data: Measurements, param: str | None = None) -> dict[str, float]:
    """The residual norm of every graph type the points can fix (in GRAPH_TYPES order)."""
    one = one_parameter(data, param)
    out: dict[str, float] = {}
    for kind in GRAPH_TYPES:
        if abs(GRAPH_TYPES[kind]) + 1 > one.n_points:
            continue
        try:
            model = fit_terms(one, graph_terms(kind, one.params[0]), kind, "absolute")
        except EmpiricalError:
            continue  # e.g. numerically dependent columns: that type cannot be fitted here
        out[kind] = model.residual_norm
    return out


def fit_unknown(data: Measurements, param: str | None = None) -> EmpiricalModel:
    """Prophecy's automatic choice: the graph type with the least norm of residuals."""
    one = one_parameter(data, param)
    norms = residual_norms(one)
    if not norms:
        raise TooFewPointsError(
            f"{one.n_points} distinct points are too few for any graph type (a line needs 2)"
        )
    best = min(norms, key=lambda k: norms[k])
    return fit_terms(one, graph_terms(best, one.params[0]), kind=best, noise="absolute")
