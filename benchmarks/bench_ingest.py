"""Ingestion throughput over real HTTP: batches of 1 000 measurements to a running server.

Starts `ppe serve` on a temporary SQLite store (and on PostgreSQL when PPE_BENCH_POSTGRES_URL or
PPE_TEST_POSTGRES_URL is set), posts from several concurrent clients, prints measurements/s.
Usage: .venv/bin/python benchmarks/bench_ingest.py [--batches 200] [--clients 4] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import sqlalchemy

BATCH = 1000


def start_server(db_url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ppe",
            "serve",
            "--db",
            db_url,
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def token(db_url: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "ppe", "token", "create", "--role", "sensor", "--db", db_url],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def run(db_url: str, batches: int, clients: int, workers: int, port: int) -> float:
    tok = token(db_url)
    proc = start_server(db_url, port, workers)
    payloads = [
        {
            "measurements": [
                {
                    "resource": f"h{(b * BATCH + i) % 64}",
                    "metric": "cpu",
                    "timestamp": 1.6e9 + b * BATCH + i,
                    "value": ((b + i) % 100) / 100,
                }
                for i in range(BATCH)
            ]
        }
        for b in range(batches)
    ]
    headers = {"Authorization": f"Bearer {tok}"}

    def post(chunk: list[dict]) -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            for p in chunk:
                r = c.post("/api/v1/measurements", json=p)
                r.raise_for_status()

    chunks = [payloads[i::clients] for i in range(clients)]
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(post, chunks))
        elapsed = time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(10)
    return batches * BATCH / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["sqlite"] = run(
            f"sqlite:///{Path(tmp) / 'bench.db'}", args.batches, args.clients, args.workers, 18765
        )
    pg = os.environ.get("PPE_BENCH_POSTGRES_URL") or os.environ.get("PPE_TEST_POSTGRES_URL")
    if pg:
        engine = sqlalchemy.create_engine(pg.replace("postgresql://", "postgresql+psycopg://"))
        with engine.begin() as c:
            c.execute(sqlalchemy.text("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
        results["postgresql"] = run(pg, args.batches, args.clients, args.workers, 18766)
    print(
        f"ingest: batches of {BATCH}, {args.batches} batches, {args.clients} clients, "
        f"{args.workers} worker(s)"
    )
    for store, rate in results.items():
        print(f"  {store:<11} {rate:>10,.0f} measurements/s")


if __name__ == "__main__":
    main()
