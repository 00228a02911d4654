"""Soak: the real service on PostgreSQL under sensors and applications for minutes on end.

Starts `ppe serve --workers 2` on its own PostgreSQL database (emptied first), then for
`--minutes` runs `--sensors` simulated sensors, each posting a batch every `--period` s (cpu,
and bandwidth + latency of one link), and `--apps` applications asking for schedules back to
back, each over its own pool of `--schedule-hosts` hosts with 5+ samples. One asyncio process
drives it all over loopback with httpx, a connection per request; client and server share
this machine, so the figures are a floor.

Reports errors (must be 0), acknowledged measurements against the rows in the store (none may
be missing), the server processes' RSS minute by minute, the store's row counts as retention
trims it, p50/p99 latency of ingestion and of schedules, and throughput.

Usage: .venv/bin/python benchmarks/bench_soak.py [--minutes 10] [--out soak.json]
       (--db, default postgresql+psycopg://postgres@127.0.0.1:5432/ppe_soak, is emptied first
       and created when missing)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import sqlalchemy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import token  # noqa: E402  (benchmarks/common.py, beside this script)

from ppe.service.store.db import make_engine, normalize_url  # noqa: E402

DEFAULT_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/ppe_soak"
MIN_SAMPLES = 5  # the forecaster's minimum: hosts with fewer are not scheduled on
Key = tuple[str, str, str, float]  # (resource, metric, peer, timestamp)


@dataclass
class Stats:
    ingest_s: list[float] = field(default_factory=list)
    schedule_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    acked: set[Key] = field(default_factory=set)
    inserted: int = 0
    late: int = 0  # sensor slots missed because the previous post had not returned
    samples: dict[str, int] = field(default_factory=dict)  # acknowledged cpu samples per host
    worker_pids: set[int] = field(default_factory=set)  # every worker process seen

    def error(self, what: str) -> None:
        self.error_count += 1
        if len(self.errors) < 10:
            self.errors.append(what)


def percentile(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def reset_database(url: str) -> bool:
    """Empty the soak's own database, creating it when missing; False: no server there."""
    try:
        engine = make_engine(url)
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as exc:
        if "does not exist" not in str(exc):
            return False
        engine.dispose()
        admin = make_engine(url.rsplit("/", 1)[0] + "/postgres")
        name = sqlalchemy.engine.make_url(url).database
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(sqlalchemy.text("CREATE SCHEMA public"))
    engine.dispose()
    return True


def store_counts(engine: sqlalchemy.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t: int(conn.execute(sqlalchemy.text(f"SELECT count(*) FROM {t}")).scalar_one())
            for t in ("measurements", "series", "served_log")
        }


def server_processes(pid: int) -> list[tuple[str, psutil.Process]]:
    """(role, process): the supervisor and its uvicorn workers (spawned children)."""
    try:
        root = psutil.Process(pid)
        out = [("main", root)]
        workers = [
            p
            for p in root.children(recursive=True)
            if any("spawn_main" in part for part in p.cmdline())
        ]
    except psutil.Error:
        return []
    out += [(f"worker{i + 1}", p) for i, p in enumerate(sorted(workers, key=lambda p: p.pid))]
    return out


def readings(i: int, n: int, k: int, now: float, rng: random.Random) -> list[dict[str, Any]]:
    """Sensor `i`'s `k`-th report: a slow CPU swing with noise, and one link's figures."""
    name, peer = f"s{i}", f"s{(i + 1) % n}"
    phase = random.Random(-1 - i).uniform(0, 2 * math.pi)
    cpu = min(1.0, max(0.0, 0.55 + 0.35 * math.sin(phase + k / 30) + rng.gauss(0, 0.05)))
    return [
        {"resource": name, "metric": "cpu", "timestamp": now, "value": cpu},
        {
            "resource": name,
            "metric": "bandwidth",
            "peer": peer,
            "timestamp": now,
            "value": 1.25e8 * (0.8 + 0.2 * rng.random()),
        },
        {
            "resource": name,
            "metric": "latency",
            "peer": peer,
            "timestamp": now,
            "value": 2e-4 * (1 + rng.random()),
        },
    ]


def acknowledge(stats: Stats, items: list[dict[str, Any]]) -> None:
    for it in items:
        stats.acked.add((it["resource"], it["metric"], it.get("peer", ""), it["timestamp"]))


