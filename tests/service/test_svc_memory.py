"""A worker's memory is bounded by its settings, not by how long it has been serving.

The soak benchmark (benchmarks/bench_soak.py) showed workers growing by ~200 MB a minute under
steady sensors and applications: forecasts memoised on every (series, sample count) forever,
and plan memos holding whole predicted distributions. These tests pin the bounds.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ppe.service.forecasts import ForecastCache
from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
from ppe.service.store.measurements import Row, find_series, insert_batch

T0 = 1.6e9


def _store(url: str, hosts: int, samples: int, seed: int = 0) -> None:
    migrate(url)
    rng = np.random.default_rng(seed)
    rows = [
        Row(
            f"h{h}",
            "cpu",
            "",
            T0 + 300 * k,
            float(np.clip(0.6 + 0.2 * rng.standard_normal(), 0, 1)),
        )
        for h in range(hosts)
        for k in range(samples)
    ]
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        insert_batch(s, rows)
    engine.dispose()


def _series(url: str, host: str) -> int:
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        sid = find_series(s, host, "cpu")
    engine.dispose()
    assert sid is not None
    return sid


def _append(url: str, host: str, k: int) -> None:
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as s:
        insert_batch(s, [Row(host, "cpu", "", T0 + 300 * k, 0.5)])
    engine.dispose()


def test_a_new_sample_drops_every_memo_of_its_series(db_url: str) -> None:
    _store(db_url, hosts=1, samples=200)
    sid = _series(db_url, "h0")
    cache = ForecastCache(make_engine(db_url))
    for horizon in (600.0, 3600.0, 6 * 3600.0):
        cache.forecast_input(sid, "cpu", horizon_s=horizon)
    held = cache.stats()
    assert held.memos == 3 and held.fits >= 1
    for k in range(200, 230):  # a sensor reporting: each sample is a new version of the data
        _append(db_url, "h0", k)
        cache.invalidate()
        cache.forecast_input(sid, "cpu", horizon_s=600.0)
    after = cache.stats()
    assert after.memos == 1, "memos of superseded data must not accumulate"
    assert after.fits <= held.fits
    assert after.samples == 230


def test_the_worker_keeps_at_most_max_series_and_rereads_the_rest(db_url: str) -> None:
    _store(db_url, hosts=5, samples=120)
    ids = [_series(db_url, f"h{h}") for h in range(5)]
    small = ForecastCache(make_engine(db_url), max_series=2)
    first = [small.forecast(sid, "cpu", horizon_s=3600.0) for sid in ids]
    assert small.stats().series == 2
    again = small.forecast(ids[0], "cpu", horizon_s=3600.0)  # evicted, read back from the store
    assert (again.mean, again.interval) == (first[0].mean, first[0].interval)
    roomy = ForecastCache(make_engine(db_url))
    assert roomy.forecast(ids[0], "cpu", horizon_s=3600.0).mean == pytest.approx(first[0].mean)


def test_a_memoised_plan_holds_no_predicted_distributions(env) -> None:  # type: ignore[no-untyped-def]
    """What the plan memo keeps per answer stays small: a Monte Carlo plan's draws are not in it."""
    rng = np.random.default_rng(1)
    items = [
        {
            "resource": f"h{h}",
            "metric": "cpu",
            "timestamp": T0 + 300 * k,
            "value": float(np.clip(0.5 + 0.3 * rng.standard_normal(), 0.05, 1)),
        }
        for h in range(8)
        for k in range(300)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200
    body = {
        "n": 4000,
        "iterations": 20,
        "strategy": "conservative",
        "hosts": [{"name": f"h{h}", "benchmark": 2e-8} for h in range(8)],
    }
    r = env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))
    assert r.status_code == 200, r.text
    memo = env.client.app.state.services.plan_memo
    answers = list(memo._answers.values())
    assert len(answers) == 1
    assert len(pickle.dumps(answers[0])) < 64_000
