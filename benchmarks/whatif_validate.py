"""What-if against reality (issue 21): a spec of this machine (its measured profile, two cores)
running SOR, predicted by ``ppe whatif``, against real ``mpiexec -n 2 ppe-sor`` runs.

1. **Dedicated.** The spec: one nodeset of 2 members with ``sharing = 2`` (both on this
   machine, so the profile's 2-copy curves apply), a link whose latency and bandwidth an MPI
   ping-pong between the two ranks measured, SOR on an ``n x n`` grid for ``I`` iterations,
   block strips (what ``ppe-sor --offline`` runs). Its analytic prediction against the median
   of ``--runs`` real offline runs (goal: within 10 %).
2. **Under recorded load.** ``ppe loadgen`` replays one Bitbrains trace on each core (the
   most bimodal and the steadiest busy one, picked as ``sor_experiment.py`` picks them), at
   speed 1, from a start time; the spec gives the same traces as load and ``--simulate``
   plans and runs SOR at ``--starts`` start times (seeded). The real runs start the load
   generators at the first ``--runs`` of those same start times. The spec's nodeset carries
   the dedicated runs' own run-to-run spread (``variation``: their standard deviation over
   their mean), which the simulation draws per run. Reported: the share of real
   runs inside the simulated distribution's central 95 % (goal: at least 90 %), and each real
   run beside the simulation at its own start.

The load a rank meets is a loadgen process spinning ``d`` of every 0.1 s on its core (``d``
the trace's CPU usage). The spec's trace files carry the availability a CPU-bound rank gets
beside it (``timestamp,value`` CSV next to the spec; the load generators replay the original
files), :class:`sensors.loadgen.Contention`: by default **measured** here first (one
``ppe-sor`` rank pinned to core 0, alone and beside a constant-duty generator at each of
``--contention-duties``, interleaved over ``--contention-repeats`` rounds; availability =
median time alone / median time beside), with ``--contention fair`` the assumed fair share
``max(1 - d, 1/2)`` (what this script used before 2026-11-27). ``benchmarks/coupling_probe.py``
found the fair share right to within about 5 % on this machine (0.46-0.52 beside a saturated
generator), and two coupled ranks each beside one running at about the smaller of their two
availabilities, not their product (docs/whatif.md): measuring keeps checking the first.
With the measured curve, the same real runs are also scored against the fair share's
simulation (same starts and seeds), so one run shows both; and each is scored once more
rescaled by the dedicated half's error (real median over prediction), which takes the
profile's error out and leaves the load model's.

    .venv/bin/python benchmarks/whatif_validate.py                       # ~10 minutes
    .venv/bin/python benchmarks/whatif_validate.py --runs 3 --n 600 --iterations 100  # quick

Needs a quiet machine: other work on the two cores is load neither side knows about.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sor_experiment import TRACE_DIRS, env, mpiexec, pick_traces  # noqa: E402
from ppe.traces import read_trace  # noqa: E402
from sensors.loadgen import Contention  # noqa: E402

PINGPONG = """
import sys, time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
out = []
for size in (8, int(sys.argv[1])):
    buf = np.zeros(max(size // 8, 1))
    best = []
    for _ in range(5):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(200):
            if comm.rank == 0:
                comm.Send(buf, 1); comm.Recv(buf, 1)
            else:
                comm.Recv(buf, 0); comm.Send(buf, 0)
        best.append((time.perf_counter() - t0) / 400)
    out.append(min(best))
if comm.rank == 0:
    print(out[0], out[1])
"""


def sh(cmd: list[str], **kw: Any) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env(), **kw).stdout


def ppe(*args: str) -> list[str]:
    return [sys.executable, "-m", "ppe", *args]


def measure_link() -> tuple[float, float]:
    """One-way latency (8 B messages) and bandwidth (1 MiB ones) between two ranks of this
    machine: shared memory, as ppe-sor's halos travel."""
    big = 1 << 20
    out = sh([mpiexec(), "-n", "2", sys.executable, "-c", PINGPONG, str(big)])
    small, large = (float(x) for x in out.split())
    return small, big / max(large - small, 1e-9)


def spec_text(n: int, iterations: int, latency: float, bandwidth: float, load: str) -> str:
    return f"""title = "this machine: 2 cores sharing it, SOR {n} x {n}, {iterations} iterations"

[[nodeset]]
name = "core"
number = 2
sharing = 2
profile = "host.json"
{load}
[[linkset]]
name = "shm"
across = "core"
latency = "{latency * 1e6:.3f} us"
bandwidth = "{bandwidth:.6g} B/s"

[[dataset]]
name = "grid"
type = "grid2dim"
size = {n}
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = "core"

[execution]
model = "sor"
iterations = {iterations}
signature = "sor"
"""


def real_run(n: int, iterations: int, ranks: int = 2) -> float:
    out = sh([mpiexec(), "-n", str(ranks), *ppe_sor(), "--offline", "--n", str(n),
              "--iterations", str(iterations), "--pin"])  # fmt: skip
    return float(json.loads(out.strip().splitlines()[-1])["total_s"])


def ppe_sor() -> list[str]:
    return [sys.executable, "-m", "ppe.apps.sor"]


def availability_csv(src: Path, dst: Path, contention: Contention) -> None:
    """The availability a CPU-bound rank gets beside ``ppe loadgen`` replaying ``src``."""
    trace = read_trace(src)
    avail = contention.availability(trace.cpu_usage_pct / 100.0)
    rows = "\n".join(f"{t:.0f},{a:.6f}" for t, a in zip(trace.timestamps, avail, strict=True))
    dst.write_text("timestamp,value\n" + rows + "\n")


def loadgen(path: Path, core: int, offset: float = 0.0) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ppe("loadgen", str(path), "--core", str(core), "--offset", f"{offset:.0f}"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        start_new_session=True,  # its own session: the scheduler's autogroups share first
    )


def stop(gens: list[subprocess.Popen[bytes]]) -> None:
    for g in gens:
        g.terminate()
    for g in gens:
        g.wait(timeout=10)


def loaded_run(
    n: int, iterations: int, start: float, traces: list[Path], firsts: list[float]
) -> float:
    gens = [
        loadgen(path, core, start - first)
        for core, (path, first) in enumerate(zip(traces, firsts, strict=True))
    ]
    try:
        time.sleep(1.0)
        return real_run(n, iterations)
    finally:
        stop(gens)


def measure_contention(
    n: int, iterations: int, duties: list[float], repeats: int, work: Path
) -> Contention:
    """One rank pinned to core 0, alone and beside a constant-duty ``ppe loadgen`` at each
    duty, interleaved round by round; each duty's availability is the median time alone over
    the median time beside it."""
    alone: list[float] = []
    beside: dict[float, list[float]] = {d: [] for d in duties}
    for _ in range(repeats):
        alone.append(real_run(n, iterations, ranks=1))
        for d in duties:
            path = work / f"duty-{d:g}.csv"
            path.write_text(f"timestamp,value\n0,{100 * d:g}\n86400,{100 * d:g}\n")
            gens = [loadgen(path, 0)]
            try:
                time.sleep(1.0)
                beside[d].append(real_run(n, iterations, ranks=1))
            finally:
                stop(gens)
    base = statistics.median(alone)
    return Contention(
        tuple((d, min(1.0, base / statistics.median(ts))) for d, ts in beside.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--runs", type=int, default=10, help="real runs, dedicated and loaded")
    ap.add_argument("--starts", type=int, default=200, help="simulated start times")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", type=Path, default=None, help="a profile JSON (else measured)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the specs and reports here")
    ap.add_argument(
        "--contention",
        choices=("measured", "fair"),
        default="measured",
        help="a rank's availability beside a generator: measured here first, or the assumed "
        "fair share max(1 - d, 1/2)",
    )
    ap.add_argument("--contention-duties", type=float, nargs="+", default=[0.25, 0.5, 0.97])
    ap.add_argument("--contention-repeats", type=int, default=3)
    ap.add_argument(
        "--contention-iterations", type=int, default=40, help="of the one-rank calibration runs"
    )
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="whatif-validate-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()}; files in {work}", flush=True)

    profile = work / "host.json"
    if args.profile:
        profile.write_text(args.profile.read_text())
    else:
        sh(ppe("profile", "--quick", "--out", str(profile)))
    latency, bandwidth = measure_link()
    print(f"link between the ranks: {latency * 1e6:.2f} us, {bandwidth / 1e9:.2f} GB/s")

    # 1. dedicated
    spec = work / "dedicated.toml"
    spec.write_text(spec_text(args.n, args.iterations, latency, bandwidth, ""))
    report = json.loads(sh(ppe("whatif", str(spec), "--strategy", "block", "--json")))
    ms = report["points"][0]["makespan"]
    real = [real_run(args.n, args.iterations) for _ in range(args.runs)]
    med = statistics.median(real)
    lo, hi = ms["interval"]
    runs = ", ".join(f"{r:.2f}" for r in real)
    print(
        f"\ndedicated: predicted {ms['mean']:.2f} s [{lo:.2f}, {hi:.2f}]; real median "
        f"{med:.2f} s (runs {runs}); error {ms['mean'] / med - 1:+.1%}",
        flush=True,
    )

    # 2. under recorded load
    directory = next(d for d in TRACE_DIRS if d.is_dir())
    picked = [s.path for s in pick_traces(directory)]
    if args.contention == "measured":
        contention = measure_contention(args.n, args.contention_iterations,
                                        args.contention_duties, args.contention_repeats, work)  # fmt: skip
    else:
        contention = Contention()
    fair = Contention()
    print("availability beside a generator (" + args.contention + "): " + ", ".join(
        f"d={d:g}: {float(contention.availability(d)):.3f} (fair share {float(fair.availability(d)):.2f})"
        for d in args.contention_duties), flush=True)  # fmt: skip
    # the machine's own run-to-run spread, measured on the dedicated runs above
    variation = statistics.stdev(real) / statistics.fmean(real) if len(real) > 1 else 0.0
    print(f"run-to-run variation of the dedicated runs: {variation:.1%} (the spec's variation)")
    link = (latency, bandwidth)
    point = simulate_loaded(args, work, picked, contention, variation, link, "")
    starts, made = point["starts"], point["makespans_s"]
    lo, hi = point["makespan"]["interval"]
    firsts = [float(read_trace(p).timestamps[0]) for p in picked]
    order = np.random.default_rng(args.seed).permutation(len(starts))[: args.runs]
    print(f"\nunder load ({', '.join(p.name for p in picked)} on cores 0, 1): simulated at "
          f"{len(starts)} starts, central 95 %: [{lo:.2f}, {hi:.2f}] s, "
          f"median {point['makespan']['quantiles']['0.5']:.2f} s")  # fmt: skip
    print("| start (trace s) | simulated at this start (s) | real (s) | inside the 95 % |")
    print("|---|---|---|---|")
    inside, loaded = 0, []
    for i in sorted(order.tolist()):
        r = loaded_run(args.n, args.iterations, starts[i], picked, firsts)
        loaded.append(r)
        ok = lo <= r <= hi
        inside += ok
        print(f"| {starts[i]:.0f} | {made[i]:.2f} | {r:.2f} | {'yes' if ok else 'no'} |",
              flush=True)  # fmt: skip
    print(f"\nreal runs inside the simulated 95 %: {inside}/{len(order)}")
    print(f"load average after: {os.getloadavg()}")
    # the load model alone: the simulation rescaled by the dedicated half's error (the
    # profile's), and the ratio of loaded to dedicated, real against simulated
    scale = med / ms["mean"]
    print(f"real loaded median over real dedicated median: "
          f"{statistics.median(loaded) / med:.3f}")  # fmt: skip
    points = [("", point)]
    if args.contention == "measured":
        # the same real runs against the assumed fair share (same starts and seeds)
        points.append((" fair", simulate_loaded(args, work, picked, fair, variation, link, "-fair")))  # fmt: skip
    for tag, p in points:
        a, b = p["makespan"]["interval"]
        mid = p["makespan"]["quantiles"]["0.5"]
        print(f"simulated{tag or ' ' + args.contention}: central 95 % [{a:.2f}, {b:.2f}] s, "
              f"median {mid:.2f} s (over the predicted dedicated: {mid / ms['mean']:.3f}): "
              f"{sum(a <= r <= b for r in loaded)}/{len(loaded)} inside; rescaled by the "
              f"dedicated error ({scale:.3f}): "
              f"{sum(a * scale <= r <= b * scale for r in loaded)}/{len(loaded)} inside")  # fmt: skip


def simulate_loaded(
    args: argparse.Namespace,
    work: Path,
    picked: list[Path],
    contention: Contention,
    variation: float,
    link: tuple[float, float],
    tag: str,
) -> dict[str, Any]:
    """The loaded spec (the traces as the availability ``contention`` gives, files and spec
    named with ``tag``) simulated at ``--starts`` seeded start times: the report's point."""
    names = []
    for path in picked:
        name = f"avail-{path.name.split('.')[0]}{tag}.csv"
        availability_csv(path, work / name, contention)
        names.append(name)
    files = ", ".join(f'"{x}"' for x in names)
    load = f'load = {{kind = "traces", files = [{files}]}}\nvariation = {variation:.4f}\n'
    spec = work / f"loaded{tag}.toml"
    spec.write_text(spec_text(args.n, args.iterations, *link, load))
    sim = json.loads(sh(ppe("whatif", str(spec), "--strategy", "block", "--simulate",
                            "--starts", str(args.starts), "--seed", str(args.seed),
                            "--workers", "1", "--json")))  # fmt: skip
    point: dict[str, Any] = sim["points"][0]
    return point


if __name__ == "__main__":
    main()
