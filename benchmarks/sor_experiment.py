"""The 2-core experiment (issue 19): real ppe-sor runs under recorded contention, each strategy
judged against what PPE promised, and the calibrated benchmark against an idle core's.

On this machine: ``ppe serve`` (SQLite, its own port), one sensor pinned to each core
(``taskset -c CORE ppe sensor --cpus CORE``), ``ppe loadgen`` replaying a bimodal Bitbrains
trace on core 0 and a steady one on core 1 (picked by their statistics, sped up so that a run
crosses load changes), then ``--runs`` rounds of ``mpiexec -n 2 ppe-sor --pin`` per strategy
(block, mean, conservative, expected, expected with re-planning), interleaved round by round so
every strategy sees the same kind of load. Before the load starts, an offline run on
the idle cores measures each rank's benchmark on its block strip (compute seconds from
``--trace``; a one-rank run over the whole grid is printed beside it); the hosts are registered
with those. The strips are measured again between rounds (``--idle-every``, the load
generators paused) and after the runs: this machine's speed drifts. Prints per strategy the mean and median makespan and the coverage of the
served intervals, the live accuracy the service computed, and each host's calibrated benchmark
beside the idle one.

    python benchmarks/sor_experiment.py --runs 20          # the experiment (about 30 min)
    python benchmarks/sor_experiment.py --tiny             # a minute: proves the machinery
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppe.apps.sor.partition import block_split  # noqa: E402
from ppe.traces import read_trace  # noqa: E402

TRACE_DIRS = (
    ROOT.parent / "shared" / "traces" / "bitbrains-rnd-2013-7",
    ROOT / "examples" / "traces" / "bitbrains-sample",
)
HOSTS = ("h0", "h1")
#: label -> (ppe-sor strategy, re-plan)
STRATEGIES = {
    "block": ("block", False),
    "mean": ("mean", False),
    "conservative": ("conservative", False),
    "expected": ("expected", False),
    "expected+replan": ("expected", True),
}


# ------------------------------------------------------------------------ traces


@dataclass(frozen=True)
class TraceStats:
    path: Path
    mean: float
    std: float
    low: float  # share of samples under 20 % busy
    high: float  # share over 80 % busy

    @property
    def bimodality(self) -> float:
        return min(self.low, self.high)


def trace_stats(path: Path) -> TraceStats:
    usage = np.clip(read_trace(path).alive().cpu_usage_pct / 100.0, 0.0, 1.0)
    return TraceStats(
        path,
        float(usage.mean()),
        float(usage.std()),
        float((usage < 0.2).mean()),
        float((usage > 0.8).mean()),
    )


def pick_traces(directory: Path) -> tuple[TraceStats, TraceStats]:
    """The most bimodal trace (most time both idle and saturated) and the steadiest one that
    loads its core at least 20 % (smallest spread around its mean)."""
    stats = [trace_stats(p) for p in sorted(directory.glob("*.csv*"))]
    bimodal = max(stats, key=lambda s: s.bimodality)
    busy = [s for s in stats if s.mean >= 0.2 and s is not bimodal]
    steady = min(busy or stats, key=lambda s: s.std / max(s.mean, 1e-9))
    return bimodal, steady


# ------------------------------------------------------------------------ processes


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def mpiexec() -> str:
    found = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which(
        "mpiexec"
    )
    if found is None:
        raise SystemExit("no mpiexec (pip install mpich)")
    return found


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Processes:
    """What this script started; stopped in reverse order, each by its own pid."""

    started: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    def start(self, name: str, cmd: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        out = open(log, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env())
        self.started.append((name, proc))
        return proc

    def stop(self) -> None:
        for _, proc in reversed(self.started):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in reversed(self.started):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                print(f"  {name} ignored SIGTERM; killing pid {proc.pid}", file=sys.stderr)
                proc.kill()


def token(db: str, role: str) -> str:
    out = subprocess.run(
        python("-m", "ppe", "token", "create", "--role", role, "--db", db),
        check=True,
        capture_output=True,
        text=True,
        env=env(),
    )
    return out.stdout.strip().splitlines()[-1]


def wait_until(what: str, ready: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ready():
            return
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


# ------------------------------------------------------------------------ runs


def sor(args: Sequence[str], timeout: float) -> dict[str, Any]:
    """One ``ppe-sor`` job; its summary line (JSON), or the error."""
    cmd = [mpiexec(), "-n", str(len(HOSTS)), *python("-m", "ppe.apps.sor"), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}
    return dict(json.loads(lines[-1]))


def compute_seconds(trace: Path) -> float:
    """The compute bursts' seconds in one rank's event trace."""
    total = 0.0
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "compute":
            total += event["end"] - event["start"]
    return total


def idle_benchmark(n: int, iterations: int, workdir: Path, ranks: int) -> list[float]:
    """``ranks`` ranks, offline (block strips), pinned, nothing else loading the cores: each
    rank's compute seconds (from the event trace) per element of its strip per iteration.
    With one rank that is the whole grid; with the experiment's ranks it is their strips,
    which is the work (and the share of the L3 cache) the calibration measures."""
    trace = workdir / f"idle-{ranks}.trace"
    cmd = [
        mpiexec(),
        "-n",
        str(ranks),
        *python("-m", "ppe.apps.sor"),
        "--offline",
        "--pin",
        "--n",
        str(n),
        "--iterations",
        str(iterations),
        "--trace",
        str(trace),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600, env=env())
    rows = block_split(n, ranks)
    return [
        compute_seconds(Path(f"{trace}.{r}")) / (rows[r] * n * iterations) for r in range(ranks)
    ]


def interval_of(client: httpx.Client, schedule_id: int) -> tuple[float, float, float]:
    m = client.get(f"/api/v1/schedules/{schedule_id}").json()["response"]["makespan"]
    return float(m["mean"]), float(m["interval"][0]), float(m["interval"][1])


@dataclass
class Outcome:
    label: str
    total_s: float | None = None
    served: tuple[float, float, float] | None = None
    error: str | None = None
    migrations: int = 0


def summarise(outcomes: Sequence[Outcome]) -> None:
    print(
        f"\n{'strategy':<16} {'runs':>4} {'failed':>6} {'mean s':>8} {'median s':>9} "
        f"{'predicted s':>11} {'coverage':>9} {'migrations':>10}"
    )
    for label in STRATEGIES:
        mine = [o for o in outcomes if o.label == label]
        ok = [o for o in mine if o.total_s is not None]
        times = [o.total_s for o in ok if o.total_s is not None]
        judged = [o for o in ok if o.served is not None]
        inside = sum(
            1 for o in judged if o.served and o.served[1] <= (o.total_s or 0) <= o.served[2]
        )
        coverage = f"{inside}/{len(judged)}" if judged else "-"
        pred = statistics.fmean([o.served[0] for o in judged if o.served]) if judged else None
        print(
            f"{label:<16} {len(mine):>4} {len(mine) - len(ok):>6} "
            f"{statistics.fmean(times) if times else float('nan'):>8.2f} "
            f"{statistics.median(times) if times else float('nan'):>9.2f} "
            f"{pred if pred is not None else float('nan'):>11.2f} {coverage:>9} "
            f"{sum(o.migrations for o in ok):>10}"
        )


def idle_paused(
    loadgens: Sequence[subprocess.Popen[bytes]], n: int, iterations: int, workdir: Path
) -> list[float]:
    """The idle strips between rounds: the load generators stopped (SIGSTOP) meanwhile."""
    for gen in loadgens:
        gen.send_signal(signal.SIGSTOP)
    try:
        return idle_benchmark(n, iterations, workdir, len(HOSTS))
    finally:
        for gen in loadgens:
            gen.send_signal(signal.SIGCONT)


def print_calibration(calibrated: dict[str, Any], idles: Sequence[Sequence[float]]) -> None:
    """Each host's calibrated benchmark beside its idle strips, measured before the runs,
    between rounds and after: this machine's speed drifts (its L3 cache is shared beyond
    the two cores), so the runs are judged against the idle figures' mean and range."""
    print("\ncalibrated benchmark (GET /api/v1/resources/{host}/calibration) vs idle strips")
    for k, host in enumerate(HOSTS):
        c = calibrated.get(host) or {}
        cal = c.get("calibrated")
        if cal is None:
            print(f"  {host}: no usable runs ({c.get('runs_read', 0)} read)")
            continue
        se = cal["std_error"] or 0.0
        sources = sorted({r["share_source"] for r in cal["runs"]})
        idle = [row[k] for row in idles]
        mean = statistics.fmean(idle)
        print(
            f"  {host}: {cal['benchmark']:.4g} ± {se:.2g} s from {len(cal['runs'])} runs "
            f"(share from {', '.join(sources)}; mean "
            f"{statistics.fmean(r['share'] for r in cal['runs']):.2f}); idle strips "
            f"{len(idle)}x, mean {mean:.4g} ({cal['benchmark'] / mean - 1:+.1%}), "
            f"{min(idle):.4g}..{max(idle):.4g}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=20, help="runs per strategy (default 20)")
    p.add_argument("--n", type=int, default=2000, help="grid side (default 2000)")
    p.add_argument("--iterations", type=int, default=600, help="per run (default 600)")
    p.add_argument("--speedup", type=float, default=60.0, help="trace speed-up (300 s -> 5 s)")
    p.add_argument("--offset", type=float, default=0.0, help="trace seconds to skip")
    p.add_argument("--check", type=float, default=3.0, help="re-planning runs' pace checks, s")
    p.add_argument("--k", type=float, default=2.0, help="conservative's k")
    p.add_argument("--warmup", type=float, default=30.0, help="s of sensing before the runs")
    p.add_argument("--traces", type=Path, default=None, help="directory of Bitbrains traces")
    p.add_argument("--keep", type=Path, default=None, help="keep the store and logs here")
    p.add_argument(
        "--idle-every", type=int, default=1, help="measure the idle strips every K rounds (0: no)"
    )
    p.add_argument("--tiny", action="store_true", help="1 run each, a small grid: a smoke test")
    a = p.parse_args(argv)
    if a.tiny:
        a.runs, a.n, a.iterations, a.warmup, a.check = 1, 300, 200, 12.0, 1.0
    if os.cpu_count() is None or len(os.sched_getaffinity(0)) < len(HOSTS):
        raise SystemExit(f"needs {len(HOSTS)} cores")
    traces_dir = a.traces or next((d for d in TRACE_DIRS if d.is_dir()), None)
    if traces_dir is None:
        raise SystemExit("no trace directory: give --traces")
    workdir = a.keep or Path(tempfile.mkdtemp(prefix="ppe-sor-experiment-"))
    workdir.mkdir(parents=True, exist_ok=True)
    bimodal, steady = pick_traces(traces_dir)
    for role, s in (("core 0, bimodal", bimodal), ("core 1, steady", steady)):
        print(
            f"{role}: {s.path.name} (mean busy {s.mean:.0%}, std {s.std:.2f}, "
            f"{s.low:.0%} idle, {s.high:.0%} saturated)"
        )

    print("idle cores: offline runs ...", flush=True)
    (whole,) = idle_benchmark(a.n, a.iterations, workdir, 1)
    idle = idle_benchmark(a.n, a.iterations, workdir, len(HOSTS))
    print(f"idle benchmark, one rank sweeping the whole grid: {whole:.4g} s per element")
    for host, value in zip(HOSTS, idle, strict=True):
        print(f"idle benchmark, {host} sweeping its block strip beside the others: {value:.4g} s")

    db = f"sqlite:///{workdir / 'ppe.db'}"
    subprocess.run(
        python("-m", "ppe", "migrate", "--db", db), check=True, env=env(), capture_output=True
    )
    admin, app, sensor = token(db, "admin"), token(db, "app"), token(db, "sensor")
    (workdir / "app.token").write_text(app)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs = Processes()
    outcomes: list[Outcome] = []
    calibrated: dict[str, Any] = {}
    between: list[list[float]] = []
    try:
        procs.start(
            "ppe serve",
            python("-m", "ppe", "serve", "--db", db, "--port", str(port), "--log-level", "warning"),
            workdir / "serve.log",
        )
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"})

        def up() -> bool:
            try:
                return client.get("/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until("ppe serve", up, 60)
        for core, host in enumerate(HOSTS):
            procs.start(
                f"sensor {host}",
                [
                    "taskset",
                    "-c",
                    str(core),
                    *python(
                        "-m",
                        "ppe",
                        "sensor",
                        "--server",
                        url,
                        "--token",
                        sensor,
                        "--name",
                        host,
                        "--cpus",
                        str(core),
                        "--period",
                        "1",
                        "--batch-delay",
                        "1",
                        "--cpu-probe-interval",
                        "10",
                        "--profile-every",  # no machine profile: it loads both cores
                        "0",
                        "--spool",
                        str(workdir / f"spool-{host}"),
                    ),
                ],
                workdir / f"sensor-{host}.log",
            )
        for host, value in zip(HOSTS, idle, strict=True):
            body = {"properties": {"benchmark": value}}
            client.put(f"/api/v1/resources/{host}", json=body).raise_for_status()
        loadgens = []
        for core, chosen in enumerate((bimodal, steady)):
            gen = procs.start(
                f"loadgen {core}",
                python(
                    "-m",
                    "ppe",
                    "loadgen",
                    str(chosen.path),
                    "--core",
                    str(core),
                    "--speedup",
                    str(a.speedup),
                    "--offset",
                    str(a.offset),
                ),
                workdir / f"loadgen-{core}.log",
            )
            loadgens.append(gen)
        print(f"sensing for {a.warmup:g} s under load ...", flush=True)
        time.sleep(a.warmup)

        common = [
            "--server",
            url,
            "--token-file",
            str(workdir / "app.token"),
            "--hosts",
            ",".join(HOSTS),
            "--n",
            str(a.n),
            "--iterations",
            str(a.iterations),
            "--pin",
            "--k",
            str(a.k),
        ]
        for round_no in range(a.runs):
            if round_no and a.idle_every and round_no % a.idle_every == 0:
                between.append(idle_paused(loadgens, a.n, a.iterations, workdir))
                shown = ", ".join(f"{v:.4g}" for v in between[-1])
                print(f"idle strips, load paused: {shown} s", flush=True)
            for label, (strategy, replan) in STRATEGIES.items():
                extra = ["--replan", "--check", str(a.check)] if replan else ["--no-replan"]
                summary = sor([*common, "--strategy", strategy, *extra], timeout=1800)
                o = Outcome(label, error=summary.get("error"))
                if o.error is None:
                    o.total_s = float(summary["total_s"])
                    o.migrations = int(summary.get("migrations") or 0)
                    if summary.get("schedule_id") is not None:
                        o.served = interval_of(client, int(summary["schedule_id"]))
                outcomes.append(o)
                shown = f"{o.total_s:.2f} s" if o.total_s is not None else f"FAILED {o.error}"
                print(f"round {round_no + 1}/{a.runs} {label:<16} {shown}", flush=True)
        summarise(outcomes)

        time.sleep(3)  # the sensors' last batches: calibration reads samples after the runs
        print(
            "\nlive accuracy (GET /api/v1/accuracy?app=sor): by the served strategy, so "
            "expected and expected+replan are one group"
        )
        for g in client.get("/api/v1/accuracy", params={"app": "sor", "last": 1000}).json():
            cov = "-" if g["coverage"] is None else f"{g['coverage']:.0%}"
            print(
                f"  {g['strategy']:<14} completed {g['completed']:>3} failed {g['failed']:>2} "
                f"coverage {cov:>5} (promised {g['nominal'] or 0:.0%}) "
                f"mean rel. error {g['mean_relative_error'] or 0:.1%} "
                f"actual/predicted {g['mean_ratio'] or 0:.3f}"
            )
        calibrated = {h: client.get(f"/api/v1/resources/{h}/calibration").json() for h in HOSTS}
        print("\ncalibrated link bandwidth (loopback shared memory; the calibration's bandwidth)")
        bandwidth = client.get(f"/api/v1/resources/{HOSTS[0]}/calibration").json()["bandwidth"]
        for link in bandwidth["links"]:
            bw, se = link["bandwidth"], link["std_error"] or 0.0
            what = (
                link["reason"]
                if bw is None
                else f"{bw / 1e6:.0f} ± {se / 1e6:.0f} MB/s from {link['runs']} runs "
                f"(latency {link['latency_source']})"
            )
            print(f"  {HOSTS[0]}-{link['peer']}: {what}")
        if not bandwidth["links"]:
            print(f"  {bandwidth['reason']}")
        client.close()
    finally:
        procs.stop()
    if outcomes:
        after = idle_benchmark(a.n, a.iterations, workdir, len(HOSTS))
        print_calibration(calibrated, [idle, *between, after])
    print(f"\nstore and logs: {workdir}")
    return 0 if all(o.error is None for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
