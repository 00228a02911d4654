"""Prometheus metrics, one registry per app (no module-level global state).

With several workers (`ppe serve --workers N`) each is its own process: the CLI then points
prometheus-client's multiprocess mode at a fresh directory (`PROMETHEUS_MULTIPROC_DIR`), every
worker writes its counters there, and a scrape answered by any worker adds them all up.
Figures that are functions of the store (live accuracy, runs reported) are not kept per worker:
collectors registered with :meth:`Metrics.watch` compute them at scrape time in every mode.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    #: scrape-time collectors (see :meth:`watch`)
    watched: list[Collector] = field(default_factory=list)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "ppe_http_requests", "HTTP requests", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "ppe_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.measurements = Counter(
            "ppe_measurements_ingested", "Measurements accepted (incl. duplicates)", registry=r
        )
        self.measurements_new = Counter(
            "ppe_measurements_stored", "New measurement rows stored", registry=r
        )
        self.rejected_batches = Counter(
            "ppe_rejected_batches", "Measurement batches rejected whole", ["reason"], registry=r
        )
        self.schedules = Counter("ppe_schedules", "Schedules served", ["strategy"], registry=r)
        self.predictions = Counter("ppe_predictions", "Predictions served", registry=r)

    def watch(self, collector: Collector) -> None:
        """Add a collector that reads its figures at scrape time (the same in every worker);
        it replaces one of the same class (an app's lifespan may run again)."""
        for old in [c for c in self.watched if type(c) is type(collector)]:
            self.watched.remove(old)
            self.registry.unregister(old)
        self.watched.append(collector)
        self.registry.register(collector)

    def render(self) -> bytes:
        """This worker's registry, or every worker's when the service runs several."""
        if os.environ.get(MULTIPROC_ENV):
            merged = CollectorRegistry()
            MultiProcessCollector(merged)
            for collector in self.watched:
                merged.register(collector)
            return generate_latest(merged)
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware) counting and timing requests."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}
        start = time.perf_counter()

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            path = route_template(scope)
            method = scope.get("method", "")
            self.metrics.requests.labels(method, path, str(status["code"])).inc()
            self.metrics.latency.labels(method, path).observe(time.perf_counter() - start)


def route_template(scope: dict[str, Any]) -> str:
    """The matched route's path template (bounded label cardinality, unlike raw paths).

    FastAPI >= 0.16x keeps included routers nested, so the route object only knows its path
    relative to its router; the effective context carries the full template.
    """
    ctx = scope.get("fastapi", {}).get("effective_route_context")
    if ctx is not None and getattr(ctx, "path", None):
        return str(ctx.path)
    route = scope.get("route")
    return str(getattr(route, "path", None) or "unmatched")
