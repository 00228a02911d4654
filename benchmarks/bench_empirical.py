"""Empirical models benchmark: the full search of a two-parameter model over 50 points
(goal < 200 ms) and the evaluation of a stored model (goal < 1 ms).

The stored model goes through JSON and ``EmpiricalModel.from_dict`` first; one
evaluation is ``predict`` (mean and 95 % interval) at a point outside the range,
and ``to_stochastic`` (the PPE Normal).  Prints median and best wall-clock time
and mean CPU time per run, and the load average (the machine is shared: the CPU
figure is the better estimate of the cost).

    .venv/bin/python benchmarks/bench_empirical.py
"""

from __future__ import annotations

import json
import os
import statistics
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


if __name__ == "__main__":
    main()
