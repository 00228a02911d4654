"""Replay-free strategy comparison on synthetic stochastic hosts, and in-process scheduler timings.

Each strategy plans on its own draws; all are judged on the same independent Monte Carlo
"actuals" drawn from the same distributions (common random numbers). Prints, per scenario, the
mean and 95th-percentile makespan per strategy and the paired difference of the mean against
the `mean` strategy (with its standard error); then the time one `schedule()` call takes.

    .venv/bin/python benchmarks/bench_scheduler_synthetic.py [--hosts 8 64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from scheduler import STRATEGIES, schedule
from scheduler.synthetic import SCENARIOS, compare_strategies, paired_difference, synthetic_hosts

ROWS = 4000


def comparison(n: int, scenario: str, actual_samples: int) -> list[dict[str, Any]]:
    hosts = synthetic_hosts(n, scenario, seed=0, total_rows=ROWS)
    res = compare_strategies(
        hosts, ROWS, STRATEGIES, actual_samples=actual_samples, plan_seed=0, actual_seed=12345
    )
    base = res["mean"]
    rows = []
    for name, o in res.items():
        diff, se = paired_difference(o.actuals, base.actuals)
        rows.append(
            {
                "hosts": n,
                "scenario": scenario,
                "strategy": name,
                "predicted_mean": o.predicted_mean,
                "mean": o.mean,
                "p50": o.p50,
                "p95": o.p95,
                "vs_mean": diff,
                "vs_mean_se": se,
                "p95_vs_mean_pct": 100 * (o.p95 / base.p95 - 1),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'strategy':18s} {'predicted':>9s} {'mean':>8s} {'p95':>8s} "
        f"{'mean - mean(mean)':>19s} {'p95 vs mean':>11s}"
    )
    current = None
    for r in rows:
        if (r["hosts"], r["scenario"]) != current:
            current = (r["hosts"], r["scenario"])
            print(f"\n{r['hosts']} hosts, {r['scenario']}  (makespan, seconds)")
            print(head)
        print(
            f"{r['strategy']:18s} {r['predicted_mean']:9.2f} {r['mean']:8.2f} {r['p95']:8.2f} "
            f"{r['vs_mean']:+10.3f} ± {r['vs_mean_se']:6.3f} {r['p95_vs_mean_pct']:+10.1f}%"
        )


def timings(n: int, scenario: str, repeats: int) -> dict[str, dict[str, float]]:
    """Wall and CPU time per call; CPU time is what the call costs when the machine is shared."""
    hosts = synthetic_hosts(n, scenario, seed=0, total_rows=ROWS)
    out = {}
    for name in STRATEGIES:
        start = time.perf_counter()
        schedule(hosts, ROWS, name)
        first = time.perf_counter() - start
        wall, cpu = [], []
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.thread_time()
            schedule(hosts, ROWS, name)
            wall.append(time.perf_counter() - start)
            cpu.append(time.thread_time() - start_cpu)
        out[name] = {
            "first_ms": 1e3 * first,
            "median_ms": 1e3 * statistics.median(wall),
            "cpu_median_ms": 1e3 * statistics.median(cpu),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--actual-samples", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    rows = [
        r for n in args.hosts for sc in SCENARIOS for r in comparison(n, sc, args.actual_samples)
    ]
    print_table(rows)

    times = {sc: timings(64, sc, args.repeats) for sc in ("low-variance", "heterogeneous")}
    for sc, per in times.items():
        print(
            f"\nschedule() for 64 hosts, {ROWS} rows, 4000 samples, {sc} "
            f"(in-process, {args.repeats} repeats)"
        )
        print(f"{'strategy':18s} {'median ms':>10s} {'median CPU ms':>14s} {'first call ms':>14s}")
        for name, t in per.items():
            print(
                f"{name:18s} {t['median_ms']:10.2f} {t['cpu_median_ms']:14.2f} "
                f"{t['first_ms']:14.1f}"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"comparison": rows, "timings_64_hosts": times}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
