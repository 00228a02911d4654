"""When to try a call again, and how long to wait first.

Retried: failures that say nothing about the request itself -- no connection, a connection
lost, a timeout, and 503 (the service, or a proxy before it, cannot take the request now;
``Retry-After`` is honoured). Never retried: any other 4xx (the same request will be refused
again) and other 5xx (a bug does not go away by asking twice).

A call that is not idempotent is retried only when its request certainly never reached the
server (the connection was never made), or on a 503, which is answered instead of processing
it. Every call the typed API makes is idempotent on the service's side -- measurements and
runs are keyed, a model is replaced by the same text, and a repeated schedule or prediction
only logs one more served row that no run refers to -- so only raw ``request()`` POSTs, such
as creating a token, take the strict rule.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from dataclasses import dataclass, field

import httpx

#: Exceptions raised before a single byte of the request left this process.
NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
RETRY_STATUS = 503


@dataclass
class RetryPolicy:
    """Exponential backoff with jitter: attempt k (0-based) waits ``backoff_s * 2**k`` scaled
    by a random factor in [0.5, 1] (so clients that failed together do not come back
    together), at most ``max_delay_s``; a server's ``Retry-After`` is a lower bound, capped
    the same way."""

    retries: int = 4
    backoff_s: float = 0.25
    max_delay_s: float = 30.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.retries < 0 or not self.backoff_s >= 0 or not self.max_delay_s >= 0:
            raise ValueError("retries, backoff_s and max_delay_s must be >= 0")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        base = min(self.max_delay_s, self.backoff_s * 2.0**attempt)
        wait = base * self.rng.uniform(0.5, 1.0)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_delay_s))
        return wait

    def should_retry_error(self, attempt: int, exc: Exception, idempotent: bool) -> bool:
        """Whether a transport error on attempt ``attempt`` is worth another try."""
        if attempt >= self.retries or not isinstance(exc, httpx.TransportError):
            return False
        return idempotent or isinstance(exc, NOT_SENT)

    def should_retry_status(self, attempt: int, status: int) -> bool:
        return attempt < self.retries and status == RETRY_STATUS


def retry_after_s(response: httpx.Response, now: float | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), None if absent
    or unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None
