"""Forecasts over HTTP: contract fields, too-little-data errors, causality of `at`."""

from __future__ import annotations

import numpy as np
import pytest

from ppe.traces import read_trace


def post_series(env, resource, ts, values, metric="cpu", peer=None) -> None:  # type: ignore[no-untyped-def]
    items = [
        {
            "resource": resource,
            "metric": metric,
            "timestamp": float(t),
            "value": float(v),
            **({"peer": peer} if peer else {}),
        }
        for t, v in zip(ts, values, strict=True)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text


@pytest.fixture
def trace(traces_dir):  # type: ignore[no-untyped-def]
    return read_trace(traces_dir / "1.csv.gz")


def test_forecast_contract_fields(env, trace) -> None:  # type: ignore[no-untyped-def]
    ts, av = trace.timestamps[:600], trace.availability[:600]
    post_series(env, "h1", ts, av)
    r = env.client.get("/api/v1/forecasts/h1/cpu?confidence=0.9", headers=env.h("app"))
    assert r.status_code == 200, r.text
    body = r.json()
    for key in (
        "mean",
        "std",
        "interval",
        "distribution",
        "predictor",
        "mse",
        "mae",
        "samples",
        "age_s",
        "multimode",
        "forecast",
        "support",
        "fallback",
    ):
        assert key in body, key
    assert body["support"] is None and body["fallback"] is None  # one sample: no analogues
    assert body["samples"] == 600
    assert body["distribution"]["kind"] in ("point", "normal", "mixture")
    lo, hi = body["interval"]
    assert 0.0 <= lo <= body["mean"] <= hi <= 1.0
    assert body["confidence"] == 0.9
    # A longer horizon averages more: its spread is no wider than one sample's.
    long = env.client.get("/api/v1/forecasts/h1/cpu?horizon=14400", headers=env.h("app")).json()
    assert long["std"] <= body["std"] + 1e-9
    # two days of history cannot support a one-day horizon: the answer says so
    day = env.client.get("/api/v1/forecasts/h1/cpu?horizon=86400", headers=env.h("app")).json()
    assert day["fallback"] in ("blend", "unconditional") and 0 <= day["support"] < 10
    past = env.client.get(
        f"/api/v1/forecasts/h1/cpu?horizon=86400&at={float(ts[500])}", headers=env.h("app")
    ).json()
    assert past["fallback"] in ("blend", "unconditional") and past["support"] < 10


def test_forecast_as_of_a_past_time_ignores_later_data(env, trace) -> None:  # type: ignore[no-untyped-def]
    ts, av = trace.timestamps[:400], trace.availability[:400]
    post_series(env, "h1", ts[:300], av[:300])
    at = float(ts[300])
    before = env.client.get(f"/api/v1/forecasts/h1/cpu?at={at}", headers=env.h("app")).json()
    post_series(env, "h1", ts[300:], 1.0 - av[300:])  # very different future
    after = env.client.get(f"/api/v1/forecasts/h1/cpu?at={at}", headers=env.h("app")).json()
    assert before == after
    now = env.client.get("/api/v1/forecasts/h1/cpu", headers=env.h("app")).json()
    assert now["samples"] == 400


def test_too_little_data_and_unknown_series(env) -> None:  # type: ignore[no-untyped-def]
    post_series(env, "h1", [1e9, 1e9 + 10], [0.5, 0.6])
    r = env.client.get("/api/v1/forecasts/h1/cpu", headers=env.h("app"))
    assert r.status_code == 409
    assert "2 samples" in r.json()["detail"][0]["reason"]
    assert env.client.get("/api/v1/forecasts/nope/cpu", headers=env.h("app")).status_code == 404
    assert env.client.get("/api/v1/forecasts/h1/bandwidth", headers=env.h("app")).status_code == 422
    assert (
        env.client.get("/api/v1/forecasts/h1/bandwidth?peer=h2", headers=env.h("app")).status_code
        == 404
    )


def test_forecast_follows_new_measurements(env) -> None:  # type: ignore[no-untyped-def]
    t0 = 1.7e9
    post_series(env, "h1", t0 + 10 * np.arange(50), np.full(50, 0.8))
    first = env.client.get("/api/v1/forecasts/h1/cpu", headers=env.h("app")).json()
    post_series(env, "h1", t0 + 10 * np.arange(50, 100), np.full(50, 0.2))
    second = env.client.get("/api/v1/forecasts/h1/cpu", headers=env.h("app")).json()
    assert first["forecast"] == pytest.approx(0.8, abs=0.01)
    assert second["forecast"] == pytest.approx(0.2, abs=0.05)
    assert second["samples"] == 100


def test_history_has_causal_band(env, trace) -> None:  # type: ignore[no-untyped-def]
    post_series(env, "h1", trace.timestamps[:300], trace.availability[:300])
    body = env.client.get(
        "/api/v1/resources/h1/history/cpu?limit=200", headers=env.h("operator")
    ).json()
    assert len(body["timestamps"]) == len(body["forecasts"]) == 200
    assert body["forecasts"][0] is None  # nothing seen before the first sample
    assert set(body["members"]) and all(v["mae"] >= 0 for v in body["members"].values())


def test_rows_written_by_another_worker_show_up(env) -> None:  # type: ignore[no-untyped-def]
    """Another worker's writes bypass this worker's invalidation; the freshness check finds them."""
    import time as _time

    from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
    from ppe.service.store.measurements import Row, insert_batch

    t0 = 1.7e9
    post_series(env, "h1", t0 + 10 * np.arange(40), np.full(40, 0.9))
    body = {"app": "sor", "n": 500, "iterations": 5, "hosts": [{"name": "h1", "benchmark": 2e-8}]}
    before = env.client.post("/api/v1/schedules", json=body, headers=env.h("app")).json()
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        insert_batch(s, [Row("h1", "cpu", "", t0 + 10 * k, 0.1) for k in range(40, 80)])
    engine.dispose()
    _time.sleep(1.2)  # the cache's freshness window
    after = env.client.post("/api/v1/schedules", json=body, headers=env.h("app")).json()
    fc = env.client.get("/api/v1/forecasts/h1/cpu", headers=env.h("app")).json()
    assert fc["samples"] == 80
    assert after["makespan"]["mean"] > 3 * before["makespan"]["mean"]


def test_idle_host_borrows_from_the_other_hosts(env, traces_dir) -> None:  # type: ignore[no-untyped-def]
    """A host idle all along falls back at 3 days and borrows what followed the other idle
    hosts' states (forecaster.fleet): the answer says how many outcomes it borrowed, and
    measurements of the others after ``at`` change nothing."""
    day = 86400.0
    idle = read_trace(traces_dir / "4.csv.gz").alive()
    ts, av = idle.timestamps, idle.availability
    at = float(ts[0]) + 8.3 * day
    post_series(env, "idle", ts[ts < at + 2 * day], av[ts < at + 2 * day])
    url = f"/api/v1/forecasts/idle/cpu?horizon={3 * day}&at={at}"
    alone = env.client.get(url, headers=env.h("app")).json()
    assert alone["fallback"] is not None and alone["fleet"] is None
    for name in ("2", "41", "233"):  # one idle all along, two that turned busy after idle days
        other = read_trace(traces_dir / f"{name}.csv.gz").alive()
        keep = other.timestamps < at
        post_series(env, f"h{name}", other.timestamps[keep], other.availability[keep])
    borrowed = env.client.get(url, headers=env.h("app")).json()
    assert borrowed["fleet"] is not None and borrowed["fleet"] >= 20
    assert borrowed["interval"][0] < alone["interval"][0]
    # the other hosts' measurements from `at` on are not read
    post_series(env, "h41", [at + 600.0, at + 900.0], [0.01, 0.01])
    assert env.client.get(url, headers=env.h("app")).json() == borrowed
    # one before it, inside a window the idle host h2 was settled at, is (no stale table)
    post_series(env, "h2", [at - 2 * day + 150.0], [0.01])
    moved = env.client.get(url, headers=env.h("app")).json()
    assert moved["fleet"] == borrowed["fleet"] and moved["distribution"] != borrowed["distribution"]
    # a live forecast of the idle host borrows too
    live = env.client.get(f"/api/v1/forecasts/idle/cpu?horizon={3 * day}", headers=env.h("app"))
    assert live.status_code == 200 and live.json()["fleet"] >= 20
