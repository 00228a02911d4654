"""What a call can fail with: the server refused it (4xx), failed (5xx), or was not reachable.

A 4xx carries the service's own words. The service answers three shapes (README "Errors"):
a ProblemReport ``{"detail": [{"index", "offset", "field", "reason"}]}``, a model's
``{"detail": [{"type", "message", "line", "column", ...}]}`` and a Message ``{"detail": "..."}``;
:func:`error_from_response` turns each into the message people read and the list of problems
programs inspect.
"""

from __future__ import annotations

from typing import Any

import httpx


class PPEError(Exception):
    """Every error the client raises."""


class PPERequestError(PPEError):
    """The server refused the request (a 4xx): retrying the same request cannot help.

    ``problems`` are the server's items (``{"index", "field", "reason", ...}``; empty for a
    plain message such as a 401), ``str()`` the server's message.
    """

    def __init__(self, status: int, message: str, problems: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.problems = problems


class PPEServerError(PPEError):
    """A 5xx, after the retries a 503 is given."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class PPEUnavailable(PPEError):
    """No answer at all (connection refused, reset, timed out), after the retries."""


def describe_problem(problem: dict[str, Any]) -> str:
    """One problem as a line: where (item, field, offset), then why."""
    where = []
    if problem.get("index") is not None:
        where.append(f"item {problem['index']}")
    if problem.get("field"):
        where.append(str(problem["field"]))
    if problem.get("offset") is not None:
        where.append(f"at character {problem['offset']}")
    if problem.get("line") is not None:  # a model's text
        where.append(f"line {problem['line']}, column {problem.get('column')}")
    why = problem.get("reason") or problem.get("message") or "invalid"
    return f"{' '.join(where)}: {why}" if where else str(why)


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def server_message(response: httpx.Response) -> tuple[str, list[dict[str, Any]]]:
    """The message and problems of an error answer, whichever documented shape it has."""
    body = _body(response)
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str):
        return detail, []
    if isinstance(detail, list) and all(isinstance(p, dict) for p in detail) and detail:
        return "; ".join(describe_problem(p) for p in detail), list(detail)
    text = response.text.strip()[:500]
    return text or response.reason_phrase or f"HTTP {response.status_code}", []


def error_from_response(response: httpx.Response) -> PPEError:
    """The exception for a 4xx or 5xx answer."""
    message, problems = server_message(response)
    if response.status_code < 500:
        return PPERequestError(response.status_code, message, problems)
    return PPEServerError(response.status_code, message)
