"""The client library's cost per schedule request, beyond the server's own time.

Starts `ppe serve` (one worker) on a temporary SQLite store with 8 hosts' CPU measurements and
benchmarks, then asks for one and the same schedule over and over (the server answers it from
its plan memo, so the server's time is small and steady), in alternating blocks:
  raw   -- httpx.Client with keep-alive: post the JSON, decode the answer;
  ppe   -- PPEClient.schedule(...): the same request through the library (body building,
           encoding, retry loop, error check, the Schedule dataclass).
The server's own time per request comes from its Prometheus histogram
(ppe_http_request_seconds for POST /api/v1/schedules) over the same requests.
Goal (issue 19): the client's overhead per schedule < 2 ms beyond the server's time.
Usage: .venv/bin/python benchmarks/bench_client.py [--requests 2000] [--blocks 10]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import token  # noqa: E402  (benchmarks/common.py, beside this script)

from ppe.client import Measurement, PPEClient  # noqa: E402

HOSTS = [f"h{i}" for i in range(8)]
ROUTE = "/api/v1/schedules"


def server_seconds(base: str) -> tuple[float, float]:
    """(sum of seconds, count) the server's histogram holds for POST /api/v1/schedules."""
    text = httpx.get(base + "/metrics", timeout=30).text
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != "ppe_http_request_seconds":
            continue
        for s in family.samples:
            if s.labels.get("route") == ROUTE and s.labels.get("method") == "POST":
                if s.name.endswith("_sum"):
                    total = s.value
                elif s.name.endswith("_count"):
                    count = s.value
    return total, count


@dataclass(frozen=True)
class Block:
    """n calls in a row: their latencies, the server's mean time for them, this process's CPU
    per call (seconds)."""

    latencies: list[float]
    server_s: float
    cpu_s: float


def block(base: str, call: Callable[[], object], n: int) -> Block:
    s0, c0 = server_seconds(base)
    cpu0 = time.process_time()
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        lat.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu0
    s1, c1 = server_seconds(base)
    return Block(lat, (s1 - s0) / max(1.0, c1 - c0), cpu / n)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "ppe", "serve", "--db", db, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"the server exited (is port {port} taken?)")
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("the server did not start")


def seed(base: str, sensor: str, admin: str) -> None:
    now = time.time()
    items = [
        Measurement(h, "cpu", 0.3 + 0.6 * ((i * 7 + k * 13) % 10) / 10, now - 3600 + 60 * i)
        for k, h in enumerate(HOSTS)
        for i in range(60)
    ]
    with PPEClient(base, sensor) as c:
        c.post_measurements(items)
    with PPEClient(base, admin) as c:
        for h in HOSTS:
            c.put_resource(h, {"benchmark": 2e-8})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=2000, help="per client kind")
    ap.add_argument("--blocks", type=int, default=10, help="alternating blocks per kind")
    ap.add_argument("--port", type=int, default=0, help="default: a free one")
    args = ap.parse_args()
    db = f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    sensor, app, admin = token(db, "sensor"), token(db, "app"), token(db, "admin")
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_server(db, port)
    try:
        seed(base, sensor, admin)
        body = {"app": "sor", "n": 4000, "iterations": 100, "hosts": HOSTS, "strategy": "mean"}
        raw = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {app}"}, timeout=60)
        ppe = PPEClient(base, app)

        def raw_call() -> object:
            r = raw.post(ROUTE, json=body)
            r.raise_for_status()
            return r.json()

        def ppe_call() -> object:
            return ppe.schedule(hosts=HOSTS, n=4000, iterations=100, strategy="mean")

        for call in (raw_call, ppe_call):  # plan once, warm both connections
            for _ in range(20):
                call()
        per = max(1, args.requests // args.blocks)
        runs: dict[str, list[Block]] = {"raw": [], "ppe": []}
        for _ in range(args.blocks):
            for name, call in (("raw", raw_call), ("ppe", ppe_call)):
                runs[name].append(block(base, call, per))
        raw.close()
        ppe.close()
    finally:
        proc.terminate()
        proc.wait(10)
    report(runs, per * args.blocks, args.blocks)


def report(runs: dict[str, list[Block]], n: int, blocks: int) -> None:
    """Per kind: latency, the server's time over the same requests, and what lies between
    (loopback HTTP, uvicorn, the client) -- each block against its own server time, so that
    load from elsewhere on the machine counts on both sides."""
    print(
        f"one memoised schedule (sor, n=4000, {len(HOSTS)} hosts, mean), "
        f"{n} requests per client in {blocks} alternating blocks:"
    )
    beyond: dict[str, float] = {}
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name, results in runs.items():
        ms = sorted(1000 * x for b in results for x in b.latencies)
        server_ms = statistics.fmean(1000 * b.server_s for b in results)
        gaps = [1000 * (statistics.fmean(b.latencies) - b.server_s) for b in results]
        beyond[name], best[name] = statistics.median(gaps), min(gaps)
        cpu[name] = statistics.fmean(1000 * b.cpu_s for b in results)
        print(
            f"  {name:>3}: latency mean {statistics.fmean(ms):.2f} ms, median "
            f"{statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * len(ms))]:.2f} ms; server's own "
            f"time {server_ms:.2f} ms; beyond it {beyond[name]:.2f} ms; "
            f"client CPU {cpu[name]:.3f} ms/req"
        )
    print(
        f"PPEClient overhead per schedule beyond the server's time: {beyond['ppe']:.2f} ms "
        f"(median over blocks of mean latency - server time; quietest block {best['ppe']:.2f} "
        "ms; goal < 2 ms)"
    )
    print(
        f"of which the library itself (vs raw httpx): {beyond['ppe'] - beyond['raw']:+.3f} ms "
        f"latency, {cpu['ppe'] - cpu['raw']:+.3f} ms CPU per request"
    )


if __name__ == "__main__":
    main()
