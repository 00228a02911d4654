"""Prophecy's 13 graph types: exact recovery on noiseless data, "unknown" by least residual norm."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.empirical.data import Measurements
from ppe.empirical.errors import EmpiricalError, NonPositiveValueError, TooFewPointsError
from ppe.empirical.prophecy import GRAPH_TYPES, PROPHECY_TYPES, fit_graph_type, residual_norms

X = np.array([2.0, 3.0, 5.0, 8.0, 12.0, 17.0, 23.0, 30.0, 40.0])


def truth(kind: str, x: np.ndarray) -> tuple[np.ndarray, list[float]]:
    order = GRAPH_TYPES[kind]
    coefs = [1.5] + [0.7 * (-1) ** k / (k + 1) for k in range(abs(order))]
    base = x if order > 0 else 1.0 / x
    return sum(c * base**k for k, c in enumerate(coefs)), coefs


def test_there_are_13_choices() -> None:
    assert len(PROPHECY_TYPES) == 13 and "unknown" in PROPHECY_TYPES


@pytest.mark.parametrize("kind", list(GRAPH_TYPES))
def test_each_type_recovers_its_coefficients(kind: str) -> None:
    y, coefs = truth(kind, X)
    model = fit_graph_type(Measurements.from_arrays(["n"], X, y), kind)
    assert model.kind == kind
    np.testing.assert_allclose(model.coefficients, coefs, rtol=1e-6, atol=1e-9)
    assert model.residual_norm < 1e-6 * np.linalg.norm(y)
    outside = 55.0
    expected = float(truth(kind, np.array([outside]))[0][0])
    assert model.predict({"n": outside}).mean == pytest.approx(expected, rel=1e-6)


def test_plain_form_names_the_terms() -> None:
    y, _ = truth("inverse_quadratic", X)
    text = fit_graph_type(Measurements.from_arrays(["n"], X, y), "inverse_quadratic").formula
    assert "n^(-1)" in text and "n^(-2)" in text


def test_unknown_takes_the_least_residual_norm() -> None:
    rng = np.random.default_rng(7)
    y = 3 + 0.2 * X**2 + rng.normal(0, 1.0, X.size)
    data = Measurements.from_arrays(["n"], X, y)
    norms = residual_norms(data)
    chosen = fit_graph_type(data, "unknown")
    assert chosen.kind == min(norms, key=lambda k: norms[k])
    assert chosen.residual_norm == pytest.approx(min(norms.values()))


def test_other_parameters_must_be_held_fixed() -> None:
    x = np.array([[2, 1], [4, 1], [8, 2], [16, 2]], dtype=float)
    with pytest.raises(EmpiricalError, match="held fixed|hold"):
        fit_graph_type(Measurements.from_arrays(["n", "p"], x, [1, 2, 3, 4]), "linear", "n")


def test_fewer_points_than_coefficients() -> None:
    with pytest.raises(TooFewPointsError):
        fit_graph_type(Measurements.from_arrays(["n"], [1, 2, 3], [1, 2, 4]), "cubic")


def test_inverse_needs_positive_values() -> None:
    with pytest.raises(NonPositiveValueError) as err:
        fit_graph_type(
            Measurements.from_arrays(["p"], [-1, 1, 2, 4], [1, 2, 3, 4]), "inverse_linear"
        )
    assert err.value.name == "p"
