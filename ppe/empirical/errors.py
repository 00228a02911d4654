"""Errors raised on bad input to empirical modelling.

They derive from :class:`ppe.core.ModelError`, so the service answers them with
422 and ``to_dict()`` as the detail, like every other user-caused model error;
``name`` carries the parameter (or kernel pair) at fault.
"""

from __future__ import annotations

from ppe.core.errors import ModelError


class EmpiricalError(ModelError):
    """Base class: the runs cannot give the requested model."""

    kind = "empirical"


class TooFewPointsError(EmpiricalError):
    """Fewer distinct measured points than the model has coefficients (plus what CV needs)."""

    kind = "too_few_points"


class SingleValueError(EmpiricalError):
    """A parameter takes a single distinct value, so nothing can be said about its effect."""

    kind = "single_value"


class NonPositiveValueError(EmpiricalError):
    """A parameter value is <= 0 where a log, a fractional power or an inverse needs > 0."""

    kind = "non_positive"


class NonFiniteValueError(EmpiricalError):
    """A parameter value or a measured value is NaN or infinite."""

    kind = "non_finite"


class CouplingError(EmpiricalError):
    """Kernel coupling cannot be computed (a pair never run, a non-positive time, ...)."""

    kind = "coupling"
