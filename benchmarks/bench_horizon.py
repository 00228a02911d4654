"""Horizon forecast latency: cold (one host, two weeks of 5-minute samples) and warm (issue 17).

    .venv/bin/python benchmarks/bench_horizon.py [TRACE_DIR] [--repeat 5]

Cold: ``forecast_series`` from the samples alone (the battery replayed in batch, the analogue
fit made), as a worker computes a series it has never seen. Warm: the same call with the
series' online state and its fit cache, as the worker's second request for that horizon after
a new sample would be if the fit were kept (a memoised answer is a dictionary look-up). For
an idle host the cold call also borrows from the fleet (``forecaster.fleet``: the other traces,
prepared once, as the service shares them for 5 minutes); preparing that fleet is timed apart.
Horizons are snapped as the service snaps them (``snap_horizon``: 300 s asks for 301 s, so
the analogues answer, not the one-sample fit). One BLAS thread; the median of ``--repeat``
calls; CPU time beside wall time.
Targets: warm under 2 ms, cold under 50 ms.

``--service``: the same through the API on a temporary SQLite store holding every trace (the
protocol an outside client runs): ``GET /forecasts/{host}/cpu?horizon=H&at=T`` for the idle
host (its fleet read from the store once per ``T``) and a bimodal one (no fleet), then live.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Hashable
from functools import partial
from pathlib import Path

from common import token  # benchmarks/common.py, beside this script
from threadpoolctl import threadpool_limits

from forecaster import CPU_ANALOG, Distribution, SeriesForecaster, forecast_series, snap_horizon
from forecaster.fleet import HostWindows
from ppe.traces import Trace, read_traces

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "traces" / "bitbrains-rnd-2013-7"
HORIZONS = (300.0, 3600.0, 21600.0, 86400.0, 259200.0)
HISTORY_S = 14 * 86400.0
BOUNDS = (0.0, 1.0)


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``repeat`` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return 1e3 * statistics.median(walls), 1e3 * statistics.median(cpus)


def bench_host(name: str, traces: dict[str, Trace], repeat: int) -> None:
    t = traces[name]
    now = float(t.timestamps[0]) + HISTORY_S + 0.3 * 86400.0
    keep = (t.timestamps < now) & (t.timestamps >= now - HISTORY_S)
    ts, xs = t.timestamps[keep], t.availability[keep]
    others = [o for n, o in traces.items() if n != name]

    def prepare() -> list[HostWindows]:
        return [HostWindows.of(o.timestamps, o.availability, BOUNDS) for o in others]

    build = timed(prepare, repeat)
    fleet = prepare()
    print(
        f"host {name}: {ts.size} samples; preparing the fleet of {len(others)} hosts "
        f"{build[0]:.1f} ms wall, {build[1]:.1f} ms CPU"
    )
    state = SeriesForecaster.from_history(list(ts), list(xs))
    for h in HORIZONS:
        fits: dict[Hashable, Distribution] = {}
        cold = partial(
            forecast_series,
            ts,
            xs,
            now=now,
            horizon_s=snap_horizon(h),  # as the service asks (5 min: 301 s, the analogues)
            bounds=BOUNDS,
            analog=CPU_ANALOG,
            fleet=lambda: fleet,
        )
        warm = partial(cold, state=state, fit_cache=fits)
        fc = warm()  # fills the fit cache
        c, w = timed(cold, repeat), timed(warm, repeat)
        print(
            f"  horizon {h / 3600:g} h: cold {c[0]:.1f} ms wall ({c[1]:.1f} CPU), "
            f"warm {w[0]:.2f} ms wall ({w[1]:.2f} CPU); fallback "
            f"{fc.distribution.fallback}, fleet {fc.distribution.fleet}"
        )


def bench_service(traces: dict[str, Trace], idle: str = "4", busy: str = "41") -> None:
    from fastapi.testclient import TestClient

    from ppe.service.app import create_app
    from ppe.service.config import Settings

    with tempfile.TemporaryDirectory() as d:
        url = f"sqlite:///{d}/ppe.db"
        tokens = {role: token(url, role) for role in ("sensor", "app")}
        with TestClient(create_app(Settings(database_url=url, max_batch=20_000))) as c:
            sensor = {"Authorization": f"Bearer {tokens['sensor']}"}
            app = {"Authorization": f"Bearer {tokens['app']}"}
            start = time.perf_counter()
            for name, t in traces.items():
                items = [
                    {"resource": f"h{name}", "metric": "cpu", "timestamp": a, "value": v}
                    for a, v in zip(t.timestamps.tolist(), t.availability.tolist(), strict=True)
                ]
                for i in range(0, len(items), 10_000):
                    r = c.post(
                        "/api/v1/measurements",
                        json={"measurements": items[i : i + 10_000]},
                        headers=sensor,
                    )
                    r.raise_for_status()
            rows = sum(len(t) for t in traces.values())
            print(f"service: {rows} samples posted in {time.perf_counter() - start:.1f} s")

            def get(host: str, query: str) -> tuple[float, object]:
                t0 = time.perf_counter()
                r = c.get(f"/api/v1/forecasts/h{host}/cpu?{query}", headers=app)
                r.raise_for_status()
                return 1e3 * (time.perf_counter() - t0), r.json()["fleet"]

            first = float(traces[idle].timestamps[0])
            for day in (8.3, 16.3, 24.3):
                at = first + day * 86400.0
                for h in (86400.0, 259200.0):
                    (ms, fleet), (ms_busy, _) = (
                        get(idle, f"horizon={h}&at={at}"),
                        get(busy, f"horizon={h}&at={at}"),
                    )
                    print(
                        f"  at day {day}, {h / 86400:g} d: idle host {ms:.0f} ms (fleet {fleet}), "
                        f"bimodal host {ms_busy:.0f} ms"
                    )
            for host in (idle, "2"):
                ms, fleet = get(host, "horizon=259200")
                print(f"  live, host {host}, 3 d: {ms:.0f} ms (fleet {fleet})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="?", default=str(DEFAULT_DIR))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hosts", default="41,4", help="trace names to forecast (41 bimodal, 4 idle)")
    ap.add_argument("--service", action="store_true", help="also through the API (module doc)")
    args = ap.parse_args()
    traces = {t.name: t.alive() for t in read_traces([Path(args.traces)])}
    print(f"load average {os.getloadavg()[0]:.2f}; {len(traces)} traces")
    with threadpool_limits(limits=1):
        for name in args.hosts.split(","):
            bench_host(name, traces, args.repeat)
    if args.service:
        bench_service(traces)


if __name__ == "__main__":
    main()
