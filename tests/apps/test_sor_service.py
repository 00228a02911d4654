"""ppe-sor against a real `ppe serve`: the schedule it follows, the run it reports (linked to
that schedule), a failed run reported as failed, a re-plan the server cannot answer."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.apps.conftest import RANK_CWD, run_sor, sor_env
from tests.apps.test_sor_mpi import start_and_kill_rank_1
from tests.conftest import ServerProcess

pytestmark = pytest.mark.slow
HOSTS = ("h0", "h1")


@dataclass
class Service:
    server: ServerProcess
    token_file: Path
    admin: str

    @property
    def url(self) -> str:
        return self.server.base_url

    def args(self, *more: str) -> list[str]:
        return ["--server", self.url, "--token-file", str(self.token_file), *more]


def make_token(db: str, role: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "ppe", "token", "create", "--role", role, "--db", db],
        capture_output=True,
        text=True,
        check=True,
        env=sor_env(),
        cwd=RANK_CWD,
    )
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    pytest.importorskip("ppe.client")
    from ppe.client import Measurement, PPEClient

    db = f"sqlite:///{tmp_path / 'ppe.db'}"
    subprocess.run(
        [sys.executable, "-m", "ppe", "migrate", "--db", db],
        check=True,
        env=sor_env(),
        cwd=RANK_CWD,
    )
    app, admin = make_token(db, "app"), make_token(db, "admin")
    token_file = tmp_path / "app.token"
    token_file.write_text(app + "\n")
    server = ServerProcess(db)
    try:
        probe = httpx.get(
            server.base_url + "/api/v1/runs", headers={"Authorization": f"Bearer {admin}"}
        )
        if probe.status_code == 404:
            pytest.skip("this service has no run store (POST /api/v1/runs) yet")
        now = time.time()
        with PPEClient(server.base_url, admin) as client:  # what two sensors would have sent
            client.post_measurements(
                [
                    Measurement(h, "cpu", v, now - 60 + 10 * i)
                    for i in range(6)
                    for h, v in zip(HOSTS, (0.95, 0.6), strict=True)
                ]
            )
        yield Service(server, token_file, admin)
    finally:
        server.stop()


def test_a_run_follows_its_schedule_and_is_reported(service: Service) -> None:
    from ppe.client import PPEClient

    run = run_sor(
        2,
        *service.args("--hosts", "h0,h1", "--benchmark", "2e-8"),
        "--n",
        "64",
        "--iterations",
        "30",
        "--strategy",
        "conservative",
    )
    assert run.code == 0, run.stderr
    s = run.summary
    assert s["checksum_ok"] is True and s["schedule_id"] is not None
    with PPEClient(service.url, service.admin) as client:
        served = client.served_schedule(s["schedule_id"])
        stored = client.run(s["run_id"])
    served_rows = [a["rows"] for a in served["response"]["allocation"]]
    assert s["rows"] == served_rows and served_rows[0] > served_rows[1]  # h1 is the busier
    assert stored["schedule_id"] == s["schedule_id"] and stored["status"] == "completed"
    assert stored["system"] == "h0,h1" and stored["values"] == [pytest.approx(s["total_s"])]
    assert stored["params"] == {"n": 64, "iterations": 30, "p": 2}
    report = stored["report"]
    assert report["strategy"] == "conservative" and report["checksum_ok"] is True
    assert [r["iterations"] for r in report["ranks"]] == [30, 30]
    assert report["rows"]["initial"] == served_rows
    # The timed window: what the service reads the hosts' CPU availability over.
    assert report["finished_at"] - report["started_at"] == pytest.approx(s["total_s"])
    for r in report["ranks"]:
        seg = r["segments"][0]
        assert report["started_at"] <= seg["start"] < seg["end"] <= report["finished_at"] + 1


def test_block_strategy_asks_for_no_schedule_but_is_reported(service: Service) -> None:
    from ppe.client import PPEClient

    run = run_sor(
        2,
        *service.args("--hosts", "h0,h1", "--strategy", "block"),
        "--n",
        "40",
        "--iterations",
        "5",
    )
    assert run.code == 0, run.stderr
    assert run.summary["rows"] == [20, 20] and run.summary["schedule_id"] is None
    with PPEClient(service.url, service.admin) as client:
        assert client.run(run.summary["run_id"])["report"]["strategy"] == "block"


def test_a_schedule_for_other_hosts_is_refused(service: Service) -> None:
    run = run_sor(2, *service.args("--hosts", "h0,nobody", "--benchmark", "1e-8"), "--n", "40")
    assert run.code == 2 and "nobody" in run.stderr


def test_a_dying_rank_is_reported_as_a_failed_run(service: Service) -> None:
    from ppe.client import PPEClient

    code, out, err = start_and_kill_rank_1(
        *service.args("--hosts", "h0,h1", "--benchmark", "2e-8"), "--n", "200"
    )
    assert code != 0 and "reported the failed run" in err, err
    with PPEClient(service.url, service.admin) as client:
        failed = client.runs(app="sor", status="failed")
    assert len(failed) == 1 and failed[0]["schedule_id"] is not None
    assert "stopped by SIG" in failed[0]["report"]["error"]
    assert failed[0]["report"]["iterations_done"] > 0
