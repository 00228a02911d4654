"""Cost of one machine profile as the sensor daemon takes it (docs/pmac.md, "In the sensor
daemon"): the quick probe in its child process, then the message sweep to one peer.

The peer is a probe responder (what `ppe sensor --listen` serves) in a process of its own on
loopback, so its side of the sweep is not counted here. Prints the wall and CPU seconds of the
probe (the child and its sharing copies, from RUSAGE_CHILDREN) and of the sweep (this thread),
and the daily share of one core at the default schedule (one profile a day).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_sensor_profile.py [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import threading
import time

from sensors.config import Endpoint, Peer
from sensors.netprobe import HostLock, SweepConfig, sweep_peers
from sensors.probe_config import ProbeConfig
from sensors.profiler import measure_in_child

RESPONDER = """
import sys, time
from sensors.config import Endpoint
from sensors.netprobe import HostLock, Responder
r = Responder("peer", Endpoint("127.0.0.1", int(sys.argv[1])), HostLock())
r.start()
sys.stdin.read()  # until the benchmark closes it
r.stop()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_profile(port: int) -> None:
    cpu0, w0 = children_cpu(), time.perf_counter()
    body = measure_in_child(ProbeConfig.quick(), "bench")
    w1, probe_cpu = time.perf_counter(), children_cpu() - cpu0
    t0 = time.thread_time()
    peer = Peer(Endpoint("127.0.0.1", port))
    [sweep] = sweep_peers((peer,), HostLock(), SweepConfig(), threading.Event(), me="bench")
    w2, sweep_cpu = time.perf_counter(), time.thread_time() - t0
    total = probe_cpu + sweep_cpu
    print(
        f"probe {w1 - w0:.2f} s wall, {probe_cpu:.2f} s CPU (measuring: "
        f"{body['machine']['probe_wall_seconds']} s wall); sweep of {len(sweep.points)} sizes "
        f"{w2 - w1:.3f} s wall, {sweep_cpu:.3f} s CPU; total {w2 - w0:.2f} s wall, "
        f"{total:.2f} s CPU = {total / 86400:.4%} of one core a day; "
        f"load average {os.getloadavg()[0]:.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    port = free_port()
    peer = subprocess.Popen(
        [sys.executable, "-c", RESPONDER, str(port)], stdin=subprocess.PIPE, env=os.environ
    )
    try:
        time.sleep(1.0)  # the responder starts listening
        for _ in range(args.runs):
            one_profile(port)
    finally:
        assert peer.stdin is not None
        peer.stdin.close()
        peer.wait(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