async def seed_history(
    client: httpx.AsyncClient, stats: Stats, sensors: int, samples: int, period: float
) -> None:
    """What a service that has been running a while holds: `samples` past reports per sensor,
    `period` apart and ending one period ago, so the soak measures steady state (forecast
    distributions reach their full size only once a series has some history)."""
    start = time.time() - period * (samples + 1)
    batch: list[dict[str, Any]] = []
    for i in range(sensors):
        rng = random.Random(10_000 + i)
        for k in range(samples):
            batch += readings(
                i, sensors, k - samples, start + period * k + period * i / sensors, rng
            )
            if len(batch) >= 15_000 or (i == sensors - 1 and k == samples - 1):
                r = await client.post("/api/v1/measurements", json={"measurements": batch})
                if r.status_code != 200:
                    sys.exit(f"seeding the history failed: {r.status_code} {r.text[:200]}")
                stats.inserted += int(r.json()["inserted"])
                acknowledge(stats, batch)
                batch = []
    for i in range(sensors):
        stats.samples[f"s{i}"] = samples


async def sensor(
    i: int, n: int, client: httpx.AsyncClient, stats: Stats, period: float, end: float
) -> None:
    name = f"s{i}"
    rng = random.Random(i)
    await asyncio.sleep(period * i / n)  # spread the sensors over the period
    slot = time.monotonic()
    k = 0
    while slot < end:
        items = readings(i, n, k, time.time(), rng)
        t = time.perf_counter()
        try:
            r = await client.post("/api/v1/measurements", json={"measurements": items})
            if r.status_code == 200:
                stats.ingest_s.append(time.perf_counter() - t)
                stats.inserted += int(r.json()["inserted"])
                acknowledge(stats, items)
                stats.samples[name] = stats.samples.get(name, 0) + 1
            else:
                stats.error(f"ingest {r.status_code}: {r.text[:200]}")
        except httpx.HTTPError as exc:
            took = time.perf_counter() - t
            stats.error(f"ingest {type(exc).__name__} after {took:.1f} s: {exc}")
        k += 1
        slot += period
        wait = slot - time.monotonic()
        if wait < 0:  # the post outlasted the period: skip to the next slot, as a sensor would
            stats.late += 1
            slot += period * math.ceil(-wait / period)
            wait = slot - time.monotonic()
        if slot >= end:
            break
        await asyncio.sleep(wait)


async def application(
    j: int, client: httpx.AsyncClient, stats: Stats, hosts: int, fixed: bool, end: float
) -> None:
    """Waits for `hosts` hosts with enough data, takes them as its pool (or a new random set
    each time with `fixed=False`), then asks for schedules back to back."""
    rng = random.Random(1000 + j)
    pool: list[str] = []
    while time.monotonic() < end:
        if not pool or not fixed:
            ready = sorted(h for h, n in stats.samples.items() if n >= MIN_SAMPLES)
            if len(ready) < hosts:
                await asyncio.sleep(1.0)
                continue
            pool = rng.sample(ready, hosts)
        body = {
            "app": "sor",
            "n": 8000,
            "iterations": 100,
            "hosts": [{"name": h, "benchmark": 2e-8} for h in pool],
            "strategy": "conservative",
        }
        t = time.perf_counter()
        try:
            r = await client.post("/api/v1/schedules", json=body)
            if r.status_code == 200:
                stats.schedule_s.append(time.perf_counter() - t)
            else:
                stats.error(f"schedule {r.status_code}: {r.text[:200]}")
        except httpx.HTTPError as exc:
            took = time.perf_counter() - t
            stats.error(f"schedule {type(exc).__name__} after {took:.1f} s: {exc}")


async def monitor(
    pid: int,
    engine: sqlalchemy.Engine,
    start: float,
    end: float,
    rows: list[dict[str, Any]],
    workers_seen: set[int],
) -> None:
    """Every 10 s: each server process's RSS and the store's row counts; every second, which
    worker processes exist (uvicorn replaces a worker that misses its health check)."""
    next_sample = 0.0
    while True:
        now = time.monotonic()
        procs = server_processes(pid)
        workers_seen.update(p.pid for role, p in procs if role != "main")
        if now >= next_sample or now >= end:
            next_sample = now + 10.0
            counts = await asyncio.to_thread(store_counts, engine)
            sample: dict[str, Any] = {"t_s": round(now - start, 1), **counts}
            for role, p in procs:
                try:
                    sample[f"{role}_rss_mb"] = round(p.memory_info().rss / 2**20, 1)
                except psutil.Error:
                    pass
            rows.append(sample)
        if now >= end:
            return
        await asyncio.sleep(min(1.0, max(0.0, end - time.monotonic())))


