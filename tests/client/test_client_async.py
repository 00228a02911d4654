"""AsyncPPEClient, the twin: the same calls, errors and retries, against the real service."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from ppe.client import (
    AsyncPPEClient,
    Measurement,
    PPERequestError,
    PPEUnavailable,
    RunReport,
)

from .conftest import free_port
from .test_client_calls import seed


async def test_async_calls_match_the_sync_ones(service: Any) -> None:
    await asyncio.to_thread(seed, service.url, service.tokens["sensor"])
    async with AsyncPPEClient(service.url, service.tokens["admin"]) as admin:
        await admin.put_resource("h1", {"benchmark": 2e-8})
    async with AsyncPPEClient(service.url, service.tokens["app"]) as c:
        assert (await c.health())["status"] == "ok"
        assert (await c.forecast("h2"))["samples"] == 6
        plans = await asyncio.gather(
            *(
                c.schedule(hosts=["h1", {"name": "h2", "benchmark": 3e-8}], n=2000, strategy=s)
                for s in ("mean", "conservative")
            )
        )
        assert [p.strategy for p in plans] == ["mean", "conservative"]
        assert all(sum(p.rows.values()) == 2000 for p in plans)
        again = await c.schedule(
            hosts=["h1", {"name": "h2", "benchmark": 3e-8}],
            n=2000,
            current={"h1": 1000, "h2": 1000},
        )
        assert again.replan is not None and "move" in again.replan
        pred = await c.predict(
            params={"n": 2000, "iterations": 10},
            allocation=[
                {"host": "h1", "rows": 1000},
                {"host": "h2", "rows": 1000, "benchmark": 3e-8},
            ],
        )
        assert len(pred["hosts"]) == 2
        assert (await c.model("jacobi2d"))["builtin"] is True
        assert (await c.served_schedule(plans[0].id))["id"] == plans[0].id
        posted = await c.post_runs([RunReport(app="sor", values=[3.0], schedule_id=plans[1].id)])
        (run_id,) = posted["ids"]
        assert (await c.run(run_id))["schedule_id"] == plans[1].id
        assert [r["id"] for r in await c.runs(schedule_id=plans[1].id)] == [run_id]


async def test_async_errors_and_retries(flaky_service: Any) -> None:
    service, gate = flaky_service
    async with AsyncPPEClient(service.url, service.tokens["sensor"], backoff_s=0.0) as c:
        with pytest.raises(PPERequestError) as err:
            await c.post_measurements([Measurement("h1", "cpu", math.inf, 1.7e9)])
    assert gate.refused == 2  # two 503s first, then the real 422
    assert err.value.status == 422 and err.value.problems[0]["field"] == "value"
    url = f"http://127.0.0.1:{free_port()}"
    async with AsyncPPEClient(url, "t", retries=1, backoff_s=0.01) as c:
        with pytest.raises(PPEUnavailable):
            await c.health()


async def test_async_token_from_the_environment(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PPE_TOKEN", service.tokens["app"])
    c = AsyncPPEClient(service.url)
    try:
        assert any(m["name"] == "sor" for m in await c.models())
    finally:
        await c.aclose()
