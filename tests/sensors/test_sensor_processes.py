"""Real processes on loopback: `ppe serve` and `ppe sensor` daemons.

- end to end: two sensors probing each other fill cpu, bandwidth and latency series for both
  hosts on a real server, which then serves forecasts for all six series;
- faults: the server goes away while the sensors run and comes back; one sensor is SIGKILLed
  mid-outage and restarted. Every measurement taken (journalled in each sensor's spool with
  --record, in the same transaction that spools it) is stored on the server exactly once.

Bounded: every wait has a timeout; the two tests take ~20-40 s together on a busy 2-core box.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from sensors.measurement import Measurement

pytestmark = pytest.mark.slow

PYTHON = sys.executable
SeriesKey = tuple[str, str, str]


def _wait(predicate, timeout: float, interval: float = 0.2) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


class Server:
    """`ppe serve` on a fixed port and SQLite file, restartable."""

    def __init__(self, tmp: Path) -> None:
        self.db_path = tmp / "ppe.db"
        self.db = f"sqlite:///{self.db_path}"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def token(self, role: str) -> str:
        out = subprocess.run(
            [PYTHON, "-m", "ppe", "token", "create", "--role", role, "--db", self.db],
            capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[-1]

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [PYTHON, "-m", "ppe", "serve", "--db", self.db, "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "warning"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        assert _wait(self.healthy, timeout=90), self.log.read_text()[-3000:]

    def healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited:\n{self.log.read_text()[-3000:]}")
        try:
            return httpx.get(self.url + "/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def stored_keys(self) -> list[tuple[str, str, str, float]]:
        """Every stored measurement's key, read straight from the store after the fact."""
        db = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True)
        try:
            return db.execute(
                "SELECT r.name, s.metric, s.peer, m.timestamp FROM measurements m "
                "JOIN series s ON s.id = m.series_id JOIN resources r ON r.id = s.resource_id"
            ).fetchall()
        finally:
            db.close()


