"""PPEClient: the service's API as typed, blocking calls over one keep-alive connection pool."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from ppe.client import calls
from ppe.client.attempts import delay_after_error, delay_after_response, finish
from ppe.client.calls import Call
from ppe.client.retry import RetryPolicy
from ppe.client.types import Measurement, RunReport, Schedule

T = TypeVar("T")


class PPEClient:
    """A client of one PPE service (``url``: else ``$PPE_URL``, else http://127.0.0.1:8000;
    ``token``: else ``$PPE_TOKEN``). Errors: :mod:`ppe.client.errors`; retries:
    :mod:`ppe.client.retry`. ``transport`` is httpx's, for tests and proxies."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff_s: float = 0.25,
        max_delay_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = calls.base_url(url)
        self.retry = RetryPolicy(retries, backoff_s, max_delay_s)
        self._http = httpx.Client(
            base_url=self.url,
            headers=calls.auth_headers(token),
            timeout=timeout,
            transport=transport,
        )

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> PPEClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        content, headers = call.content(), call.all_headers()
        for attempt in itertools.count():
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    content=content,
                    params=call.params,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                time.sleep(delay_after_error(self.retry, attempt, call, exc, self.url))
                continue
            wait = delay_after_response(self.retry, attempt, response)
            if wait is None:
                return finish(call, response)
            time.sleep(wait)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ the API

    def health(self) -> dict[str, Any]:
        return self._send(calls.health())

    def post_measurements(self, items: Sequence[Measurement | Mapping[str, Any]]) -> dict[str, Any]:
        return self._send(calls.post_measurements(items))

    def forecast(
        self,
        resource: str,
        metric: str = "cpu",
        *,
        horizon_s: float | None = None,
        at: float | None = None,
        peer: str | None = None,
        confidence: float | None = None,
    ) -> dict[str, Any]:
        return self._send(
            calls.forecast(
                resource, metric, horizon_s=horizon_s, at=at, peer=peer, confidence=confidence
            )
        )

    def predict(self, **fields: Any) -> dict[str, Any]:
        return self._send(calls.predict(fields))

    def schedule(
        self,
        *,
        hosts: Sequence[str | Mapping[str, Any]],
        n: int,
        iterations: int = 100,
        app: str = "sor",
        strategy: str = "mean",
        k: float = 2.0,
        current: Sequence[tuple[str, int]] | Mapping[str, int] | None = None,
        replan_every_s: float | None = None,
        **extra: Any,
    ) -> Schedule:
        return self._send(
            calls.schedule(
                hosts=hosts,
                n=n,
                iterations=iterations,
                app=app,
                strategy=strategy,
                k=k,
                current=current,
                replan_every_s=replan_every_s,
                extra=extra,
            )
        )

    def served_schedule(self, schedule_id: int) -> dict[str, Any]:
        """A served schedule as logged: ``{"id", "created_at", "request", "response"}``."""
        return self._send(calls.served_schedule(schedule_id))

    def post_runs(self, runs: Sequence[RunReport | Mapping[str, Any]]) -> dict[str, Any]:
        return self._send(calls.post_runs(runs))

    def runs(self, **filters: Any) -> list[dict[str, Any]]:
        return self._send(calls.runs(filters))

    def run(self, run_id: int) -> dict[str, Any]:
        return self._send(calls.run(run_id))

    def models(self) -> list[dict[str, Any]]:
        return self._send(calls.models())

    def model(self, name: str) -> dict[str, Any]:
        return self._send(calls.model(name))

    def put_model(self, name: str, text: str, description: str = "") -> dict[str, Any]:
        return self._send(calls.put_model(name, text, description))

    def resources(self) -> list[dict[str, Any]]:
        return self._send(calls.resources())

    def resource(self, name: str) -> dict[str, Any]:
        return self._send(calls.resource(name))

    def put_resource(self, name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        """Register a host's properties (operator): ``benchmark``, ``memory_bytes``, ..."""
        return self._send(calls.put_resource(name, properties))

    def post_phase_signature(
        self,
        name: str,
        app: str,
        analysis: Mapping[str, Any],
        parameters: Mapping[str, Any] | None = None,
        ranks: int | None = None,
    ) -> dict[str, Any]:
        """Store a PAS2P analysis (``ppe.pas2p.report.to_dict``) as ``name``'s next version
        (operator); ``ranks`` defaults to the analysis'. The answer names the version."""
        return self._send(calls.post_phase_signature(name, app, analysis, parameters or {}, ranks))

    def phase_signatures(self) -> list[dict[str, Any]]:
        return self._send(calls.phase_signatures())

    def phase_signature(self, name: str, version: int | None = None) -> dict[str, Any]:
        """A stored PAS2P signature (its newest version, or ``version``) with its analysis."""
        return self._send(calls.phase_signature(name, version))

    def post_phase_probe(
        self,
        name: str,
        host: str,
        status: str = "ok",
        *,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """Record one run of the signature on a registered host (sensor or operator)."""
        return self._send(calls.post_phase_probe(name, host, status, error, result, version))

    def phase_probes(
        self,
        name: str,
        *,
        host: str | None = None,
        version: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The signature's probes, newest first."""
        return self._send(calls.phase_probes(name, host, version, limit))

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Any route, with the same errors and retries (POST/PATCH: strict, see retry)."""
        return self._send(calls.raw(method, path, json=json, params=params, idempotent=idempotent))
