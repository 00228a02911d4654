"""Replay throughput: schedules planned per second (all strategies), simulator and oracle speed,
and the whole experiment of issue 7 (59 traces, SOR, 8 hosts, 200 start times).

    .venv/bin/python benchmarks/bench_replay.py [--starts 200] [--workers 0] [--sample 8]

Prints wall and CPU times; the machine is shared, so CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from threadpoolctl import threadpool_limits  # noqa: E402

from ppe.replay.cases import draw_cases, make_banks, prepare_hosts, run_specs  # noqa: E402
from ppe.replay.config import ReplayConfig  # noqa: E402
from ppe.replay.experiment import run_experiment  # noqa: E402
from ppe.replay.oracle import oracle  # noqa: E402
from ppe.replay.planning import plan_case  # noqa: E402
from ppe.replay.report import format_table  # noqa: E402
from ppe.replay.simulate import simulate  # noqa: E402
from ppe.traces import read_traces  # noqa: E402

TRACES = "/work/shared/traces/bitbrains-rnd-2013-7"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default=TRACES)
    ap.add_argument("--starts", type=int, default=200)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--sample", type=int, default=8, help="cases timed per strategy, 1 process")
    ap.add_argument("--benchmark", type=float, default=ReplayConfig().benchmark)
    args = ap.parse_args()

    t = time.perf_counter()
    traces = read_traces([args.traces])
    print(f"read {len(traces)} traces: {time.perf_counter() - t:.2f} s")
    config = ReplayConfig(
        traces=(args.traces,), starts=args.starts, workers=args.workers, benchmark=args.benchmark
    )
    hosts = prepare_hosts(traces, config)
    cases = draw_cases(hosts, config)

    print(f"\nplanning, one process, {args.sample} cases per strategy (CPU s per schedule):")
    with threadpool_limits(1):  # (sklearn is loaded: ppe.replay.planning imports it)
        # first pass warms caches and imports; "+replan": block plus the first plan of a
        # re-planning run (forecasts to its first check only)
        for s in ("mean", *config.strategies, *(f"{r}+replan" for r in config.replan)):
            static, _, again = s.partition("+")
            one = ReplayConfig(
                traces=config.traces,
                strategies=("block",) if again else (s,),
                replan=(static,) if again else (),
                benchmark=args.benchmark,
            )
            c0 = time.process_time()
            for c in cases[: args.sample]:
                plan_case(c, hosts, one)
            per = (time.process_time() - c0) / args.sample
            print(f"  {s:<18} {per * 1e3:7.1f} ms  (incl. the case's forecasts)")

    bank, _ = make_banks(hosts)
    rows = [[config.sim.n // config.hosts] * config.hosts for _ in cases]
    specs = run_specs(cases, hosts, rows, False)
    t = time.perf_counter()
    res = simulate(bank, specs, config.sim)
    dt = time.perf_counter() - t
    print(
        f"\nsimulator: {len(specs)} runs x {config.sim.iterations} iterations x {config.hosts} hosts "
        f"in {dt:.3f} s = {len(specs) / dt:.0f} runs/s "
        f"({len(specs) * config.sim.iterations / dt:.2e} host-set iterations/s, {res.steps} steps)"
    )
    t = time.perf_counter()
    oracle(bank, specs, config.sim, config.sim.n)
    print(f"oracle search for {len(specs)} cases: {time.perf_counter() - t:.2f} s")

    print(
        f"\nwhole experiment: {args.starts} starts x {len(config.reported())} strategies, "
        f"{config.hosts} hosts, workers={args.workers or os.cpu_count()}"
    )
    t, c0 = time.perf_counter(), time.process_time()
    report = run_experiment(traces, config)
    wall = time.perf_counter() - t
    timing = report["config"]["timing"]
    print(
        f"  wall {wall:.1f} s (planning {timing['plan_s']:.1f} s), "
        f"{timing['schedules'] / wall:.1f} schedules/s, {timing['replans']} re-plans; "
        f"parent CPU {time.process_time() - c0:.1f} s"
    )
    print()
    print(format_table(report))
    ratios = np.array([r["actual"] / r["oracle"] for r in report["runs"]])
    print(f"\nruns: {len(ratios)}; oracle found by: {report['oracle']['found_by']}")


if __name__ == "__main__":
    main()