async def drive(args: argparse.Namespace, base: str, tokens: dict[str, str], pid: int) -> Any:
    stats = Stats()
    if args.history:
        async with httpx.AsyncClient(
            base_url=base,
            timeout=httpx.Timeout(600.0),
            headers={"Authorization": f"Bearer {tokens['sensor']}"},
        ) as seeder:
            t = time.perf_counter()
            await seed_history(seeder, stats, args.sensors, args.history, args.period)
            print(
                f"seeded {args.history} past reports per sensor in {time.perf_counter() - t:.0f} s",
                flush=True,
            )
    start = time.monotonic()
    end = start + 60 * args.minutes
    timeout = httpx.Timeout(args.timeout)
    # A connection per request, as sensors posting every 10 s and applications asking every
    # few seconds would have: a kept-alive one may be closed by uvicorn (5 s keep-alive) just as
    # a lagging client reuses it, and POSTs are not retried.
    limits = httpx.Limits(max_connections=args.connections, max_keepalive_connections=0)
    engine = make_engine(args.db)
    rss: list[dict[str, Any]] = []
    workers_seen: set[int] = set()
    async with (
        httpx.AsyncClient(
            base_url=base,
            timeout=timeout,
            limits=limits,
            headers={"Authorization": f"Bearer {tokens['sensor']}"},
        ) as sensors,
        httpx.AsyncClient(
            base_url=base,
            timeout=timeout,
            limits=limits,
            headers={"Authorization": f"Bearer {tokens['app']}"},
        ) as apps,
    ):
        tasks = [
            asyncio.create_task(sensor(i, args.sensors, sensors, stats, args.period, end))
            for i in range(args.sensors)
        ]
        tasks += [
            asyncio.create_task(
                application(j, apps, stats, args.schedule_hosts, not args.random_hosts, end)
            )
            for j in range(args.apps)
        ]
        watch = asyncio.create_task(monitor(pid, engine, start, end, rss, workers_seen))
        await asyncio.gather(*tasks)  # each stops by itself at `end` (+ one request timeout)
        elapsed = time.monotonic() - start
        await watch
    final = await asyncio.to_thread(store_counts, engine)
    missing = await asyncio.to_thread(find_missing, engine, stats.acked)
    engine.dispose()
    stats.worker_pids = workers_seen
    return stats, elapsed, rss, final, missing


def find_missing(engine: sqlalchemy.Engine, acked: set[Key]) -> int:
    """Acknowledged measurements that the store does not hold."""
    q = sqlalchemy.text(
        "SELECT r.name, s.metric, s.peer, m.timestamp FROM measurements m "
        "JOIN series s ON s.id = m.series_id JOIN resources r ON r.id = s.resource_id"
    )
    with engine.connect() as conn:
        stored = {(n, met, peer, float(ts)) for n, met, peer, ts in conn.execute(q)}
    return len(acked - stored)


