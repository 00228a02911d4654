"""What an attack report found, each sent as it was found, on SQLite and PostgreSQL: requests
that gave 5xx, writes acknowledged then lost, wrong answers, and error bodies unlike the
documented ones. Every refusal must be a 4xx in the documented shape, naming the field."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi import status
from sqlalchemy import select

from ppe.service.deps import SessionDep
from ppe.service.schemas import ModelProblemReport, ProblemReport
from ppe.service.store.db import make_engine, make_sessionmaker, session_scope
from ppe.service.store.models import UserModel

API = "/api/v1"
BIG = 2**70  # beyond 64 bits


@pytest.fixture
def hosts(env):  # type: ignore[no-untyped-def]
    """h0 and h1 with steady CPU and benchmarks, and 'dead', measured at 0 availability."""
    t0 = time.time() - 3600
    items = [
        {"resource": h, "metric": "cpu", "timestamp": t0 + 30 * k, "value": v}
        for h, v in (("h0", 0.6), ("h1", 0.7), ("dead", 0.0))
        for k in range(60)
    ]
    r = env.client.post(
        f"{API}/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    assert r.status_code == 200, r.text
    for h in ("h0", "h1", "dead"):
        r = env.client.put(
            f"{API}/resources/{h}",
            json={"properties": {"benchmark": 2e-8}},
            headers=env.h("operator"),
        )
        assert r.status_code == 200, r.text
    return env


def problems(r: Any, status_code: int = 422) -> list[dict[str, Any]]:
    """The body of a refusal, checked against the documented ProblemReport."""
    assert r.status_code == status_code, r.text
    report = ProblemReport.model_validate(r.json())
    return [p.model_dump() for p in report.detail]


def fields(r: Any, status_code: int = 422) -> list[str | None]:
    return [p["field"] for p in problems(r, status_code)]


def raw(env, method: str, path: str, text: str, role: str = "app"):  # type: ignore[no-untyped-def]
    """Send a body as written (JSON's non-standard NaN/Infinity included)."""
    headers = {**env.h(role), "content-type": "application/json"}
    return env.client.request(method, path, content=text.encode(), headers=headers)


SCHEDULE = {"app": "sor", "n": 1000, "iterations": 10, "hosts": ["h0", "h1"]}
PREDICTION = {
    "model": "sor",
    "params": {"n": 1000, "I": 10},
    "allocation": [{"host": "h0", "rows": 500}, {"host": "h1", "rows": 500}],
}


# ----------------------------------------------------------------- 1. commit, then answer


def test_a_failed_commit_is_never_acknowledged(env) -> None:  # type: ignore[no-untyped-def]
    """A write whose commit fails (here: a unique name taken meanwhile) answers 409, not 201."""
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        s.add(UserModel(name="taken", text="x"))
    engine.dispose()

    def write(session: SessionDep) -> dict[str, bool]:
        session.add(UserModel(name="taken", text="y"))  # flushed only by the commit
        return {"stored": True}

    env.client.app.add_api_route("/test/write", write, methods=["POST"], status_code=201)
    r = env.client.post("/test/write")
    assert "conflict" in problems(r, 409)[0]["reason"]


def test_concurrent_model_posts_answer_only_what_was_stored(env) -> None:  # type: ignore[no-untyped-def]
    """Eight concurrent POST /models with one new name: each answer is 201 (stored) or 409
    (lost the race, nothing stored), never a 201 whose commit failed afterwards."""
    sor = next(
        m["text"]
        for m in env.client.get(f"{API}/models", headers=env.h("app")).json()
        if m["name"] == "sor"
    )

    def post(i: int) -> Any:
        body = {"name": "raced", "text": sor, "description": f"writer {i}"}
        return env.client.post(f"{API}/models", json=body, headers=env.h("app"))

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(8)))
    codes = [r.status_code for r in answers]
    assert set(codes) <= {201, 409} and 201 in codes, codes
    for r in answers:
        if r.status_code == 409:
            problems(r, 409)
    engine = make_engine(env.url)
    with session_scope(make_sessionmaker(engine)) as s:
        stored = s.execute(select(UserModel.description).where(UserModel.name == "raced")).all()
    engine.dispose()
    winners = {r.json()["description"] for r in answers if r.status_code == 201}
    assert len(stored) == 1 and stored[0][0] in winners


# --------------------------------------------------------------------------- 2. strings

