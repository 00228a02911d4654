"""Empirical models benchmark: the full search of a two-parameter model over 50 points
(goal < 200 ms) and the evaluation of a stored model (goal < 1 ms).

The stored model goes through JSON and ``EmpiricalModel.from_dict`` first; one
evaluation is ``predict`` (mean and 95 % interval) at a point outside the range,
and ``to_stochastic`` (the PPE Normal).  Prints median and best wall-clock time
and mean CPU time per run, and the load average (the machine is shared: the CPU
figure is the better estimate of the cost).

Through the service (a SQLite store in a temporary directory, FastAPI's test client, so
no network): the two-parameter runs are posted to /api/v1/runs, ``POST
/api/v1/models/empirical`` fits and saves them, and ``GET /api/v1/models/empirical/{name}?n=&p=``
reads the stored model and predicts (token check, a query, JSON in and out included).

    .venv/bin/python benchmarks/bench_empirical.py
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np

from ppe.empirical.data import Measurements
from ppe.empirical.model import EmpiricalModel
from ppe.empirical.search import search


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float, float]:
    fn()
    walls, cpu0 = [], time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), min(walls), (time.process_time() - cpu0) / runs


def two_parameter_runs() -> Measurements:
    """50 points (10 sizes x 5 process counts), 3 repetitions, 3 % noise."""
    rng = np.random.default_rng(0)
    grid = np.array([(n, p) for n in 2.0 ** np.arange(3, 13) for p in 2.0 ** np.arange(0, 5)])
    x = np.repeat(grid, 3, axis=0)
    mu = 0.5 + 1e-6 * x[:, 0] ** 2 * np.log2(x[:, 0]) + 0.01 * x[:, 1] ** 0.5 * x[:, 0]
    return Measurements.from_arrays(["n", "p"], x, mu * (1 + 0.03 * rng.standard_normal(mu.size)))


def main() -> None:
    data = two_parameter_runs()
    model = search(data)
    print(f"load average: {os.getloadavg()}")
    print(f"two-parameter data: {data.n_points} points, {data.n_obs} runs; chosen: {model.formula}")
    med, best, cpu = timed(lambda: search(data), 10)
    print(
        f"full search, 2 parameters, 50 points: median {med * 1e3:.1f} ms, best {best * 1e3:.1f} ms, "
        f"CPU {cpu * 1e3:.1f} ms  (goal < 200 ms)"
    )
    stored = json.dumps(model.to_dict())
    loaded = EmpiricalModel.from_dict(json.loads(stored))
    point = {"n": 16384.0, "p": 32.0}
    med, best, cpu = timed(lambda: loaded.predict(point), 2000)
    print(
        f"stored model, predict (mean + 95 % interval): median {med * 1e6:.0f} us, best {best * 1e6:.0f} us, "
        f"CPU {cpu * 1e6:.0f} us  (goal < 1 ms)"
    )
    med, best, cpu = timed(lambda: loaded.to_stochastic(point), 2000)
    print(
        f"stored model, to_stochastic (PPE Normal): median {med * 1e6:.0f} us, best {best * 1e6:.0f} us, "
        f"CPU {cpu * 1e6:.0f} us"
    )
    med, best, cpu = timed(
        lambda: EmpiricalModel.from_dict(json.loads(stored)).predict(point), 2000
    )
    print(
        f"JSON load + from_dict + predict: median {med * 1e6:.0f} us, best {best * 1e6:.0f} us, "
        f"CPU {cpu * 1e6:.0f} us"
    )
    service_figures(data)


def service_figures(data: Measurements) -> None:
    """Fit over stored runs and evaluate a stored model through the HTTP routes."""
    from fastapi.testclient import TestClient

    from ppe.service.app import create_app
    from ppe.service.config import Settings
    from ppe.service.store.db import make_engine, make_sessionmaker, migrate, session_scope
    from ppe.service.store.tokens import create_token

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        migrate(url)
        engine = make_engine(url)
        with session_scope(make_sessionmaker(engine)) as s:
            token = create_token(s, "admin")
        engine.dispose()
        auth = {"Authorization": f"Bearer {token}"}
        runs = [
            {
                "app": "bench",
                "params": {"n": float(x[0]), "p": float(x[1])},
                "values": [float(v) for v in values],
            }
            for x, values in zip(data.points, data.values, strict=True)
        ]
        with TestClient(create_app(Settings(database_url=url))) as client:
            r = client.post("/api/v1/runs", json={"runs": runs}, headers=auth)
            assert r.status_code == 201, r.text
            body = {"app": "bench", "predict": [{"n": 16384, "p": 32}]}
            med, best, cpu = timed(
                lambda: client.post("/api/v1/models/empirical", json=body, headers=auth), 10
            )
            print(
                f"POST /api/v1/models/empirical (50 stored points, full search): median "
                f"{med * 1e3:.1f} ms, best {best * 1e3:.1f} ms, CPU {cpu * 1e3:.1f} ms"
            )
            r = client.post(
                "/api/v1/models/empirical", json={**body, "save_as": "bench"}, headers=auth
            )
            assert r.status_code == 200, r.text
            path = "/api/v1/models/empirical/bench?n=16384&p=32"
            med, best, cpu = timed(lambda: client.get(path, headers=auth), 500)
            print(
                f"stored model evaluates via GET /api/v1/models/empirical/bench?n=&p= in "
                f"{med * 1e3:.2f} ms (median; best {best * 1e3:.2f} ms, CPU {cpu * 1e3:.2f} ms)"
            )
            med, best, cpu = timed(lambda: client.get("/api/v1/models", headers=auth), 500)
            print(
                f"  reference, GET /api/v1/models through the same client: {med * 1e3:.2f} ms "
                f"(median; best {best * 1e3:.2f} ms, CPU {cpu * 1e3:.2f} ms)"
            )


if __name__ == "__main__":
    main()
