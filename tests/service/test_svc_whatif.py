"""What-if over HTTP: specs checked up front (422, nothing queued), small specs answered at
once, sweeps as jobs with progress, registered hosts and their live forecasts, and "the hosts
I have now" as a spec that evaluates."""

from __future__ import annotations

import time
import tomllib
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from ppe.service.app import create_app
from ppe.service.config import Settings
from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
from ppe.service.store.models import WhatIfJob
from ppe.service.whatif import check, job_spread
from ppe.whatif import RegisteredHost, Spread, resolve
from ppe.whatif import analytic as whatif_analytic
from tests.service.conftest import Env
from tests.service.test_svc_planning import feed
from tests.whatif.conftest import MemoryResolver

SPEC = """
title = "two registered hosts"

[[nodeset]]
name = "a"
number = 1
host = "h0"
load = {kind = "forecasts"}

[[nodeset]]
name = "b"
number = 1
host = "h1"
load = {kind = "dedicated"}

[[linkset]]
name = "ab"
updown = ["a", "b"]

[[dataset]]
name = "grid"
type = "grid2dim"
size = 2000

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = ["a", "b"]

[execution]
model = "sor"
iterations = 50
"""

#: floatspeed nodes swept over 3 sizes up to 128 nodes: a job.
SWEEP = """
[[nodeset]]
name = "node"
number = [32, 64, 128]
floatspeed = "1 Gflop/s"
load = {kind = "normal", mean = 0.8, std = 0.05}

[[linkset]]
name = "lan"
across = "node"

[[dataset]]
name = "grid"
type = "grid2dim"
size = 2000
floatsperunit = 8

[[distribution]]
name = "strips"
type = "block1dim"
dataset = "grid"
nodeset = "node"

[execution]
model = "sor"
iterations = 20
"""


@pytest.fixture
def fed(env: Env, traces_dir: Any) -> Env:
    """Three hosts h0..h2 with real cpu data (a measured link h0-h1), each with a benchmark."""
    feed(env, traces_dir)
    for i, bench in enumerate((2e-8, 3e-8, 2.5e-8)):
        r = env.client.put(
            f"/api/v1/resources/h{i}",
            json={"properties": {"benchmark": bench}},
            headers=env.h("operator"),
        )
        assert r.status_code in (200, 201), r.text
    return env


def post(env: Env, spec: str, role: str = "operator", **kw: Any) -> Any:
    return env.client.post("/api/v1/whatif", json={"spec": spec, **kw}, headers=env.h(role))


def wait_done(env: Env, url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job: dict[str, Any] = env.client.get(url, headers=env.h("app")).json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.2)
    raise TimeoutError(url)


def jobs(env: Env) -> list[dict[str, Any]]:
    r = env.client.get("/api/v1/whatif", headers=env.h("app"))
    assert r.status_code == 200
    out: list[dict[str, Any]] = r.json()
    return out


def test_a_bad_spec_is_422_with_its_lines_and_nothing_is_queued(env: Env) -> None:
    bad = SWEEP.replace('floatspeed = "1 Gflop/s"', 'floatsped = "1 Gflop/s"').replace(
        'across = "node"', 'across = "nodes"'
    )
    r = post(env, bad)
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    by_field = {p["field"]: p for p in problems}
    assert "nodeset[0].floatsped" in by_field
    assert "floatspeed" in by_field["nodeset[0].floatsped"]["reason"]  # the nearest name
    assert by_field["nodeset[0].floatsped"]["line"] == 5
    assert any(p["field"].startswith("linkset[0].across") for p in problems)
    assert jobs(env) == []
    # not TOML at all, and an unknown strategy
    assert post(env, "[[nodeset]\n").status_code == 422
    r = post(env, SWEEP, strategy="fastest")
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "strategy"
    assert jobs(env) == []