NUL = "a\x00b"
LONG = "x" * 10_000


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", f"{API}/resources/a%00b", {"properties": {}}, "path.name"),
        ("PUT", f"{API}/resources/{LONG}", {"properties": {}}, "path.name"),
        ("PUT", f"{API}/resources/{'x' * 256}", {"properties": {}}, "path.name"),
        ("PUT", f"{API}/resources/bad%20name", {"properties": {}}, "path.name"),
        ("GET", f"{API}/resources/a%00b", None, "path.name"),
        ("GET", f"{API}/resources/{LONG}", None, "path.name"),
        ("GET", f"{API}/forecasts/a%00b/cpu", None, "path.resource"),
        ("GET", f"{API}/forecasts/h0/bandwidth?peer=a%00b", None, "query.peer"),
        ("GET", f"{API}/resources/{LONG}/history/cpu", None, "path.resource"),
        ("POST", f"{API}/schedules", {**SCHEDULE, "hosts": ["h0", NUL]}, "hosts[1]"),
        ("POST", f"{API}/schedules", {**SCHEDULE, "hosts": [{"name": LONG}]}, "hosts[0].name"),
        ("POST", f"{API}/schedules", {**SCHEDULE, "strategy": NUL}, "strategy"),
        ("POST", f"{API}/schedules", {**SCHEDULE, "app": NUL}, "app"),
        (
            "POST",
            f"{API}/schedules",
            {**SCHEDULE, "current": [{"host": NUL, "rows": 1000}]},
            "current[0].host",
        ),
        (
            "POST",
            f"{API}/predictions",
            {**PREDICTION, "allocation": [{"host": NUL, "rows": 1000}]},
            "allocation[0].host",
        ),
        ("POST", f"{API}/predictions", {**PREDICTION, "model": LONG}, "model"),
        ("POST", f"{API}/predictions", {**PREDICTION, "grammar": "param n\x00"}, "grammar"),
        ("POST", f"{API}/predictions", {**PREDICTION, "params": {NUL: 1.0}}, "params"),
        ("PUT", f"{API}/resources/h0", {"properties": {"note": NUL}}, "properties.note"),
        ("PUT", f"{API}/resources/h0", {"properties": {NUL: 1}}, "properties"),
    ],
)
def test_nul_and_overlong_text_refused(env, method, path, body, field) -> None:  # type: ignore[no-untyped-def]
    r = env.client.request(method, path, json=body, headers=env.h("operator"))
    assert field in (fields(r)[0] or ""), r.text


@pytest.mark.parametrize(
    "item",
    [
        {"resource": NUL, "metric": "cpu", "timestamp": 1e9, "value": 0.5},
        {"resource": "h0", "metric": "bandwidth", "peer": NUL, "timestamp": 1e9, "value": 1e6},
        {"resource": "x" * 256, "metric": "cpu", "timestamp": 1e9, "value": 0.5},
    ],
)
def test_measurement_names_follow_the_resource_rule(env, item) -> None:  # type: ignore[no-untyped-def]
    r = env.client.post(
        f"{API}/measurements", json={"measurements": [item]}, headers=env.h("sensor")
    )
    assert problems(r)[0]["index"] == 0


def test_put_resource_takes_exactly_what_measurements_take(env) -> None:  # type: ignore[no-untyped-def]
    name = "node-1.grid:7000@site_a"
    assert (
        env.client.put(
            f"{API}/resources/{name}", json={"properties": {}}, headers=env.h("operator")
        ).status_code
        == 200
    )
    longest = "h" * 255
    assert (
        env.client.put(
            f"{API}/resources/{longest}", json={"properties": {}}, headers=env.h("operator")
        ).status_code
        == 200
    )
    r = env.client.get(f"{API}/resources/{longest}", headers=env.h("app"))
    assert r.status_code == 200 and r.json()["name"] == longest


def test_labels_descriptions_and_model_names_refuse_nul(env) -> None:  # type: ignore[no-untyped-def]
    r = env.client.post(f"{API}/tokens", json={"role": "app", "label": NUL}, headers=env.h("admin"))
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "label"
    for body, field in (
        ({"name": "m1", "text": "param n", "description": NUL}, "description"),
        ({"name": "m1", "text": "param n\x00"}, "text"),
        ({"name": NUL, "text": "param n"}, "name"),
    ):
        r = env.client.post(f"{API}/models", json=body, headers=env.h("app"))
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == field, r.text


# --------------------------------------------------------------------------- 3. numbers


