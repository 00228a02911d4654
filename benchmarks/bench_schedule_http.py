"""Schedules through the HTTP API: 64 hosts, `conservative`, 16 concurrent clients.

Starts `ppe serve` on a temporary SQLite store, feeds 64 hosts with real trace availability
(../shared/traces), registers their benchmarks, then fires schedule requests from 16 threads.
Prints median and p95 latency and schedules/s. Targets (issue 5): median < 10 ms, >= 200/s.
Usage: .venv/bin/python benchmarks/bench_schedule_http.py [--requests 800] [--clients 16]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces" / "bitbrains-rnd-2013-7"
sys.path.insert(0, str(ROOT))

from ppe.replay.traces import read_traces  # noqa: E402


def token(db: str, role: str) -> str:
    out = subprocess.run([sys.executable, "-m", "ppe", "token", "create", "--role", role,
                          "--db", db], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--strategy", default="conservative")
    ap.add_argument("--port", type=int, default=18777)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    db = f"sqlite:///{tmp}/bench.db"
    sensor, app = token(db, "sensor"), token(db, "app")
    admin = token(db, "admin")
    proc = subprocess.Popen([sys.executable, "-m", "ppe", "serve", "--db", db, "--port",
                             str(args.port), "--workers", str(args.workers),
                             "--log-level", "warning"])
    base = f"http://127.0.0.1:{args.port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        traces = read_traces([TRACES])
        items = []
        for h in range(args.hosts):
            tr = traces[h % len(traces)]
            for t, v in zip(tr.timestamps[-300:], tr.availability[-300:], strict=True):
                items.append({"resource": f"h{h}", "metric": "cpu", "timestamp": float(t),
                              "value": float(v)})
        with httpx.Client(base_url=base, timeout=600) as c:
            c.post("/api/v1/measurements", json={"measurements": items},
                   headers={"Authorization": f"Bearer {sensor}"}).raise_for_status()
            for h in range(args.hosts):
                c.put(f"/api/v1/resources/h{h}", json={"properties": {"benchmark": 2e-8}},
                      headers={"Authorization": f"Bearer {admin}"}).raise_for_status()
        body = {"app": "sor", "n": 8000, "iterations": 100,
                "hosts": [f"h{h}" for h in range(args.hosts)], "strategy": args.strategy}
        headers = {"Authorization": f"Bearer {app}"}
        t = time.perf_counter()
        with httpx.Client(base_url=base, timeout=600, headers=headers) as c:
            for _ in range(2 * args.workers):  # each worker warms its forecast cache
                c.post("/api/v1/schedules", json=body).raise_for_status()
        cold = time.perf_counter() - t
        def run(clients: int, total: int) -> tuple[list[float], float]:
            latencies: list[float] = []

            def client(n: int) -> None:
                with httpx.Client(base_url=base, timeout=120, headers=headers) as c:
                    for _ in range(n):
                        s = time.perf_counter()
                        c.post("/api/v1/schedules", json=body).raise_for_status()
                        latencies.append(time.perf_counter() - s)

            per = max(1, total // clients)
            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(client, [per] * clients))
            elapsed = time.perf_counter() - start
            return sorted(latencies), per * clients / elapsed

        print(f"schedules over HTTP: {args.hosts} hosts, {args.strategy}, "
              f"{args.workers} worker(s); warm-up (cold forecasts) {cold:.2f} s")
        for clients in sorted({1, args.clients}):
            lat, rate = run(clients, args.requests if clients > 1 else args.requests // 4)
            print(f"  {clients:>2} client(s): median {1000 * statistics.median(lat):6.1f} ms, "
                  f"p95 {1000 * lat[int(0.95 * len(lat))]:6.1f} ms, {rate:6.0f} schedules/s")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
