"""Cancelling background jobs (what-ifs and replays): a queued job never starts, a running one
stops at its next progress step and stores no report, an ended one answers 409; the store is
where the worker that runs a job learns of it, whichever worker took the cancel."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ppe.service import replay_jobs
from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.jobs import Cancelled
from ppe.whatif import analytic as whatif_analytic
from tests.service.conftest import Env, make_tokens
from tests.service.test_svc_whatif import SWEEP, post

WAIT_S = 60


def status_of(env: Env, url: str) -> dict[str, Any]:
    job: dict[str, Any] = env.client.get(url, headers=env.h("app")).json()
    return job


def wait_for(env: Env, url: str, *states: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        job = status_of(env, url)
        if job["status"] in states:
            return job
        time.sleep(0.05)
    raise TimeoutError(f"{url} never reached {states}")


def cancel(env: Env, url: str, role: str = "operator") -> Any:
    return env.client.post(f"{url}/cancel", headers=env.h(role))


class Gate:
    """Stands in for a point's evaluation: counts calls and holds each until opened."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.calls = 0
        self.opened = threading.Event()
        self.entered = threading.Event()

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.opened.wait(WAIT_S)
        return self.real(*args)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Gate:
    g = Gate(whatif_analytic.evaluate_point)
    monkeypatch.setattr(whatif_analytic, "evaluate_point", g)
    return g


def test_a_running_whatif_stops_at_its_next_point(env: Env, gate: Gate) -> None:
    url = post(env, SWEEP, executor="serial").json()["url"]  # the patch lives in this process
    assert gate.entered.wait(WAIT_S)  # point 1 of 3 is being evaluated
    assert status_of(env, url)["status"] == "running"
    r = cancel(env, url)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "cancelled" and r.json()["finished_at"] is not None
    gate.opened.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and gate.calls < 2:
        time.sleep(0.05)
    job = status_of(env, url)
    assert gate.calls == 1, "points after the cancel were evaluated"
    assert job["status"] == "cancelled" and job["report"] is None and job["done"] == 0
    assert cancel(env, url).status_code == 200  # again: a no-op


def test_a_queued_whatif_cancelled_never_starts(env: Env, gate: Gate) -> None:
    first = post(env, SWEEP, executor="serial").json()["url"]
    assert gate.entered.wait(WAIT_S)
    second = post(env, SWEEP, executor="serial").json()["url"]
    assert status_of(env, second)["status"] == "queued"  # one job at a time
    assert cancel(env, second).json()["status"] == "cancelled"
    gate.opened.set()
    assert wait_for(env, first, "done", "failed")["status"] == "done"
    time.sleep(0.5)  # the runner has picked the second job up by now, and left it
    job = status_of(env, second)
    assert job["status"] == "cancelled" and job["report"] is None
    assert gate.calls == 3  # the first job's three points only
    r = cancel(env, first)
    assert r.status_code == 409 and "has ended (done)" in r.text


def test_cancel_needs_an_operator_and_a_job(env: Env, gate: Gate) -> None:
    assert cancel(env, "/api/v1/whatif/999").status_code == 404
    assert cancel(env, "/api/v1/replays/999").status_code == 404
    url = post(env, SWEEP, executor="serial").json()["url"]
    assert gate.entered.wait(WAIT_S)
    assert cancel(env, url, role="app").status_code == 403
    assert status_of(env, url)["status"] == "running"
    gate.opened.set()
    assert wait_for(env, url, "done", "failed")["status"] == "done"


def test_a_running_replay_stops_at_its_next_progress_step(
    db_url: str, traces_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's own progress (planned start times) carries the cancel into it."""
    seen: list[BaseException] = []
    started = threading.Event()

    def experiment(traces: Any, cfg: Any, progress: Callable[[int, int], None]) -> Any:
        started.set()
        try:
            for done in range(1, 2000):
                progress(done, 2000)
                time.sleep(0.01)
        except BaseException as exc:
            seen.append(exc)
            raise
        raise AssertionError("ran to the end")

    monkeypatch.setattr(replay_jobs, "run_experiment", experiment)
    tokens = make_tokens(db_url)
    app = create_app(Settings(database_url=db_url, trace_dirs=(str(traces_dir.parent),)))
    with TestClient(app) as client:
        env = Env(client, db_url, tokens)
        body = {
            "traces": [f"{traces_dir.name}/1.csv.gz"],
            "n": 400,
            "iterations": 20,
            "hosts": 1,
            "starts": 3,
        }
        r = client.post("/api/v1/replays", json=body, headers=env.h("operator"))
        assert r.status_code == 202, r.text
        url = r.json()["url"]
        assert started.wait(WAIT_S)
        wait_for(env, url, "running")
        assert cancel(env, url).json()["status"] == "cancelled"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not seen:
            time.sleep(0.05)
        assert seen and isinstance(seen[0], Cancelled)
        job = status_of(env, url)
        assert job["status"] == "cancelled" and job["report"] is None
        assert job["error"] == "cancelled"