def minute_table(rss: list[dict[str, Any]], minutes: float) -> list[dict[str, Any]]:
    """The first sample, the last one at or before each whole minute, and the final one."""
    out = rss[:1]
    for m in range(1, int(math.ceil(minutes)) + 1):
        before = [r for r in rss if r["t_s"] <= 60 * m + 5]
        if before and before[-1] is not out[-1]:
            out.append(before[-1])
    if rss and rss[-1] is not out[-1]:
        out.append(rss[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--sensors", type=int, default=500)
    ap.add_argument("--period", type=float, default=10.0, help="s between a sensor's batches")
    ap.add_argument("--apps", type=int, default=8)
    ap.add_argument("--schedule-hosts", type=int, default=32, help="hosts per schedule request")
    ap.add_argument(
        "--random-hosts",
        action="store_true",
        help="a new random host set for every schedule (default: each app keeps its own pool)",
    )
    ap.add_argument(
        "--history",
        type=int,
        default=240,
        help="past reports per sensor stored before the clock starts (steady state; 0: none)",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--db", default=os.environ.get("PPE_SOAK_DB", DEFAULT_DB))
    ap.add_argument("--port", type=int, default=18779)
    ap.add_argument("--timeout", type=float, default=60.0, help="s per request")
    ap.add_argument("--connections", type=int, default=200, help="sensor connection pool")
    ap.add_argument(
        "--served-rows",
        type=int,
        default=10_000,
        help="the served log's row limit for the run (PPE_RETAIN_SERVED_ROWS), low enough that "
        "retention trims it during the soak",
    )
    ap.add_argument("--retention-interval", type=float, default=60.0)
    ap.add_argument("--log-level", default="warning", help="the server's")
    ap.add_argument("--out", help="write the figures as JSON (.json) or the RSS curve as CSV")
    args = ap.parse_args()
    args.db = normalize_url(args.db)
    if not args.db.startswith("postgresql"):
        ap.error("the soak runs against PostgreSQL (--db postgresql+psycopg://...)")

    if not reset_database(args.db):  # `make bench` runs every script: say so and go on
        print(f"soak skipped: no PostgreSQL server at {args.db}")
        return
    tokens = {role: token(args.db, role) for role in ("sensor", "app")}
    log = tempfile.NamedTemporaryFile(prefix="ppe-soak-", suffix=".log", delete=False)
    env = {
        **os.environ,
        "PPE_RETAIN_SERVED_ROWS": str(args.served_rows),
        "PPE_RETENTION_INTERVAL_S": str(args.retention_interval),
    }
    cmd = [sys.executable, "-m", "ppe", "serve", "--db", args.db, "--port", str(args.port)]
    cmd += ["--workers", str(args.workers), "--log-level", args.log_level]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                sys.exit(f"server exited early; see {log.name}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        cpu0 = time.process_time()
        stats, elapsed, rss, final, missing = asyncio.run(drive(args, base, tokens, proc.pid))
        client_cpu = time.process_time() - cpu0
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    report(args, stats, elapsed, rss, final, missing, client_cpu, log.name)


def report(
    args: argparse.Namespace,
    stats: Stats,
    elapsed: float,
    rss: list[dict[str, Any]],
    final: dict[str, int],
    missing: int,
    client_cpu: float,
    log_path: str,
) -> None:
    n_ing, n_sch = len(stats.ingest_s), len(stats.schedule_s)
    print(
        f"soak: {elapsed / 60:.1f} min, {args.sensors} sensors every {args.period:g} s "
        f"(cpu + bandwidth + latency of one link), {args.apps} apps scheduling over "
        f"{args.schedule_hosts} {'random' if args.random_hosts else 'pooled'} hosts (conservative), "
        f"{args.workers} workers on PostgreSQL"
    )
    print(
        f"  client and server share this {psutil.cpu_count()}-core machine "
        f"(the client used {client_cpu:.0f} s CPU, {100 * client_cpu / elapsed:.0f} % of one core)"
    )
    print(f"errors: {stats.error_count}" + (f"  first: {stats.errors[:3]}" if stats.errors else ""))
    restarts = max(0, len(stats.worker_pids) - args.workers)
    print(f"worker processes replaced during the run (missed uvicorn health checks): {restarts}")
    print(
        f"measurements: {len(stats.acked)} acknowledged, {stats.inserted} inserted, "
        f"{final['measurements']} rows in the store, {missing} acknowledged but missing"
    )
    print(
        f"ingest:    {n_ing} batches, {n_ing / elapsed:.1f}/s ({3 * n_ing / elapsed:.0f} rows/s); "
        f"p50 {1000 * percentile(stats.ingest_s, 0.5):.1f} ms, "
        f"p99 {1000 * percentile(stats.ingest_s, 0.99):.1f} ms; "
        f"{stats.late} sensor slots missed"
    )
    print(
        f"schedules: {n_sch}, {n_sch / elapsed:.1f}/s; "
        f"p50 {1000 * percentile(stats.schedule_s, 0.5):.1f} ms, "
        f"p99 {1000 * percentile(stats.schedule_s, 0.99):.1f} ms"
    )
    print(
        f"served log: {final['served_log']} rows at the end (limit {args.served_rows}, "
        f"trimmed every {args.retention_interval:g} s)"
    )
    table = minute_table(rss, elapsed / 60)
    roles = sorted({k[: -len("_rss_mb")] for r in rss for k in r if k.endswith("_rss_mb")})
    print("minute  " + "  ".join(f"{r + ' MB':>12}" for r in roles) + "  measurements  served_log")
    for row in table:
        cells = "  ".join(f"{row.get(r + '_rss_mb', math.nan):>12.1f}" for r in roles)
        minute = row["t_s"] / 60
        print(f"{minute:>6.1f}  {cells}  {row['measurements']:>12}  {row['served_log']:>10}")
    print(f"(server log: {log_path})")
    if args.out:
        out = Path(args.out)
        if out.suffix == ".csv":
            with out.open("w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=sorted({k for r in rss for k in r}))
                w.writeheader()
                w.writerows(rss)
        else:
            figures = {
                "args": vars(args),
                "elapsed_s": elapsed,
                "errors": stats.error_count,
                "worker_restarts": max(0, len(stats.worker_pids) - args.workers),
                "first_errors": stats.errors,
                "acknowledged": len(stats.acked),
                "missing": missing,
                "store": final,
                "ingest": {
                    "batches": n_ing,
                    "per_s": n_ing / elapsed,
                    "p50_ms": 1000 * percentile(stats.ingest_s, 0.5),
                    "p99_ms": 1000 * percentile(stats.ingest_s, 0.99),
                    "missed_slots": stats.late,
                },
                "schedules": {
                    "count": n_sch,
                    "per_s": n_sch / elapsed,
                    "p50_ms": 1000 * percentile(stats.schedule_s, 0.5),
                    "p99_ms": 1000 * percentile(stats.schedule_s, 0.99),
                },
                "client_cpu_s": client_cpu,
                "rss": rss,
            }
            out.write_text(json.dumps(figures, indent=1))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