def test_unknown_hosts_and_files_are_spec_problems(env: Env) -> None:
    r = post(env, SPEC)  # no host registered yet
    assert r.status_code == 422, r.text
    fields = {p["field"]: p["reason"] for p in r.json()["detail"]}
    assert "no registered host 'h0'" in fields["nodeset[0].host"]
    assert "nodeset[1].host" in fields
    traces = SWEEP.replace(
        'load = {kind = "normal", mean = 0.8, std = 0.05}',
        'load = {kind = "traces", files = ["../../etc/passwd"]}',
    )
    r = post(env, traces)
    assert r.status_code == 422
    assert r.json()["detail"][0]["field"] == "nodeset[0].load.files[0]"
    assert jobs(env) == []


def test_a_simgrid_platform_in_a_posted_spec_is_refused_with_a_way_out(env: Env) -> None:
    r = post(env, SWEEP + '\n[machine]\nsimgrid = "platform.xml"\n')
    assert r.status_code == 422, r.text
    reasons = {p["field"]: p["reason"] for p in r.json()["detail"]}
    assert "reads no SimGrid platform files" in reasons["machine.simgrid"], reasons
    assert len(reasons) == 1, reasons
    assert jobs(env) == []


def test_a_small_spec_on_registered_hosts_is_answered_at_once(fed: Env) -> None:
    r = post(fed, SPEC)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "done" and body["id"] is None
    (point,) = body["report"]["points"]
    assert point["hosts"] == 2
    # the registered benchmarks, as planning reads them
    bench = {ns["nodeset"]: ns["benchmark"] for ns in point["nodesets"]}
    assert bench == {"a": pytest.approx(2e-8), "b": pytest.approx(3e-8)}
    # h0 carries its live forecast: an interval, not a point
    lo, hi = point["makespan"]["interval"]
    assert lo < hi
    assert sum(ns["rows"] for ns in point["nodesets"]) == 2000
    assert jobs(fed) == []  # nothing stored for an answer given at once


def test_a_block2dim_spec_is_answered_with_its_process_grid(env: Env) -> None:
    """The service evaluates block distributions as the CLI does: the report's
    process_grid, elements per node; and the same checks (422 at the distribution)."""
    spec = SWEEP.replace("number = [32, 64, 128]", "number = 16").replace(
        'type = "block1dim"', 'type = "block2dim"'
    )
    r = post(env, spec)
    assert r.status_code == 200, r.text
    (point,) = r.json()["report"]["points"]
    assert point["process_grid"] == [4, 4] and point["path"] == "blocks"
    assert sum(ns["rows"] for ns in point["nodesets"]) == 2000 * 2000
    assert any("process grid 4 x 4" in n for n in point["notes"])
    r = post(env, spec.replace("size = 2000", "size = [3, 3]"))
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["field"] == "distribution[0].nodeset" and "no process grid" in problem["reason"]
    assert jobs(env) == []


def test_a_profile_by_host_name_reads_the_newest_stored_profile(fed: Env) -> None:
    from tests.service.test_svc_pmac import post_profile, synthetic_profile

    assert post_profile(fed, "h0", synthetic_profile("h0", 2.0)).status_code == 201
    spec = SPEC.replace('host = "h0"\nload = {kind = "forecasts"}', 'profile = "h0"')
    spec = spec.replace('host = "h1"', 'profile = "h0"')
    r = post(fed, spec)
    assert r.status_code == 200, r.text
    (point,) = r.json()["report"]["points"]
    a, b = point["nodesets"]
    assert a["benchmark"] == pytest.approx(b["benchmark"]) and a["benchmark"] > 0
    r = post(fed, spec.replace('profile = "h0"', 'profile = "h2"', 1))
    assert r.status_code == 422 and "no stored machine profile" in r.text


def test_a_sweep_runs_as_a_job_to_done_with_progress_and_a_report(env: Env) -> None:
    r = post(env, SWEEP, strategy="conservative")
    assert r.status_code == 202, r.text
    assert r.json()["total"] == 3
    job = wait_done(env, r.json()["url"])
    assert job["status"] == "done", job["error"]
    assert job["done"] == job["total"] == 3
    report = job["report"]
    assert report["strategy"] == "conservative"
    assert report["axes"] == ["nodeset.node.number"]
    assert [p["values"]["nodeset.node.number"] for p in report["points"]] == [32, 64, 128]
    means = [p["makespan"]["mean"] for p in report["points"]]
    assert means[0] > means[1] > means[2]  # more nodes, sooner
    assert job["spec"] == SWEEP and job["options"]["strategy"] == "conservative"
    listed = jobs(env)
    assert [j["id"] for j in listed] == [job["id"]] and "report" not in listed[0]


