"""Ingestion contract: validation, atomicity, idempotency, size."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ppe.service.store.db import make_engine
from ppe.service.store.models import Measurement

URL = "/api/v1/measurements"


def m(**kw: Any) -> dict[str, Any]:
    base = {"resource": "h1", "metric": "cpu", "timestamp": time.time() - 10, "value": 0.5}
    base.update(kw)
    return base


def stored(env) -> int:  # type: ignore[no-untyped-def]
    """Rows in the store itself, not the series summaries the API reports."""
    engine = make_engine(env.url)
    with Session(engine) as s:
        n = s.execute(select(func.count()).select_from(Measurement)).scalar_one()
    engine.dispose()
    return int(n)


def test_accepts_batch_and_registers_resources(env) -> None:  # type: ignore[no-untyped-def]
    t = time.time() - 100
    batch = [
        m(timestamp=t),
        m(timestamp=t + 10, value=0.25),
        m(metric="bandwidth", peer="h2", timestamp=t, value=1.25e7),
        m(metric="latency", peer="h2", timestamp=t, value=0.0005),
    ]
    r = env.client.post(URL, json={"measurements": batch}, headers=env.h("sensor"))
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 4, "inserted": 4, "duplicates": 0}
    res = env.client.get("/api/v1/resources", headers=env.h("app")).json()
    names = [x["name"] for x in res]
    assert names == ["h1", "h2"]
    h1 = res[0]
    cpu = next(s for s in h1["series"] if s["metric"] == "cpu")
    assert cpu["samples"] == 2 and cpu["latest_value"] == 0.25
    assert cpu["latest_timestamp"] == pytest.approx(t + 10)
    bw = next(s for s in h1["series"] if s["metric"] == "bandwidth")
    assert bw["peer"] == "h2" and bw["latest_value"] == 1.25e7


def test_repost_is_idempotent(env) -> None:  # type: ignore[no-untyped-def]
    batch = {"measurements": [m(timestamp=1000.0 + i) for i in range(50)]}
    first = env.client.post(URL, json=batch, headers=env.h("sensor")).json()
    again = env.client.post(URL, json=batch, headers=env.h("sensor")).json()
    assert first["inserted"] == 50
    assert again == {"accepted": 50, "inserted": 0, "duplicates": 50}
    assert stored(env) == 50


BAD_CASES = [
    ("nan", m(value=math.nan), "value", "finite"),
    ("inf", m(value=math.inf), "value", "finite"),
    ("cpu above 1", m(value=1.2), "value", "[0, 1]"),
    ("cpu below 0", m(value=-0.1), "value", "[0, 1]"),
    ("negative bandwidth", m(metric="bandwidth", peer="h2", value=-5.0), "value", "(0, 1e+12]"),
    ("negative latency", m(metric="latency", peer="h2", value=-1e-3), "value", "[0, 60]"),
    ("timestamp string", m(timestamp="yesterday"), "timestamp", "number"),
    ("timestamp far future", m(timestamp=time.time() + 10 * 86400), "timestamp", "future"),
    ("timestamp in ms", m(timestamp=time.time() * 1000), "timestamp", "future"),
    ("unknown metric", m(metric="memory"), "metric", "cpu"),
    ("link without peer", m(metric="bandwidth", value=1e6), "peer", "required"),
    ("cpu with peer", m(peer="h2"), "peer", "omitted"),
    ("missing value", {"resource": "h1", "metric": "cpu", "timestamp": 1.0}, "value", "required"),
    ("bad resource name", m(resource="bad name/with slash"), "resource", "letters"),
]


@pytest.mark.parametrize(
    ("case", "item", "field", "word"), BAD_CASES, ids=[c[0] for c in BAD_CASES]
)
def test_bad_item_rejects_whole_batch(env, case, item, field, word) -> None:  # type: ignore[no-untyped-def]
    good = [m(timestamp=2000.0 + i) for i in range(3)]
    batch = [*good[:2], item, good[2]]
    r = env.client.post(
        URL,
        content=_dumps({"measurements": batch}),
        headers={**env.h("sensor"), "content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert problems[0]["index"] == 2, problems
    assert field in (problems[0]["field"] or ""), problems
    assert word.lower() in problems[0]["reason"].lower(), problems
    assert stored(env) == 0


def test_oversized_and_empty_batches_rejected(env) -> None:  # type: ignore[no-untyped-def]
    big = [m(timestamp=float(i)) for i in range(20_001)]
    r = env.client.post(URL, json={"measurements": big}, headers=env.h("sensor"))
    assert r.status_code == 422
    assert "limit" in r.json()["detail"][0]["reason"]
    r = env.client.post(URL, json={"measurements": []}, headers=env.h("sensor"))
    assert r.status_code == 422
    assert stored(env) == 0


def test_ten_thousand_in_one_request(env) -> None:  # type: ignore[no-untyped-def]
    t0 = time.time() - 20_000
    batch = [
        m(resource=f"h{i % 10}", timestamp=t0 + i, value=(i % 100) / 100) for i in range(10_000)
    ]
    r = env.client.post(URL, json={"measurements": batch}, headers=env.h("sensor"))
    assert r.status_code == 200, r.text
    assert r.json()["inserted"] == 10_000
    assert stored(env) == 10_000


def test_metrics_count_ingest_and_rejections(env) -> None:  # type: ignore[no-untyped-def]
    env.client.post(URL, json={"measurements": [m()]}, headers=env.h("sensor"))
    env.client.post(URL, json={"measurements": [m(value=7.0)]}, headers=env.h("sensor"))
    text = env.client.get("/metrics").text
    assert "ppe_measurements_ingested_total 1.0" in text
    assert 'ppe_rejected_batches_total{reason="invalid"} 1.0' in text
    assert (
        'ppe_http_requests_total{method="POST",route="/api/v1/measurements",status="200"}' in text
    )


def _dumps(obj: Any) -> str:
    import json

    return json.dumps(obj, allow_nan=True)


def test_series_summary_follows_duplicates_and_late_samples(env) -> None:  # type: ignore[no-untyped-def]
    """Listings read counts kept at ingestion: re-posts add nothing, a late (older) sample
    counts but does not replace the newest value."""

    def cpu_summary() -> dict:  # type: ignore[type-arg]
        res = env.client.get("/api/v1/resources/h1", headers=env.h("app")).json()
        return next(s for s in res["series"] if s["metric"] == "cpu")

    batch = {
        "measurements": [m(timestamp=1000.0 + i, value=0.5) for i in range(5)]
        + [m(timestamp=2000.0, value=0.75)]
    }
    env.client.post(URL, json=batch, headers=env.h("sensor"))
    env.client.post(URL, json=batch, headers=env.h("sensor"))
    assert cpu_summary() == {
        "metric": "cpu",
        "peer": None,
        "samples": 6,
        "latest_timestamp": 2000.0,
        "latest_value": 0.75,
    }
    late = {"measurements": [m(timestamp=1500.0, value=0.1), m(timestamp=900.0, value=0.2)]}
    env.client.post(URL, json=late, headers=env.h("sensor"))
    s = cpu_summary()
    assert (s["samples"], s["latest_timestamp"], s["latest_value"]) == (8, 2000.0, 0.75)
    newer = {"measurements": [m(timestamp=2500.0, value=0.3)]}
    env.client.post(URL, json=newer, headers=env.h("sensor"))
    s = cpu_summary()
    assert (s["samples"], s["latest_timestamp"], s["latest_value"]) == (9, 2500.0, 0.3)


def test_migration_backfills_series_summaries(db_url) -> None:  # type: ignore[no-untyped-def]
    """A store written before the summary columns existed lists the right counts after upgrade."""
    from alembic import command
    from sqlalchemy import text

    from ppe.service.store.db import alembic_config, make_engine

    cfg = alembic_config(db_url)
    command.upgrade(cfg, "0001")
    engine = make_engine(db_url)
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO resources (id, name, properties, created_at) VALUES (1, 'h1', '{}', 0)"
            )
        )
        c.execute(
            text(
                "INSERT INTO series (id, resource_id, metric, peer) VALUES "
                "(1, 1, 'cpu', ''), (2, 1, 'bandwidth', 'h2')"
            )
        )
        c.execute(
            text(
                "INSERT INTO measurements (series_id, timestamp, value) VALUES "
                "(1, 10, 0.5), (1, 30, 0.9), (1, 20, 0.1)"
            )
        )
    command.upgrade(cfg, "head")
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT id, samples, latest_timestamp, latest_value FROM series ORDER BY id")
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [(1, 3, 30.0, 0.9), (2, 0, None, None)]
