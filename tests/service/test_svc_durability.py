"""An acknowledged batch survives a SIGKILL of the server the moment after the ack."""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ppe.service.store.db import make_engine
from ppe.service.store.models import Measurement

pytestmark = pytest.mark.slow


def test_sigkill_after_ack_loses_nothing(db_url: str, server_factory, request) -> None:  # type: ignore[no-untyped-def]
    make_tokens = request.getfixturevalue("env_tokens_factory")
    tokens = make_tokens(db_url)
    server = server_factory(db_url)
    headers = {"Authorization": f"Bearer {tokens['sensor']}"}
    t0 = time.time() - 5000
    acked = 0
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
        for k in range(5):
            batch = [
                {
                    "resource": f"h{i % 4}",
                    "metric": "cpu",
                    "timestamp": t0 + k * 1000 + i,
                    "value": 0.5,
                }
                for i in range(1000)
            ]
            r = client.post("/api/v1/measurements", json={"measurements": batch})
            assert r.status_code == 200
            acked += r.json()["inserted"]
    server.kill()  # immediately after the last acknowledgement
    engine = make_engine(db_url)
    with Session(engine) as s:
        n = s.execute(select(func.count()).select_from(Measurement)).scalar_one()
    engine.dispose()
    assert acked == 5000
    assert n == acked
    # And a restarted server serves them.
    server2 = server_factory(db_url)
    r = httpx.get(
        server2.base_url + "/api/v1/resources",
        headers={"Authorization": f"Bearer {tokens['operator']}"},
    )
    assert sum(s["samples"] for h in r.json() for s in h["series"]) == 5000
