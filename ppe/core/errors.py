"""Errors raised by the PPE core.

Every error a caller can cause (bad grammar, bad parameters, an evaluation that
cannot be carried out) derives from :class:`ModelError` and carries enough to
point at the culprit: line and column in the model text, the offending token,
and/or the parameter name.  ``to_dict()`` is the body of a 422 response.
"""

from __future__ import annotations

from typing import Any


class StochasticError(ValueError):
    """Arithmetic on stochastic values that cannot be carried out (e.g. x / 0)."""


class ModelError(ValueError):
    """Base class for user-caused model errors; maps to HTTP 422."""

    kind = "model"

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        token: str | None = None,
        name: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.token = token
        self.name = name
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line is not None else ""
        return f"{where}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (the ``detail`` of a 422 response)."""
        return {
            "type": self.kind,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "token": self.token,
            "name": self.name,
        }


class GrammarError(ModelError):
    """The model text is malformed or inconsistent (found before any evaluation).

    ``errors`` lists every problem found (the exception itself describes the first).
    """

    kind = "grammar"

    def __init__(self, message: str, **where: Any) -> None:
        super().__init__(message, **where)
        self.errors: list[GrammarError] = [self]


class ParameterError(ModelError):
    """A parameter, host input or allocation is missing, unknown or invalid."""

    kind = "parameter"


class EvaluationError(ModelError):
    """The model is valid but cannot be evaluated with these inputs
    (index out of range, division by zero, no link between two hosts, ...)."""

    kind = "evaluation"
