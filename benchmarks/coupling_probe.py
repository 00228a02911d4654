"""How two coupled ppe-sor ranks slow down beside duty-cycle load generators (issue 21).

The what-if simulator advances each rank at its own availability and ends every iteration at
the slowest, so two ranks each beside a generator are predicted at the smaller availability.
But the ranks exchange halos every half-iteration (~20 ms, far shorter than a generator's
0.1 s period), and each generator takes its CPU at its own phase. This probe measures what
the pair really does, with a constant duty ``d`` (a two-sample ``timestamp,value`` trace
replayed by ``ppe loadgen``, in its own session as ``whatif_validate.py`` starts it):

* ``dedicated``: ``mpiexec -n 2 ppe-sor --offline --pin`` on idle cores (the reference);
* ``core0`` / ``core1``: a generator of duty ``d`` on that core only;
* ``both``: one generator of duty ``d`` on each core, phases as they fall (random);
* ``aligned`` / ``opposite`` (``--phased``): the same two generators started on one shared
  clock (:func:`sensors.loadgen.run` after sleeping to a common instant), their periods in
  step or half a period apart: the overlap of their busy windows set rather than random;
* ``mixed``: duties ``D0,D1`` on cores 0 and 1 (``--mixed``; by default 0.97 and 0.5, the
  levels of the two Bitbrains traces ``whatif_validate.py`` replays);
* ``single`` / ``single+gen``: one rank alone on core 0, without and with a generator: the
  availability one CPU-bound process really gets beside it, against ``max(1 - d, 1/2)``;
* ``single+other`` (``--other``): one rank on core 0, a generator on core 1: does load on
  one core slow the other (shared caches, memory, a hypervisor's siblings)?

Conditions are interleaved round by round (each round runs every condition once), so drift
in the machine's speed or in other work spreads over all of them. Prints every run, then one
row per condition: the median time over its dedicated reference, beside what the models
give for it (see ``models``). The load average is printed before and after.

    .venv/bin/python benchmarks/coupling_probe.py                       # ~7 minutes
    .venv/bin/python benchmarks/coupling_probe.py --duties 0.4 --repeats 2 --phased
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sor_experiment import env, mpiexec  # noqa: E402
from sensors.loadgen import Contention  # noqa: E402

#: A generator started on the shared clock: pin, build a constant schedule, sleep to the
#: instant given, then run the loadgen loop until terminated.
PHASED_GEN = """
import os, signal, sys, threading, time
from sensors.loadgen import DutySchedule, Step, run
core, duty, at = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
os.sched_setaffinity(0, {core})
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
time.sleep(max(0.0, at - time.monotonic()))
run(DutySchedule((Step(0.0, 1e6, duty, 0.0),)), stop=stop)
"""


@dataclass(frozen=True)
class Condition:
    """One way to run: ranks, the duty on each core (0: no generator), how the generators
    start (``cli``: ``ppe loadgen``, random phase; or a phase offset in periods)."""

    name: str
    duty: float
    ranks: int
    loads: tuple[float, float]
    phase: float | None = None

    @property
    def reference(self) -> str:
        return "single" if self.ranks == 1 else "dedicated"


def conditions(
    duties: list[float], phased: bool, mixed: list[tuple[float, float]], other: bool = False
) -> list[Condition]:
    out = [Condition("dedicated", 0.0, 2, (0.0, 0.0)), Condition("single", 0.0, 1, (0.0, 0.0))]
    out += [Condition("mixed", max(pair), 2, pair) for pair in mixed]
    for d in duties:
        out += [
            Condition("core0", d, 2, (d, 0.0)),
            Condition("core1", d, 2, (0.0, d)),
            Condition("both", d, 2, (d, d)),
            Condition("single+gen", d, 1, (d, 0.0)),
        ]
        if other:
            out.append(Condition("single+other", d, 1, (0.0, d)))
        if phased:
            out += [
                Condition("aligned", d, 2, (d, d), 0.0),
                Condition("opposite", d, 2, (d, d), 0.5),
            ]
    return out


def constant_trace(duty: float, folder: Path) -> Path:
    """A two-sample trace of ``duty`` (written as CPU usage in percent) for ``ppe loadgen``."""
    path = folder / f"duty-{duty:g}.csv"
    pct = 100.0 * duty
    path.write_text(f"timestamp,value\n0,{pct:g}\n86400,{pct:g}\n")
    return path


def start_generators(c: Condition, folder: Path) -> list[subprocess.Popen[bytes]]:
    gens = []
    at = time.monotonic() + 1.5  # the phased ones all start on this instant (+ phase)
    for core, d in enumerate(c.loads):
        if d <= 0:
            continue
        if c.phase is None:
            cmd = [sys.executable, "-m", "ppe", "loadgen", str(constant_trace(d, folder)),
                   "--core", str(core)]  # fmt: skip
        else:
            offset = c.phase * 0.1 if core == 1 else 0.0
            cmd = [sys.executable, "-c", PHASED_GEN, str(core), str(d), repr(at + offset)]
        gens.append(
            subprocess.Popen(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env(),
                start_new_session=True,  # as whatif_validate.py: its own autogroup
            )
        )
    return gens


def sor(ranks: int, n: int, iterations: int) -> float:
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "ppe.apps.sor", "--offline",
           "--n", str(n), "--iterations", str(iterations), "--pin"]  # fmt: skip
    out = subprocess.run(
        cmd,
        check=True,
        capture_output=True,
        text=True,
        env=env(),
    ).stdout
    return float(json.loads(out.strip().splitlines()[-1])["total_s"])


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``: all but idle
    and iowait), to tell how much other work ran beside a measurement."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in fields]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def measure(c: Condition, n: int, iterations: int, folder: Path) -> tuple[float, float]:
    """The run's seconds, and the share of the two cores that other work took meanwhile
    (from the generators' start to their end: the machine's busy CPU time minus this probe's
    children's, over twice the wall time; a rough gauge, kernel threads included)."""
    busy, ours, t0 = busy_cpu_s(), children_cpu_s(), time.monotonic()
    gens = start_generators(c, folder)
    try:
        if gens:
            time.sleep(2.0)  # imported, pinned and (phased ones) started on the shared clock
        took = sor(c.ranks, n, iterations if c.ranks == 2 else iterations // 2)
    finally:
        for g in gens:
            g.terminate()
        for g in gens:
            g.wait(timeout=10)
    wall = time.monotonic() - t0
    other = busy_cpu_s() - busy - (children_cpu_s() - ours)
    return took, max(other, 0.0) / (2 * wall)


def fair(d: float) -> float:
    """The spec's assumed availability beside a generator of duty ``d`` (Linux fair share)."""
    return float(Contention().availability(d))


def models(c: Condition, single: dict[float, float]) -> dict[str, float]:
    """Predicted slowdowns (time over dedicated). ``min``: the slower rank's availability
    (what the simulator does per iteration), ``product``: the pair runs only while both run
    (off-windows at independent random phases), each with ``max(1-d, 1/2)``; ``shared``:
    each generator shares its core half and half with the rank for ``min(2d, 1)`` of the
    period, the pair at the slower rank's instantaneous rate, random phases
    (``1 - (1 - prod(2a - 1)) / 2``); ``meas``: min and product with the single-rank
    availability this probe measured at that duty."""
    if c.ranks == 1:
        return {"min": 1 / fair(c.loads[0]) if c.loads[0] > 0 else 1.0}
    a = [fair(d) if d > 0 else 1.0 for d in c.loads]
    m = [single.get(d, float("nan")) if d > 0 else 1.0 for d in c.loads]
    return {
        "min": 1 / min(a),
        "product": 1 / (a[0] * a[1]),
        "shared": 1 / (1 - (1 - (2 * a[0] - 1) * (2 * a[1] - 1)) / 2),
        "min meas": 1 / min(m),
        "product meas": 1 / (m[0] * m[1]),
    }


RUN_LINE = re.compile(
    r"^round (\d+) +(\S+) ([\d.]+),([\d.]+): ([\d.]+) s +\(other work (\d+)% of the cores\)$"
)


def parse_log(text: str, conds: list[Condition]) -> dict[Condition, list[tuple[float, float]]]:
    """The runs a previous probe printed (``round R NAME D0,D1: T s (other work X% ...)``),
    matched to ``conds`` by name and duties."""
    by_key = {(c.name, c.loads): c for c in conds}
    runs: dict[Condition, list[tuple[float, float]]] = {c: [] for c in conds}
    for line in text.splitlines():
        m = RUN_LINE.match(line.strip())
        if m:
            c = by_key.get((m[2], (float(m[3]), float(m[4]))))
            if c is not None:
                runs[c].append((float(m[5]), float(m[6]) / 100))
    return runs


def table(runs: dict[Condition, list[tuple[float, float]]], max_other: float) -> list[str]:
    """One row per condition: its runs' median over its reference's, keeping only runs
    during which other work took at most ``max_other`` of the cores (all when none did)."""

    def kept(c: Condition) -> list[float]:
        quiet = [t for t, o in runs[c] if o <= max_other]
        return quiet or [t for t, _ in runs[c]]

    conds = list(runs)
    ref = {c.name: statistics.median(kept(c)) for c in conds if c.duty == 0 and runs[c]}
    single = {
        c.duty: ref["single"] / statistics.median(kept(c))
        for c in conds
        if c.name == "single+gen" and runs[c]
    }
    names = ["min", "product", "shared", "min meas", "product meas"]
    out = [
        "| condition | duty core 0, core 1 | runs s (kept/all) | median / ref | spread | "
        + " | ".join(names)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for c in conds:
        ts = kept(c)
        if not ts:
            continue
        base = ref[c.reference]
        ratio = statistics.median(ts) / base
        spread = f"{min(ts) / base:.2f}-{max(ts) / base:.2f}"
        got = models(c, single) if c.duty > 0 else {}
        cells = " | ".join(f"{got[k]:.2f}" if k in got else "" for k in names)
        shown = ", ".join(f"{t:.2f}" for t in ts) + f" ({len(ts)}/{len(runs[c])})"
        duty = (
            f"{c.loads[0]:g}"
            if c.name in ("single", "single+gen")
            else f"{c.loads[0]:g}, {c.loads[1]:g}"
        )
        out.append(f"| {c.name} | {duty} | {shown} | {ratio:.2f} | {spread} | {cells} |")
    out.append(
        "\nsingle-rank availability measured beside a generator (vs max(1-d, 1/2)): "
        + ", ".join(f"d={d:g}: {a:.3f} ({fair(d):.2f})" for d, a in single.items())
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duties", type=float, nargs="+", default=[0.2, 0.4, 0.5, 0.6, 0.97])
    ap.add_argument("--repeats", type=int, default=3, help="rounds over every condition")
    ap.add_argument("--n", type=int, default=2000, help="grid side (ranks hold n/2 rows)")
    ap.add_argument("--iterations", type=int, default=40, help="two ranks; one rank runs half")
    ap.add_argument("--phased", action="store_true", help="add aligned and opposite phases")
    ap.add_argument(
        "--other", action="store_true", help="add one rank beside the other core's load"
    )
    ap.add_argument(
        "--mixed",
        nargs="*",
        default=["0.97,0.5"],
        help="D0,D1: a different duty on each core (default: whatif_validate's two traces "
        "at their usual levels, one saturated and one half busy)",
    )
    ap.add_argument(
        "--max-other",
        type=float,
        default=0.1,
        help="leave out runs during which other work took more of the cores (default 0.1)",
    )
    ap.add_argument("--from-log", type=Path, help="rebuild the table from a probe's output")
    args = ap.parse_args()
    mixed = [(float(a), float(b)) for a, b in (x.split(",") for x in args.mixed)]
    conds = conditions(args.duties, args.phased, mixed, args.other)
    if args.from_log:
        print("\n".join(table(parse_log(args.from_log.read_text(), conds), args.max_other)))
        return
    # a terminated probe stops its generators too (they run in sessions of their own)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    print(f"load average before: {os.getloadavg()}", flush=True)
    runs: dict[Condition, list[tuple[float, float]]] = {c: [] for c in conds}
    with tempfile.TemporaryDirectory(prefix="coupling-") as tmp:
        for r in range(args.repeats):
            for c in conds:
                t, other = measure(c, args.n, args.iterations, Path(tmp))
                runs[c].append((t, other))
                print(f"round {r} {c.name:>10} {c.loads[0]:g},{c.loads[1]:g}: {t:.3f} s  "
                      f"(other work {other:.0%} of the cores)", flush=True)  # fmt: skip
    others = [o for rs in runs.values() for _, o in rs]
    print(f"load average after: {os.getloadavg()}; other work took {min(others):.0%}-"
          f"{max(others):.0%} of the cores during a run (median {statistics.median(others):.0%})\n")  # fmt: skip
    print("\n".join(table(runs, args.max_other)))


if __name__ == "__main__":
    main()
