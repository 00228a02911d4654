"""The run store over real HTTP: batches of runs stored, re-posted (all duplicates), listed.

Starts `ppe serve` on a temporary SQLite store (and on PostgreSQL when PPE_BENCH_POSTGRES_URL
is set: its schema is dropped), posts batches of 1 000 runs (5 repetitions and a small report
each), posts them again, and lists the newest 100. Prints runs/s and milliseconds.
Usage: .venv/bin/python benchmarks/bench_runs.py [--batches 20]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy

sys.path.insert(0, str(Path(__file__).parent))
from common import token  # noqa: E402

BATCH = 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db_url: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ppe", "serve", "--db", db_url, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], stdout=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def batch(b: int) -> dict[str, Any]:
    return {
        "runs": [
            {
                "app": "sor",
                "params": {"n": 100 + b * BATCH + i, "p": 2},
                "system": "h0,h1",
                "values": [1.0 + 0.01 * k for k in range(5)],
                "report": {"ranks": [{"rank": r, "rows": 50, "s": 0.5} for r in range(2)]},
            }
            for i in range(BATCH)
        ]
    }


def bench(db_url: str, batches: int) -> None:
    tok = token(db_url, "app")
    port = free_port()
    proc = serve(db_url, port)
    payloads = [batch(b) for b in range(batches)]
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {tok}"},
            timeout=120,
        ) as c:
            for label in ("new", "re-posted"):
                t0 = time.perf_counter()
                for p in payloads:
                    r = c.post("/api/v1/runs", json=p)
                    assert r.status_code == 201, r.text
                dt = time.perf_counter() - t0
                print(f"  {label:>9}: {batches * BATCH / dt:8.0f} runs/s ({batches} x {BATCH})")
            times = []
            for _ in range(20):
                t0 = time.perf_counter()
                assert c.get("/api/v1/runs", params={"app": "sor"}).status_code == 200
                times.append(time.perf_counter() - t0)
            print(
                f"  GET /runs?app=sor (100 newest): median {statistics.median(times) * 1e3:.1f} ms"
            )
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("SQLite")
        bench(f"sqlite:///{Path(tmp) / 'runs.db'}", args.batches)
    pg = os.environ.get("PPE_BENCH_POSTGRES_URL")
    if pg:
        engine = sqlalchemy.create_engine(pg.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("DROP SCHEMA IF EXISTS public CASCADE"))
            conn.execute(sqlalchemy.text("CREATE SCHEMA public"))
        engine.dispose()
        print("PostgreSQL")
        bench(pg, args.batches)


if __name__ == "__main__":
    main()
