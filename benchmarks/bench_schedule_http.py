"""Schedules through the HTTP API: 64 hosts, `conservative`, 16 concurrent clients.

Starts `ppe serve` on a temporary SQLite store, feeds 64 hosts with real trace availability
(../shared/traces), registers their benchmarks, then fires schedule requests from 16 threads.
Prints median and p95 latency, schedules/s and the server's CPU per schedule, first over
unchanged data (repeat requests reuse each worker's plan), then with sensors posting new
measurements meanwhile (each one changes the data, so every worker plans anew).
Targets (issue 5): median < 10 ms, >= 200/s.
Usage: .venv/bin/python benchmarks/bench_schedule_http.py [--requests 800] [--clients 16]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces" / "bitbrains-rnd-2013-7"
sys.path.insert(0, str(ROOT))

from common import token  # noqa: E402  (benchmarks/common.py, beside this script)

from ppe.traces import read_traces  # noqa: E402


class Load:
    """Clients firing the same schedule request; latencies, throughput, server CPU."""

    def __init__(
        self, base: str, headers: dict[str, str], body: dict[str, object], server_pid: int
    ) -> None:
        self.base, self.headers, self.body, self.pid = base, headers, body, server_pid

    def run(self, clients: int, total: int) -> tuple[list[float], float, float]:
        latencies: list[float] = []

        def client(n: int) -> None:
            with httpx.Client(base_url=self.base, timeout=120, headers=self.headers) as c:
                for _ in range(n):
                    s = time.perf_counter()
                    c.post("/api/v1/schedules", json=self.body).raise_for_status()
                    latencies.append(time.perf_counter() - s)

        per = max(1, total // clients)
        cpu0, own0 = server_cpu(self.pid), time.process_time()
        start = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(client, [per] * clients))
        elapsed = time.perf_counter() - start
        done = per * clients
        self.client_cpu_ms = 1000 * (time.process_time() - own0) / done
        cpu_ms = 1000 * (server_cpu(self.pid) - cpu0) / done
        return sorted(latencies), done / elapsed, cpu_ms

    def report(self, clients: int, total: int) -> None:
        lat, rate, cpu_ms = self.run(clients, total)
        print(
            f"  {clients:>2} client(s): median {1000 * statistics.median(lat):6.1f} ms, "
            f"p95 {1000 * lat[int(0.95 * len(lat))]:6.1f} ms, {rate:6.0f} schedules/s; "
            f"CPU per schedule: server {cpu_ms:.2f} ms, this client {self.client_cpu_ms:.2f} ms"
        )


class SensorFeed(threading.Thread):
    """Sensors reporting while schedules are asked for: round robin over the hosts, each new
    value the trace's next one (cycling), 300 s after that host's previous measurement."""

    def __init__(self, base: str, token: str, traces: list, hosts: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.base, self.token, self.traces, self.hosts, self.rate = base, token, traces, hosts, rate
        self.stop = threading.Event()
        self.posted = 0

    def __enter__(self) -> SensorFeed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()

    def run(self) -> None:
        last = [float(self.traces[h % len(self.traces)].timestamps[-1]) for h in range(self.hosts)]
        with httpx.Client(
            base_url=self.base, timeout=60, headers={"Authorization": f"Bearer {self.token}"}
        ) as c:
            k = 0
            while not self.stop.wait(1 / self.rate):
                h = k % self.hosts
                tr = self.traces[h % len(self.traces)]
                last[h] += 300.0
                value = float(tr.availability[(k // self.hosts) % tr.availability.size])
                c.post(
                    "/api/v1/measurements",
                    json={
                        "measurements": [
                            {
                                "resource": f"h{h}",
                                "metric": "cpu",
                                "timestamp": last[h],
                                "value": value,
                            }
                        ]
                    },
                ).raise_for_status()
                self.posted += 1
                k += 1


def server_cpu(pid: int) -> float:
    """CPU seconds used so far by the server's processes (the client's own cost left out)."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(t.user + t.system for t in (p.cpu_times() for p in procs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=800)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--strategy", default="conservative")
    ap.add_argument("--port", type=int, default=18777)
    ap.add_argument(
        "--sensor-rate",
        type=float,
        default=6.4,
        help="measurements/s posted during the second pass (64 hosts every 10 s); 0: off",
    )
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    db = f"sqlite:///{tmp}/bench.db"
    sensor, app = token(db, "sensor"), token(db, "app")
    admin = token(db, "admin")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ppe",
            "serve",
            "--db",
            db,
            "--port",
            str(args.port),
            "--workers",
            str(args.workers),
            "--log-level",
            "warning",
        ]
    )
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
                items.append(
                    {"resource": f"h{h}", "metric": "cpu", "timestamp": float(t), "value": float(v)}
                )
        with httpx.Client(base_url=base, timeout=600) as c:
            c.post(
                "/api/v1/measurements",
                json={"measurements": items},
                headers={"Authorization": f"Bearer {sensor}"},
            ).raise_for_status()
            for h in range(args.hosts):
                c.put(
                    f"/api/v1/resources/h{h}",
                    json={"properties": {"benchmark": 2e-8}},
                    headers={"Authorization": f"Bearer {admin}"},
                ).raise_for_status()
        body = {
            "app": "sor",
            "n": 8000,
            "iterations": 100,
            "hosts": [f"h{h}" for h in range(args.hosts)],
            "strategy": args.strategy,
        }
        headers = {"Authorization": f"Bearer {app}"}
        t = time.perf_counter()
        with httpx.Client(base_url=base, timeout=600, headers=headers) as c:
            c.post("/api/v1/schedules", json=body).raise_for_status()
        cold = time.perf_counter() - t
        load = Load(base, headers, body, proc.pid)
        load.run(args.clients, 4 * args.clients)  # warm every worker (connections spread)
        print(
            f"schedules over HTTP: {args.hosts} hosts, {args.strategy}, "
            f"{args.workers} worker(s); first request (cold forecasts) {cold:.2f} s"
        )
        print(" unchanged data (repeat requests reuse the worker's plan):")
        for clients in sorted({1, args.clients}):
            load.report(clients, args.requests if clients > 1 else args.requests // 4)
        if args.sensor_rate > 0:
            print(
                f" live sensors: one new cpu measurement every {1 / args.sensor_rate:.2f} s, "
                "each one a new plan on every worker:"
            )
            feed = SensorFeed(base, sensor, traces, args.hosts, args.sensor_rate)
            with feed:
                for clients in sorted({1, args.clients}):
                    load.report(clients, args.requests if clients > 1 else args.requests // 4)
            print(f"   ({feed.posted} measurements posted)")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
