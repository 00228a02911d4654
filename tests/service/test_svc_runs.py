"""The run store over HTTP and from `ppe runs import`: batches whole or refused, idempotent,
linked to served schedules, surviving the served log's retention (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert

from ppe.cli import main as cli_main
from ppe.empirical.runs import MAX_BATCH, MAX_REPORT_BYTES
from ppe.service.config import RetentionPolicy
from ppe.service.store.db import make_engine
from ppe.service.store.models import ServedLog
from ppe.service.store.retention import run_pass

RUNS = "/api/v1/runs"
DATA = Path(__file__).parents[1] / "runs" / "data"


def sor_run(n: int = 1000, **kw: Any) -> dict[str, Any]:
    return {
        "app": "sor",
        "params": {"n": n, "p": 2, "iterations": 50},
        "system": "h0,h1",
        "values": [1e-6 * n * 1.5, 1e-6 * n * 1.6],
        **kw,
    }


def post(env: Any, runs: list[dict[str, Any]], role: str = "app") -> Any:
    return env.client.post(RUNS, json={"runs": runs}, headers=env.h(role))


def listed(env: Any, **query: Any) -> list[dict[str, Any]]:
    r = env.client.get(RUNS, params=query, headers=env.h("operator"))
    assert r.status_code == 200, r.text
    return list(r.json())


def seed_hosts(env: Any) -> None:
    """Hosts h0 and h1 with an hour of cpu data and benchmarks, so schedules can be served."""
    t0 = time.time() - 3600
    items = [
        {"resource": h, "metric": "cpu", "timestamp": t0 + 30 * k, "value": 0.5 + 0.01 * (k % 7)}
        for h in ("h0", "h1")
        for k in range(60)
    ]
    r = env.client.post(
        "/api/v1/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text
    for h in ("h0", "h1"):
        r = env.client.put(
            f"/api/v1/resources/{h}",
            json={"properties": {"benchmark": 2e-8}},
            headers=env.h("operator"),
        )
        assert r.status_code == 200, r.text


def serve_schedule(env: Any) -> int:
    body = {"app": "sor", "n": 400, "iterations": 10, "hosts": ["h0", "h1"]}
    r = env.client.post("/api/v1/schedules", json=body, headers=env.h("app"))
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


# ------------------------------------------------------------------------ POST and GET


def test_post_then_get_returns_what_was_posted_newest_first(env) -> None:  # type: ignore[no-untyped-def]
    runs = [sor_run(1000), sor_run(2000, kernel="sweep", metric="time"), sor_run(4000, key="job-4")]
    r = post(env, runs)
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["stored"], body["duplicates"]) == (3, 0)
    assert body["ids"] == sorted(body["ids"]) and len(set(body["ids"])) == 3
    got = listed(env, app="sor")
    assert [g["id"] for g in got] == body["ids"][::-1]  # newest first
    for g, sent in zip(got[::-1], runs, strict=True):
        assert g["params"] == sent["params"] and g["values"] == sent["values"]
        assert (g["system"], g["status"], g["report"], g["schedule_id"]) == (
            "h0,h1",
            "completed",
            None,
            None,
        )
        assert g["kernel"] == sent.get("kernel", "total") and g["metric"] == "time"
        assert time.time() - 60 < g["created_at"] <= time.time()
    assert got[0]["key"] == "job-4" and len(got[1]["key"]) == 64  # client key, else a hash
    one = env.client.get(f"{RUNS}/{body['ids'][1]}", headers=env.h("app"))
    assert one.status_code == 200 and one.json() == got[1]
    missing = env.client.get(f"{RUNS}/999999", headers=env.h("app"))
    assert missing.status_code == 404 and missing.json()["detail"][0]["field"] == "path.run_id"


def test_reposting_stores_nothing_new(env) -> None:  # type: ignore[no-untyped-def]
    runs = [sor_run(1000), sor_run(2000), sor_run(4000, key="job-4")]
    first = post(env, runs).json()
    again = post(env, runs)
    assert again.status_code == 201
    assert again.json() == {"stored": 0, "duplicates": 3, "ids": first["ids"]}
    # the same run spelled differently (1000.0, other key order) is the same run
    same = sor_run(1000)
    same["params"] = {"iterations": 50.0, "p": 2.0, "n": 1000.0}
    mixed = post(env, [sor_run(8000), same, sor_run(8000)]).json()
    assert (mixed["stored"], mixed["duplicates"]) == (1, 2)
    assert mixed["ids"][1] == first["ids"][0] and mixed["ids"][0] == mixed["ids"][2]
    assert len(listed(env)) == 4


def test_a_client_key_identifies_the_run(env) -> None:  # type: ignore[no-untyped-def]
    a = post(env, [sor_run(1000, key="run-2024-01")]).json()
    b = post(env, [sor_run(1000, key="run-2024-01", values=[9.0])]).json()  # a retry, re-measured
    assert b == {"stored": 0, "duplicates": 1, "ids": a["ids"]}
    other_app = post(env, [sor_run(1000, key="run-2024-01", app="jacobi")]).json()
    assert other_app["stored"] == 1  # keys are per application
    assert listed(env, app="sor")[0]["values"] == sor_run(1000)["values"]


def test_a_failed_run_keeps_its_report(env) -> None:  # type: ignore[no-untyped-def]
    report = {
        "ranks": [
            {"rank": 0, "rows": 200, "iteration_s": [0.01, 0.012]},
            {"rank": 1, "error": "died"},
        ],
        "replans": 1,
        "migrations": [{"from": "h0", "to": "h1", "rows": 20}],
        "unicode": "Δt ≤ 2 s",
    }
    r = post(env, [sor_run(1000, status="failed", report=report), sor_run(2000)])
    assert r.status_code == 201, r.text
    [failed] = listed(env, status="failed")
    assert failed["report"] == report and failed["params"]["n"] == 1000
    assert [g["params"]["n"] for g in listed(env, status="completed")] == [2000]


def test_filters_and_limit(env) -> None:  # type: ignore[no-untyped-def]
    runs = [
        sor_run(1000),
        sor_run(1000, kernel="sweep"),
        sor_run(1000, system="cluster-a"),
        sor_run(1000, metric="energy", values=[30.0]),
        sor_run(1000, app="jacobi"),
    ]
    ids = post(env, runs).json()["ids"]
    assert [g["id"] for g in listed(env, app="sor", kernel="sweep")] == [ids[1]]
    assert [g["id"] for g in listed(env, system="cluster-a")] == [ids[2]]
    assert [g["id"] for g in listed(env, metric="energy")] == [ids[3]]
    assert [g["id"] for g in listed(env, app="jacobi")] == [ids[4]]
    assert [g["id"] for g in listed(env, limit=2)] == [ids[4], ids[3]]
    assert listed(env, app="nothing") == []
    for bad in (
        {"limit": 0},
        {"limit": 1001},
        {"app": "9sor"},
        {"status": "done"},
        {"schedule_id": 0},
    ):
        r = env.client.get(RUNS, params=bad, headers=env.h("app"))
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["detail"][0]["field"] == f"query.{next(iter(bad))}"


# ------------------------------------------------------------------------ refusals


def test_a_bad_run_refuses_the_whole_batch_naming_index_and_field(env) -> None:  # type: ignore[no-untyped-def]
    good = json.dumps(sor_run(1000))
    text = (
        '{"runs": ['
        f"{good}, "
        '{"app": "sor", "values": [1.0, NaN]}, '
        '{"app": "sor", "values": [0.5, -2]}, '
        '{"app": "sor", "values": []}, '
        '{"app": "sor", "values": [Infinity]}'
        "]}"
    )
    r = env.client.post(
        RUNS, content=text, headers={**env.h("app"), "Content-Type": "application/json"}
    )
    assert r.status_code == 422, r.text
    problems = [(p["index"], p["field"]) for p in r.json()["detail"]]
    assert problems == [(1, "values[1]"), (2, "values[1]"), (3, "values"), (4, "values[0]")]
    assert listed(env) == []  # nothing stored, not even the good run


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"app": "9sor"}, "app", "pattern"),
        ({"app": ""}, "app", "at least 1"),
        ({"status": "crashed"}, "status", "completed"),
        ({"params": {"n": 1e16}}, "params.n", "less than or equal"),
        ({"params": {"bad name": 1}}, "params.bad name", "pattern"),
        ({"system": "h0, h1"}, "system", "pattern"),
        ({"kernel": "a\nb"}, "kernel", "control"),
        ({"values": [1.0] * 1001}, "values", "at most 1000"),
        ({"values": ["fast"]}, "values[0]", "number"),
        ({"schedule_id": 0}, "schedule_id", "greater than or equal to 1"),
        ({"key": "has space"}, "key", "pattern"),
        ({"report": [1, 2]}, "report", "dictionary"),
        ({"report": {"blob": "x" * MAX_REPORT_BYTES}}, "report", f"at most {MAX_REPORT_BYTES}"),
        ({"report": {"big": 2**70}}, "report", "64 bits"),
        ({"report": {"s": "a\u0000b"}}, "report", "NUL"),
        ({"surprise": 1}, "surprise", "Extra inputs"),
    ],
)
def test_each_bad_field_is_named(env, change: dict[str, Any], field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    r = post(env, [sor_run(1000), sor_run(2000, **change)])
    assert r.status_code == 422, r.text
    [problem] = r.json()["detail"]
    assert (problem["index"], problem["field"]) == (1, field)
    assert words in problem["reason"]
    assert listed(env) == []


def test_empty_and_oversized_batches_are_refused(env) -> None:  # type: ignore[no-untyped-def]
    for runs in ([], [sor_run(1000 + i) for i in range(MAX_BATCH + 1)]):
        r = post(env, runs)
        assert r.status_code == 422
        [problem] = r.json()["detail"]
        assert (problem["index"], problem["field"]) == (None, "runs")
    r = env.client.post(
        RUNS, content=b'{"runs": [', headers={**env.h("app"), "Content-Type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"][0]["offset"] is not None


def test_unknown_schedule_ids_are_refused(env) -> None:  # type: ignore[no-untyped-def]
    engine = make_engine(env.url)
    with engine.begin() as conn:  # a served prediction is not a schedule
        conn.execute(insert(ServedLog).values(id=77, kind="prediction", request={}, response={}))
    engine.dispose()
    r = post(env, [sor_run(1000), sor_run(2000, schedule_id=12345), sor_run(3000, schedule_id=77)])
    assert r.status_code == 422
    problems = [(p["index"], p["field"]) for p in r.json()["detail"]]
    assert problems == [(1, "schedule_id"), (2, "schedule_id")]
    assert "no served schedule 12345" in r.json()["detail"][0]["reason"]
    assert listed(env) == []


def test_roles(env) -> None:  # type: ignore[no-untyped-def]
    assert env.client.post(RUNS, json={"runs": [sor_run()]}).status_code == 401
    assert env.client.get(RUNS).status_code == 401
    assert env.client.get(f"{RUNS}/1").status_code == 401
    bad = {"Authorization": "Bearer not-a-token"}
    assert env.client.post(RUNS, json={"runs": [sor_run()]}, headers=bad).status_code == 401
    assert post(env, [sor_run()], role="sensor").status_code == 403
    assert env.client.get(RUNS, headers=env.h("sensor")).status_code == 403
    assert env.client.get(f"{RUNS}/1", headers=env.h("sensor")).status_code == 403
    assert listed(env) == []
    for i, role in enumerate(("app", "operator", "admin")):
        assert post(env, [sor_run(1000 + i)], role=role).status_code == 201
        assert env.client.get(RUNS, headers=env.h(role)).status_code == 200


# ------------------------------------------------------------------------ schedules


def test_a_run_links_to_the_schedule_it_followed(env) -> None:  # type: ignore[no-untyped-def]
    seed_hosts(env)
    sid = serve_schedule(env)
    schedule = env.client.get(f"/api/v1/schedules/{sid}", headers=env.h("app")).json()
    strips = schedule["response"]["allocation"]
    report = {"strips": strips, "total_s": 1.25}
    r = post(env, [sor_run(400, schedule_id=sid, report=report)])
    assert r.status_code == 201, r.text
    [linked] = listed(env, schedule_id=sid)
    assert linked["id"] == r.json()["ids"][0] and linked["report"] == report
    assert listed(env, schedule_id=sid + 1) == []


def test_retention_of_the_served_log_unlinks_runs_and_keeps_them(env) -> None:  # type: ignore[no-untyped-def]
    seed_hosts(env)
    old, new = serve_schedule(env), serve_schedule(env)
    ids = post(env, [sor_run(400, schedule_id=old), sor_run(800, schedule_id=new)]).json()["ids"]
    policy = RetentionPolicy(
        interval_s=0,
        served_log_days=0,
        served_log_max_rows=1,  # keep only the newest served row
        replay_days=0,
        replay_max_jobs=0,
        raw_days=0,
        downsample_s=0,
        measurement_days=0,
        pause_s=0,
    )
    engine = make_engine(env.url)
    try:
        assert run_pass(engine, policy).served_log == 1
    finally:
        engine.dispose()
    assert env.client.get(f"/api/v1/schedules/{old}", headers=env.h("app")).status_code == 404
    by_id = {g["id"]: g for g in listed(env)}
    assert by_id[ids[0]]["schedule_id"] is None  # unlinked, not deleted
    assert by_id[ids[1]]["schedule_id"] == new
    r = post(env, [sor_run(1600, schedule_id=old)])
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "schedule_id"


def test_concurrent_reposts_store_each_run_once(env) -> None:  # type: ignore[no-untyped-def]
    runs = [sor_run(1000 + i) for i in range(50)]

    def post_until_answered(_: int) -> dict[str, Any]:
        for _attempt in range(20):
            r = post(env, runs)
            if r.status_code != 409:  # 409: lost a race on the store; the client retries
                assert r.status_code == 201, r.text
                return dict(r.json())
        raise AssertionError("still 409 after 20 attempts")

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post_until_answered, range(4)))
    assert sum(a["stored"] for a in answers) == len(runs)
    assert all(a["ids"] == answers[0]["ids"] for a in answers)
    assert len(listed(env, limit=1000)) == len(runs)


# ------------------------------------------------------------------------ the command


def test_import_stores_a_file_as_the_api_would(env, capsys) -> None:  # type: ignore[no-untyped-def]
    path = DATA / "extrap_experiment_MP.txt"
    code = cli_main(
        ["runs", "import", str(path), "--app", "mp", "--system", "h0,h1", "--db", env.url]
    )
    assert code == 0
    assert "100 runs read, 100 stored, 0 already stored" in capsys.readouterr().out
    stored = listed(env, app="mp", limit=1000)
    assert len(stored) == 100 and {g["system"] for g in stored} == {"h0,h1"}
    assert {g["kernel"] for g in stored} == {"met1", "met2", "met3", "met4"}
    # the same runs posted over HTTP are the same runs: nothing new
    again = [
        {k: g[k] for k in ("app", "kernel", "params", "system", "metric", "values")} for g in stored
    ]
    assert post(env, again).json()["stored"] == 0
    assert (
        cli_main(["runs", "import", str(path), "--app", "mp", "--system", "h0,h1", "--db", env.url])
        == 0
    )
    assert "0 stored, 100 already stored" in capsys.readouterr().out
    assert cli_main(["runs", "list", "--app", "mp", "--limit", "3", "--db", env.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and "met4" in out[1] and "p=10000 n=10000" in out[1]
    assert cli_main(["runs", "list", "--app", "mp", "--json", "--limit", "2", "--db", env.url]) == 0
    assert json.loads(capsys.readouterr().out) == stored[:2]


def test_import_refuses_what_the_api_refuses_and_stores_nothing(env, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "runs.csv"
    path.write_text("app,kernel,n,time\nsor,total,100,1.5\nsor,total,200,2.5\n9sor,total,100,2\n")
    assert cli_main(["runs", "import", str(path), "--db", env.url]) == 1
    err = capsys.readouterr().err
    api = post(env, [{"app": "9sor", "params": {"n": 100}, "values": [2.0]}]).json()["detail"][0]
    assert f"line 4: app: {api['reason']}" in err and "nothing stored" in err
    path.write_text("app,kernel,n,time\nsor,total,100,1.5\nsor,total,100,-1\n")
    assert cli_main(["runs", "import", str(path), "--format", "csv", "--db", env.url]) == 1
    assert "line 3: time is -1" in capsys.readouterr().err
    assert cli_main(["runs", "import", str(DATA / "extrap_input.txt"), "--db", env.url]) == 1
    assert "--app" in capsys.readouterr().err
    assert cli_main(["runs", "import", str(tmp_path / "missing.csv"), "--db", env.url]) == 2
    assert listed(env) == []


# ------------------------------------------------------------------------ schema


def test_the_routes_document_what_they_answer(env) -> None:  # type: ignore[no-untyped-def]
    paths = env.client.get("/openapi.json").json()["paths"]
    expected = {
        ("post", RUNS): {"201", "401", "403", "409", "422"},
        ("get", RUNS): {"200", "401", "403", "422"},
        ("get", RUNS + "/{run_id}"): {"200", "401", "403", "404", "422"},
    }
    for (method, path), codes in expected.items():
        responses = paths[path][method]["responses"]
        assert codes <= set(responses), (method, path, sorted(responses))
        for code in codes - {"200", "201"}:
            schema = json.dumps(responses[code]["content"]["application/json"]["schema"])
            assert "ProblemReport" in schema or "Message" in schema, (method, path, code)
