"""Forecaster throughput: batch replay of every trace, and the cost of one online update.

    .venv/bin/python benchmarks/bench_forecaster.py [TRACE_DIR] [--repeat 3] [--online 4]

Batch: every trace (dead stretches dropped, as forecast-eval does) through the full battery,
selection and intervals (``forecaster.batch_forecasts``), on one core (BLAS/OpenMP threads
limited to 1); prints samples per second for the best of ``--repeat`` passes.
Online: ``SeriesForecaster.update`` timed per measurement over whole traces; prints the median and
tail, plus the cost of ``forecast()`` (the interval's order statistics are computed there).
The host's load average is printed: on a shared machine, wall-clock figures suffer first.
Targets from issue 3: >= 100 000 samples/s batch, median online update < 50 us.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from forecaster import SeriesForecaster, batch_forecasts, member_names
from forecaster.config import DEFAULT_CONFIG
from ppe.traces import read_traces

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "traces" / "bitbrains-rnd-2013-7"


def bench_batch(series: list[np.ndarray], repeat: int) -> tuple[float, float]:
    """Best wall time and best CPU time (the latter is robust to other load on the host)."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        for x in series:
            batch_forecasts(x)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu


def bench_online(
    traces: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[list[float], list[float]]:
    updates: list[float] = []
    forecasts: list[float] = []
    clock = time.perf_counter_ns
    for ts, x in traces:
        fc = SeriesForecaster()
        for t, v in zip(ts.tolist(), x.tolist(), strict=True):
            t0 = clock()
            fc.update(t, v)
            t1 = clock()
            fc.forecast()
            t2 = clock()
            updates.append((t1 - t0) / 1000.0)
            forecasts.append((t2 - t1) / 1000.0)
    return updates, forecasts


def describe(label: str, us: list[float]) -> str:
    q = np.percentile(us, [50, 90, 99])
    return (
        f"{label}: median {q[0]:.1f} us, p90 {q[1]:.1f} us, p99 {q[2]:.1f} us, "
        f"mean {statistics.fmean(us):.1f} us over {len(us)} calls"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir", nargs="?", default=str(DEFAULT_DIR))
    parser.add_argument("--repeat", type=int, default=3, help="batch passes (best is reported)")
    parser.add_argument("--online", type=int, default=4, help="traces replayed online")
    args = parser.parse_args()

    start = time.perf_counter()
    traces = [t.alive() for t in read_traces([args.trace_dir])]
    read_s = time.perf_counter() - start
    series = [t.availability for t in traces]
    total = sum(x.size for x in series)
    members = len(member_names(DEFAULT_CONFIG))
    print(
        f"read {len(traces)} traces ({total} live samples) in {read_s:.2f} s; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )

    with threadpool_limits(limits=1):
        batch_s, batch_cpu = bench_batch(series, args.repeat)
        picked = sorted(traces, key=lambda t: t.name)[: args.online]
        updates, forecasts = bench_online([(t.timestamps, t.availability) for t in picked])
    print(
        f"batch: {total} samples x {members} members in {batch_s:.2f} s wall "
        f"= {total / batch_s:,.0f} samples/s; {batch_cpu:.2f} s CPU = "
        f"{total / batch_cpu:,.0f} samples/CPU-s (one core, best of {args.repeat})"
    )
    print(describe("online update()", updates))
    print(describe("online forecast()", forecasts))


if __name__ == "__main__":
    main()