@pytest.mark.parametrize(
    ("path", "text", "field"),
    [
        (f"{API}/predictions", json.dumps({**PREDICTION, "seed": BIG}), "seed"),
        (
            f"{API}/schedules",
            json.dumps({**SCHEDULE, "hosts": [{"name": "h0", "max_rows": BIG}, "h1"]}),
            "hosts[0].max_rows",
        ),
        (
            f"{API}/schedules",
            json.dumps({**SCHEDULE, "hosts": [{"name": "h0", "min_rows": BIG}, "h1"]}),
            "hosts[0].min_rows",
        ),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "n": 10_000_001}), "n"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "iterations": BIG}), "iterations"),
        (
            f"{API}/predictions",
            json.dumps({**PREDICTION, "allocation": [{"host": "h0", "rows": BIG}]}),
            "allocation[0].rows",
        ),
        (f"{API}/predictions", json.dumps({**PREDICTION, "samples": BIG}), "samples"),
        (
            f"{API}/schedules",
            json.dumps({**SCHEDULE, "params": {"n": float("inf")}}),
            "params.n",
        ),
        (
            f"{API}/predictions",
            json.dumps({**PREDICTION, "params": {"n": float("inf")}}),
            "params.n",
        ),
        (
            f"{API}/predictions",
            json.dumps({**PREDICTION, "params": {"I": float("nan")}}),
            "params.I",
        ),
        (f"{API}/predictions", json.dumps({**PREDICTION, "params": {"I": 1e300}}), "params.I"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "at": float("inf")}), "at"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "k": float("nan")}), "k"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "bandwidth": 1.7e308}), "bandwidth"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "latency": 1e9}), "latency"),
        (f"{API}/schedules", json.dumps({**SCHEDULE, "replan_every_s": 1e300}), "replan_every_s"),
        (
            f"{API}/schedules",
            json.dumps({**SCHEDULE, "hosts": [{"name": "h0", "benchmark": 1e300}]}),
            "hosts[0].benchmark",
        ),
    ],
)
def test_out_of_range_numbers_refused(hosts, path, text, field) -> None:  # type: ignore[no-untyped-def]
    assert fields(raw(hosts, "POST", path, text)) == [field]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (f"{API}/schedules/{BIG}", "path.schedule_id"),
        (f"{API}/schedules/0", "path.schedule_id"),
        (f"{API}/forecasts/h0/cpu?horizon=inf", "query.horizon"),
        (f"{API}/forecasts/h0/cpu?horizon=1e300", "query.horizon"),
        (f"{API}/forecasts/h0/cpu?at=nan", "query.at"),
        (f"{API}/forecasts/h0/cpu?at=-1", "query.at"),
        (f"{API}/forecasts/h0/cpu?confidence=nan", "query.confidence"),
        (f"{API}/resources/h0/history/cpu?confidence=1", "query.confidence"),
    ],
)
def test_out_of_range_path_and_query_refused(hosts, path, field) -> None:  # type: ignore[no-untyped-def]
    assert fields(hosts.client.get(path, headers=hosts.h("app"))) == [field]


@pytest.mark.parametrize(
    ("properties", "field"),
    [
        ({"memory_bytes": BIG}, "properties.memory_bytes"),
        ({"element_size": 0}, "properties.element_size"),
        ({"benchmark": 0}, "properties.benchmark"),
        ({"cores": BIG}, "properties.cores"),
        ({"speed": 1e300}, "properties.speed"),
        ({"tags": ["a", "b"]}, "properties.tags"),
    ],
)
def test_resource_properties_bounded(env, properties, field) -> None:  # type: ignore[no-untyped-def]
    r = env.client.put(
        f"{API}/resources/h0", json={"properties": properties}, headers=env.h("operator")
    )
    assert fields(r) == [field]


def test_resource_properties_within_bounds_kept(env) -> None:  # type: ignore[no-untyped-def]
    props = {"benchmark": 2e-8, "memory_bytes": 2**40, "cores": 2**62, "site": "lyon", "gpu": False}
    r = env.client.put(f"{API}/resources/h0", json={"properties": props}, headers=env.h("operator"))
    assert r.status_code == 200, r.text
    assert r.json()["properties"] == props


@pytest.mark.parametrize(
    ("metric", "value", "accepted"),
    [
        ("bandwidth", 1.7e308, False),
        ("bandwidth", 1e12 * 1.01, False),
        ("bandwidth", 0.0, False),
        ("bandwidth", 1e12, True),
        ("latency", 60.5, False),
        ("latency", 0.0, True),
        ("cpu", 0.0, True),
        ("cpu", 1.0, True),
    ],
)
def test_metric_bounds_at_ingestion(env, metric, value, accepted) -> None:  # type: ignore[no-untyped-def]
    item = {"resource": "h0", "metric": metric, "timestamp": time.time() - 60, "value": value}
    if metric != "cpu":
        item["peer"] = "h1"
    r = env.client.post(
        f"{API}/measurements", json={"measurements": [item]}, headers=env.h("sensor")
    )
    if accepted:
        assert r.status_code == 200, r.text
    else:
        (p,) = problems(r)
        assert (p["index"], p["field"]) == (0, "value") and "within" in p["reason"]


