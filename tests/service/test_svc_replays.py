"""Replay jobs over HTTP on real server-side traces and on uploads."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from ppe.service.app import create_app
from ppe.service.config import Settings

pytestmark = pytest.mark.slow

SMALL = {
    "n": 400,
    "iterations": 20,
    "hosts": 2,
    "starts": 3,
    "workers": 1,
    "executor": "serial",
    "strategies": ["mean", "conservative"],
}


@pytest.fixture
def client(db_url, traces_dir, env_tokens_factory) -> Iterator[tuple[TestClient, dict[str, str]]]:  # type: ignore[no-untyped-def]
    tokens = env_tokens_factory(db_url)
    app = create_app(Settings(database_url=db_url, trace_dirs=(str(traces_dir.parent),)))
    with TestClient(app) as c:
        yield c, tokens


def wait_done(c: TestClient, url: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job = c.get(url, headers=headers).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.5)
    raise TimeoutError(job)


def test_replay_job_on_server_traces(client, traces_dir) -> None:  # type: ignore[no-untyped-def]
    c, tokens = client
    op = {"Authorization": f"Bearer {tokens['operator']}"}
    body = {**SMALL, "traces": [f"{traces_dir.name}/{n}.csv.gz" for n in ("1", "2", "4")]}
    r = c.post("/api/v1/replays", json=body, headers=op)
    assert r.status_code == 202, r.text
    job = wait_done(c, r.json()["url"], op)
    assert job["status"] == "done", job["error"]
    assert job["done"] == job["total"]
    report = job["report"]
    # the two asked for; `replan` left out re-plans only named strategies (neither here)
    assert set(report["strategies"]) == {"mean", "conservative"}
    assert report["strategies"]["mean"]["makespan_mean"] > 0
    listed = c.get("/api/v1/replays", headers=op).json()
    assert listed[0]["id"] == job["id"]


def test_replay_rejects_paths_outside_trace_dirs(client, traces_dir) -> None:  # type: ignore[no-untyped-def]
    c, tokens = client
    op = {"Authorization": f"Bearer {tokens['operator']}"}
    for bad in (["../../etc/passwd"], ["/etc/passwd"], []):
        r = c.post("/api/v1/replays", json={**SMALL, "traces": bad}, headers=op)
        assert r.status_code == 422, bad
    r = c.post(
        "/api/v1/replays",
        json={**SMALL, "traces": [traces_dir.name], "bogus": 1},
        headers=op,
    )
    assert r.status_code == 422 and "bogus" in r.text
    app_h = {"Authorization": f"Bearer {tokens['app']}"}
    assert c.post("/api/v1/replays", json=SMALL, headers=app_h).status_code == 403
    assert c.get("/api/v1/replays", headers=op).json() == []


def test_replay_job_on_uploaded_traces(client, traces_dir) -> None:  # type: ignore[no-untyped-def]
    import json

    c, tokens = client
    op = {"Authorization": f"Bearer {tokens['operator']}"}
    files = [
        ("files", (f, (traces_dir / f).read_bytes(), "application/gzip"))
        for f in ("1.csv.gz", "2.csv.gz")
    ]
    r = c.post("/api/v1/replays", data={"config": json.dumps(SMALL)}, files=files, headers=op)
    assert r.status_code == 202, r.text
    job = wait_done(c, r.json()["url"], op)
    assert job["status"] == "done", job["error"]


def test_uploaded_traces_are_removed_when_their_job_ends(client, traces_dir) -> None:  # type: ignore[no-untyped-def]
    """Uploads live as long as their job: after it ends, or after a rejected request, the
    server keeps no copy of them."""
    import json

    c, tokens = client
    op = {"Authorization": f"Bearer {tokens['operator']}"}
    root = c.app.state.services.replays.upload_dir().parent  # type: ignore[attr-defined]

    def kept() -> list[str]:
        return sorted(f.name for f in root.rglob("*") if f.is_file())

    files = [("files", ("1.csv.gz", (traces_dir / "1.csv.gz").read_bytes(), "application/gzip"))]
    r = c.post(
        "/api/v1/replays",
        data={"config": json.dumps({**SMALL, "hosts": 1})},
        files=files,
        headers=op,
    )
    assert r.status_code == 202, r.text
    assert wait_done(c, r.json()["url"], op)["status"] in ("done", "failed")
    deadline = time.monotonic() + 10  # the runner removes them just after the last status write
    while kept() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kept() == []
    bad = c.post(
        "/api/v1/replays",
        data={"config": json.dumps({**SMALL, "colour": "red"})},
        files=files,
        headers=op,
    )
    assert bad.status_code == 422
    assert kept() == []