def test_a_failing_job_reports_why(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    real = whatif_analytic.evaluate_point

    def second_fails(point: Any, resources: Any, options: Any) -> Any:
        if dict(point.values)["nodeset.node.number"] == 64:
            raise ValueError("the scheduler found no allocation")
        return real(point, resources, options)

    monkeypatch.setattr(whatif_analytic, "evaluate_point", second_fails)
    r = post(env, SWEEP, executor="serial")  # (the patch lives in this process)
    assert r.status_code == 202
    job = wait_done(env, r.json()["url"])
    assert job["status"] == "failed" and job["report"] is None
    assert job["error"] == "ValueError: the scheduler found no allocation"
    assert job["done"] == 1


def test_a_jobs_points_on_a_process_pool_give_the_serial_report(env: Env) -> None:
    """The default executor (a pool of the server's replay workers, forked beside the
    server's threads) answers exactly as the points one after another."""
    serial = wait_done(env, post(env, SWEEP, executor="serial").json()["url"])
    pooled = wait_done(env, post(env, SWEEP).json()["url"])
    assert serial["status"] == pooled["status"] == "done", (serial["error"], pooled["error"])
    assert pooled["report"] == serial["report"]
    assert pooled["done"] == 3
    assert pooled["options"]["executor"] == "process"
    assert serial["options"]["executor"] == "serial"


def test_dask_runs_only_on_the_servers_scheduler(env: Env) -> None:
    r = post(env, SWEEP, executor="dask")
    assert r.status_code == 422 and "needs a server started with --dask-scheduler" in r.text
    assert jobs(env) == []
    r = post(env, SWEEP, scheduler_address="tcp://198.51.100.7:8786")
    assert r.status_code == 422  # an address is the server's to set, never a request's
    resources = resolve(check(SWEEP), MemoryResolver())
    on = Settings(dask_scheduler="tcp://10.0.0.5:8786", replay_max_workers=2)
    assert job_spread(on, "dask", resources) == Spread(
        "dask", scheduler_address="tcp://10.0.0.5:8786"
    )
    assert job_spread(on, "process", resources) == Spread("process", 2)
    assert job_spread(Settings(replay_max_workers=3), "serial", resources) == Spread("serial", 3)


def test_live_forecasts_run_in_the_servers_process() -> None:
    def cpu(horizon: float | None) -> Any:
        raise AssertionError("not read here")

    spec = SWEEP.replace(
        'floatspeed = "1 Gflop/s"\nload = {kind = "normal", mean = 0.8, std = 0.05}',
        'host = "h1"\nload = {kind = "forecasts"}',
    )
    assert 'kind = "forecasts"' in spec
    hosts = {"h1": RegisteredHost("h1", benchmark=1e-8, cpu=cpu)}
    resources = resolve(check(spec), MemoryResolver(hosts=hosts))
    on = Settings(dask_scheduler="tcp://10.0.0.5:8786", replay_max_workers=2)
    assert job_spread(on, "dask", resources) == Spread("serial")
    assert job_spread(on, "process", resources) == Spread("serial")


def test_jobs_a_restart_interrupted_are_failed(env: Env) -> None:
    sessions = make_sessionmaker(make_engine(env.url))
    with session_scope(sessions) as s:
        s.add(WhatIfJob(status="running", spec=SWEEP, options={}, total=3, done=1))
    app = create_app(Settings(database_url=env.url))
    with TestClient(app):
        pass
    with session_scope(sessions) as s:
        (job,) = s.scalars(select(WhatIfJob)).all()
        assert job.status == "failed" and "interrupted" in job.error


def test_the_current_hosts_spec_evaluates(fed: Env) -> None:
    r = fed.client.get("/api/v1/whatif/current?n=3000&iterations=40", headers=fed.h("app"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/toml")
    doc = tomllib.loads(r.text)
    assert [ns["host"] for ns in doc["nodeset"]] == ["h0", "h1", "h2"]
    assert all(ns["load"] == {"kind": "forecasts"} for ns in doc["nodeset"])
    # h0-h1 is measured (about 1e7 bytes/s); h1-h2 is not: the default
    first, second = doc["linkset"]
    assert first["updown"] == ["h0", "h1"] and 5e6 < first["bandwidth"] < 2e7
    assert "bandwidth" not in second
    assert doc["dataset"][0]["size"] == 3000 and doc["execution"]["iterations"] == 40
    answer = post(fed, r.text)
    assert answer.status_code == 200, answer.text
    (point,) = answer.json()["report"]["points"]
    assert point["hosts"] == 3 and point["makespan"]["mean"] > 0
    # "add 32 more like h0": edited, it answers what if
    more = r.text.replace('nodeset = ["h0", "h1", "h2"]', 'nodeset = ["h0", "h1", "h2", "more"]')
    more += (
        '[[nodeset]]\nname = "more"\nnumber = 32\nhost = "h0"\nload = {kind = "forecasts"}\n'
        '[[linkset]]\nname = "new"\nacross = "more"\n'
        '[[linkset]]\nname = "up"\nupdown = ["h2", "more"]\n'
    )
    bigger = post(fed, more)
    assert bigger.status_code == 200, bigger.text
    (grown,) = bigger.json()["report"]["points"]
    assert grown["hosts"] == 35
    by_name = {ns["nodeset"]: ns for ns in grown["nodesets"]}
    assert by_name["more"]["benchmark"] == pytest.approx(by_name["h0"]["benchmark"])
    assert grown["makespan"]["mean"] < point["makespan"]["mean"]


def test_the_current_hosts_leave_out_hosts_without_a_speed(env: Env, traces_dir: Any) -> None:
    assert env.client.get("/api/v1/whatif/current", headers=env.h("app")).status_code == 409
    feed(env, traces_dir)  # three hosts with cpu data, no benchmark
    env.client.put(
        "/api/v1/resources/h1", json={"properties": {"benchmark": 3e-8}}, headers=env.h("operator")
    )
    r = env.client.get("/api/v1/whatif/current", headers=env.h("app"))
    assert r.status_code == 200, r.text
    assert [ns["host"] for ns in tomllib.loads(r.text)["nodeset"]] == ["h1"]
    assert "# left out: h0 (no benchmark, calibration or profile)" in r.text
    assert post(env, r.text).status_code == 200


def test_roles(fed: Env) -> None:
    for role in ("app", "sensor"):
        assert post(fed, SPEC, role).status_code == 403
    assert fed.client.get("/api/v1/whatif", headers=fed.h("sensor")).status_code == 403
    assert fed.client.get("/api/v1/whatif/current", headers=fed.h("sensor")).status_code == 403
    assert fed.client.get("/api/v1/whatif/1", headers=fed.h("sensor")).status_code == 403
    assert fed.client.get("/api/v1/whatif/1", headers=fed.h("app")).status_code == 404
    assert fed.client.post("/api/v1/whatif", json={"spec": SPEC}).status_code == 401
    assert post(fed, SPEC, "admin").status_code == 200
    assert jobs(fed) == []


def test_trace_files_resolve_under_the_trace_dirs(
    db_url: str, traces_dir: Any, tmp_path: Any
) -> None:
    from tests.service.conftest import make_tokens

    tokens = make_tokens(db_url)
    (tmp_path / "broken.csv").write_text("not,a\ntrace,at all\n")
    dirs = (str(traces_dir.parent), str(tmp_path))
    app = create_app(Settings(database_url=db_url, trace_dirs=dirs))
    with TestClient(app) as client:
        env = Env(client, db_url, tokens)
        files = [f"{traces_dir.name}/1.csv.gz", f"{traces_dir.name}/2.csv.gz"]
        spec = SWEEP.replace(
            'load = {kind = "normal", mean = 0.8, std = 0.05}',
            f'load = {{kind = "traces", files = ["{files[0]}", "{files[1]}"]}}',
        )
        r = post(env, spec)
        assert r.status_code == 202, r.text
        job = wait_done(env, r.json()["url"])
        assert job["status"] == "done", job["error"]
        assert all(p["makespan"]["mean"] > 0 for p in job["report"]["points"])
        r = post(env, spec.replace(files[0], "broken.csv"))
        assert r.status_code == 422
        (p,) = r.json()["detail"]
        assert p["field"] == "nodeset[0].load.files[0]" and str(tmp_path) not in p["reason"]


def validate(env: Env, spec: str, role: str = "operator", **kw: Any) -> Any:
    return env.client.post(
        "/api/v1/whatif/validate", json={"spec": spec, **kw}, headers=env.h(role)
    )


def test_validate_checks_without_running_or_queuing(env: Env) -> None:
    r = validate(env, SWEEP)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "valid": True,
        "title": "",
        "axes": ["nodeset.node.number"],
        "points": 3,
        "nodes": 128,
        "job": True,
    }
    bad = SWEEP.replace('floatspeed = "1 Gflop/s"', 'floatsped = "1 Gflop/s"')
    r = validate(env, bad)
    assert r.status_code == 422, r.text
    (p,) = r.json()["detail"]
    assert (p["field"], p["line"], p["column"]) == ("nodeset[0].floatsped", 5, 1)
    assert "did you mean 'floatspeed'?" in p["reason"]
    r = validate(env, SPEC)  # h0, h1 are not registered: a reference problem at its line
    assert r.status_code == 422 and {p["line"] for p in r.json()["detail"]} == {7, 13}  # host = ...

    assert validate(env, SWEEP, strategy="mean").status_code == 422  # spec only: extra refused
    assert validate(env, SWEEP, "app").status_code == 403
    assert jobs(env) == []


def test_figures_are_the_html_pages_plots(env: Env) -> None:
    small = SWEEP.replace("number = [32, 64, 128]", "number = 4")
    r = post(env, small)
    assert r.status_code == 200 and "figures" not in r.json()
    r = env.client.post(
        "/api/v1/whatif?figures=true", json={"spec": small}, headers=env.h("operator")
    )
    assert r.status_code == 200, r.text
    (bars,) = r.json()["figures"]  # one point: compute / communication / waiting per nodeset
    assert [t["name"] for t in bars["data"]] == ["compute", "communication", "waiting"]
    job = wait_done(env, post(env, SWEEP).json()["url"])
    r = env.client.get(f"/api/v1/whatif/{job['id']}?figures=true", headers=env.h("app"))
    makespan = r.json()["figures"][0]
    traces = {t["name"]: t for t in makespan["data"]}
    assert traces["predicted mean"]["x"] == [32, 64, 128]
    assert traces["predicted lower"]["fill"] == "tonexty"
    for lo, m, hi in zip(
        traces["predicted lower"]["y"],
        traces["predicted mean"]["y"],
        traces["predicted upper"]["y"],
        strict=True,
    ):
        assert lo <= m <= hi
    assert m == job["report"]["points"][-1]["makespan"]["mean"]


def test_a_folder_of_traces_is_picked_from_under_the_trace_dirs(
    db_url: str, traces_dir: Any
) -> None:
    from tests.service.conftest import make_tokens

    tokens = make_tokens(db_url)
    app = create_app(Settings(database_url=db_url, trace_dirs=(str(traces_dir.parent),)))
    with TestClient(app) as client:
        env = Env(client, db_url, tokens)
        load = f'{{kind = "traces", dir = "{traces_dir.name}", pick = "quietest", count = 2}}'
        spec = SWEEP.replace('load = {kind = "normal", mean = 0.8, std = 0.05}', f"load = {load}")
        r = post(env, spec)
        assert r.status_code == 202, r.text
        job = wait_done(env, r.json()["url"])
        assert job["status"] == "done", job["error"]
        notes = job["report"]["points"][0]["notes"]
        # VM 2 is idle all month: the quietest, in the sample as in the full set
        (note,) = [n for n in notes if "quiet" in n]
        assert "the 2 quietest of" in note and ": 2 (1.000 ± 0.000), " in note, note
        r = post(env, spec.replace(f'dir = "{traces_dir.name}"', 'dir = "../.."'))
        assert r.status_code == 422
        (p,) = r.json()["detail"]
        assert p["field"] == "nodeset[0].load.dir" and "not found under" in p["reason"]
