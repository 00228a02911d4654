"""Bad input gets a clear EmpiricalError (a ppe.core.ModelError, so a 422 in the service)."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.core.errors import ModelError
from ppe.empirical.data import Measurements
from ppe.empirical.errors import (
    EmpiricalError,
    NonFiniteValueError,
    NonPositiveValueError,
    SingleValueError,
    TooFewPointsError,
)
from ppe.empirical.model import EmpiricalModel
from ppe.empirical.search import search


def test_errors_are_model_errors_with_a_type() -> None:
    err = SingleValueError("p takes one value", name="p")
    assert isinstance(err, ModelError) and isinstance(err, EmpiricalError)
    assert err.to_dict()["type"] == "single_value" and err.to_dict()["name"] == "p"


def test_nan_time() -> None:
    with pytest.raises(NonFiniteValueError):
        Measurements.from_arrays(["n"], [1, 2, 3], [1.0, np.nan, 3.0])


def test_infinite_parameter() -> None:
    with pytest.raises(NonFiniteValueError) as err:
        Measurements.from_arrays(["n"], [1, np.inf, 3], [1.0, 2.0, 3.0])
    assert err.value.name == "n"


def test_single_distinct_value() -> None:
    data = Measurements.from_arrays(["n", "p"], [[2, 4], [4, 4], [8, 4], [16, 4]], [1, 2, 3, 4])
    with pytest.raises(SingleValueError) as err:
        search(data)
    assert err.value.name == "p"


def test_non_positive_under_log() -> None:
    data = Measurements.from_arrays(["n"], [0, 2, 4, 8, 16], [1, 2, 3, 4, 5])
    with pytest.raises(NonPositiveValueError):
        search(data)


def test_too_few_points() -> None:
    with pytest.raises(TooFewPointsError):
        search(Measurements.from_arrays(["n"], [2, 4, 2, 4], [1, 2, 1.1, 2.1]))


def test_prediction_point_lacking_a_parameter() -> None:
    model = search(Measurements.from_arrays(["n"], [2, 4, 8, 16, 32], [1, 2, 3, 4, 5]))
    with pytest.raises(EmpiricalError) as err:
        model.predict({"m": 3})
    assert err.value.name == "n"


def test_malformed_stored_model() -> None:
    model = search(Measurements.from_arrays(["n"], [2, 4, 8, 16, 32], [1, 2, 3, 4, 5]))
    data = model.to_dict()
    data["coefficients"] = data["coefficients"][:1]
    with pytest.raises(EmpiricalError):
        EmpiricalModel.from_dict(data)
