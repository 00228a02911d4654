"""A client library of the PPE service for applications and tools (httpx, sync and async).

    from ppe.client import PPEClient
    with PPEClient("http://127.0.0.1:8000", token) as ppe:
        plan = ppe.schedule(hosts=["h1", "h2"], n=4000, iterations=100, strategy="expected")

It depends on httpx and the standard library only (never on the service), so an
application installs it without the server's stack. docs/client.md is the tour.
"""

from ppe.client.asynchronous import AsyncPPEClient
from ppe.client.errors import PPEError, PPERequestError, PPEServerError, PPEUnavailable
from ppe.client.retry import RetryPolicy
from ppe.client.sync import PPEClient
from ppe.client.types import Measurement, RunReport, Schedule, Strip

__all__ = [
    "AsyncPPEClient",
    "Measurement",
    "PPEClient",
    "PPEError",
    "PPERequestError",
    "PPEServerError",
    "PPEUnavailable",
    "RetryPolicy",
    "RunReport",
    "Schedule",
    "Strip",
]