# ---------------------------------------------------------------------- 4. 5xx -> 4xx


def test_prediction_with_no_rows_and_no_n(hosts) -> None:  # type: ignore[no-untyped-def]
    """Was a ZeroDivisionError (the memory bound divided by n = 0 rows)."""
    hosts.client.put(
        f"{API}/resources/h0",
        json={"properties": {"memory_bytes": 10**9}},
        headers=hosts.h("operator"),
    )
    body = {"model": "sor", "allocation": [{"host": "h0", "rows": 0}]}
    r = hosts.client.post(f"{API}/predictions", json=body, headers=hosts.h("app"))
    assert fields(r) == ["allocation"]


def test_unknown_model_names_its_field(hosts) -> None:  # type: ignore[no-untyped-def]
    r = hosts.client.post(
        f"{API}/predictions", json={**PREDICTION, "model": "nope"}, headers=hosts.h("app")
    )
    assert fields(r) == ["model"]
    r = hosts.client.post(
        f"{API}/schedules", json={**SCHEDULE, "app": "nope"}, headers=hosts.h("app")
    )
    assert fields(r) == ["app"]


def test_infeasible_schedule_says_so_once(hosts) -> None:  # type: ignore[no-untyped-def]
    body = {**SCHEDULE, "hosts": [{"name": "h0", "max_rows": 10}, {"name": "h1", "max_rows": 10}]}
    (p,) = problems(hosts.client.post(f"{API}/schedules", json=body, headers=hosts.h("app")))
    assert p["field"] == "hosts" and p["reason"].count("no feasible schedule") == 1, p


# ---------------------------------------------------------------------- 5. wrong answers


def test_host_at_zero_availability_is_floored_and_said(hosts) -> None:  # type: ignore[no-untyped-def]
    body = {**SCHEDULE, "hosts": ["h0", "h1", "dead"]}
    r = hosts.client.post(f"{API}/schedules", json=body, headers=hosts.h("app"))
    assert r.status_code == 200, r.text
    rows = {a["host"]: a["rows"] for a in r.json()["allocation"]}
    assert sum(rows.values()) == 1000 and rows["dead"] < rows["h0"] / 20
    (warning,) = r.json()["warnings"]
    assert "'dead'" in warning and "floor" in warning
    logged = hosts.client.get(f"{API}/schedules/{r.json()['id']}", headers=hosts.h("app")).json()
    assert logged["response"]["warnings"] == [warning]


def test_selection_drops_a_host_at_zero_availability(hosts) -> None:  # type: ignore[no-untyped-def]
    body = {**SCHEDULE, "hosts": ["h0", "dead", "h1"], "select": True}
    r = hosts.client.post(f"{API}/schedules", json=body, headers=hosts.h("app"))
    assert r.status_code == 200, r.text
    assert "dead" not in [a["host"] for a in r.json()["allocation"]]
    (warning,) = r.json()["warnings"]
    assert "'dead' left out" in warning
    r = hosts.client.post(
        f"{API}/schedules", json={**body, "hosts": ["dead"]}, headers=hosts.h("app")
    )
    assert fields(r, 409) == ["hosts"]


def test_prediction_on_a_dead_host_is_floored_and_said(hosts) -> None:  # type: ignore[no-untyped-def]
    body = {
        **PREDICTION,
        "allocation": [{"host": "h0", "rows": 900}, {"host": "dead", "rows": 100}],
    }
    r = hosts.client.post(f"{API}/predictions", json=body, headers=hosts.h("app"))
    assert r.status_code == 200, r.text
    assert ["'dead'" in w for w in r.json()["warnings"]] == [True]


def test_prediction_must_cover_the_grid(hosts) -> None:  # type: ignore[no-untyped-def]
    """n = 4000 with rows summing to 1383 answered 200 for a run a third of the size."""
    partial = {
        "model": "sor",
        "params": {"n": 4000, "I": 10},
        "allocation": [{"host": "h0", "rows": 700}, {"host": "h1", "rows": 683}],
    }
    (p,) = problems(hosts.client.post(f"{API}/predictions", json=partial, headers=hosts.h("app")))
    assert p["field"] == "allocation" and "1383" in p["reason"] and "4000" in p["reason"]
    whole = {**partial, "params": {"n": 1383, "I": 10}}
    assert (
        hosts.client.post(f"{API}/predictions", json=whole, headers=hosts.h("app")).status_code
        == 200
    )
    implied = {**partial, "params": {"I": 10}}  # n defaults to the rows placed
    r = hosts.client.post(f"{API}/predictions", json=implied, headers=hosts.h("app"))
    assert r.status_code == 200, r.text
    assert (
        r.json()["makespan"]
        == hosts.client.post(f"{API}/predictions", json=whole, headers=hosts.h("app")).json()[
            "makespan"
        ]
    )