class Sensor:
    """`ppe sensor` as a child process, with its spool and log under tmp/NAME."""

    def __init__(self, tmp: Path, name: str, server: Server, token: str, port: int,
                 peer_port: int) -> None:  # fmt: skip
        self.name = name
        self.spool = tmp / name
        self.log = tmp / f"{name}.log"
        self.argv = [
            PYTHON, "-m", "ppe", "sensor", "--server", server.url, "--token", token,
            "--name", name, "--period", "0.5", "--batch-delay", "0.5", "--batch-size", "50",
            "--listen", f"127.0.0.1:{port}", "--peers", f"127.0.0.1:{peer_port}",
            "--cpu-probe-interval", "3", "--cpu-probe-duration", "0.05",
            "--backoff-initial", "0.2", "--backoff-max", "1", "--probe-timeout", "2",
            "--profile-every", "0",  # no machine profile: it would pause the series it waits for
            "--spool", str(self.spool), "--record",
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        code = _stop(self.proc, sig)
        self.proc = None
        return code

    def _spool_bodies(self, table: str) -> list[str]:
        """The spool's ``pending`` or ``journal`` rows, read straight from its SQLite file: the
        sensor may still be running and holds the spool's lock, so `Spool` would refuse."""
        db = sqlite3.connect(self.spool / "spool.sqlite3")
        try:
            return [r[0] for r in db.execute(f"SELECT body FROM {table} ORDER BY id")]
        finally:
            db.close()

    def journal_keys(self) -> list[tuple[str, str, str, float]]:
        return [Measurement.from_json(json.loads(b)).key for b in self._spool_bodies("journal")]

    def pending(self) -> int:
        return len(self._spool_bodies("pending"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Server, Sensor, Sensor, str]]:
    server = Server(tmp_path)
    sensor_token = server.token("sensor")  # creates the schema
    with ThreadPoolExecutor(1) as pool:  # the second token while the server starts
        operator = pool.submit(server.token, "operator")
        server.start()
        operator_token = operator.result(timeout=120)
    pa, pb = _free_port(), _free_port()
    a = Sensor(tmp_path, "h1", server, sensor_token, pa, pb)
    b = Sensor(tmp_path, "h2", server, sensor_token, pb, pa)
    try:
        yield server, a, b, operator_token
    finally:
        for s in (a, b):
            if s.proc is not None:
                s.stop(signal.SIGKILL)
        server.stop()


def series_counts(server: Server, token: str) -> dict[SeriesKey, int]:
    r = httpx.get(server.url + "/api/v1/resources", timeout=10,
                  headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    r.raise_for_status()
    return {
        (res["name"], s["metric"], s["peer"] or ""): s["samples"]
        for res in r.json()
        for s in res["series"]
    }


ALL_SERIES = {
    ("h1", "cpu", ""), ("h1", "latency", "h2"), ("h1", "bandwidth", "h2"),
    ("h2", "cpu", ""), ("h2", "latency", "h1"), ("h2", "bandwidth", "h1"),
}  # fmt: skip


def test_two_sensors_fill_all_series_and_the_server_forecasts_them(cluster) -> None:  # type: ignore[no-untyped-def]
    server, a, b, token = cluster
    a.start()
    b.start()

    def have_series(min_samples: int) -> bool:
        counts = series_counts(server, token)
        return all(counts.get(k, 0) >= min_samples for k in ALL_SERIES)

    assert _wait(lambda: have_series(3), timeout=60), series_counts(server, token)

    def forecast(key: SeriesKey) -> httpx.Response:
        resource, metric, peer = key
        return httpx.get(
            f"{server.url}/api/v1/forecasts/{resource}/{metric}",
            params={"peer": peer} if peer else {},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )

    answers: dict[SeriesKey, dict] = {}

    def all_forecasts() -> bool:
        for key in ALL_SERIES - set(answers):
            r = forecast(key)
            if r.status_code == 200:
                answers[key] = r.json()
        return set(answers) == ALL_SERIES

    assert _wait(all_forecasts, timeout=60, interval=0.5), {
        k: forecast(k).text[:300] for k in ALL_SERIES - set(answers)
    }
    assert 0.0 <= answers[("h1", "cpu", "")]["mean"] <= 1.0 + 1e-9
    assert answers[("h2", "bandwidth", "h1")]["mean"] > 0
    assert answers[("h1", "latency", "h2")]["mean"] > 0

    assert a.stop() == 0 and b.stop() == 0  # SIGTERM: clean exit after a flush
    stored = server.stored_keys()
    taken = a.journal_keys() + b.journal_keys()
    assert a.pending() == 0 and b.pending() == 0
    assert sorted(stored) == sorted(taken)  # every measurement taken, stored exactly once


def test_outage_and_sigkill_lose_nothing_and_duplicate_nothing(cluster) -> None:  # type: ignore[no-untyped-def]
    server, a, b, token = cluster
    a.start()
    b.start()
    assert _wait(
        lambda: all(series_counts(server, token).get(k, 0) >= 2 for k in ALL_SERIES), timeout=60
    ), series_counts(server, token)

    server.stop()
    outage_start = time.time()
    time.sleep(3)
    assert b.stop(signal.SIGKILL) == -signal.SIGKILL  # mid-outage, no chance to flush
    stranded = b.pending()
    assert stranded > 0  # the killed sensor left measurements in its spool
    b_taken_before_kill = b.journal_keys()
    time.sleep(1.5)
    server.start()
    outage_end = time.time()
    b.start()  # same spool: it must drain what the killed process left

    taken_during_outage = [
        k for k in a.journal_keys() + b_taken_before_kill if outage_start <= k[3] <= outage_end
    ]
    assert len(taken_during_outage) > 10

    def caught_up() -> bool:
        stored = set(server.stored_keys())
        return set(a.journal_keys()[:-20]) <= stored and set(b_taken_before_kill) <= stored

    assert _wait(caught_up, timeout=60, interval=0.5)
    time.sleep(1.0)
    assert a.stop() == 0 and b.stop() == 0
    stored = server.stored_keys()
    taken = a.journal_keys() + b.journal_keys()
    assert a.pending() == 0 and b.pending() == 0  # both spools drained
    assert max(Counter(taken).values()) == 1
    assert max(Counter(stored).values()) == 1  # no duplicates on the server...
    assert sorted(stored) == sorted(taken)  # ...and nothing missing
    assert set(taken_during_outage) <= set(stored)
    assert set(b_taken_before_kill) <= set(stored)
    counts = series_counts(server, token)  # the API agrees with the store
    for key in ALL_SERIES:
        assert counts[key] == sum(1 for k in taken if k[:3] == key)
    for sensor in (a, b):
        assert not (sensor.spool / "dead-letter.jsonl").exists()  # nothing was refused
