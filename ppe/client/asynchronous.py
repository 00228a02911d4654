"""AsyncPPEClient: PPEClient's calls as coroutines, over one keep-alive connection pool."""

from __future__ import annotations

import asyncio
import itertools
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


class AsyncPPEClient:
    """:class:`~ppe.client.sync.PPEClient`'s twin for asyncio: the same arguments, methods
    and errors; ``async with``, ``await client.aclose()``."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff_s: float = 0.25,
        max_delay_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = calls.base_url(url)
        self.retry = RetryPolicy(retries, backoff_s, max_delay_s)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=calls.auth_headers(token),
            timeout=timeout,
            transport=transport,
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> AsyncPPEClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        content, headers = call.content(), call.all_headers()
        for attempt in itertools.count():
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    content=content,
                    params=call.params,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                await asyncio.sleep(delay_after_error(self.retry, attempt, call, exc, self.url))
                continue
            wait = delay_after_response(self.retry, attempt, response)
            if wait is None:
                return finish(call, response)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ the API

    async def health(self) -> dict[str, Any]:
        return await self._send(calls.health())

    async def post_measurements(
        self, items: Sequence[Measurement | Mapping[str, Any]]
    ) -> dict[str, Any]:
        return await self._send(calls.post_measurements(items))

    async def forecast(
        self,
        resource: str,
        metric: str = "cpu",
        *,
        horizon_s: float | None = None,
        at: float | None = None,
        peer: str | None = None,
        confidence: float | None = None,
    ) -> dict[str, Any]:
        return await self._send(
            calls.forecast(
                resource, metric, horizon_s=horizon_s, at=at, peer=peer, confidence=confidence
            )
        )

    async def predict(self, **fields: Any) -> dict[str, Any]:
        return await self._send(calls.predict(fields))

    async def schedule(
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
        return await self._send(
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

    async def served_schedule(self, schedule_id: int) -> dict[str, Any]:
        """A served schedule as logged: ``{"id", "created_at", "request", "response"}``."""
        return await self._send(calls.served_schedule(schedule_id))

    async def post_runs(self, runs: Sequence[RunReport | Mapping[str, Any]]) -> dict[str, Any]:
        return await self._send(calls.post_runs(runs))

    async def runs(self, **filters: Any) -> list[dict[str, Any]]:
        return await self._send(calls.runs(filters))

    async def run(self, run_id: int) -> dict[str, Any]:
        return await self._send(calls.run(run_id))

    async def models(self) -> list[dict[str, Any]]:
        return await self._send(calls.models())

    async def model(self, name: str) -> dict[str, Any]:
        return await self._send(calls.model(name))

    async def put_model(self, name: str, text: str, description: str = "") -> dict[str, Any]:
        return await self._send(calls.put_model(name, text, description))

    async def resources(self) -> list[dict[str, Any]]:
        return await self._send(calls.resources())

    async def resource(self, name: str) -> dict[str, Any]:
        return await self._send(calls.resource(name))

    async def put_resource(self, name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        """Register a host's properties (operator): ``benchmark``, ``memory_bytes``, ..."""
        return await self._send(calls.put_resource(name, properties))

    async def post_phase_signature(
        self,
        name: str,
        app: str,
        analysis: Mapping[str, Any],
        parameters: Mapping[str, Any] | None = None,
        ranks: int | None = None,
    ) -> dict[str, Any]:
        """Store a PAS2P analysis (``ppe.pas2p.report.to_dict``) as ``name``'s next version
        (operator); ``ranks`` defaults to the analysis'. The answer names the version."""
        return await self._send(
            calls.post_phase_signature(name, app, analysis, parameters or {}, ranks)
        )

    async def phase_signatures(self) -> list[dict[str, Any]]:
        return await self._send(calls.phase_signatures())

    async def phase_signature(self, name: str, version: int | None = None) -> dict[str, Any]:
        """A stored PAS2P signature (its newest version, or ``version``) with its analysis."""
        return await self._send(calls.phase_signature(name, version))

    async def post_phase_probe(
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
        return await self._send(calls.post_phase_probe(name, host, status, error, result, version))

    async def phase_probes(
        self,
        name: str,
        *,
        host: str | None = None,
        version: int | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """The signature's probes, newest first."""
        return await self._send(calls.phase_probes(name, host, version, limit))

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Any route, with the same errors and retries (POST/PATCH: strict, see retry)."""
        return await self._send(
            calls.raw(method, path, json=json, params=params, idempotent=idempotent)
        )