def test_malformed_json_reports_an_offset_not_an_index(env) -> None:  # type: ignore[no-untyped-def]
    r = raw(env, "POST", f"{API}/measurements", '{"measurements": [', role="sensor")
    (p,) = problems(r)
    assert p["index"] is None and p["offset"] == 18 and "JSON" in p["reason"]
    r = env.client.post(
        f"{API}/schedules",
        content=b'{"n": "\xff"}',
        headers={**env.h("app"), "content-type": "application/json"},
    )
    assert problems(r)[0]["reason"].startswith("malformed body")


def test_batch_item_errors_keep_their_index(env) -> None:  # type: ignore[no-untyped-def]
    items = [
        {"resource": "h0", "metric": "cpu", "timestamp": 1e9, "value": 0.5},
        {"resource": "h0", "metric": "cpu", "timestamp": 1e9 + 1, "value": "high"},
    ]
    r = env.client.post(
        f"{API}/measurements", json={"measurements": items}, headers=env.h("sensor")
    )
    (p,) = problems(r)
    assert (p["index"], p["offset"], p["field"]) == (1, None, "value")


# --------------------------------------------------------------- 6. documented error shapes


def test_every_route_documents_what_it_answers(env) -> None:  # type: ignore[no-untyped-def]
    spec = env.client.get("/openapi.json").json()
    mine = {
        ("post", "/measurements"): {"200", "401", "403", "409", "422"},
        ("get", "/resources"): {"200", "401", "403"},
        ("get", "/resources/{name}"): {"200", "401", "403", "404", "422"},
        ("put", "/resources/{name}"): {"200", "401", "403", "409", "422"},
        ("get", "/forecasts/{resource}/{metric}"): {"200", "401", "403", "404", "409", "422"},
        ("get", "/resources/{resource}/history/{metric}"): {"200", "401", "404", "409", "422"},
        ("post", "/predictions"): {"200", "401", "403", "404", "409", "422"},
        ("post", "/schedules"): {"200", "401", "403", "404", "409", "422"},
        ("get", "/schedules"): {"200", "401", "403", "422"},
        ("get", "/schedules/{schedule_id}"): {"200", "401", "403", "404", "422"},
    }
    for (method, path), codes in mine.items():
        responses = spec["paths"][API + path][method]["responses"]
        assert codes <= set(responses), (method, path, sorted(responses))
        for code in codes - {"200"}:
            schema = json.dumps(responses[code]["content"]["application/json"]["schema"])
            assert "ProblemReport" in schema or "Message" in schema, (method, path, code)
    assert "text/plain" in spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


def test_model_errors_keep_their_own_documented_shape(hosts) -> None:  # type: ignore[no-untyped-def]
    body = {**PREDICTION, "grammar": "param n\nExecTime = Bogus[0]"}
    r = hosts.client.post(f"{API}/predictions", json=body, headers=hosts.h("app"))
    assert r.status_code == status.HTTP_422_UNPROCESSABLE_CONTENT, r.text
    ModelProblemReport.model_validate(r.json())


# ------------------------------------------------------------------ the pure layer's rules


def test_check_allocation_is_the_one_rule() -> None:
    from ppe.pipeline import AllocationError, check_allocation

    check_allocation({"n": 10}, {"a": 4, "b": 6})
    check_allocation({}, {"a": 3})  # a model without a grid size: nothing to check against
    for params, rows in (({"n": 10}, {"a": 4}), ({"n": 10}, {"a": 0}), ({}, {"a": -1})):
        with pytest.raises(AllocationError):
            check_allocation(params, rows)


def test_floor_availability_flags_what_it_raised() -> None:
    from ppe.core import CPU_FLOOR
    from ppe.core.stochastic import Point
    from ppe.pipeline import HostForecasts, floor_availability

    out = floor_availability({"dead": HostForecasts(Point(0.0)), "ok": HostForecasts(Point(0.5))})
    assert out["dead"].floored and out["dead"].cpu.mean() == CPU_FLOOR
    assert not out["ok"].floored and out["ok"].cpu.mean() == 0.5
