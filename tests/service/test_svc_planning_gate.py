"""Planning runs in threads of its own: applications asking for schedules never hold up sensors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ppe.service import planning
from ppe.service.app import create_app
from ppe.service.config import Settings

T0 = 1.6e9
BODY = {"n": 100, "iterations": 5, "hosts": [{"name": "h0", "benchmark": 1e-8}]}


def test_ingestion_is_served_while_schedules_hold_every_planning_thread(
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    env_tokens_factory: Callable[[str], dict[str, str]],
) -> None:
    tokens = env_tokens_factory(db_url)
    release, entered = threading.Event(), threading.Semaphore(0)
    real = planning.schedule

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.release()
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "schedule", held)
    settings = Settings(database_url=db_url, request_threads=3, planning_threads=1)
    app, blocked = create_app(settings), 6  # twice the request threads
    sensor = {"Authorization": f"Bearer {tokens['sensor']}"}
    apps = {"Authorization": f"Bearer {tokens['app']}"}
    seed = [
        {"resource": "h0", "metric": "cpu", "timestamp": T0 + 300 * k, "value": 0.5}
        for k in range(10)
    ]
    with TestClient(app) as client, ThreadPoolExecutor(blocked + 1) as pool:
        assert (
            client.post(
                "/api/v1/measurements", json={"measurements": seed}, headers=sensor
            ).status_code
            == 200
        )
        schedules = [
            pool.submit(client.post, "/api/v1/schedules", json=BODY, headers=apps)
            for _ in range(blocked)
        ]
        assert entered.acquire(timeout=30), "no schedule reached the planner"
        batch = [{"resource": "h0", "metric": "cpu", "timestamp": T0 + 300 * 10, "value": 0.4}]
        ingest = pool.submit(
            client.post, "/api/v1/measurements", json={"measurements": batch}, headers=sensor
        )
        try:
            answer = ingest.result(timeout=20)  # before any schedule is let go
            assert answer.status_code == 200 and answer.json()["inserted"] == 1
            assert not entered.acquire(timeout=0.5), "a second plan ran beside the first"
        finally:
            release.set()
        assert [f.result(timeout=60).status_code for f in schedules] == [200] * blocked
