"""The whole loop on this machine, nothing simulated: a real `ppe serve`, one real `ppe sensor`
pinned to each core, and `mpiexec -n 2 ppe-sor --pin` planned from what the sensors measured.

The run completes and matches the single-process run (ppe-sor checks its checksum), its report
is stored and linked to the schedule it followed, live accuracy counts it, and the sensors kept
measuring the cores while the ranks ran on them (the readings the service calibrates from)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.apps.conftest import RANK_CWD, run_sor, sor_env
from tests.apps.test_sor_service import make_token
from tests.conftest import ServerProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU pinning"),
]
HOSTS = ("h0", "h1")
PERIOD = 0.5


def cpu_samples(url: str, token: str, host: str) -> list[tuple[float, float]]:
    r = httpx.get(
        f"{url}/api/v1/resources/{host}/history/cpu",
        params={"limit": 20000},
        headers={"Authorization": f"Bearer {token}"},
    )
    if r.status_code != 200:  # no series yet, or fewer than two samples
        return []
    body = r.json()
    return list(zip(body["timestamps"], body["values"], strict=True))


@contextmanager
def running_sensors(
    url: str, admin: str, sensor_token: str, hosts: Sequence[str], spool: Path
) -> Iterator[None]:
    """One `ppe sensor` per host, host k pinned to core k, each with a few CPU samples stored
    before the body runs; stopped (SIGTERM) after it."""
    sensors = []
    try:
        for core, host in enumerate(hosts):
            cmd = [
                sys.executable, "-m", "ppe", "sensor", "--server", url,
                "--token", sensor_token, "--name", host, "--cpus", str(core),
                "--period", str(PERIOD), "--batch-delay", "0.5",
                "--profile-every", "0",  # a machine profile would load both cores at start
                "--spool", str(spool / f"spool-{host}"),
            ]  # fmt: skip
            log = (spool / f"sensor-{host}.log").open("wb")
            sensors.append(subprocess.Popen(cmd, env=sor_env(), cwd=RANK_CWD, stderr=log))
        deadline = time.monotonic() + 60
        while any(len(cpu_samples(url, admin, h)) < 6 for h in hosts):
            assert time.monotonic() < deadline, "the sensors posted too few CPU samples"
            assert all(s.poll() is None for s in sensors), "a sensor died"
            time.sleep(0.5)
        yield
    finally:
        for s in sensors:
            s.send_signal(signal.SIGTERM)
        for s in sensors:
            try:
                s.wait(timeout=15)
            except subprocess.TimeoutExpired:
                s.kill()


@dataclass
class Sensed:
    """A real server, and what starting sensors and ranks against it takes."""

    url: str
    admin: str
    sensor: str
    token_file: Path
    spool: Path

    def sensors(self, hosts: Sequence[str]) -> AbstractContextManager[None]:
        return running_sensors(self.url, self.admin, self.sensor, hosts, self.spool)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Sensed]:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores")
    db = f"sqlite:///{tmp_path / 'ppe.db'}"
    subprocess.run([sys.executable, "-m", "ppe", "migrate", "--db", db], check=True, env=sor_env())
    admin, sensor = make_token(db, "admin"), make_token(db, "sensor")
    token_file = tmp_path / "app.token"
    token_file.write_text(make_token(db, "app") + "\n")
    proc = ServerProcess(db)
    try:
        yield Sensed(proc.base_url, admin, sensor, token_file, tmp_path)
    finally:
        proc.stop()


@pytest.fixture
def sensed(server: Sensed) -> Iterator[tuple[str, str, Path]]:
    """A server and a sensor per core, each with a few CPU samples already stored."""
    with server.sensors(HOSTS):
        yield server.url, server.admin, server.token_file


def test_a_run_planned_from_real_sensors_is_stored_and_judged(sensed) -> None:  # type: ignore[no-untyped-def]
    url, admin, token_file = sensed
    run = run_sor(
        2,
        "--server", url, "--token-file", str(token_file), "--hosts", ",".join(HOSTS),
        "--benchmark", "2e-8", "--pin", "--n", "600", "--iterations", "2000", "--verify-max", "600",
        "--strategy", "conservative",
        timeout=300,
    )  # fmt: skip
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["checksum_ok"] is True and s["schedule_id"] is not None
    headers = {"Authorization": f"Bearer {admin}"}
    stored = httpx.get(f"{url}/api/v1/runs/{s['run_id']}", headers=headers).json()
    assert stored["schedule_id"] == s["schedule_id"] and stored["status"] == "completed"
    report = stored["report"]
    served = httpx.get(f"{url}/api/v1/schedules/{s['schedule_id']}", headers=headers).json()
    assert report["rows"]["initial"] == [a["rows"] for a in served["response"]["allocation"]]
    # the schedule was planned from what the sensors measured
    inputs = {i["host"]: i for i in served["response"]["inputs"] if i["metric"] == "cpu"}
    assert set(inputs) == set(HOSTS) and all(i["samples"] >= 6 for i in inputs.values())
    accuracy = httpx.get(f"{url}/api/v1/accuracy", params={"app": "sor"}, headers=headers)
    [group] = accuracy.json()
    assert group["strategy"] == "conservative" and group["runs"] == 1
    assert [j["run_id"] for j in group["judged"]] == [s["run_id"]]
    # the sensors measured the cores while the ranks ran on them
    time.sleep(2 * PERIOD + 1.0)  # the last readings of the run reach the server
    for host in HOSTS:
        during = [
            v
            for t, v in cpu_samples(url, admin, host)
            if report["started_at"] <= t <= report["finished_at"]
        ]
        assert during and all(0.0 <= v <= 1.0 for v in during), (host, during)
