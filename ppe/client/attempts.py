"""One attempt's outcome -> wait and try again, or finish: shared by the sync and async loops."""

from __future__ import annotations

import logging
from typing import TypeVar

import httpx

from ppe.client.calls import Call
from ppe.client.errors import PPEUnavailable, error_from_response
from ppe.client.retry import NOT_SENT, RetryPolicy, retry_after_s

T = TypeVar("T")
log = logging.getLogger("ppe.client")


def delay_after_error(
    policy: RetryPolicy, attempt: int, call: Call[T], exc: httpx.TransportError, url: str
) -> float:
    """Seconds to wait before trying again after a transport error, or PPEUnavailable."""
    what = f"{call.method} {url}{call.path}"
    if policy.should_retry_error(attempt, exc, call.idempotent):
        wait = policy.delay(attempt)
        log.warning("%s: %s; retrying in %.2f s", what, _name(exc), wait)
        return wait
    tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
    if call.idempotent or isinstance(exc, NOT_SENT):
        raise PPEUnavailable(f"{what}: no answer after {tries}: {_name(exc)}") from exc
    raise PPEUnavailable(
        f"{what}: {_name(exc)} after the request was sent; not retried, as it may have been "
        "processed (it is not idempotent)"
    ) from exc


def delay_after_response(
    policy: RetryPolicy, attempt: int, response: httpx.Response
) -> float | None:
    """Seconds to wait before asking again (a 503 with retries left), or None: final."""
    if not policy.should_retry_status(attempt, response.status_code):
        return None
    wait = policy.delay(attempt, retry_after_s(response))
    log.warning(
        "%s %s: %d; retrying in %.2f s",
        response.request.method,
        response.request.url,
        response.status_code,
        wait,
    )
    return wait


def finish(call: Call[T], response: httpx.Response) -> T:
    """A final answer: its parsed body, or the error it carries."""
    if response.is_success:
        return call.parse(response)
    raise error_from_response(response)


def _name(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
