"""PPE core benchmark: an SOR prediction over 64 hosts with each engine.

Targets (issue 4): analytic < 5 ms, Monte Carlo with 20 000 samples < 100 ms.
Prints the median and best wall-clock time of repeated runs (after a warm-up),
the mean CPU time of this process per run, and the machine's load average: on a
shared, oversubscribed machine the wall-clock figures include time spent
waiting for a core, and the CPU figure is the better estimate of the cost.

    .venv/bin/python benchmarks/bench_core.py
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from ppe.core import (
    HostInputs,
    Normal,
    compile_model,
    get_model,
    linear_host_models,
    predict,
)

HOSTS = 64
PARAMS = {"n": 4000, "iterations": 100}


def sor_hosts(count: int) -> list[HostInputs]:
    """Heterogeneous hosts with normal (horizon-averaged) forecasts."""
    out = []
    for p in range(count):
        cpu = 0.4 + 0.5 * ((p * 37) % 64) / 64
        out.append(
            HostInputs(
                name=f"h{p:02d}",
                benchmark=2e-8 * (1 + (p % 5) / 4),
                cpu=Normal(cpu, 0.05 * cpu),
                bw_next=Normal(1.25e7, 1.0e6) if p < count - 1 else None,
                bw_prev=Normal(1.20e7, 1.0e6) if p > 0 else None,
                latency=5e-4,
            )
        )
    return out


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """(median wall ms, best wall ms, mean CPU ms) over ``repeats`` runs."""
    fn()  # warm-up (compiles the model, imports)
    times = []
    cpu_start = time.process_time()
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    cpu = (time.process_time() - cpu_start) / repeats
    return statistics.median(times) * 1e3, min(times) * 1e3, cpu * 1e3


def main() -> None:
    hosts = sor_hosts(HOSTS)
    rows = [4000 // HOSTS] * HOSTS
    model = get_model("sor")

    def analytic() -> object:
        return predict(model, PARAMS, hosts, rows, engine="analytic")

    def monte_carlo() -> object:
        return predict(model, PARAMS, hosts, rows, engine="mc", samples=20_000, seed=0)

    def linear() -> object:
        return linear_host_models(model, PARAMS, hosts, engine="analytic")

    def compile_text() -> object:
        compile_model.cache_clear()
        return compile_model(model.text)

    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cpus")
    for label, fn, repeats, target in (
        (f"SOR {HOSTS} hosts, analytic", analytic, 50, 5.0),
        (f"SOR {HOSTS} hosts, Monte Carlo 20000 samples", monte_carlo, 15, 100.0),
        (f"linear host models {HOSTS} hosts, analytic", linear, 20, None),
        ("compile sor.ppg", compile_text, 50, None),
    ):
        median, best, cpu = timed(fn, repeats)
        goal = f"  (target < {target:g} ms)" if target else ""
        print(
            f"{label:46s} wall median {median:7.2f} ms, best {best:7.2f} ms;"
            f" cpu {cpu:7.2f} ms{goal}"
        )
    a = analytic()
    m = monte_carlo()
    print(f"makespan analytic:   {a.makespan}")  # type: ignore[attr-defined]
    print(f"makespan Monte Carlo: {m.makespan}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
