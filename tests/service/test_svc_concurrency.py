"""Many concurrent requests on a real server: no request may wait on a second pooled connection."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_concurrent_forecasts_and_schedules(db_url, server_factory, env_tokens_factory) -> None:  # type: ignore[no-untyped-def]
    tokens = env_tokens_factory(db_url)
    server = server_factory(db_url)
    rng = np.random.default_rng(0)
    items = [
        {
            "resource": f"h{h}",
            "metric": "cpu",
            "timestamp": 1.6e9 + 300 * k,
            "value": float(np.clip(0.6 + 0.2 * rng.standard_normal(), 0.01, 1)),
        }
        for h in range(8)
        for k in range(200)
    ]
    with httpx.Client(base_url=server.base_url, timeout=120) as c:
        r = c.post(
            "/api/v1/measurements",
            json={"measurements": items},
            headers={"Authorization": f"Bearer {tokens['sensor']}"},
        )
        assert r.status_code == 200
    headers = {"Authorization": f"Bearer {tokens['app']}"}
    body = {
        "app": "sor",
        "n": 1000,
        "iterations": 10,
        "strategy": "mean",
        "hosts": [{"name": f"h{h}", "benchmark": 2e-8} for h in range(8)],
    }

    def call(i: int) -> int:
        with httpx.Client(base_url=server.base_url, timeout=60, headers=headers) as c:
            if i % 2:
                return c.get(f"/api/v1/forecasts/h{i % 8}/cpu?horizon={600 * (i + 1)}").status_code
            return c.post("/api/v1/schedules", json=body).status_code

    # More concurrent requests than the store's connection pool holds (40 for SQLite).
    with ThreadPoolExecutor(64) as pool:
        codes = list(pool.map(call, range(128)))
    assert codes.count(200) == len(codes), codes


def test_metrics_add_up_over_workers(tmp_path, server_factory, env_tokens_factory) -> None:  # type: ignore[no-untyped-def]
    """With two workers every scrape, whichever worker answers it, reports all requests."""
    url = f"sqlite:///{tmp_path / 'ppe.db'}"
    tokens = env_tokens_factory(url)
    server = server_factory(url, "--workers", "2")
    headers = {"Authorization": f"Bearer {tokens['sensor']}"}

    def post(i: int) -> int:
        with httpx.Client(base_url=server.base_url, timeout=60, headers=headers) as c:
            item = {"resource": "h1", "metric": "cpu", "timestamp": 1.6e9 + i, "value": 0.5}
            return c.post("/api/v1/measurements", json={"measurements": [item]}).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(post, range(40))) == {200}

    def stored() -> float:
        text = httpx.get(server.base_url + "/metrics", timeout=10).text
        line = next(x for x in text.splitlines() if x.startswith("ppe_measurements_stored_total"))
        return float(line.split()[-1])

    assert [stored() for _ in range(6)] == [40.0] * 6
