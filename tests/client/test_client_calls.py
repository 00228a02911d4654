"""Every typed call of PPEClient against the real service (uvicorn on loopback, SQLite)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ppe.client import (
    Measurement,
    PPEClient,
    PPERequestError,
    RunReport,
    Schedule,
)

TINY_GRAMMAR = """# compute only: every row costs its benchmark, slowed by the CPU left
param n
param I alias iterations
HostTime[p] = I * rows[p] * n * Benchmark[p] / FracAvailCPU[p]
ExecTime = max(p in hosts: HostTime[p])
"""


def seed(url: str, sensor: str, now: float | None = None) -> list[Measurement]:
    """Six samples of h1's and h2's CPU and of the h1-h2 link, 100 s apart (README tour)."""
    now = time.time() if now is None else now
    items = []
    for i in range(1, 7):
        t = now - 600 + 100 * i
        items += [
            Measurement("h1", "cpu", 0.6 + i / 100, t),
            Measurement("h2", "cpu", 0.9 + i / 100, t),
            Measurement("h1", "bandwidth", 1.1e7, t, peer="h2"),
        ]
    with PPEClient(url, sensor) as c:
        c.post_measurements(items)
    return items


@pytest.fixture
def app_client(service: Any) -> Iterator[PPEClient]:
    seed(service.url, service.tokens["sensor"])
    with PPEClient(service.url, service.tokens["admin"]) as admin:
        admin.put_resource("h1", {"benchmark": 2e-8, "memory_bytes": 8e9})
    client = PPEClient(service.url, service.tokens["app"], retries=0)
    yield client
    client.close()


def test_health_answers_without_a_token(service: Any) -> None:
    with PPEClient(service.url, token="") as c:
        h = c.health()
    assert h["status"] == "ok" and h["store"] == "up"


def test_measurements_are_stored_once(service: Any) -> None:
    items = seed(service.url, service.tokens["sensor"], now=time.time() - 50)
    with PPEClient(service.url, service.tokens["sensor"]) as c:
        again = c.post_measurements([m.to_json() for m in items[:3]])  # dicts work too
    assert again == {"accepted": 3, "inserted": 0, "duplicates": 3}


def test_resources_and_forecast(app_client: PPEClient) -> None:
    names = {r["name"] for r in app_client.resources()}
    assert {"h1", "h2"} <= names
    assert app_client.resource("h1")["properties"]["benchmark"] == 2e-8
    fc = app_client.forecast("h1", "cpu", horizon_s=3600, confidence=0.9)
    assert fc["resource"] == "h1" and fc["samples"] == 6
    assert 0.0 <= fc["forecast"] <= 1.0
    link = app_client.forecast("h1", "bandwidth", peer="h2")
    assert link["peer"] == "h2" and link["forecast"] == pytest.approx(1.1e7)


def test_schedule_strips_follow_the_chain(app_client: PPEClient) -> None:
    plan = app_client.schedule(
        hosts=["h1", {"name": "h2", "benchmark": 3e-8}],
        n=4000,
        iterations=100,
        strategy="conservative",
        k=2,
    )
    assert isinstance(plan, Schedule)
    assert [s.host for s in plan.strips] == ["h1", "h2"]
    assert sum(s.rows for s in plan.strips) == 4000
    assert [s.first_row for s in plan.strips] == [0, plan.strips[0].rows]
    assert plan.strategy == "conservative" and plan.replan is None
    assert plan.makespan["mean"] > 0
    logged = app_client.served_schedule(plan.id)
    assert logged["response"]["allocation"] == plan.raw["allocation"]


def test_replan_with_current_rows_says_whether_to_move(app_client: PPEClient) -> None:
    plan = app_client.schedule(
        hosts=["h1", {"name": "h2", "benchmark": 3e-8}],
        n=4000,
        iterations=50,
        strategy="expected",
        current=[("h1", 3900), ("h2", 100)],
        replan_every_s=300,
    )
    assert plan.replan is not None and isinstance(plan.replan["move"], bool)
    assert plan.replan["migration_s"] >= 0
    assert sum(plan.rows.values()) == 4000


def test_predict(app_client: PPEClient) -> None:
    answer = app_client.predict(
        model="sor",
        params={"n": 4000, "iterations": 100},
        allocation=[{"host": "h1", "rows": 1600}, {"host": "h2", "rows": 2400, "benchmark": 3e-8}],
    )
    assert [h["host"] for h in answer["hosts"]] == ["h1", "h2"]
    assert answer["makespan"]["mean"] >= max(h["time"]["mean"] for h in answer["hosts"]) * 0.99


def test_models_put_list_and_one(app_client: PPEClient) -> None:
    assert app_client.model("sor")["builtin"] is True
    stored = app_client.put_model("tiny", TINY_GRAMMAR, "one host")
    assert stored["name"] == "tiny"
    assert "tiny" in {m["name"] for m in app_client.models()}
    assert app_client.model("tiny")["description"] == "one host"
    with pytest.raises(PPERequestError) as err:
        app_client.model("nosuch")
    assert err.value.status == 404 and "nosuch" in str(err.value)


def test_runs_are_stored_linked_and_idempotent(app_client: PPEClient) -> None:
    plan = app_client.schedule(hosts=["h1", {"name": "h2", "benchmark": 3e-8}], n=1000)
    report = RunReport(
        app="sor",
        values=[1.25, 1.5],
        params={"n": 1000, "iterations": 10},
        system="h1,h2",
        schedule_id=plan.id,
        report={"ranks": [{"rows": s.rows} for s in plan.strips]},
    )
    first = app_client.post_runs([report])
    assert first["stored"] == 1 and first["duplicates"] == 0
    again = app_client.post_runs([report.to_json()])
    assert again["stored"] == 0 and again["ids"] == first["ids"]
    (run_id,) = first["ids"]
    run = app_client.run(run_id)
    assert run["schedule_id"] == plan.id and run["values"] == [1.25, 1.5]
    listed = app_client.runs(app="sor", schedule_id=plan.id)
    assert [r["id"] for r in listed] == [run_id]


def test_bad_run_is_refused_naming_item_and_field(app_client: PPEClient) -> None:
    good = RunReport(app="sor", values=[1.0])
    bad = RunReport(app="sor", values=[2.0, -1.0])
    with pytest.raises(PPERequestError) as err:
        app_client.post_runs([good, bad])
    assert err.value.status == 422
    problem = err.value.problems[0]
    assert problem["index"] == 1 and problem["field"].startswith("values")
    assert app_client.runs(app="sor") == []  # nothing stored


def test_nan_measurement_is_a_422_with_the_item(service: Any) -> None:
    items = [Measurement("h9", "cpu", 0.5, 1.7e9), Measurement("h9", "cpu", math.nan, 1.7e9 + 1)]
    with (
        PPEClient(service.url, service.tokens["sensor"]) as c,
        pytest.raises(PPERequestError) as err,
    ):
        c.post_measurements(items)
    assert err.value.status == 422
    (p,) = err.value.problems
    assert p["index"] == 1 and p["field"] == "value"
    assert p["reason"] in str(err.value)


def test_unknown_host_is_a_404_with_the_servers_words(app_client: PPEClient) -> None:
    with pytest.raises(PPERequestError) as err:
        app_client.schedule(hosts=["h1", "ghost"], n=100)
    assert err.value.status == 404
    assert "ghost" in str(err.value)
    assert err.value.problems and "ghost" in err.value.problems[0]["reason"]


def test_model_errors_carry_line_and_message(app_client: PPEClient) -> None:
    with pytest.raises(PPERequestError) as err:
        app_client.put_model("broken", "param n\nExecTime = = 1\n")
    assert err.value.status == 422
    assert err.value.problems[0]["line"] is not None
    assert err.value.problems[0]["message"] in str(err.value)


def test_auth_failures_carry_the_message(service: Any) -> None:
    with (
        PPEClient(service.url, "ppe_app_wrong", retries=0) as c,
        pytest.raises(PPERequestError) as err,
    ):
        c.models()
    assert err.value.status == 401 and err.value.problems == []
    assert str(err.value)  # the server's message, e.g. "missing or invalid token"
    with (
        PPEClient(service.url, service.tokens["sensor"]) as c,
        pytest.raises(PPERequestError) as err,
    ):
        c.schedule(hosts=["h1"], n=10)
    assert err.value.status == 403 and "role" in str(err.value)


def test_token_comes_from_the_environment(service: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PPE_TOKEN", service.tokens["app"])
    monkeypatch.setenv("PPE_URL", service.url)
    with PPEClient() as c:
        assert c.url == service.url
        assert any(m["name"] == "sor" for m in c.models())
    monkeypatch.delenv("PPE_TOKEN")
    with PPEClient(service.url) as c, pytest.raises(PPERequestError) as err:
        c.models()
    assert err.value.status == 401


def test_raw_request_reaches_any_route(service: Any) -> None:
    with PPEClient(service.url, service.tokens["admin"]) as c:
        made = c.request("POST", "/api/v1/tokens", json={"role": "app", "label": "raw"})
        assert made["token"].startswith("ppe_app_")
        assert made["id"] in {t["id"] for t in c.request("GET", "api/v1/tokens")}
