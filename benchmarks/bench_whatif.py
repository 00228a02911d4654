"""What-if, analytic path: how long a spec point takes for 4096 nodes (issue 21's target:
under 1 s), and how that compares with the node-by-node pipeline it collapses.

Cases, SOR over one chain (a 40960-row grid, 100 iterations), each timed on a spec that is
parsed once and evaluated ``--reps`` times (the evaluation of one point: machine, linear
models, the scheduler over every node, the prediction and the makespan):

* ``dedicated``: 4096 dedicated nodes;
* ``normal``: 4096 nodes with i.i.d. normal load (mean 0.8, std 0.05);
* ``two nodesets``: 3072 fast nodes with normal load and 1024 slow ones with a bimodal
  mixture, joined by a slower bridge;
* ``script``: the ``normal`` machine running a PetaSIM-style SOR script (compiled to a model);
* ``block2dim`` / ``block3dim``: the same machines on 2-D blocks (a 64 x 64 process grid)
  and 3-D blocks of a 1024^3 grid (16 x 16 x 16): jagged time-balanced blocks, face
  exchanges;
* ``node by node``: the ``normal`` case with collapsing off (``Options(collapse=False)``),
  at 256 and 1024 nodes only: what the collapse saves.

Prints the median and best wall-clock time, the mean CPU time of this process per run, and
the load average (the machine is shared; CPU time is the better estimate of the cost).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_whatif.py [--reps 5]

``--simulated``: the simulated path instead (issue 21's target: 4096 nodes x 1000 iterations
over trace-driven load in under 30 s). SOR on a 40960-row grid, 4096 nodes, 1000 iterations,
the Bitbrains traces of ``--traces`` (default /work/shared/traces/bitbrains-rnd-2013-7, the
files spanning the whole month: 52) assigned round-robin, ``--starts`` start times (8) on
``--workers`` processes (2). Two speeds: 2 Gflop/s (a run of ~15 s, inside one 300 s sample)
and 20 Mflop/s (runs of 5-70 min that cross many samples); the first on 64 x 64 blocks too.
Prints the wall time end to end
(reading the traces, planning every start, simulating), and the seconds the workers spent
planning and simulating.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_whatif.py --simulated [--starts 8 --workers 2]

``--sweeps``: a sweep serial against spread over every core (``ppe.executors``'s process
pool; issue 21: "spreads sweeps over all cores"): an 8-point analytic sweep of 4096 nodes
(the ``two nodesets`` machine, the fast nodes' floatspeed swept over 8 values), on 1 worker
then ``--workers`` (0: every core), checking that both reports are identical; then one
simulated point of 4096 nodes x 1000 iterations over the traces at both speeds with
``--starts`` start times, 1 worker then ``--workers``, checking the makespans agree.
Wall time end to end, pool start included.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_whatif.py --sweeps [--workers 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from ppe.executors import worker_count
from ppe.whatif import (
    Options,
    Spread,
    WhatIf,
    evaluate_point,
    evaluate_resolved,
    parse_spec,
    resolve,
)
from ppe.whatif.simulated import SimOptions, simulate_whatif
from ppe.whatif_cli import FileResolver

TRACES = Path("/work/shared/traces/bitbrains-rnd-2013-7")
#: Traces that do not span the whole month (the common span would be too short).
PARTIAL = {"195", "197", "45", "47", "49", "51", "53"}

SCRIPT = '''"""
use distribution strips
repeat iterations {
  compute fraction 0.5
  send halo
  compute fraction 0.5
  send halo
  synchronize
}
"""'''


def spec(
    number: int,
    load: str,
    execution: str = 'model = "sor"',
    second: str = "",
    layout: str = "block1dim",
) -> str:
    nodesets = '"node"' if not second else '["node", "slow"]'
    grid, size = ("grid3dim", 1024) if layout == "block3dim" else ("grid2dim", 40960)
    return f"""
[[nodeset]]
name = "node"
number = {number}
floatspeed = "2 Gflop/s"
load = {load}
{second}
[[linkset]]
name = "fabric"
across = "node"
latency = "5 us"
bandwidth = "10 Gb/s"

[[dataset]]
name = "grid"
type = "{grid}"
size = {size}
floatsperunit = 8

[[distribution]]
name = "strips"
type = "{layout}"
dataset = "grid"
nodeset = {nodesets}

[execution]
{execution}
iterations = 100
"""


SLOW = """
[[nodeset]]
name = "slow"
number = 1024
floatspeed = "1 Gflop/s"
load = {kind = "mixture", components = [{weight = 0.8, mean = 0.9, std = 0.03}, {weight = 0.2, mean = 0.45, std = 0.05}]}

[[linkset]]
name = "lan"
across = "slow"
latency = "50 us"
bandwidth = "1 Gb/s"

[[linkset]]
name = "bridge"
updown = ["node", "slow"]
latency = "200 us"
bandwidth = "1 Gb/s"
"""

NORMAL = '{kind = "normal", mean = 0.8, std = 0.05}'
DEDICATED = '{kind = "dedicated"}'


class _NoFiles:
    def profile(self, ref: str):  # type: ignore[no-untyped-def]
        raise OSError(ref)

    trace = text = host = profile


def timed(text: str, reps: int, options: Options) -> tuple[float, float, float, str]:
    whatif = parse_spec(text, "bench")
    resources = resolve(whatif, _NoFiles())  # type: ignore[arg-type]
    point = whatif.points[0]
    result = evaluate_point(point, resources, options)  # warm-up
    walls, cpu0 = [], time.process_time()
    for _ in range(reps):
        t0 = time.perf_counter()
        result = evaluate_point(point, resources, options)
        walls.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / reps
    lo, hi = result.makespan.interval(0.95)
    what = (
        f"{result.path}, {result.classes} classes, makespan {result.makespan.mean():.4g} s "
        f"[{lo:.4g}, {hi:.4g}]"
    )
    return statistics.median(walls), min(walls), cpu, what


def simulated(traces: Path, starts: int, workers: int) -> None:
    files = sorted(f.name for f in traces.glob("*.csv.gz") if f.name.split(".")[0] not in PARTIAL)
    load = '{kind = "traces", files = [' + ", ".join(f'"{f}"' for f in files) + "]}"
    cases = [("2 Gflop/s", "block1dim"), ("20 Mflop/s", "block1dim"), ("2 Gflop/s", "block2dim")]
    for speed, layout in cases:
        text = spec(4096, load, layout=layout).replace('"2 Gflop/s"', f'"{speed}"')
        text = text.replace("iterations = 100", "iterations = 1000")
        whatif = parse_spec(text, "bench")
        t0 = time.perf_counter()
        report = simulate_whatif(
            whatif, FileResolver(traces), sim=SimOptions(starts=starts, workers=workers)
        )
        wall = time.perf_counter() - t0
        p = report.points[0]
        lo, hi = p.interval()
        print(
            f"4096 nodes x 1000 it, {layout}, {len(files)} traces, {speed:>10}, {starts} starts, "
            f"{workers} workers: wall {wall:6.1f} s (planning {p.timing[0]:.1f} s, simulating "
            f"{p.timing[1]:.2f} s, summed over workers); makespan {p.makespans.mean():.4g} s "
            f"[{lo:.4g}, {hi:.4g}], predicted {p.predicted.mean():.4g} s, "
            f"coverage {p.coverage:.0%}"
        )


SPEEDS = "[1e9, 1.25e9, 1.5e9, 1.75e9, 2e9, 2.5e9, 3e9, 4e9]"


def sweeps(traces: Path, starts: int, workers: int) -> None:
    """The same sweep on one worker and on ``workers``: wall time and whether they agree."""
    many = worker_count(workers)
    text = spec(3072, NORMAL, second=SLOW).replace('"2 Gflop/s"', SPEEDS, 1)
    whatif = parse_spec(text, "bench")
    resources = resolve(whatif, _NoFiles())  # type: ignore[arg-type]
    reports = []
    for n in (1, many):
        t0 = time.perf_counter()
        report = evaluate_resolved(whatif, resources, Options(), spread=Spread("process", n))
        wall = time.perf_counter() - t0
        reports.append(report.to_dict())
        print(
            f"analytic sweep, {len(whatif.points)} points x 4096 nodes, {n} worker(s): "
            f"wall {wall:6.2f} s ({wall / len(whatif.points):.2f} s a point)"
        )
    print(f"  identical reports: {reports[0] == reports[1]}")
    files = sorted(f.name for f in traces.glob("*.csv.gz") if f.name.split(".")[0] not in PARTIAL)
    load = '{kind = "traces", files = [' + ", ".join(f'"{f}"' for f in files) + "]}"
    for speed in ("2 Gflop/s", "20 Mflop/s"):
        text = spec(4096, load).replace('"2 Gflop/s"', f'"{speed}"')
        text = text.replace("iterations = 100", "iterations = 1000")
        _simulated_sweep(parse_spec(text, "bench"), traces, starts, many, speed, len(files))


def _simulated_sweep(
    sim_whatif: WhatIf, traces: Path, starts: int, many: int, speed: str, nfiles: int
) -> None:
    makespans = []
    for n in (1, many):
        t0 = time.perf_counter()
        sim = simulate_whatif(
            sim_whatif,
            FileResolver(traces),
            sim=SimOptions(starts=starts),
            spread=Spread("process", n),
        )
        wall = time.perf_counter() - t0
        p = sim.points[0]
        makespans.append(p.makespans.tolist())
        print(
            f"simulated point, 4096 nodes x 1000 it, {nfiles} traces, {speed:>10}, {starts} starts, "
            f"{n} worker(s): wall {wall:6.1f} s (planning {p.timing[0]:.1f} s, simulating "
            f"{p.timing[1]:.2f} s, summed over workers)"
        )
    print(f"  identical makespans: {makespans[0] == makespans[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--simulated", action="store_true", help="the simulated path instead")
    parser.add_argument("--sweeps", action="store_true", help="sweeps: 1 worker vs --workers")
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    if args.sweeps:
        sweeps(args.traces, args.starts, args.workers)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    if args.simulated:
        simulated(args.traces, args.starts, args.workers)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    cases = [
        ("dedicated, 4096 nodes", spec(4096, DEDICATED), Options()),
        ("normal, 4096 nodes", spec(4096, NORMAL), Options()),
        ("two nodesets, 3072 + 1024", spec(3072, NORMAL, second=SLOW), Options()),
        ("script, 4096 nodes", spec(4096, NORMAL, f"script = {SCRIPT}"), Options()),
        (
            "conservative, 3072 + 1024",
            spec(3072, NORMAL, second=SLOW),
            Options(strategy="conservative"),
        ),
        ("block2dim, dedicated, 64x64", spec(4096, DEDICATED, layout="block2dim"), Options()),
        ("block2dim, normal, 64x64", spec(4096, NORMAL, layout="block2dim"), Options()),
        ("block2dim, two nodesets", spec(3072, NORMAL, second=SLOW, layout="block2dim"), Options()),
        ("block3dim, normal, 16^3", spec(4096, NORMAL, layout="block3dim"), Options()),
        ("node by node, 256 nodes", spec(256, NORMAL), Options(collapse=False)),
        ("node by node, 1024 nodes", spec(1024, NORMAL), Options(collapse=False)),
    ]
    for name, text, options in cases:
        median, best, cpu, what = timed(text, args.reps, options)
        print(
            f"{name:28} median {median * 1e3:8.1f} ms  best {best * 1e3:8.1f} ms  "
            f"cpu {cpu * 1e3:8.1f} ms  ({what})"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
